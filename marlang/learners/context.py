"""What a learner works with: the agents' names and fixed instructions, the model for its
own calls (``learning.model``), prompts, the call context, trajectories and an env to
narrate them; and the two hooks into the run it is given at construction, which the run
binds once the loop and the checkpointer exist (`EpisodeSink`, `CheckpointBarrier`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlang.prompts import PromptLibrary
from marlang.types import CallContext, PolicyState, StopFlag, TextObservation, Trajectory

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from marlang.models.local_policy import LocalPolicy
    from marlang.usergraph import GraphPlayer


class EpisodeSink:
    """Where a learner that plays its own training episodes (``records_rollouts``) writes
    each one, played with the given policy state, as the loop writes those it plays. The run
    makes it before the learner and binds it to its loop's writer once the loop is built
    (`bind`); unbound (a learner used without a run), an episode is not written."""

    def __init__(self) -> None:
        self._write: Callable[[Trajectory, PolicyState], None] | None = None

    def bind(self, write: Callable[[Trajectory, PolicyState], None]) -> None:
        """Send every episode from now on to ``write`` (the run's loop)."""
        self._write = write

    def __call__(self, traj: Trajectory, policy: PolicyState) -> None:
        if self._write is not None:
            self._write(traj, policy)


class CheckpointBarrier:
    """Awaited before each of the learner's model calls and each rollout: the run makes its
    checkpoint durable first, so a killed run never makes an answered call again. The run
    makes it before the learner and binds it to its checkpointer once that is open (`bind`);
    unbound (a learner used without a run), it returns at once."""

    def __init__(self) -> None:
        self._flush: Callable[[], Awaitable[None]] | None = None

    def bind(self, flush: Callable[[], Awaitable[None]]) -> None:
        """Await ``flush`` (the checkpointer's) from now on."""
        self._flush = flush

    async def __call__(self) -> None:
        if self._flush is not None:
            await self._flush()


@dataclass
class LearnerContext:
    agents: list[str]
    """Agent names, in order."""
    model: Any = None
    """The chat model for the learner's own calls (critic, gradient, ...); None for learners
    that make none."""
    prompts: PromptLibrary = field(default_factory=PromptLibrary)
    call: CallContext = field(default_factory=CallContext)
    """Seed, callbacks and the concurrency limiter shared with the actors."""
    env: Any = None
    """An environment instance, to describe the world and narrate trajectories."""
    actors: dict[str, Any] = field(default_factory=dict)
    """The acting `LLMAgent`s (Reflexion reflects through them)."""
    local: dict[str, LocalPolicy] = field(default_factory=dict)
    """Per LLM slot on a local model, that model's handle (slots on one model share it): what a
    weight-space learner trains and acts through."""
    trajectory: Callable[[int], Trajectory] | None = None
    """Loads a finished episode by id (the run directory's episodes)."""
    record_episode: EpisodeSink = field(default_factory=EpisodeSink)
    """Writes a training episode the update played itself (a learner with
    ``records_rollouts``), played with the given policy state, as the loop writes those it
    plays; one already in the run directory is not written again."""
    instructions: dict[str, str] = field(default_factory=dict)
    """Per agent: the fixed part of its prompt (role, output format) that updates never
    rewrite; shown to the learner's LLM calls as context."""
    run_dir: Path | None = None
    """The run directory (weight-space learners write ``adapters/<iteration>/`` there)."""
    structured: str = "auto"
    """``model.structured``: how the learner's calls that want JSON ask for it."""
    before_calls: CheckpointBarrier = field(default_factory=CheckpointBarrier)
    """Awaited before each of the learner's model calls (the run makes its checkpoint
    durable first, so a killed run never makes an answered call again)."""
    stop: StopFlag = field(default_factory=StopFlag)
    """The run's stop flag (set by Ctrl-C): long updates check it between their steps."""
    config: Any = None
    """The run's `ExperimentConfig` (a learner that builds its own trainer from it: neural)."""
    callbacks: list[Any] = field(default_factory=list)
    """Callbacks given in Python for the learner's own trainer (BenchMARL callbacks for a
    neural learner), called after marlang's own."""
    learning: list[str] | None = None
    """The slots learners update (``team.<slot>.learn`` not false); None: every agent. The
    others still act, talk and are credited."""
    graph: GraphPlayer | None = None
    """A run of a user's own graph: its player (a learner that plays groups of graph runs itself)."""
    reward_hook: Callable[..., Any] | None = None
    """A per-agent reward hook given in Python (a neural learner; see
    ``marlang.methods.neural.reward_hook``); it takes the place of ``learning.reward_hook``."""

    def act_messages(self, agent: str, obs: TextObservation, instruction: str) -> list[BaseMessage]:
        """``agent``'s prompt to act on ``obs`` alone (no history, no messages), with the named
        instruction: what a weight-space learner scores or samples after."""
        return self.actors[agent].act_messages(obs, [], CallContext(episode=-1), instruction=instruction)

    def learns(self, agent: str) -> bool:
        """Whether learners update ``agent``'s policy, memory or adapter."""
        return self.learning is None or agent in self.learning

    @property
    def learning_agents(self) -> list[str]:
        """The agents learners update, in agent order."""
        return [a for a in self.agents if self.learns(a)]
