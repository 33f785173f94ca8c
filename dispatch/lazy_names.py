"""A package's names imported from their modules on first use (PEP 562), so that importing the
package does not import every module behind it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def importer(namespace: dict[str, Any], home_of: Mapping[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of the package whose globals are ``namespace``: a name of
    ``home_of`` is imported from the module it maps to and kept in ``namespace``; any other
    name is an ``AttributeError``, as for a package without it."""

    def __getattr__(name: str) -> Any:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
