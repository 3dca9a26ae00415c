"""Reflexion on the learner seam: after each iteration's rollouts, every agent writes one
lesson per trajectory; its long-term memory keeps the newest ``learning.memory_size``.

Rollouts of one iteration act with the memory left by every iteration before it, which is
what the old per-wave Reflexion did with ``learning.rollouts`` = ``run.parallel``.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import Field

from marlang.config import ModelConfig
from marlang.learners.base import Candidate, Learner, LearnerOptions, PolicyState
from marlang.types import Trajectory


class ReflexionOptions(LearnerOptions):
    memory_size: int = Field(3, ge=1, description="Reflections kept per agent (long-term memory bound).")
    model: ModelConfig | None = Field(None, description="Model that writes reflections; default: `model`.")

    @property
    def learning_model(self) -> ModelConfig | None:
        return self.model

    @property
    def memory_capacity(self) -> int:
        return self.memory_size


class ReflexionLearner(Learner):
    name: ClassVar[str] = "reflexion"
    options_model: ClassVar[type[LearnerOptions]] = ReflexionOptions
    roles: ClassVar[tuple[str, ...]] = ("reflector",)
    graph_class: ClassVar[str | None] = "marlang.methods.reflexion.graph:GraphReflexionLearner"
    """A user's graph keeps a memory per marked prompt (`marlang.methods.reflexion.graph`)."""

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        options: Any = self.options
        actors = self.context.actors
        ordered = sorted(trajectories, key=lambda t: t.episode)
        names = [a for a in self.context.learning_agents if a in actors]  # a frozen slot keeps its memory
        for name in names:  # reflect with the memory the agents acted with
            actors[name].memory.load_state_dict({"reflections": state.memories.get(name, [])})

        async def one(name: str, traj: Trajectory) -> str:
            ctx = self.context.call.for_step(traj.n_steps)
            ctx.episode, ctx.iteration = traj.episode, state.iteration
            return await actors[name].reflect(traj, ctx, steps=self._steps(traj, name))

        jobs = [(name, traj) for traj in ordered for name in names]
        texts = await asyncio.gather(*(one(n, t) for n, t in jobs))
        return remembered(state, names, jobs, texts, options.memory_size)

    def _steps(self, traj: Trajectory, agent: str) -> list[str] | None:
        env = self.context.env
        if env is None:
            return None
        from marlang.envs.core.narration import step_summary

        afters = [s.observations for s in traj.steps[1:]] + [traj.final_observations or None]
        return [step_summary(env, s, agent, after) for s, after in zip(traj.steps, afters)]


def remembered(state: PolicyState, names: list[str], jobs: list[tuple[str, Trajectory]], texts: list[str],
               memory_size: int) -> Candidate:
    """The candidate of one Reflexion update: each of ``names`` keeps its memory plus the lessons
    ``texts`` written for it (``jobs``: whose lesson of which episode each is), the newest
    ``memory_size``, with one record per name of its lessons and its memory before and after."""
    memories = {n: list(state.memories.get(n, [])) for n in names}
    records: dict[str, dict[str, Any]] = {
        n: {"agent": n, "reflections": [], "memory_before": list(memories[n])} for n in names
    }
    for (name, traj), text in zip(jobs, texts, strict=True):
        records[name]["reflections"].append({"episode": traj.episode, "text": text})
        if text.strip():
            memories[name].append(text.strip())
    for n in names:
        memories[n] = memories[n][-memory_size:]
        records[n]["memory_after"] = list(memories[n])
    return Candidate(memories=memories, records=list(records.values()))
