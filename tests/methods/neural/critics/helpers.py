"""Real Two-Switch transitions for the credit tests: records of consecutive states under
random joint actions (snapshots, and ego texts when asked)."""

from __future__ import annotations

from functools import lru_cache

from marlang.envs import make
from marlang.methods.neural.critics.rankers import random_queries


@lru_cache(maxsize=8)
def two_switch_queries(n_steps: int, *, seed: int = 0, texts: bool = False, mode: str = "numeric"):
    """(env, queries): one query per agent for each of ``n_steps`` random steps (cached: read only)."""
    env = make("gridworld/two-switch", observation_mode=mode)
    return env, random_queries(env, n_steps, seed=seed, texts=texts)
