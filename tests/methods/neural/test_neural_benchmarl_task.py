"""marlang envs as BenchMARL tasks: numeric observations, the global state, action masks, fixed
numeric infos, and time limits reported as truncation (never termination)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest
import torch
from gymnasium.spaces import Box, Discrete
from pettingzoo import ParallelEnv

from marlang.methods.neural.benchmarl_task import GROUP, MarlangTask, NumericParallelEnv


class FakeCountdownEnv(ParallelEnv):
    """A plain PettingZoo env (not a marlang one) that terminates after ``ends_after`` steps
    and has no time limit of its own; reward 1 per step for each agent."""

    metadata: ClassVar[dict] = {"name": "fake_countdown", "render_modes": []}

    def __init__(self, ends_after: int) -> None:
        self.possible_agents = ["agent_0", "agent_1"]
        self.agents: list[str] = []
        self.ends_after = ends_after
        self.t = 0

    def observation_space(self, agent):
        return Box(0.0, 100.0, shape=(1,), dtype=np.float32)

    def action_space(self, agent):
        return Discrete(2)

    state_space = Box(0.0, 100.0, shape=(1,), dtype=np.float32)

    def state(self):
        return np.array([self.t], dtype=np.float32)

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {a: self.state() for a in self.agents}, {a: {"note": "free-form"} for a in self.agents}

    def step(self, actions):
        self.t += 1
        over = self.t >= self.ends_after
        agents = list(self.agents)
        self.agents = [] if over else agents
        return ({a: self.state() for a in agents}, dict.fromkeys(agents, 1.0), dict.fromkeys(agents, over),
                dict.fromkeys(agents, False), {a: {"note": "free-form", "success": over} for a in agents})


def run_to_end(env: NumericParallelEnv) -> tuple[int, dict, dict, dict]:
    env.reset(seed=0)
    steps = 0
    while env.agents:
        _, _, terminated, truncated, infos = env.step(dict.fromkeys(env.agents, 0))
        steps += 1
    return steps, terminated, truncated, infos


def test_time_limit_is_truncation_and_termination_stays_termination():
    steps, terminated, truncated, infos = run_to_end(NumericParallelEnv(FakeCountdownEnv(ends_after=100), max_steps=4))
    assert steps == 4 and not any(terminated.values()) and all(truncated.values())
    steps, terminated, truncated, infos = run_to_end(NumericParallelEnv(FakeCountdownEnv(ends_after=3), max_steps=4))
    assert steps == 3 and all(terminated.values()) and not any(truncated.values())
    assert infos == {"agent_0": {"success": 1.0}, "agent_1": {"success": 1.0}}  # free-form keys dropped


def test_climbing_task_gives_numeric_observations_state_and_truncation():
    task = MarlangTask("matrix/climbing")
    env = task.get_env_fun(1, False, 0, "cpu")()
    assert task.max_steps(env) == 25 and task.group_map(env) == {GROUP: ["agent_0", "agent_1"]}
    assert task.action_mask_spec(env) is None
    td = env.rollout(25, break_when_any_done=False)
    assert td.get((GROUP, "observation")).shape == (25, 2, 2)
    assert td.get("state").shape == (25, 4)
    assert td.get((GROUP, "observation"))[0].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    truncated = td.get(("next", GROUP, "truncated")).squeeze(-1)
    terminated = td.get(("next", GROUP, "terminated")).squeeze(-1)
    assert truncated[-1].all() and not truncated[:-1].any() and not terminated.any()
    # The reward is the common payoff of the joint action, for both agents.
    payoff = torch.tensor([[11.0, -30.0, 0.0], [-30.0, 7.0, 6.0], [0.0, 0.0, 5.0]])
    actions = td.get((GROUP, "action"))
    expected = payoff[actions[:, 0], actions[:, 1]]
    reward = td.get(("next", GROUP, "reward")).squeeze(-1)
    assert torch.equal(reward, torch.stack([expected, expected], dim=-1))
    env.close()


def test_lbf_task_masks_actions_and_seeds_each_collection_env():
    task = MarlangTask("lbf/8x8-2p-2f-coop")
    make = task.get_env_fun(2, False, 7, "cpu")
    first, second = make(), make()
    # BenchMARL's n_envs collection envs get one seed each of run seed 7's training stream: the
    # same seed gives the same episodes, and run seed 8's envs play none of run seed 7's (with
    # seeds 7 + i, run seed 8's first env replayed run seed 7's second)
    states = [env.reset().get("state") for env in (first, second)]
    assert not torch.equal(*states)
    again = task.get_env_fun(2, False, 7, "cpu")
    assert all(torch.equal(again().reset().get("state"), state) for state in states)
    other = task.get_env_fun(2, False, 8, "cpu")
    others = [other().reset().get("state") for _ in range(2)]
    assert not any(torch.equal(o, state) for o in others for state in states)
    assert task.action_mask_spec(first) is not None
    td = first.rollout(30, break_when_any_done=False)
    mask = td.get((GROUP, "action_mask"))
    assert mask.shape == (30, 2, 6) and not mask.all()  # some moves are blocked at some step
    chosen = mask.gather(-1, td.get((GROUP, "action")).unsqueeze(-1))
    assert chosen.all()  # random actions respect the mask
    first.close()
    second.close()


def test_env_without_numeric_mode_fails_before_the_run_directory(tmp_path):
    from marlang.config import ConfigError, build_config
    from marlang.envs import register_env
    from marlang.envs.registry import DEFAULT_REGISTRY
    from marlang.run import Experiment

    def text_only(n_agents=2, **kwargs):
        if kwargs:
            raise ValueError(f"test/kwargs-only has no parameter {next(iter(kwargs))!r}")
        return FakeCountdownEnv(3)

    register_env("test/kwargs-only", text_only, "an env whose factory takes **kwargs")
    try:
        # Its signature cannot tell, so the config validates; building it in numeric mode fails.
        config = build_config({"env": {"id": "test/kwargs-only"}, "agents": {"kind": "neural"},
                               "learning": {"method": "mappo"}})
        with pytest.raises(ConfigError, match="env: test/kwargs-only has no parameter 'observation_mode'"):
            Experiment(config, tmp_path / "run").run()
    finally:
        DEFAULT_REGISTRY.unregister("test/kwargs-only")
    assert not (tmp_path / "run").exists()
