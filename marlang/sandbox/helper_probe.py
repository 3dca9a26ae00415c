"""Whether a joint team's main function needs its helpers: what the judge watches in a run
(`HelperProbe`) and, in the program process, the wrapper around each helper (`HelperWatch`)
that counts its calls and, in a perturbed run, hands the caller a different value.

Standard library only (the sandbox worker imports it as a sibling script). The judge records
the entry point's results in every watched run; only the runs that wrap the helpers tell the
program process anything (the helpers' names and lines, the entry point, and whether to
perturb), and the control and perturbed runs differ in nothing else.
"""

from __future__ import annotations

import math
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

PROGRAM_FILE = "<program>"
"""The file name the program process compiles the program under."""
MEMO_LIMIT = 100_000
"""Most results whose substitute is remembered (and the result kept alive), so that the one
same object gets the one same substitute: `aux(x) is aux(x)` answers alike in the control and
the perturbed run."""
MAX_DEPTH = 20
"""Containers nested deeper than this are substituted whole."""

# Bound at import, before any program runs.
_type, _len, _id = type, len, id
_FunctionType = types.FunctionType
_isfinite = math.isfinite
_dict_get = dict.get
_getrecursionlimit, _setrecursionlimit = sys.getrecursionlimit, sys.setrecursionlimit


@dataclass(frozen=True)
class HelperProbe:
    """What the judge watches in one run of a joint program.

    entry_point: the function whose results are recorded (a digest of every result a test's
    call to it gets, in `SandboxResult.probe["outputs"]`). helpers: helper name -> (first,
    last) line of the program that hold its agent's code; empty for the judged run, which
    wraps nothing. perturb: the wrapped helpers return a different value of the same type
    (a `Substitute` where there is none) instead of their result. In every watched run the
    judge seeds its `random` with 0 before the test setup, so tests that draw their inputs
    draw the same ones in each.
    """

    entry_point: str
    helpers: dict[str, tuple[int, int]] = field(default_factory=dict)
    perturb: bool = False

    def job_fields(self) -> dict:
        """The fields this adds to a sandbox job."""
        fields: dict = {"watch": self.entry_point}
        if self.helpers:
            fields["helpers"] = {"entry": self.entry_point, "perturb": self.perturb,
                                 "names": {n: [int(a), int(b)] for n, (a, b) in self.helpers.items()}}
        return fields


class Substitute:
    """What a perturbed helper returns in place of a value with no substitute of its type."""

    __slots__ = ()


