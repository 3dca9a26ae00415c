"""Reflexion on a user's own LangGraph graph (``graph:``, ``learning.method: reflexion``): after
each iteration's rollouts, every marked prompt gets one lesson per episode whose nodes read it,
written by the learner's model from that prompt's own calls (the node's input and reply, as the
graph narrator tells them) and the episode's outcome; a prompt's long-term memory keeps the
newest ``learning.memory_size``, and the graph's nodes read it after the prompt's text.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from langchain_core.messages import HumanMessage, SystemMessage

from marlang.agents.calls import call_model, call_seed
from marlang.envs.core.narration import step_summary
from marlang.learners.base import Candidate, PolicyState
from marlang.methods.reflexion.learner import ReflexionLearner, remembered
from marlang.types import Trajectory

SHOWN_CALLS = 12
"""A prompt's latest calls shown to the reflector (the earlier ones counted)."""


class GraphReflexionLearner(ReflexionLearner):
    """Reflexion memory per marked prompt (see the module docstring)."""

    graph_class: ClassVar[str | None] = None

    @classmethod
    def graph_learner(cls) -> type[ReflexionLearner]:
        return cls

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        options: Any = self.options
        names = list(self.context.learning_agents)
        ordered = sorted(trajectories, key=lambda t: t.episode)
        jobs = [(name, traj) for traj in ordered for name in names if name in traj.agents]
        texts = await asyncio.gather(*(self._reflect(state, name, traj) for name, traj in jobs))
        return remembered(state, names, jobs, list(texts), options.memory_size)

    async def _reflect(self, state: PolicyState, name: str, traj: Trajectory) -> str:
        """One lesson for prompt ``name`` from ``traj``: its calls and the outcome."""
        calls = [step_summary(self.context.env, s, name) for s in traj.steps if name in s.decisions]
        shown = calls[-SHOWN_CALLS:]
        if len(calls) > len(shown):
            shown = [f"({len(calls) - len(shown)} earlier calls not shown)", *shown]
        error = traj.metrics.get("error")
        outcome = (f"failed: {error}" if error else
                   f"{'success' if traj.success else 'failure'} (reward {traj.team_return:g})")
        user = self.context.prompts.get("reflect").render(outcome=outcome, trajectory="\n".join(shown))
        system = state.policies.get(name, "")
        model = self.context.model
        ctx = self.context.call.for_step(traj.n_steps)
        ctx.episode, ctx.iteration = traj.episode, state.iteration
        seed = call_seed(ctx.seed, state.iteration, traj.episode, name, "reflector") \
            if float(getattr(model, "temperature", 0) or 0) > 0 else None
        options: Any = self.options
        section = options.model or getattr(self.context.config, "model", None)  # learning.model, else model
        max_tokens = section.reflection_max_tokens if section is not None else 64
        text = await call_model(model, [SystemMessage(system), HumanMessage(user)], ctx, role="reflector",
                                agent=name, max_tokens=max_tokens, seed=seed)
        return text.split("\n\n")[0].strip()
