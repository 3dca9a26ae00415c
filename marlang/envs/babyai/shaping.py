"""Progress toward a BabyAI go-to goal, and the potential-based reward that pays it.

``goal_distance`` is the fewest actions (turns and forward moves) one agent needs, alone, to
stand next to and face an object the mission's ``go to ...`` names: a breadth-first search
over (cell, direction) through the cells it can enter (empty cells, open doors; teammates
are ignored, other objects block). The multi-agent BabyAI env puts it in each observation's
``data["goal_distance"]`` (``None`` where the mission is not a single go-to, or no matching
object can be reached).

``goal_progress`` is a PPO ``learning.reward_hook`` built on it: the env's reward plus
potential-based shaping (Ng, Harada and Russell, 1999) with Phi(s) = -scale * distance,

    r'_t = r_t + gamma * Phi(s_{t+1}) - Phi(s_t),    Phi(terminal) = 0,

so a step toward the goal pays about ``scale`` and a step away costs about as much, while the
discounted sum of the shaping over an episode is gamma^T Phi(s_T) - Phi(s_0): fixed by where
the episode starts and ends, whatever was done between. Walking in circles, turning away from
the target and back, or waiting cannot earn it, and the policy that is best under the shaped
reward is the best under the env's (the learner passes its own ``gamma`` so the two agree).
Training only: returns, ``iterations.csv`` and evaluations stay the env's rewards.
"""

from __future__ import annotations

from collections import deque

from minigrid.core.constants import DIR_TO_VEC
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.envs.babyai.core.verifier import GoToInstr

from marlang.types import TextObservation, Trajectory

Cell = tuple[int, int]

DEFAULT_SCALE = 0.1
"""Shaping per action of progress: a step toward the goal pays about this much (the env pays
up to 1 for success, less the later it comes)."""


def goal_cells(level: RoomGridLevel) -> list[Cell] | None:
    """Cells holding an object the mission's go-to names; ``None`` for other missions."""
    instrs = getattr(level, "instrs", None)
    if not isinstance(instrs, GoToInstr):
        return None
    return [(int(p[0]), int(p[1])) for p in instrs.desc.obj_poss]


def goal_distance(level: RoomGridLevel, position: Cell, direction: int) -> int | None:
    """Fewest turns and forward moves from (position, direction) to facing an object the
    mission's go-to names; ``None`` where none can be reached or the mission is not a go-to."""
    targets = set(goal_cells(level) or ())
    if not targets:
        return None
    width, height = level.grid.width, level.grid.height

    def ahead(cell: Cell, facing: int) -> Cell:
        dx, dy = DIR_TO_VEC[facing]
        return cell[0] + int(dx), cell[1] + int(dy)

    def enterable(cell: Cell) -> bool:
        x, y = cell
        if not (0 <= x < width and 0 <= y < height):
            return False
        obj = level.grid.get(x, y)
        return obj is None or obj.can_overlap()

    start = ((int(position[0]), int(position[1])), int(direction))
    seen = {start}
    queue = deque([(start, 0)])
    while queue:
        (cell, facing), dist = queue.popleft()
        front = ahead(cell, facing)
        if front in targets:
            return dist
        successors = [(cell, (facing - 1) % 4), (cell, (facing + 1) % 4)]
        if enterable(front):
            successors.append((front, facing))
        for nxt in successors:
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, dist + 1))
    return None


def potential(observation: TextObservation | None, scale: float = DEFAULT_SCALE) -> float:
    """Phi of an observation: -scale * its ``goal_distance``. An unreachable goal counts as
    the grid's width plus height (a bound on an open room's distances), so losing the goal
    costs, never pays."""
    if observation is None:
        raise ValueError("goal_progress needs every step's observation of the agent")
    data = observation.data
    if "goal_distance" not in data:
        raise ValueError("goal_progress needs observations with data['goal_distance'] "
                         "(the multi-agent BabyAI envs write it for go-to missions)")
    distance = data["goal_distance"]
    if distance is None:
        width, height = data.get("grid_size", (0, 0))
        distance = int(width) + int(height)
    return -scale * float(distance)


def goal_progress(trajectory: Trajectory, agent: str, gamma: float = 1.0,
                  scale: float = DEFAULT_SCALE) -> list[float]:
    """The agent's per-step rewards: the env's plus gamma * Phi(next) - Phi(now) (see the
    module docstring). The state after the agent's last step is worth 0 where its episode
    terminated there (success or failure), else it is the final observation (cut off: the
    learner bootstraps from it). Steps after the agent's episode ended keep the env's reward."""
    steps = trajectory.steps
    phi = {i: potential(step.observations[agent], scale)
           for i, step in enumerate(steps) if agent in step.observations}
    rewards = [float(step.rewards.get(agent, 0.0)) for step in steps]
    for i, now in phi.items():
        step = steps[i]
        if i + 1 in phi:
            after = phi[i + 1]
        elif step.terminations.get(agent, step.terminated):
            after = 0.0
        else:
            after = potential(trajectory.final_observations.get(agent), scale)
        rewards[i] += gamma * after - now
    return rewards
