"""Spaceworld's state snapshot, the part-delivery plans read from it (what its rankings and
the scripted team compare) and the scripted team that follows them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marlang.envs.core.base import ScriptedTeam
from marlang.envs.credit.grid import manhattan
from marlang.envs.credit.gridworld import (
    Cell,
    MoveIntent,
    choose_joint_moves,
)


@dataclass(frozen=True)
class SpaceworldSnapshot:
    """The whole Spaceworld state at one step (what ``rank_states`` compares)."""

    positions: tuple[Cell, ...]
    part_positions: tuple[Cell, ...]
    """Where each part is (its carrier's cell while carried)."""
    carried_by: tuple[int | None, ...]
    delivered: tuple[bool, ...]
    destinations: tuple[Cell, ...]
    collided: bool
    step: int


def _tour_steps(
    start: Cell, carrying: int | None, parts: Sequence[int], snapshot: SpaceworldSnapshot
) -> int:
    """Steps for one satellite to deliver ``parts`` in order (the carried one must be first)."""
    here, steps = start, 0
    for part in parts:
        if part != carrying:
            steps += manhattan(here, snapshot.part_positions[part]) + 1
            here = snapshot.part_positions[part]
        steps += manhattan(here, snapshot.destinations[part]) + 1
        here = snapshot.destinations[part]
    return steps


def plans(snapshot: SpaceworldSnapshot) -> list[tuple[int, list[int], list[list[int]]]]:
    """Every way to split the undelivered parts between the satellites, each satellite's
    parts in its fastest order: ``(team steps, steps per satellite, parts per satellite)``."""
    n_agents = len(snapshot.positions)
    remaining = [p for p, d in enumerate(snapshot.delivered) if not d]
    carrying: list[int | None] = [None] * n_agents
    for part, carrier in enumerate(snapshot.carried_by):
        if carrier is not None:
            carrying[carrier] = part
    found = []
    for owners in itertools.product(range(n_agents), repeat=len(remaining)):
        if any(
            snapshot.carried_by[p] is not None and snapshot.carried_by[p] != o
            for p, o in zip(remaining, owners, strict=True)
        ):
            continue
        per_agent_steps, per_agent_parts = [], []
        for agent in range(n_agents):
            mine = [p for p, o in zip(remaining, owners, strict=True) if o == agent]
            best_steps, best_order = 0, list[int]()
            for order in itertools.permutations(mine):
                if carrying[agent] is not None and order[0] != carrying[agent]:
                    continue
                steps = _tour_steps(snapshot.positions[agent], carrying[agent], order, snapshot)
                if not best_order or steps < best_steps:
                    best_steps, best_order = steps, list(order)
            per_agent_steps.append(best_steps)
            per_agent_parts.append(best_order)
        found.append((max(per_agent_steps, default=0), per_agent_steps, per_agent_parts))
    return found


def plan_steps(snapshot: SpaceworldSnapshot) -> tuple[int, list[int], list[list[int]]]:
    """The best split: fewest team steps, then fewest steps in all."""
    return min(plans(snapshot), key=lambda plan: (plan[0], sum(plan[1])))


def spaceworld_rank_key(snapshot: SpaceworldSnapshot, index: int) -> tuple[int, int, int, int]:
    """The ordering ``SpaceworldEnv.rank_states`` compares (larger is better for ``index``)."""
    if snapshot.collided:
        return (0, 0, 0, 0)
    options = plans(snapshot)
    team = min(plan[0] for plan in options)
    ego = min(plan[1][index] for plan in options if plan[0] == team)
    return (1, sum(snapshot.delivered), -team, -ego)


class ScriptedSpaceworldTeam(ScriptedTeam):
    """The reference team: the best split of the parts (``plan_steps``, kept once chosen),
    each satellite on Manhattan paths, every joint move checked to be collision-free, the
    satellite with more work left having right of way. Reads the env, so it works in both
    observation modes; actions are names."""

    def reset(self) -> None:
        self._parts: list[list[int]] | None = None

    def _joint_action(self, observations: Any) -> dict[str, str]:
        env = self.env
        snapshot = env.rank_snapshot()
        if self._parts is None or self._broken(snapshot):
            self._parts = [list(p) for p in plan_steps(snapshot)[2]]
        intents, work = [], []
        for i in range(len(env.possible_agents)):
            queue = [p for p in self._parts[i] if not env.delivered[p]]
            work.append(
                _tour_steps(env.positions[i], env.carrying(i), queue, snapshot) if queue else 0
            )
            intents.append(self._intent(i, queue))
        slowest = max(range(len(work)), key=lambda i: (work[i], -i))
        for i, intent in enumerate(intents):
            intent.weight = 3.0 if i == slowest else 1.0
        names = choose_joint_moves(
            env.positions, intents, env.layout.in_bounds, collisions_fatal=True
        )
        return {
            agent: names[i] for i, agent in enumerate(env.possible_agents) if agent in env.agents
        }

    def _broken(self, snapshot: SpaceworldSnapshot) -> bool:
        """Whether a part is carried by a satellite other than the one planned to take it."""
        assert self._parts is not None
        for agent, parts in enumerate(self._parts):
            for part in parts:
                if snapshot.carried_by[part] not in (None, agent):
                    return True
        return False

    def _intent(self, index: int, queue: list[int]) -> MoveIntent:
        env = self.env
        if not queue:
            return MoveIntent()
        part, here = queue[0], env.positions[index]
        carried = env.carrying(index)
        if carried == part:
            if here == env.destinations[part]:
                return MoveIntent(fixed_action="drop")
            goal = env.destinations[part]
        else:
            if here == env.part_positions[part] and carried is None:
                return MoveIntent(fixed_action="pick up")
            goal = env.part_positions[part]
        field = {cell: manhattan(cell, goal) for cell in env.layout.rooms}
        return MoveIntent(distance=field)
