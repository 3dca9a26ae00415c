"""The numeric/text base class, through the climbing game: modes, actions, errors, registry."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from gymnasium.spaces import Box, Discrete

from marlang.envs import EnvSpec, NumericTextEnv, make
from marlang.envs.core.spaces import TextObservationSpace
from marlang.envs.credit.climbing import CLIMBING_ACTIONS, ClimbingGameEnv
from marlang.types import TextObservation

MARL_IDS = [
    "matrix/climbing",
    "lbf/8x8-2p-2f-coop",
    "lbf/8x8-2p-2f-2s-coop",
    "lbf/10x10-3p-3f",
    "lbf/10x10-3p-3f-2s",
    "lbf/15x15-3p-5f",
    "lbf/15x15-4p-3f",
    "lbf/15x15-4p-5f",
    "rware/tiny-4ag",
    "rware/small-4ag",
    "rware/tiny-2ag",
    "pistonball/n5-sparse",
    "babyai-marl/goto-obj",
    "babyai-marl/pickup",
    "babyai-marl/unlock-pickup",
    "babyai-marl/put-next",
]


def test_spaces_follow_the_observation_mode():
    text, numeric = ClimbingGameEnv(), ClimbingGameEnv(observation_mode="numeric")
    assert isinstance(text.observation_space("agent_0"), TextObservationSpace)
    assert isinstance(numeric.observation_space("agent_0"), Box)
    for env in (text, numeric):
        assert env.action_space("agent_1") == Discrete(3)
        assert env.action_names("agent_1") == list(CLIMBING_ACTIONS)
    obs, _ = text.reset(seed=0)
    assert isinstance(obs["agent_0"], TextObservation)
    assert obs["agent_0"].legal_actions == list(CLIMBING_ACTIONS)
    obs, _ = numeric.reset(seed=0)
    assert obs["agent_0"].dtype == np.float32
    assert numeric.observation_space("agent_0").contains(obs["agent_0"])
    assert numeric.state_space.contains(numeric.state())
    # Text stays available to critics in numeric mode.
    assert "payoff" in numeric.text_observation("agent_1").text


def test_index_and_name_actions_give_the_same_episode():
    by_index, by_name = (ClimbingGameEnv(observation_mode="numeric") for _ in range(2))
    by_index.reset(seed=3)
    by_name.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(10):
        joint = {agent: int(rng.integers(3)) for agent in by_index.agents}
        a = by_index.step({k: np.int64(v) for k, v in joint.items()})
        b = by_name.step({k: CLIMBING_ACTIONS[v] for k, v in joint.items()})
        assert a[1] == b[1] and a[2] == b[2] and a[3] == b[3] and a[4] == b[4]


@pytest.mark.parametrize(
    ("action", "words"),
    [
        ("action D", "unknown action 'action D' for agent_0; valid actions"),
        (3, "out of range; valid indices 0..2"),
        (-1, "out of range"),
        (1.0, "must be an integer index or an action name"),
        (None, "must be an integer index or an action name"),
        (True, "must be an integer index or an action name"),
    ],
)
def test_invalid_actions_raise_a_clear_error(action, words):
    env = ClimbingGameEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        env.step({"agent_0": action, "agent_1": "action A"})


def test_step_needs_every_live_agent_and_a_reset():
    env = ClimbingGameEnv()
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": 0, "agent_1": 0})
    env.reset()
    with pytest.raises(ValueError, match="missing"):
        env.step({"agent_0": 0})


def test_numeric_steps_build_no_text(monkeypatch):
    env = ClimbingGameEnv(observation_mode="numeric")

    def no_text(*args, **kwargs):
        raise AssertionError("text was built in numeric mode")

    for name in ("ego_text", "observation_data", "text_observation"):
        monkeypatch.setattr(env, name, no_text)
    env.reset(seed=0)
    while env.agents:
        env.step(dict.fromkeys(env.agents, 0))
    assert env.step_count == 25


def test_time_limit_truncates_and_ends_the_episode():
    env = ClimbingGameEnv(max_steps=3)
    env.reset()
    for _ in range(2):
        _, _, term, trunc, infos = env.step(dict.fromkeys(env.agents, 1))
        assert not any(term.values()) and not any(trunc.values())
    _, rewards, term, trunc, infos = env.step(dict.fromkeys(env.agents, 1))
    assert trunc == {"agent_0": True, "agent_1": True} and not any(term.values())
    assert rewards == {"agent_0": 7.0, "agent_1": 7.0}
    assert infos["agent_0"]["step"] == 3 and infos["agent_0"]["success"] is False
    assert env.agents == []


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"observation_mode": "pixels"}, "observation_mode must be one of"),
        ({"max_steps": 0}, "max_steps must be a positive integer"),
        ({"n_agents": 3}, "n_agents must be 2"),
        ({"colour": 1}, "has no parameter 'colour'; valid parameters: n_agents, max_steps"),
    ],
)
def test_bad_construction_arguments_are_named(kwargs, words):
    with pytest.raises(ValueError, match=words):
        make("matrix/climbing", **kwargs)


def test_every_id_is_registered_and_builds_in_both_modes():
    for env_id in MARL_IDS:
        for mode in ("text", "numeric"):
            env = make(env_id, observation_mode=mode)
            assert isinstance(env, NumericTextEnv) and env.env_id == env_id
            assert env.observation_mode == mode


def test_a_spec_by_import_path_lists_the_real_parameters():
    spec = EnvSpec("matrix/climbing", "marlang.envs.credit.climbing:make_climbing", "climbing")

    assert spec.parameters() == ["n_agents", "max_steps", "observation_mode"]
    assert isinstance(spec.make(), ClimbingGameEnv)


@pytest.mark.parametrize("module", ["marlang.envs.credit.lbf", "marlang.envs.credit"])
def test_the_package_imports_first_without_a_cycle(module):
    code = f"import {module}; from marlang.envs import make; make('matrix/climbing')"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("env_id", MARL_IDS)
def test_numeric_observations_and_state_stay_in_their_spaces(env_id):
    env = make(env_id, observation_mode="numeric")
    obs, _ = env.reset(seed=0)
    for _ in range(8):
        for agent, value in obs.items():
            assert value.dtype == np.float32
            assert env.observation_space(agent).contains(value), (agent, value)
        assert env.state_space.contains(env.state())
        if not env.agents:
            break
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    assert isinstance(env.text_observation(env.possible_agents[0]), TextObservation)
