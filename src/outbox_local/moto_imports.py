"""How a correction puts its own function where moto's was: on a class, or in every module that imported
moto's by name (`from moto.core.utils import camelcase_to_underscores`: each module holds a reference)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def rebind(name: str, current: object, replacement: object) -> None:
    """In moto and each of its modules whose attribute `name` is `current`, make it `replacement`."""
    for module_name, module in list(sys.modules.items()):  # a copy: an import elsewhere may add a module
        if (module_name == "moto" or module_name.startswith("moto.")) and getattr(
            module, name, None
        ) is current:
            setattr(module, name, replacement)


def as_method(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`function` as a class attribute that binds: a bound method set on a class does not bind again."""

    def method(self: Any) -> Any:
        return function(self)

    return method
