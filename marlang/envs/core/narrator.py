"""The base ``Narrator``, which tells any text env's episodes in words, and the helpers that
env narrators share. Each env's own narrator subclasses it beside its env (``babyai.narration``,
``overcooked.narration``, ``pistonball.narration``, ``tasks.narration``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from marlang.types import Step, TextObservation, Trajectory

MESSAGE_CHARS = 200
"""Longest message shown in a narration; longer ones are cut with an ellipsis."""

After = Mapping[str, TextObservation] | None
"""The observations right after a step (the next step's, or the trajectory's final ones);
``None`` when the trajectory does not store them."""


class Narrator:
    """Narrates any ParallelEnv with ``TextObservation``s: first observation lines, actions,
    rewards and messages. Env-specific narrators override the parts they know better.

    ``entry`` renders a window of consecutive steps (one step, unless ``sampling``), all
    agents; ``after`` is the observations following the window's last step, when stored.
    Narrators read only what a ``Trajectory`` stores (observations' text and ``data``,
    decisions, rewards, infos, messages), so a trajectory loaded back from a run file reads
    exactly as the live one did; the env is there for static facts only.
    """

    sampling: ClassVar[bool] = False
    """Fit a long episode by coarser windows of steps (True) rather than by leaving out the
    middle (False)."""
    step_noun: ClassVar[str] = "step"

    def __init__(self, env: Any):
        self.env = env

    # one agent ------------------------------------------------------------------------------
    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        seen = obs.text.splitlines()[0] if obs is not None and obs.text else ""
        parts = [f"step {step.t}: saw '{seen}'", f"did '{action_of(step, agent)}'"]
        parts += reward_and_words(step, agent)
        return "; ".join(parts)

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        illegal = sum(bool(s.infos.get(agent, {}).get("illegal_action")) for s in trajectory.steps)
        sent = sum(m.sender == agent for s in trajectory.steps for m in s.messages)
        illegal_text, sent_text = plural(illegal, "illegal action"), plural(sent, "message")
        return [f"{agent} totals: {illegal_text}, {sent_text} sent."]

    # all agents -----------------------------------------------------------------------------
    def header(self, trajectory: Trajectory) -> list[str]:
        lines = [f"Episode of {trajectory.env_id} with agents {', '.join(agents_of(trajectory))}."]
        mission = mission_of(trajectory)
        if mission:
            lines.append(f"Mission: {mission}")
        return lines

    def entry(self, steps: Sequence[Step], after: After) -> str:
        return "\n".join(self._step_line(step, then) for step, then in with_afters(steps, after))

    def _step_line(self, step: Step, after: After) -> str:
        """One step of ``entry``, all agents; ``after``: the observations that followed it."""
        acts = "; ".join(f"{a} did '{d.action}'" for a, d in step.decisions.items())
        line = f"step {step.t}: {acts}"
        reward = team_reward(step)
        if reward:
            line += f"; reward {reward:g}"
        return "\n".join([line, *message_lines(step)])

    def _cells_line(self, step: Step, after: After) -> str:
        """A ``_step_line`` of one cell per agent: ``_step_label``, each agent's
        ``_agent_cell``, then ``_step_events`` and the step's messages."""
        cells = "; ".join(
            self._agent_cell(step, agent, obs, after) for agent, obs in step.observations.items()
        )
        line = f"{self._step_label(step)}: {cells}{self._step_events(step, after)}"
        return "\n".join([line, *message_lines(step)])

    def _step_label(self, step: Step) -> str:
        return f"step {step.t}"

    def _agent_cell(self, step: Step, agent: str, obs: Any, after: After) -> str:
        """What ``agent`` saw and did in ``step`` (``_cells_line``)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _agent_cell")

    def _step_events(self, step: Step, after: After) -> str:
        """What happened to the team in ``step``, after the agents' cells (``_cells_line``)."""
        return ""

    def summary(self, trajectory: Trajectory) -> list[str]:
        return []

    def outcome(self, trajectory: Trajectory) -> str:
        verdict = "success" if trajectory.success else "failure"
        return (
            f"Outcome: {verdict}; team return {trajectory.team_return:g}; "
            f"{plural(trajectory.n_steps, self.step_noun)}."
        )



# ------------------------------------------------------------------------------ helpers


def with_afters(steps: Sequence[Step], after: After) -> list[tuple[Step, After]]:
    """Each step of a window with the observations that followed it (the next step's; for the
    window's last step, ``after``)."""
    nexts: list[After] = [step.observations for step in steps[1:]]
    return list(zip(steps, [*nexts, after], strict=True))


def agents_of(trajectory: Trajectory) -> list[str]:
    """The trajectory's agents, or those seen in its observations when it does not list them."""
    if trajectory.agents:
        return list(trajectory.agents)
    seen: dict[str, None] = {}
    for step in trajectory.steps:
        seen.update(dict.fromkeys(step.observations))
    return list(seen)


def mission_of(trajectory: Trajectory) -> str:
    """The mission of the first observation (``""`` for an empty trajectory)."""
    for step in trajectory.steps:
        for obs in step.observations.values():
            return obs.mission
    return ""


def first_data(trajectory: Trajectory) -> Mapping[str, Any]:
    """The ``data`` of the first observation (``{}`` for an empty trajectory)."""
    for step in trajectory.steps:
        for obs in step.observations.values():
            return obs.data
    return {}


def action_of(step: Step, agent: str) -> str:
    """The action ``agent`` took at ``step`` (``"-"`` when it took none)."""
    decision = step.decisions.get(agent)
    return decision.action if decision is not None else "-"


def team_reward(step: Step) -> float:
    """The mean reward over the agents at ``step``."""
    return sum(step.rewards.values()) / len(step.rewards) if step.rewards else 0.0


def plural(n: int, noun: str) -> str:
    """``"1 step"``, ``"2 steps"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def shorten(text: str, limit: int = MESSAGE_CHARS) -> str:
    """``text`` on one line, cut with an ellipsis past ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def said_by(step: Step, agent: str) -> list[str]:
    """What ``agent`` said at ``step``, one ``said '...'`` part per message."""
    return [f"said '{shorten(m.content)}'" for m in step.messages if m.sender == agent]


def reward_and_words(step: Step, agent: str) -> list[str]:
    """``agent``'s reward, whether its action was illegal, and what it said, as line parts."""
    parts = []
    reward = step.rewards.get(agent)
    if reward:
        parts.append(f"reward {reward:g}")
    info = step.infos.get(agent, {})
    if info.get("illegal_action"):
        parts.append("the action was not legal")
    return parts + said_by(step, agent)


def message_lines(step: Step) -> list[str]:
    """One indented ``sender said: ...`` line per message of ``step``."""
    return [f"  {m.sender} said: {shorten(m.content)}" for m in step.messages]

