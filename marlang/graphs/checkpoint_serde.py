"""Reads a training checkpoint as data, never as code: plain values and the few LangGraph types
the training graph stores (`CHECKPOINT_TYPES`) load, and a checkpoint naming anything else (a
constructor such as ``os.system``, a pickle, a LangChain constructor) is refused in one line
before anything in it is imported or called. A run directory may be someone else's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)

from marlang.rundir.untrusted import DamagedRunFile

CHECKPOINT_TYPES: frozenset[tuple[str, str]] = frozenset({
    ("langgraph.types", "Send"),  # LangMARL's fan-out, pending in an interrupted update
    ("langgraph.types", "Interrupt"),  # an update waiting for review
})
"""The (module, name) of every type marlang's graphs store in a checkpoint; their state is
plain JSON-like values (`marlang.types.PolicyState` is stored as a dict)."""

_CONSTRUCTORS = frozenset({EXT_CONSTRUCTOR_SINGLE_ARG, EXT_CONSTRUCTOR_POS_ARGS, EXT_CONSTRUCTOR_KW_ARGS,
                           EXT_PYDANTIC_V1, EXT_PYDANTIC_V2})
_PLAIN = frozenset({"null", "bytes", "bytearray"})


class RefusedCheckpoint(DamagedRunFile):
    """A checkpoint that names a type marlang never stores (loading it could run code)."""


class StrictCheckpointSerializer(JsonPlusSerializer):
    """LangGraph's serializer with no pickle, no LangChain constructors and `CHECKPOINT_TYPES`
    as its msgpack allow-list; every value is read once for the names it holds, importing and
    calling nothing, before LangGraph builds it. ``path`` is the checkpoint file (named by a
    refusal)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(pickle_fallback=False, allowed_json_modules=None,
                         allowed_msgpack_modules=tuple(CHECKPOINT_TYPES))
        self.path = Path(path)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, payload = data
        if kind == "msgpack":
            self._check_msgpack(payload)
            return super().loads_typed(data)
        if kind == "json":
            return self._plain_json(payload)
        if kind in _PLAIN:
            return super().loads_typed(data)
        raise self._refused(f"a value stored as {kind!r}" + (" (a pickle)" if kind == "pickle" else ""))

    def _check_msgpack(self, payload: bytes) -> None:
        refused: list[str] = []

        def names_only(code: int, inner: bytes) -> None:
            # Reads an extension's (module, name, ...) and whatever it nests; builds nothing.
            if code not in _CONSTRUCTORS and code != EXT_METHOD_SINGLE_ARG:
                refused.append(f"msgpack extension type {code}")
                raise ValueError(refused[-1])
            fields = ormsgpack.unpackb(inner, ext_hook=names_only, option=ormsgpack.OPT_NON_STR_KEYS)
            if not isinstance(fields, list | tuple) or len(fields) < (4 if code == EXT_METHOD_SINGLE_ARG else 3):
                refused.append(f"a malformed msgpack extension of type {code}")
                raise ValueError(refused[-1])
            key = (fields[0], fields[1])
            if code == EXT_METHOD_SINGLE_ARG or key not in CHECKPOINT_TYPES:
                method = f".{fields[3]}" if code == EXT_METHOD_SINGLE_ARG else ""
                refused.append(f"{_dotted(fields[0])}.{_dotted(fields[1])}{method}")
                raise ValueError(refused[-1])

        try:
            ormsgpack.unpackb(payload, ext_hook=names_only, option=ormsgpack.OPT_NON_STR_KEYS)
        except (ValueError, RecursionError) as err:  # ormsgpack reports a hook's error as its own
            if refused:
                raise self._refused(refused[0]) from None
            raise DamagedRunFile(f"{self.path} is damaged (a checkpoint value is no msgpack: "
                                 f"{str(err)[:200]}); {_ADVICE}") from None

    def _plain_json(self, payload: bytes) -> Any:
        def no_constructor(value: dict[str, Any]) -> dict[str, Any]:
            if "lc" in value and value.get("type") in ("constructor", "secret", "not_implemented"):
                ident = value.get("id")
                name = ".".join(map(str, ident)) if isinstance(ident, list) else repr(ident)
                raise self._refused(f"a LangChain {value.get('type')} {_dotted(name)}")
            return value

        try:
            return json.loads(payload, object_hook=no_constructor)
        except RefusedCheckpoint:
            raise
        except (ValueError, RecursionError) as err:  # not JSON, not UTF-8, nested past the parser
            raise DamagedRunFile(f"{self.path} is damaged (a checkpoint value is no JSON: "
                                 f"{str(err)[:200]}); {_ADVICE}") from None

    def _refused(self, what: str) -> RefusedCheckpoint:
        return RefusedCheckpoint(
            f"{self.path} names {what}, which marlang never stores in a checkpoint: refused, nothing in it was "
            f"imported or run (a run directory is data, never code); the run's finished episodes in "
            f"{self.path.parent / 'episodes.jsonl'} are kept (marlang report, marlang view); {_ADVICE}")


_ADVICE = ("the run continues only from a checkpoint marlang wrote: restore checkpoints.sqlite from a backup "
           "of a directory you trust")


def _dotted(value: Any) -> str:
    """A stored name as one printable line (it is someone else's text)."""
    text = value if isinstance(value, str) else repr(value)
    return text.encode("ascii", "backslashreplace").decode()[:120].replace("\n", " ")
