"""What a marlang run assigns to a user's graph for one invocation: prompt texts by name and
chat models by role, held in a context variable so that concurrent invocations (asyncio tasks,
threads started from a copied context) each see their own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType

from langchain_core.language_models import BaseChatModel

ROLE_METADATA_KEY = "marlang_role"
"""The callback-metadata key under which a chat model returned by a mark inside a run carries
its role, so that the node-call recorder can attribute its calls."""


@dataclass(frozen=True)
class Binding:
    """Prompt texts by mark name, chat models by role (and one ``model`` for every other role),
    and each bound prompt's version (a prompt without one is version 0). A mark the binding does
    not name returns its default."""

    prompts: Mapping[str, str] = field(default_factory=dict)
    models: Mapping[str, BaseChatModel] = field(default_factory=dict)
    versions: Mapping[str, int] = field(default_factory=dict)
    model: BaseChatModel | None = None
    """The chat model every role plays that ``models`` does not name (None: the mark's default)."""
    _role_models: dict[str, BaseChatModel] = field(default_factory=dict, init=False, repr=False, compare=False)
    _reads: dict[str, list[str | None]] = field(default_factory=dict, init=False, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.versions) - set(self.prompts))
        if unknown:
            raise ValueError(f"versions given for prompts the binding does not hold: {unknown}; bind their texts too")
        # read-only views: a binding is shared by every node of the invocation
        object.__setattr__(self, "prompts", MappingProxyType(dict(self.prompts)))
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))
        object.__setattr__(self, "versions", MappingProxyType(dict(self.versions)))

    def model_for(self, role: str, default: Callable[[], BaseChatModel]) -> BaseChatModel:
        """The chat model playing ``role`` in this binding (``default()`` where it binds none),
        carrying ``role`` in its callback metadata; the same object at every call, so that a
        node marking its model on each call keeps one model's state."""
        with self._lock:
            if role not in self._role_models:
                bound = self.models.get(role, self.model)
                model = bound if bound is not None else default()
                # a copy shares the model's client or engine; only its metadata names the role
                self._role_models[role] = model.model_copy(
                    update={"metadata": {**(model.metadata or {}), ROLE_METADATA_KEY: role}}
                )
            return self._role_models[role]

    def note_read(self, name: str, node: str | None) -> None:
        """Prompt ``name`` was read in ``node`` (None: outside any node, e.g. in a builder)."""
        with self._lock:
            nodes = self._reads.setdefault(name, [])
            if node not in nodes:
                nodes.append(node)

    def reads(self) -> dict[str, list[str | None]]:
        """Each prompt read inside this binding, in the order first read, with the nodes that
        read it (what attributes a node's calls to the prompts it played)."""
        with self._lock:
            return {name: list(nodes) for name, nodes in self._reads.items()}

    def prompt_versions(self) -> dict[str, int]:
        """The version of each bound prompt, by name."""
        return {name: self.versions.get(name, 0) for name in self.prompts}


_CURRENT: ContextVar[Binding | None] = ContextVar("marlang_usergraph_binding", default=None)


def current_binding() -> Binding | None:
    """The binding of the invocation running in this context, None outside a marlang run."""
    return _CURRENT.get()


@contextmanager
def bind(binding: Binding) -> Iterator[Binding]:
    """Run the block (one invocation of the user's graph) inside ``binding``; the previous
    binding, if any, is back afterwards."""
    token = _CURRENT.set(binding)
    try:
        yield binding
    finally:
        _CURRENT.reset(token)
