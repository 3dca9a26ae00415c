"""The marks a user writes in their own LangGraph app: `prompt` and `chat_model` return their
default outside a marlang run and the run's bound value inside one, and each call registers the
mark, so that a run can list what a graph's module declares as trainable (`declared_marks`).
"""

from __future__ import annotations

import importlib
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

from langchain_core.language_models import BaseChatModel

from marlang.usergraph.binding import current_binding

_SHOWN_DEFAULT = 60
"""Characters of a default shown in a conflict error."""


@dataclass(frozen=True)
class Mark:
    """One mark seen: a prompt's name or a model's role, its default (a prompt's text, a model's
    spec or class name), where it was written (``file:line``) and the module that wrote it."""

    kind: Literal["prompt", "chat_model"]
    name: str
    default: str
    place: str
    module: str


_marks: dict[tuple[str, str, str], Mark] = {}  # by kind, name and place
# the registry of names seen is global on purpose: marks are written at any depth of a user's
# code, and discovery must find them without the user passing anything around
_lock = threading.Lock()


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN_DEFAULT else text[: _SHOWN_DEFAULT - 3] + "...")


def _register(mark: Mark) -> None:
    with _lock:
        # the same place marked again is the same mark (a node called twice, a module reloaded
        # after an edit); another place of the same app (its top-level package, or the script)
        # must agree on a prompt's default; two apps in one process (tests, a notebook importing
        # both) name their prompts on their own
        for seen in _marks.values():
            if (seen.kind, seen.name) != ("prompt", mark.name) or mark.kind != "prompt":
                continue
            if _app(seen.module) != _app(mark.module):
                continue
            if seen.place == mark.place or seen.default == mark.default:
                continue
            raise ValueError(
                f"prompt {mark.name!r} is marked twice with different defaults: {_shown(seen.default)} at "
                f"{seen.place} and {_shown(mark.default)} at {mark.place}; give both the same default "
                "or give one of them another name"
            )
        _marks[(mark.kind, mark.name, mark.place)] = mark


def _app(module: str) -> str:
    """The app a module belongs to: its top-level package (``my_app`` for ``my_app.nodes``)."""
    return module.partition(".")[0]


def _caller(depth: int = 2) -> tuple[str, str]:
    """The ``file:line`` and module name of the code that called the mark."""
    frame = sys._getframe(depth)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}", str(frame.f_globals.get("__name__", "?"))


def prompt(name: str, default: str) -> str:
    """The text of prompt ``name``: ``default`` outside a marlang run, the run's current version
    inside one (``default`` where the run binds no text for ``name``).

    Call it where the prompt is used (in the node, or in the builder the run calls): it returns
    the text of the moment it is called. Two places of one app (one top-level package, or one
    script) marking ``name`` with different defaults raise a ValueError.
    """
    if not isinstance(default, str):
        raise TypeError(f"prompt {name!r}: the default must be a str, not {type(default).__name__}")
    place, module = _caller()
    _register(Mark("prompt", name, default, place, module))
    binding = current_binding()
    if binding is None:
        return default
    binding.note_read(name, _node())
    return binding.prompts.get(name, default)


def _node() -> str | None:
    """The LangGraph node running the caller (None outside a graph's node)."""
    from langgraph.config import get_config

    try:
        metadata = get_config().get("metadata") or {}
    except RuntimeError:  # outside a runnable: a builder, a script
        return None
    node = metadata.get("langgraph_node")
    return None if node is None else str(node)


def chat_model(role: str, default: str | BaseChatModel) -> BaseChatModel:
    """The chat model playing ``role``: ``default`` outside a marlang run (a spec such as
    ``"openai:gpt-4o-mini"`` or ``"local:smollm2"`` is built by `marlang.models.load_chat_model`,
    a chat model is returned as is), inside one the model the run assigns to ``role`` (the
    default where it assigns none), carrying ``role`` in its callback metadata: one copy for the
    whole binding.

    Like `prompt`, it returns the model of the moment it is called. A spec default is built once
    per process and spec (a node that marks its model on every call loads its weights once).
    """
    if isinstance(default, BaseChatModel):
        shown = type(default).__name__
    elif isinstance(default, str):
        shown = default
    else:
        raise TypeError(f"chat_model {role!r}: the default must be a model spec or a chat model, "
                        f"not {type(default).__name__}")
    place, module = _caller()
    _register(Mark("chat_model", role, shown, place, module))
    binding = current_binding()
    if binding is None:
        return _build(default)
    return binding.model_for(role, lambda: _build(default))


_built: dict[str, BaseChatModel] = {}  # a spec default's model, built once per process
_build_lock = threading.Lock()  # held while building: two threads asking for one spec load it once


def _build(default: str | BaseChatModel) -> BaseChatModel:
    if isinstance(default, BaseChatModel):
        return default
    from marlang.models.factory import load_chat_model  # loads a backend only when a spec is built

    with _build_lock:
        if default not in _built:
            _built[default] = load_chat_model(default)
        return _built[default]


def declared_marks(module: str | ModuleType | None = None) -> list[Mark]:
    """The marks seen so far, in the order first seen: all of them, or those written in
    ``module`` (imported first when given by name, so that its module-level marks and any
    builder it runs on import register). Marks inside a node register when the node first runs.
    """
    if isinstance(module, str):
        module = importlib.import_module(module)
    with _lock:
        seen = list(_marks.values())
    if module is None:
        return seen
    return [mark for mark in seen if mark.module == module.__name__]
