"""Typed errors of the local runtime. Each names what was wrong and where, so a failure is actionable."""


class LocalRuntimeError(Exception):
    """Base class of every error the local runtime raises on purpose."""


class TemplateError(LocalRuntimeError):
    """The template cannot be read or is not a CloudFormation template."""


class UnresolvableReferenceError(TemplateError):
    """An intrinsic function refers to something the runtime cannot resolve."""


class UnsupportedResourceError(LocalRuntimeError):
    """The template holds a resource type (or a property) the runtime does not know how to run."""


class FilterPatternError(LocalRuntimeError):
    """A FilterCriteria pattern uses syntax the emulator does not implement (never silently ignored)."""


class FunctionNotFoundError(LocalRuntimeError):
    """No function of the template matches the requested name or ARN."""


class ProvisioningError(LocalRuntimeError):
    """A resource could not be created on the moto server."""


class RuntimeStateError(LocalRuntimeError):
    """The runtime was used in the wrong state (e.g. started twice)."""


class EndpointUnavailableError(LocalRuntimeError):
    """The runtime cannot listen where it was asked to (a port in use, an address not of this machine)."""
