"""Lazy module attributes: a package names where some of its public names live, and they are
imported on first use, so that importing the package does not load heavy dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` that imports each name of ``homes`` when it is
    first asked for; other names raise AttributeError. A home is the module that defines the
    name, or ``"module:attr"`` where it is defined under another name."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, attr = homes[name].partition(":")
        return getattr(importlib.import_module(home), attr or name)

    return __getattr__
