"""Lazy module attributes: a package names where some of its public names live, and they are
imported on first use, so that importing the package does not load heavy dependencies.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Homes = Mapping[str, Sequence[str]]
"""Each home and the names a package takes from it: a home is the module that defines the
names, or ``"module:attr"`` for one attribute the package exports under another name."""


def home_of_each(homes: Homes) -> dict[str, str]:
    """Each name of ``homes`` with its home (a ``ValueError`` for a name given two homes)."""
    found: dict[str, str] = {}
    for home, names in homes.items():
        for name in names:
            if found.setdefault(name, home) != home:
                raise ValueError(f"{name!r} has two homes: {found[name]!r} and {home!r}")
    return found


def lazy_getattr(module: str, homes: Homes) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module`` that imports each name of ``homes`` when it is
    first asked for; other names raise AttributeError."""
    home_of = home_of_each(homes)

    def __getattr__(name: str) -> Any:
        if name not in home_of:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, _, attr = home_of[name].partition(":")
        return getattr(importlib.import_module(home), attr or name)

    return __getattr__
