"""Recorded episodes for the credit-check tests: an env played with given joint actions (or its
scripted team), written down as the episode graph writes a `Trajectory`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marlang.types import Decision, Step, Trajectory


def record(env: Any, seed: int, joints: Sequence[dict[str, str]] | None = None, *, episode: int = 0,
           scripted_steps: int = 0) -> Trajectory:
    """Play ``joints`` (or ``scripted_steps`` of the env's scripted team) from ``seed``."""
    observations, _ = env.reset(seed=seed)
    team = env.scripted_team() if joints is None else None
    if team is not None:
        team.reset()
    steps = []
    for t in range(len(joints) if joints is not None else scripted_steps):
        if not env.agents:
            break
        actions = dict(joints[t]) if joints is not None else team.act(observations)
        after, rewards, terminations, truncations, _ = env.step(actions)
        steps.append(Step(t=t, observations=observations, messages=[],
                          decisions={a: Decision(action=act) for a, act in actions.items()},
                          rewards={a: float(r) for a, r in rewards.items()},
                          terminated=any(terminations.values()), truncated=any(truncations.values())))
        observations = after
    return Trajectory(episode=episode, seed=seed, env_id=env.env_id, protocol="none",
                      agents=list(env.possible_agents), steps=steps, final_observations=dict(observations))
