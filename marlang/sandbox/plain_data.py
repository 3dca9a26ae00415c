"""Plain data across the sandbox's process boundary: the only form a program's results take.

Standard library only (the sandbox worker imports this file as a sibling script). A value
crosses as tagged JSON built from exact builtin types: None, bool, int, float, str, bytes, and
lists, tuples, dicts, sets and frozensets of them. The standard library's dict subclasses
`Counter`, `OrderedDict` and `defaultdict` cross as plain dicts (their items only). Anything
else, a subclass of a plain type included, never crosses: the program keeps it and the judge
gets an opaque handle, which it may only hand back to the program. Decoding builds exact
builtin types only, so no method of the program's (``__eq__``, ``__hash__``, ...) can reach
the judge.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import cast

MAX_DEPTH = 100
"""Deepest nesting of containers that crosses (deeper, or self-referencing, is refused)."""
MAX_NODES = 2_000_000
"""Most values (containers and scalars counted alike) in one crossing."""
MAX_BYTES = 16 << 20
"""Largest encoded message (16 MiB): a larger result fails its test."""
PLAIN_TYPES = "None, bool, int, float, str, bytes, and lists, tuples, dicts and sets of them"

_SMALL_INT = 1 << 62  # larger ints cross in hex: JSON decimals above 4300 digits are refused
_DICT_LIKE = (dict, collections.Counter, collections.OrderedDict, collections.defaultdict)
_TAGS = frozenset({"t", "d", "s", "f", "b", "i", "h", "fn"})
# Bound once, at import: a program that rebinds builtins later cannot change them here.
_type, _len, _hex = type, len, hex
_dict_items = dict.items


class PlainDataError(ValueError):
    """A value cannot cross as plain data (too deep, too large, malformed, unhashable key)."""


class Encoder:
    """Turns a value into tagged JSON; `other(value)` decides what a non-plain value becomes
    (a handle on the program's side; an error or a reference on the judge's side)."""

    def __init__(self, other: Callable[[object], object], max_nodes: int = MAX_NODES) -> None:
        self.other = other
        self.max_nodes = max_nodes
        self.nodes = 0

    def encode(self, value: object, depth: int = 0) -> object:
        if depth > MAX_DEPTH:
            raise PlainDataError(f"the value is nested more than {MAX_DEPTH} levels deep "
                                 "(or contains itself)")
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise PlainDataError(f"the value holds more than {self.max_nodes} items")
        kind = _type(value)
        if value is None or kind is bool or kind is str or kind is float:
            return value
        # `kind` is the exact type (never isinstance, which a program's `__class__` can fool), so
        # each cast below restates what the `is` test just proved.
        if kind is int:
            number = cast(int, value)
            return number if -_SMALL_INT < number < _SMALL_INT else {"i": _hex(number)}
        inner = depth + 1
        if kind is list:
            return [self.encode(item, inner) for item in cast("list[object]", value)]
        if kind is tuple:
            return {"t": [self.encode(item, inner) for item in cast("tuple[object, ...]", value)]}
        if kind in _DICT_LIKE:
            return {"d": [[self.encode(k, inner), self.encode(v, inner)]
                          for k, v in _dict_items(cast("dict[object, object]", value))]}
        if kind is set:
            return {"s": [self.encode(item, inner) for item in cast("set[object]", value)]}
        if kind is frozenset:
            return {"f": [self.encode(item, inner) for item in cast("frozenset[object]", value)]}
        if kind is bytes:
            return {"b": cast(bytes, value).hex()}
        return self.other(value)


def encode(value: object, other: Callable[[object], object]) -> object:
    """`value` as tagged JSON (see `Encoder`)."""
    return Encoder(other).encode(value)


def _malformed(obj: object) -> PlainDataError:
    text = repr(obj)
    return PlainDataError("malformed plain data: " + (text if _len(text) < 80 else text[:80]
                                                      + "..."))


def decode(obj: object, other: Callable[[str, object], object], depth: int = 0) -> object:
    """Exact builtin values from tagged JSON (as `json.loads` returns it). `other(tag, body)`
    resolves the reference tags "h" (a handle) and "fn" (a program function by name)."""
    if depth > MAX_DEPTH + 1:
        raise PlainDataError(f"plain data nested more than {MAX_DEPTH} levels deep")
    kind = _type(obj)
    if obj is None or kind is bool or kind is int or kind is float or kind is str:
        return obj
    # As in `Encoder.encode`, each cast restates an exact-type test just made (JSON objects have
    # string keys).
    inner = depth + 1
    if kind is list:
        return [decode(item, other, inner) for item in cast("list[object]", obj)]
    if kind is not dict or _len(cast("dict[str, object]", obj)) != 1:
        raise _malformed(obj)
    ((tag, body),) = cast("dict[str, object]", obj).items()
    if tag not in _TAGS:
        raise _malformed(obj)
    if tag in ("h", "fn"):
        return other(tag, body)
    if tag == "b" or tag == "i":
        if _type(body) is not str:
            raise _malformed(obj)
        text = cast(str, body)
        try:
            return bytes.fromhex(text) if tag == "b" else int(text, 16)
        except ValueError:
            raise _malformed(obj) from None
    if _type(body) is not list:
        raise _malformed(obj)
    body_items = cast("list[object]", body)
    items = [decode(item, other, inner) for item in body_items] if tag != "d" else []
    try:
        if tag == "t":
            return tuple(items)
        if tag == "s":
            return set(items)
        if tag == "f":
            return frozenset(items)
        result: dict[object, object] = {}
        for pair in body_items:
            if _type(pair) is not list or _len(cast("list[object]", pair)) != 2:
                raise _malformed(obj)
            key, value = cast("list[object]", pair)
            result[decode(key, other, inner)] = decode(value, other, inner)
    except TypeError as exc:  # an unhashable key or set member
        raise PlainDataError(f"plain data with an unhashable key: {exc}") from None
    return result


def type_name(value: object) -> str:
    """A description of a non-plain value's type for messages: 'Foo', 'Foo (a subclass of int)'."""
    kind = _type(value)
    name = _type.__dict__["__name__"].__get__(kind)
    for base in (bool, int, float, str, bytes, list, tuple, dict, set, frozenset):
        if kind is not base and issubclass(kind, base):
            return f"{name} (a subclass of {base.__name__})"
    return name