class HelperWatch:
    """In the program process: wraps each named helper once the program has loaded.

    The helper must be the function its agent's lines define (a function compiled from those
    lines of the program, under its own name): one the team's code rebound before the watch
    starts, or rebinds, replaces the code or defaults of later, marks the run not `intact`.
    """

    def __init__(self, namespace: dict, spec: dict) -> None:
        self.namespace = namespace
        self.entry = str(spec["entry"])
        self.perturb = spec.get("perturb") is True
        self.calls = 0
        self.raised = 0
        self.intact = True
        self.serving = False
        self.memo: dict = {}
        # name -> (function, its code, defaults, keyword defaults, wrapper), as installed
        self.helpers: dict[str, tuple[types.FunctionType, types.CodeType, tuple | None, dict | None,
                                      Callable[..., object]]] = {}
        for name, lines in dict(spec["names"]).items():
            self._install(str(name), int(lines[0]), int(lines[1]))
        if not self.helpers:
            self.intact = False
        # Each call through a wrapper takes one more frame: a helper recursing through its own
        # name must reach the depth it reaches unwrapped.
        _setrecursionlimit(2 * _getrecursionlimit())

    def _install(self, name: str, first: int, last: int) -> None:
        found = _dict_get(self.namespace, name)
        function = cast(types.FunctionType, found) if _type(found) is _FunctionType else None
        code = function.__code__ if function is not None else None
        if (function is None or code is None or code.co_filename != PROGRAM_FILE or code.co_name != name
                or not first <= code.co_firstlineno <= last):
            self.intact = False
            return
        watch = self

        def wrapper(*args, **kwargs):
            return watch.call(function, args, kwargs)

        for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(wrapper, attribute, getattr(function, attribute))
        self.helpers[name] = (function, code, function.__defaults__, function.__kwdefaults__,
                              wrapper)
        self.namespace[name] = wrapper

    def call(self, function: Callable[..., object], args: tuple, kwargs: dict) -> object:
        counted = self.serving
        try:
            result = function(*args, **kwargs)
        except BaseException:
            if counted:
                self.raised += 1
            raise
        if counted:
            self.calls += 1
        # The control run makes the substitute too, and both runs pick by one index: the same
        # code runs in both, in the same time, with the same objects kept.
        try:
            new = self.substitute(result)
        except Exception:  # noqa: BLE001 - a key's own __hash__ or __eq__ may raise anything
            new = Substitute()
        return (result, new)[self.perturb]

    def serve(self, name: object) -> bool:
        """Whether a call the judge asked for (to `name`) is the entry point's."""
        return _type(name) is str and name == self.entry

    def check(self) -> None:
        """Every helper is still the function its agent defined, bound to its wrapper."""
        for name, (function, code, defaults, kwdefaults, wrapper) in self.helpers.items():
            if (_dict_get(self.namespace, name) is not wrapper or function.__code__ is not code
                    or function.__defaults__ is not defaults
                    or function.__kwdefaults__ is not kwdefaults):
                self.intact = False

    def report(self) -> dict:
        self.check()
        return {"calls": self.calls, "raised": self.raised, "intact": self.intact}

    # ------------------------------------------------------------------ substitutes

    def substitute(self, value: object, depth: int = 0) -> object:
        """A value of the same type that differs from `value` (a `Substitute` where the type
        has none, or past `MAX_DEPTH`); the same one each time for the same object."""
        key = _id(value)
        known = _dict_get(self.memo, key)
        if known is not None and known[0] is value:
            return known[1]
        new = self._new_substitute(value, depth)
        if _len(self.memo) < MEMO_LIMIT:
            self.memo[key] = (value, new)
        return new

    def _new_substitute(self, value: object, depth: int) -> object:
        kind = _type(value)
        if kind is bool:
            return not value
        if kind in (int, float, complex, str, bytes) or value is None:
            return _scalar_substitute(value)
        if depth >= MAX_DEPTH:
            return Substitute()
        inner = depth + 1
        # `kind` is the exact type: each cast restates the `is` test just made.
        if kind is list:
            return [self.substitute(item, inner) for item in cast("list[object]", value)] or [None]
        if kind is tuple:
            return tuple([self.substitute(item, inner) for item in cast("tuple[object, ...]", value)]) or (None,)
        if kind is dict:
            return ({k: self.substitute(v, inner) for k, v in dict.items(cast("dict[object, object]", value))}
                    or {None: None})
        if kind is set or kind is frozenset:
            make = cast("type[set[object] | frozenset[object]]", kind)
            return make([self.substitute(item, inner) for item in cast("Iterable[object]", value)]) or make([None])
        return Substitute()


def _scalar_substitute(value: object) -> object:
    """3v + 1 for numbers: no repeat of it gives v back (a helper whose result goes through
    another, or through itself, stays changed), and it changes differences and parity too."""
    kind = _type(value)
    # `kind` is the exact type: each cast restates the `is` test just made.
    if kind is int:
        return 3 * cast(int, value) + 1
    if kind is float or kind is complex:
        number = cast(complex, value)
        moved = 3 * number + 1
        if moved == number or not (_isfinite(moved.real) and _isfinite(moved.imag)):  # -0.5, inf, nan
            plain = 0.0 if number != 0.0 else 1.0
            return plain if kind is float else complex(plain)
        return moved
    if kind is str:
        return cast(str, value)[::-1] + "~"
    if kind is bytes:
        return cast(bytes, value)[::-1] + b"~"
    return Substitute()  # None
