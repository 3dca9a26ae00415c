"""Real Two-Switch transitions for the credit tests: records of consecutive states under
random joint actions (snapshots, and ego texts when asked)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from marlang.credit.rankers import RankQuery
from marlang.credit.records import StepRecord
from marlang.envs_text import make


@lru_cache(maxsize=8)
def two_switch_queries(n_steps: int, *, seed: int = 0, texts: bool = False, mode: str = "numeric"):
    """(env, queries): one query per agent for each of ``n_steps`` random steps (cached: read only)."""
    env = make("gridworld/two-switch", observation_mode=mode)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)

    def record():
        return StepRecord(env.snapshot(), {a: env.ego_text(a) for a in env.possible_agents} if texts else {})

    queries, before = [], record()
    for t in range(n_steps):
        if not env.agents:
            env.reset(seed=seed + t + 1)
            before = record()
        actions = {a: int(rng.integers(env.action_space(a).n)) for a in env.agents}
        env.step(actions)
        after = record()
        for agent, action in actions.items():
            queries.append(RankQuery(agent, before, after, env.action_names(agent)[action], key=f"{t}:{agent}"))
        before = after
    return env, queries
