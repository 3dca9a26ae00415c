"""One env id's spec: its entry point, the keyword arguments it fixes, its default agent
count and what success means (as Gymnasium's ``EnvSpec``). Every builtin id is one, in
``marlang.envs.builtin``; ``marlang.envs.registry`` builds envs from them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pettingzoo import ParallelEnv

from marlang.registry import is_entry_point, load_entry_point

EnvFactory = Callable[..., ParallelEnv]
"""Builds an env; called as ``factory(n_agents=..., **kwargs)``."""

_NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def keyword_parameters(target: Any, *, follow: bool = False) -> tuple[list[str], bool] | None:
    """The names ``target`` takes by keyword and whether it also takes ``**kwargs``; None if it
    cannot be introspected. ``follow``: a class's ``**kwargs`` passed on to its bases' own
    constructors count as its parameters (the bases' first)."""
    if follow and isinstance(target, type):
        chain: list[list[inspect.Parameter]] = []
        open_ = False
        for cls in target.__mro__:
            if "__init__" not in vars(cls) or cls is object:
                continue
            parameters = list(inspect.signature(vars(cls)["__init__"]).parameters.values())[1:]
            chain.append(parameters)
            open_ = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
            if not open_:
                break
        names = [p.name for parameters in reversed(chain) for p in parameters if p.kind in _NAMED]
        return names, open_
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        return None
    names = [p.name for p in parameters if p.kind in _NAMED]
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


@dataclass(frozen=True)
class EnvSpec:
    """One env id: how to build it and what it is.

    The env is ``entry_point(n_agents=..., **kwargs, **options)``: ``kwargs`` are fixed by the
    id (a layout, a scenario, the id itself), ``options`` are what a config's ``env.kwargs``
    or ``make`` add. The registry names an unknown option and lists the valid ones: the entry
    point's keyword parameters, and where it passes ``**options`` on, those of the callables
    ``options_of`` names (but ``kwargs`` and ``hidden``).
    """

    id: str
    entry_point: str | EnvFactory
    """A callable, or ``"package.module:attr"`` imported when the first env is built."""
    description: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    default_agents: int = 2
    """Agents when none are asked for (a scenario's fixed team, Pistonball ids' pistons)."""
    success: bool = True
    """False: the env has no notion of success (tables leave that column out)."""
    options_of: tuple[str | Callable[..., Any], ...] = ()
    """Where ``**options`` go (classes count their bases' parameters too)."""
    hidden: tuple[str, ...] = ()
    """Parameters of ``options_of`` the id does not take."""

    @property
    def env_id(self) -> str:
        """The id (the name older code reads)."""
        return self.id

    def load(self) -> EnvFactory:
        """The entry point (imported the first time when it is a path)."""
        return _load(self.entry_point)

    @property
    def factory(self) -> EnvFactory:
        """``factory(n_agents=..., **options)``: the entry point with the id's ``kwargs``."""
        target = self.load()
        return functools.partial(target, **self.kwargs) if self.kwargs else target

    def declared(self) -> tuple[list[str], bool] | None:
        """The options an env takes and whether it takes others it checks itself; None if the
        entry point cannot be introspected."""
        own = keyword_parameters(self.load())
        if own is None:
            return None
        names, open_ = own
        if open_ and self.options_of:
            found = [keyword_parameters(_load(o), follow=True) for o in self.options_of]
            names = names + [n for f in found if f is not None for n in f[0]]
            open_ = any(f is None or f[1] for f in found)
        skip = {*self.kwargs, *self.hidden}
        return list(dict.fromkeys(n for n in names if n not in skip)), open_

    def parameters(self) -> list[str] | None:
        """Every option the env takes, or None if it checks its own (``**kwargs``)."""
        declared = self.declared()
        return None if declared is None or declared[1] else declared[0]

    def takes(self, name: str) -> bool | None:
        """Whether the env takes the option ``name``; None when it cannot tell."""
        declared = self.declared()
        if declared is None:
            return None
        return True if name in declared[0] else (None if declared[1] else False)

    def make(self, n_agents: int | None = None, **options: Any) -> ParallelEnv:
        """Build the env with ``n_agents`` agents (default: its own); an unknown option is a
        ``ValueError`` naming it and the valid ones."""
        n_agents = self.default_agents if n_agents is None else n_agents
        valid = self.parameters()
        if valid is not None:
            for name in ("n_agents", *options):
                if name not in valid:
                    raise ValueError(
                        f"{self.id} has no parameter {name!r}; valid parameters: {', '.join(valid)}"
                    )
        return self.load()(n_agents=n_agents, **self.kwargs, **options)


def _load(target: str | Callable[..., Any]) -> Any:
    return load_entry_point(target) if isinstance(target, str) else target


def check_spec(spec: EnvSpec) -> None:
    """A ``ValueError`` (``TypeError`` for the entry point) naming what is wrong with ``spec``."""
    env_id = spec.id
    if not isinstance(env_id, str) or not env_id.strip() or env_id != env_id.strip():
        raise ValueError(f"env_id must be a non-empty string without outer spaces, got {env_id!r}")
    entry = spec.entry_point
    if not (callable(entry) or is_entry_point(entry)):
        raise TypeError(
            f"factory for {env_id!r} must be callable or 'package.module:attr', got {entry!r}"
        )
    if not isinstance(spec.description, str) or not spec.description.strip():
        raise ValueError(f"description for {env_id!r} must be a non-empty string")
