"""The env registry: building by id, listing, user registration, and clear errors."""

from __future__ import annotations

import pytest
from pettingzoo import ParallelEnv

from marlang.envs import BabyAITextEnv, EnvRegistry, list_envs, make, register_env
from marlang.envs.registry import DEFAULT_REGISTRY

BUILT_IN = ["babyai/goto-obj", "babyai/pickup", "babyai/put-next", "babyai/unlock-pickup"]


def test_built_in_envs_are_listed_with_one_line_descriptions():
    envs = list_envs()
    assert list(envs) == sorted(envs)
    assert set(BUILT_IN) <= set(envs)
    for description in envs.values():
        assert description and "\n" not in description


@pytest.mark.parametrize("env_id", BUILT_IN)
def test_make_builds_each_built_in_env(env_id):
    env = make(env_id, n_agents=3)
    assert isinstance(env, BabyAITextEnv)
    assert env.env_id == env_id
    assert env.possible_agents == ["agent_0", "agent_1", "agent_2"]
    observations, _ = env.reset(seed=0)
    assert set(observations) == set(env.possible_agents)


def test_level_choices_behind_each_id():
    levels = {env_id: type(make(env_id).level).__name__ for env_id in BUILT_IN}
    assert levels == {
        "babyai/goto-obj": "GoToLocal",
        "babyai/pickup": "BlockedUnlockPickup",
        "babyai/put-next": "PutNextLocal",
        "babyai/unlock-pickup": "UnlockPickup",
    }


def test_max_steps_default_and_override():
    env = make("babyai/unlock-pickup")
    env.reset(seed=0)
    assert env.max_steps == 288  # the level's intended 8 * room_size**2
    env = make("babyai/pickup", max_steps=40)
    env.reset(seed=0)
    assert env.max_steps == 40


def test_level_options_pass_through():
    env = make("babyai/goto-obj", room_size=6, num_dists=3)
    env.reset(seed=0)
    assert (env.level.width, env.level.height) == (6, 6)


def test_unknown_id_names_it_and_lists_valid_ids():
    with pytest.raises(ValueError) as error:
        make("babyai/pick-up")
    message = str(error.value)
    assert "'babyai/pick-up'" in message
    for env_id in BUILT_IN:
        assert env_id in message
    assert "Did you mean 'babyai/pickup'" in message


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"n_agents": 1}, "n_agents"),
        ({"n_agents": 2.5}, "n_agents"),
        ({"max_steps": 0}, "max_steps"),
        ({"render_mode": "human"}, "render_mode"),
        ({"room_size": 3}, "room_size"),
        ({"num_dists": 40}, "num_dists"),
        ({"num_dists": "many"}, "num_dists"),
    ],
)
def test_invalid_parameters_are_named(kwargs, parameter):
    with pytest.raises(ValueError, match=parameter):
        make("babyai/goto-obj", **kwargs)


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(ValueError) as error:
        make("babyai/pickup", colour="red")
    message = str(error.value)
    assert "'colour'" in message
    assert "n_agents, max_steps, render_mode" in message


def test_too_many_agents_for_the_room_is_reported():
    env = make("babyai/pickup", n_agents=16)
    with pytest.raises(ValueError, match="n_agents=16 does not fit"):
        env.reset(seed=0)


def test_user_registration_on_a_private_registry():
    registry = EnvRegistry()

    def factory(n_agents: int, max_steps: int = 10) -> ParallelEnv:
        return make("babyai/goto-obj", n_agents=n_agents, max_steps=max_steps)

    registry.register("mine/goto", factory, "My GoTo variant")
    assert registry.list() == {"mine/goto": "My GoTo variant"}
    assert registry.make("mine/goto", n_agents=3, max_steps=5).max_num_agents == 3
    with pytest.raises(ValueError, match=r"'speed'.*valid parameters: n_agents, max_steps"):
        registry.make("mine/goto", speed=2)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("mine/goto", factory, "again")
    registry.register("mine/goto", factory, "Replaced", overwrite=True)
    assert registry.list()["mine/goto"] == "Replaced"
    with pytest.raises(ValueError, match="description"):
        registry.register("mine/other", factory, "")
    with pytest.raises(TypeError, match="callable"):
        registry.register("mine/other", "not a factory", "text")
    with pytest.raises(TypeError, match="needs a factory and a description"):
        registry.register("mine/other", factory)
    registry.unregister("mine/goto")
    assert "mine/goto" not in registry


def test_register_env_on_the_default_registry():
    def factory(n_agents: int = 2, **kwargs) -> ParallelEnv:
        return make("babyai/pickup", n_agents=n_agents, **kwargs)

    register_env("test/pickup-alias", factory, "Alias used by a test")
    try:
        assert list_envs()["test/pickup-alias"] == "Alias used by a test"
        assert make("test/pickup-alias", n_agents=2).env_id == "babyai/pickup"
    finally:
        DEFAULT_REGISTRY.unregister("test/pickup-alias")
    assert "test/pickup-alias" not in list_envs()
