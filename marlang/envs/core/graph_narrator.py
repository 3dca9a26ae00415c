"""How a learner reads an episode of a user's LangGraph graph: `GraphWorld` stands where an env
would (it describes the graph and gives its narrator) and `GraphNarrator` tells each chat-model
call as the node that made it, what it read and what it answered, then the reward or the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from marlang.envs.core.narrator import After, Narrator, plural
from marlang.types import Step, Trajectory

READ_CHARS = 600
"""Characters of a call's input shown (its end: the latest messages matter most)."""

ANSWER_CHARS = 800
"""Characters of a call's reply shown (its start)."""


@dataclass(frozen=True)
class GraphWorld:
    """A graph as the world its learners' prompts describe: its builder and its prompts."""

    build: str
    prompts: tuple[str, ...]

    @property
    def world_description(self) -> str:
        return (f"a LangGraph graph ({self.build}) whose nodes answer each input with marked prompts "
                f"{', '.join(self.prompts) or '(none)'}")

    def narrator(self) -> GraphNarrator:
        return GraphNarrator(self)


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"...{text[-limit:]}"


def _head(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."


class GraphNarrator(Narrator):
    """Narrates a graph's episode call by call (a step is one chat-model call)."""

    step_noun = "call"

    def _call(self, step: Step, agent: str | None = None) -> str:
        node = step.info.get("node") or "(no node)"
        agents = ", ".join(step.decisions)
        key = agent if agent is not None else next(iter(step.decisions), None)
        obs = step.observations.get(key) if key is not None else None
        decision = step.decisions.get(key) if key is not None else None
        read = _tail(obs.text, READ_CHARS) if obs is not None else ""
        answer = _head(decision.action, ANSWER_CHARS) if decision is not None else ""
        error = step.info.get("error")
        lines = [f"call {step.t} in node {node} (prompt {agents}):", f"  read: {read}",
                 f"  answered: {answer}" if error is None else f"  failed: {error}"]
        return "\n".join(lines)

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        return self._call(step, agent)

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        calls = sum(agent in s.decisions for s in trajectory.steps)
        return [f"{agent} totals: {plural(calls, 'call')}."]

    def header(self, trajectory: Trajectory) -> list[str]:
        lines = [f"Episode of {trajectory.env_id} with prompts {', '.join(trajectory.agents) or '(none)'}."]
        text = trajectory.metrics.get("input")
        if text:
            lines.append(f"Input: {_head(str(text), READ_CHARS)}")
        return lines

    def entry(self, steps: Sequence[Step], after: After) -> str:
        return "\n".join(self._call(step) for step in steps)

    def outcome(self, trajectory: Trajectory) -> str:
        error = trajectory.metrics.get("error")
        output = trajectory.metrics.get("output")
        answer = f"; answer: {_head(str(output), ANSWER_CHARS)}" if output is not None and not error else ""
        if error:
            return f"Outcome: failed ({error}); reward 0; {plural(trajectory.n_steps, self.step_noun)}."
        verdict = "success" if trajectory.success else "failure"
        return (f"Outcome: {verdict}; reward {trajectory.team_return:g}; "
                f"{plural(trajectory.n_steps, self.step_noun)}{answer}.")
