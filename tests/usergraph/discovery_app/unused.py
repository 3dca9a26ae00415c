"""A module of the package no node imports: its marks are not the graph's."""

from __future__ import annotations

import marlang


def shout() -> str:
    return marlang.prompt("shouter", "SHOUT.")
