"""What a critic needs from each env step beyond the tensors BenchMARL keeps: step observers
that the numeric env wrapper calls around ``reset``/``step``, and the store of per-step records
(snapshots for heuristic rankers, ego texts for LLM rankers) that the batch points into.

The batch holds tensors only, so each record stays on the side, in this process, and the env's
info carries its address as two numbers, ``record_env`` (which env instance) and
``record_step`` (which record of that instance). BenchMARL collects its ``n_envs`` envs in one
process (``SerialEnv``), so the critic reads the same store the envs write.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tensordict import TensorDictBase

RECORD_ENV = "record_env"
RECORD_STEP = "record_step"
_ID_SPAN = 1 << 24
"""Record numbers wrap here: infos travel as float32, exact for integers below 2**24."""


class StepObserver(Protocol):
    """Called by the numeric env wrapper around every reset and step of one env instance.
    Both ``on_reset`` and ``after_step`` return extra numeric info entries per agent (the
    same keys every time: the wrapper declares them from the first reset)."""

    def on_reset(self, env: Any) -> dict[str, dict[str, float]]: ...

    def before_step(self, env: Any, actions: Mapping[str, int]) -> None: ...

    def after_step(self, env: Any, actions: Mapping[str, int],
                   rewards: Mapping[str, float]) -> dict[str, dict[str, float]]: ...


@dataclass(frozen=True)
class StepRecord:
    """One env state as a critic sees it: the env's snapshot; for LLM rankers, each agent's
    ego text (``{}`` when texts are not recorded); for centralised LLM critics, the team's
    state in words (``env.state_text()``; ``""`` when not recorded)."""

    snapshot: Any
    texts: Mapping[str, str] = field(default_factory=dict)
    state: str = ""


class StepRecords:
    """The records of every env instance built for one run, each instance keeping its most
    recent ``capacity`` (enough for one batch, its resets and the state before it)."""

    def __init__(self, capacity: int, *, texts: bool = False, states: bool = False) -> None:
        self.capacity = max(2, capacity)
        self.texts = texts
        self.states = states
        self._lock = threading.Lock()
        self._envs: list[OrderedDict[int, StepRecord]] = []

    def observer(self) -> RecordingObserver:
        """A new observer, for one new env instance."""
        with self._lock:
            self._envs.append(OrderedDict())
            return RecordingObserver(self, len(self._envs) - 1)

    def add(self, env_index: int, number: int, record: StepRecord) -> None:
        with self._lock:
            records = self._envs[env_index]
            records[number] = record
            while len(records) > self.capacity:
                records.popitem(last=False)

    def get(self, env_index: int, number: int) -> StepRecord | None:
        with self._lock:
            if not 0 <= env_index < len(self._envs):
                return None
            return self._envs[env_index].get(number)

    def lookup(self, batch: TensorDictBase, *, next_state: bool) -> list[StepRecord | None]:
        """The record of every position of ``batch`` (flattened, row-major), of the state
        before the step or, with ``next_state``, after it; None where it is gone."""
        prefix = ("next", "agents", "info") if next_state else ("agents", "info")
        envs = batch.get((*prefix, RECORD_ENV))[..., 0].reshape(-1).tolist()
        numbers = batch.get((*prefix, RECORD_STEP))[..., 0].reshape(-1).tolist()
        return [self.get(int(e), int(n)) for e, n in zip(envs, numbers, strict=True)]


class RecordingObserver:
    """Records the env's state after every reset and step into its ``StepRecords``."""

    def __init__(self, store: StepRecords, env_index: int) -> None:
        self.store = store
        self.env_index = env_index
        self._numbers = itertools.count()

    def _record(self, env: Any) -> dict[str, dict[str, float]]:
        number = next(self._numbers) % _ID_SPAN
        texts = {a: env.ego_text(a) for a in env.possible_agents} if self.store.texts else {}
        state = env.state_text() if self.store.states else ""
        self.store.add(self.env_index, number, StepRecord(env.rank_snapshot(), texts, state))
        entry = {RECORD_ENV: float(self.env_index), RECORD_STEP: float(number)}
        return {agent: dict(entry) for agent in env.possible_agents}

    def on_reset(self, env: Any) -> dict[str, dict[str, float]]:
        return self._record(env)

    def before_step(self, env: Any, actions: Mapping[str, int]) -> None:
        return None

    def after_step(self, env: Any, actions: Mapping[str, int],
                   rewards: Mapping[str, float]) -> dict[str, dict[str, float]]:
        return self._record(env)



class RecordingCritic:
    """What the critics that read recorded steps (LCA, LLM-MCA) share of the ``Critic``
    interface: their step observers feed ``records``, ``last`` holds the batch's
    ``iterations.csv`` columns and ``annotated`` what the critic said about each position
    of the last batch it read."""

    records: StepRecords
    last: dict[str, Any]
    annotated: dict[int, dict[str, Any]]

    def observers(self) -> list[Any]:
        return [self.records.observer()]

    def metrics(self) -> dict[str, Any]:
        return dict(self.last)

    def annotations(self) -> dict[int, dict[str, Any]]:
        """Per flat position of the last batch the critic read: what it said there."""
        return dict(self.annotated)
