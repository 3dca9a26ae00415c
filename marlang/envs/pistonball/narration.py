"""Pistonball episodes told in words for learners: the pistons' heights and moves and the
ball's distance to the wall, sampled every few cycles to fit a token budget.
``PistonballTextEnv.narrator()`` returns a ``PistonballNarrator``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from marlang.envs.core.narrator import (
    After,
    Narrator,
    action_of,
    agents_of,
    plural,
    said_by,
    shorten,
    team_reward,
)
from marlang.types import Step, Trajectory

_MOVES = {"move up": 1, "move down": -1}
WINDOW_MESSAGES = 2
"""Messages shown per window of several cycles (the rest are counted)."""


class PistonballNarrator(Narrator):
    """Pistonball: the pistons' heights row and the ball's distance to the wall and motion,
    sampled every k cycles (k as small as the budget allows), each piston's net moves."""

    sampling: ClassVar[bool] = True
    step_noun: ClassVar[str] = "cycle"

    def header(self, trajectory: Trajectory) -> list[str]:
        agents = agents_of(trajectory)
        row = (
            f"Pistonball {trajectory.env_id}: {len(agents)} pistons, {agents[0]} next to the left "
            f"wall to {agents[-1]} on the right; rows list them left to right."
        )
        legend = (
            "Each line: cycles, ball distance to the left wall (piston widths) and its motion, the "
            "team reward, heights (0-16) at the start, moves (ups minus downs in those cycles)."
        )
        return [row, legend]

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        d = obs.data if obs is not None else {}
        parts = [f"cycle {d.get('cycle', step.t) + 1}"]
        if d:
            sides = (("left", d.get("left_height")), ("right", d.get("right_height")))
            neighbours = ", ".join(f"{side} {h}" for side, h in sides if h is not None)
            parts.append(
                f"height {d.get('height')}/{d.get('max_height', 16)} (neighbours: {neighbours})"
            )
            side = {"left": "to your left", "right": "to your right", "above": "above you"}
            parts.append(
                f"ball {side.get(d.get('ball_relative', ''), '?')} {d.get('ball_distance', 0):.1f} "
                f"widths away, {d.get('ball_wall_distance', 0):.1f} from the wall, "
                f"{_ball_motion(d)}"
            )
        action = action_of(step, agent)
        parts.append(
            f"did '{action}'"
            + (" (illegal)" if step.infos.get(agent, {}).get("illegal_action") else "")
        )
        reward = step.rewards.get(agent)
        if reward:
            parts.append(f"reward {reward:+.2f}")
        parts += said_by(step, agent)
        return "; ".join(parts)

    def entry(self, steps: Sequence[Step], after: After) -> str:
        first = _pistons(steps[0])
        start = next(iter(first.values()), {})
        end_data = (
            next(iter(after.values())).data
            if after
            else next(iter(_pistons(steps[-1]).values()), {})
        )
        c0 = start.get("cycle", steps[0].t)
        cycles = f"cycle {c0 + 1}" if len(steps) == 1 else f"cycles {c0 + 1}-{c0 + len(steps)}"
        reward = sum(team_reward(s) for s in steps)
        heights = " ".join(str(d.get("height", "?")) for d in first.values())
        moves = " ".join(
            _signed(sum(_MOVES.get(action_of(s, agent), 0) for s in steps)) for agent in first
        )
        line = (
            f"{cycles}: ball {start.get('ball_wall_distance', 0):.1f}->"
            f"{end_data.get('ball_wall_distance', 0):.1f} from wall, {_ball_motion(start)}; "
            f"reward {reward:+.1f}; heights {heights}; moves {moves}"
        )
        messages = [m for step in steps for m in step.messages]
        said = [f"  {m.sender} said: {shorten(m.content)}" for m in messages[:WINDOW_MESSAGES]]
        if len(messages) > WINDOW_MESSAGES:
            said.append(f"  ({len(messages) - WINDOW_MESSAGES} more messages in these cycles)")
        return "\n".join([line, *said])

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        up, stay, down = self._counts(trajectory, agent)
        return [f"{agent} totals: {up} up, {stay} stay, {down} down."]

    def summary(self, trajectory: Trajectory) -> list[str]:
        counts = ", ".join(
            f"{agent} {'/'.join(map(str, self._counts(trajectory, agent)))}"
            for agent in agents_of(trajectory)
        )
        return [f"Moves up/stay/down per piston: {counts}."]

    @staticmethod
    def _counts(trajectory: Trajectory, agent: str) -> tuple[int, int, int]:
        actions = Counter(action_of(s, agent) for s in trajectory.steps if agent in s.decisions)
        return (
            actions["move up"],
            sum(actions.values()) - actions["move up"] - actions["move down"],
            actions["move down"],
        )

    def outcome(self, trajectory: Trajectory) -> str:
        verdict = (
            "success: the ball reached the left wall"
            if trajectory.success
            else "failure: the ball did not reach the left wall"
        )
        final = next(iter(trajectory.final_observations.values()), None)
        where = ""
        if final is not None and not trajectory.success and "ball_wall_distance" in final.data:
            where = f" (it ended {final.data['ball_wall_distance']:.1f} piston widths away)"
        return (
            f"Outcome: {verdict}{where}; team return {trajectory.team_return:.1f}; "
            f"{plural(trajectory.n_steps, self.step_noun)}."
        )


def _pistons(step: Step) -> dict[str, dict[str, Any]]:
    """Each piston's data at a step, left to right."""
    pairs = [(agent, obs.data) for agent, obs in step.observations.items()]
    pairs.sort(key=lambda p: p[1].get("index", 0))
    return dict(pairs)


def _ball_motion(data: Mapping[str, Any]) -> str:
    direction = data.get("ball_direction", "")
    if not direction or direction == "at rest":
        return "at rest"
    return f"moving {direction} {data.get('ball_speed', 0):.1f} widths/s"


def _signed(n: int) -> str:
    return f"{n:+d}" if n else "0"
