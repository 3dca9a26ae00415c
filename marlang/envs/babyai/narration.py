"""Multi-agent BabyAI episodes told in words for learners: poses, carried objects, what each
agent faces and sees, actions and what came of them (pick-ups, drops, doors), messages.
``BabyAITextEnv.narrator()`` returns a ``BabyAINarrator``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marlang.envs.core.narrator import (
    After,
    Narrator,
    action_of,
    agents_of,
    mission_of,
    plural,
    reward_and_words,
    team_reward,
)
from marlang.types import Step, Trajectory


class BabyAINarrator(Narrator):
    """Multi-agent BabyAI: poses, carried objects, what each agent faces and sees, actions,
    pick-ups, drops and doors opened, messages."""

    def header(self, trajectory: Trajectory) -> list[str]:
        agents = ", ".join(agents_of(trajectory))
        legend = (
            "Positions are (x, y), x growing east and y south; each line: a step, then per agent "
            "its position, facing, what it carries and faces, its action and what came of it."
        )
        mission = mission_of(trajectory)
        return [
            f"BabyAI level {trajectory.env_id}; agents {agents}; mission: {mission}.",
            legend,
        ]

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        parts = [f"step {step.t}: {_babyai_pose(obs.data, long=True)}" if obs else f"step {step.t}"]
        if obs is not None:
            front = _babyai_front(obs.data)
            if front:
                parts.append(f"facing {front}")
            seen = _babyai_seen(obs.data, obs.mission)
            if seen:
                parts.append(f"sees {seen}")
        parts.append(f"did '{action_of(step, agent)}'{_babyai_result(step, agent, after)}")
        parts += reward_and_words(step, agent)
        return "; ".join(parts)

    _step_line = Narrator._cells_line

    def _agent_cell(self, step: Step, agent: str, obs: Any, after: After) -> str:
        cell = f"{agent} {_babyai_pose(obs.data, long=False)}"
        front = _babyai_front(obs.data)
        if front:
            cell += f" facing {front}"
        return cell + f": {action_of(step, agent)}{_babyai_result(step, agent, after)}"

    def _step_events(self, step: Step, after: After) -> str:
        reward = team_reward(step)
        if not reward:
            return ""
        done_by = next(
            (i.get("completed_by") for i in step.infos.values() if i.get("completed_by")), None
        )
        return f"; reward {reward:.2f}" + (f" (mission completed by {done_by})" if done_by else "")

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        infos = [s.infos.get(agent, {}) for s in trajectory.steps]
        blocked = sum(bool(i.get("blocked")) for i in infos)
        illegal = sum(bool(i.get("illegal_action")) for i in infos)
        sent = sum(m.sender == agent for s in trajectory.steps for m in s.messages)
        done = any(i.get("completed_by") == agent for i in infos)
        totals = (
            f"{agent} totals: {plural(blocked, 'blocked action')}, "
            f"{plural(illegal, 'illegal action')}, {plural(sent, 'message')} sent"
        )
        return [totals + ("; it completed the mission." if done else ".")]

    def summary(self, trajectory: Trajectory) -> list[str]:
        return [
            line
            for agent in agents_of(trajectory)
            for line in self.agent_summary(trajectory, agent)
        ]


def _babyai_pose(data: Mapping[str, Any], *, long: bool) -> str:
    x, y = data.get("position", ("?", "?"))
    facing = data.get("direction", "?")
    carrying = _babyai_object(data.get("carrying"))
    if long:
        return f"at ({x}, {y}) facing {facing}, carrying {carrying or 'nothing'}"
    return f"({x},{y}) {facing}" + (f" carrying {carrying}" if carrying else "")


def _babyai_object(record: Mapping[str, Any] | None) -> str | None:
    if not record:
        return None
    name = f"{record.get('color', '')} {record.get('type', '')}".strip()
    return f"{record['state']} {name}" if record.get("state") else name


def _babyai_front(data: Mapping[str, Any]) -> str | None:
    front = data.get("front") or {}
    if front.get("agent"):
        return front["agent"]
    record = front.get("object")
    if record and record.get("type") == "wall":
        return "a wall"
    return _babyai_object(record)


def _babyai_seen(data: Mapping[str, Any], mission: str, most: int = 3) -> str:
    """Objects in view, those the mission names first (nearest first within each), then the
    other agents in view."""
    words = set(mission.lower().replace(",", " ").split())

    def named(record: Mapping[str, Any]) -> bool:
        return record.get("type") in words or record.get("color") in words

    objects = sorted(
        data.get("visible_objects", []), key=lambda r: not named(r)
    )  # stable: nearest first
    shown = [f"{_babyai_object(r)} {_relative(r.get('relative', {}))}" for r in objects[:most]]
    if len(objects) > most:
        shown.append(f"{len(objects) - most} more objects")
    shown += [
        f"{r['name']} {_relative(r.get('relative', {}))}" for r in data.get("visible_agents", [])
    ]
    return ", ".join(shown)


def _relative(offset: Mapping[str, int]) -> str:
    right, forward = int(offset.get("right", 0)), int(offset.get("forward", 0))
    parts = []
    if forward:
        parts.append(f"{abs(forward)} {'forward' if forward > 0 else 'back'}")
    if right:
        parts.append(f"{abs(right)} {'right' if right > 0 else 'left'}")
    return " ".join(parts) or "here"


def _babyai_result(step: Step, agent: str, after: After) -> str:
    """What the action did, in parentheses: blocked, illegal, skipped, picked up, dropped,
    a door opened or closed (from the observation after it, when stored)."""
    info = step.infos.get(agent, {})
    notes = [flag for flag in ("blocked", "skipped") if info.get(flag)]
    if info.get("illegal_action"):
        notes.append("illegal")
    before = step.observations.get(agent)
    now = after.get(agent) if after else None
    if before is not None and now is not None and not info.get("skipped"):
        held_before, held_now = before.data.get("carrying"), now.data.get("carrying")
        if held_before != held_now:
            if held_now:
                notes.append(f"picked up {_babyai_object(held_now)}")
            if held_before:
                notes.append(f"dropped {_babyai_object(held_before)}")
        door_before = (before.data.get("front") or {}).get("object") or {}
        door_now = (now.data.get("front") or {}).get("object") or {}
        if door_before.get("type") == door_now.get("type") == "door" and door_before.get(
            "state"
        ) != door_now.get("state"):
            notes.append(f"{door_before.get('color')} door now {door_now.get('state')}")
    return f" ({', '.join(notes)})" if notes else ""
