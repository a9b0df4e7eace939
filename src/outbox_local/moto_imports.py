"""Replace a function that moto's modules imported by name (`from moto.core.utils import
camelcase_to_underscores`): each module holds its own reference, so a correction must rebind it in every
module that holds it, and rebind moto's own afterwards."""

from __future__ import annotations

import sys


def rebind(name: str, current: object, replacement: object) -> None:
    """In moto and each of its modules whose attribute `name` is `current`, make it `replacement`."""
    for module_name, module in list(sys.modules.items()):  # a copy: an import elsewhere may add a module
        if (module_name == "moto" or module_name.startswith("moto.")) and getattr(
            module, name, None
        ) is current:
            setattr(module, name, replacement)
