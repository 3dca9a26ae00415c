"""The one env table: a spec per id, each building the env it describes."""

from __future__ import annotations

import copy
import functools

import pytest

from marlang.envs import EnvRegistry, EnvSpec, list_envs, make
from marlang.envs.builtin import BUILTIN_ENVS, MARL_ENVS
from marlang.envs.credit.scenarios import LBF_SCENARIOS, RWARE_SCENARIOS
from marlang.envs.registry import DEFAULT_REGISTRY
from marlang.registry import ENVS

# the task ids but HumanEval read their datasets from the Hugging Face hub
OFFLINE = [s for s in BUILTIN_ENVS if "tasks" not in str(s.entry_point) or s.id == "code/humaneval"]


def test_every_builtin_id_is_one_spec_in_the_default_registry():
    ids = [spec.id for spec in BUILTIN_ENVS]
    assert len(ids) == len(set(ids)) and {spec.id for spec in MARL_ENVS} <= set(ids)
    assert set(ids) <= set(list_envs())
    for spec in BUILTIN_ENVS:
        assert DEFAULT_REGISTRY.spec(spec.id) is spec
        assert list_envs()[spec.id] == spec.description
        assert ENVS.entry(spec.id).metadata["default_agents"] == spec.default_agents
        assert ENVS.entry(spec.id).metadata.get("success", True) is spec.success


@pytest.mark.parametrize("spec", OFFLINE, ids=lambda spec: spec.id)
def test_each_spec_builds_its_env_with_its_agents(spec):
    env = make(spec.id)
    assert len(env.possible_agents) == spec.default_agents
    assert env.env_id == spec.id


def test_no_entry_point_fakes_its_signature():
    for spec in BUILTIN_ENVS:
        target = spec.load()
        assert "__signature__" not in vars(type(target)), spec.id
        if isinstance(target, functools.partial):
            target = target.func
        assert "__signature__" not in vars(type(target)), spec.id


def test_scenario_ids_come_from_their_scenarios():
    by_id = {spec.id: spec for spec in BUILTIN_ENVS}
    for scenarios, success in ((LBF_SCENARIOS, True), (RWARE_SCENARIOS, False)):
        for env_id, scenario in scenarios.items():
            spec = by_id[env_id]
            assert spec.kwargs["scenario"] is scenario and spec.success is success
            assert spec.default_agents == scenario.agents
            assert spec.description == scenario.description


def test_what_an_id_fixes_is_not_an_option():
    assert DEFAULT_REGISTRY.spec("overcooked/cramped-room").kwargs["layout"] == "cramped-room"
    with pytest.raises(ValueError, match=r"no parameter 'layout'; valid parameters: n_agents, "):
        make("overcooked/cramped-room", layout="forced-coordination")
    with pytest.raises(ValueError, match="no parameter 'sandbox_slice'"):
        make("math/math", sandbox_slice=2)
    assert "sandbox_slice" in DEFAULT_REGISTRY.spec("code/mbpp").parameters()
    with pytest.raises(ValueError, match="n_agents must be 10"):
        make("pistonball/n10", n_agents=4)


def test_options_passed_on_are_listed_and_open_ones_are_not():
    pistons = DEFAULT_REGISTRY.spec("pistonball").parameters()
    assert pistons[:3] == ["n_agents", "max_steps", "render_mode"] and "ball_mass" in pistons
    assert "n_pistons" not in pistons and "env_id" not in pistons
    task = DEFAULT_REGISTRY.spec("code/humaneval").parameters()
    assert task[0] == "n_agents" and task[-1] == "task_ids" and "split" in task
    assert "problems" not in task and "env_class" not in task
    numeric = DEFAULT_REGISTRY.spec("babyai-marl/pickup")
    assert numeric.parameters() is None  # its level checks the options it takes
    assert numeric.takes("observation_mode") is True and numeric.takes("room_size") is None
    assert DEFAULT_REGISTRY.spec("matrix/climbing").takes("room_size") is False


def test_a_spec_by_import_path_registers_and_builds_on_a_private_registry():
    registry = EnvRegistry()
    spec = EnvSpec(
        "mine/warehouse", "marlang.envs.credit.rware:make_rware", "my warehouse",
        kwargs={"scenario": RWARE_SCENARIOS["rware/tiny-2ag"], "env_id": "mine/warehouse"},
        success=False,
    )
    registry.register(spec)
    assert registry.list() == {"mine/warehouse": "my warehouse"}
    env = registry.make("mine/warehouse", observation_mode="numeric")
    assert env.env_id == "mine/warehouse" and len(env.possible_agents) == 2
    with pytest.raises(ValueError, match=r"'scenario'.*valid parameters: n_agents, max_steps"):
        registry.make("mine/warehouse", scenario=None)
    with pytest.raises(ValueError, match="unknown environment id 'mine/warhouse'.*mine/warehouse"):
        registry.make("mine/warhouse")
    with pytest.raises(TypeError, match="must be callable or 'package.module:attr'"):
        registry.register(EnvSpec("mine/bad", "not an import path", "bad"))


@pytest.mark.parametrize("spec", MARL_ENVS, ids=lambda spec: spec.id)
def test_numeric_envs_serve_their_spaces_and_actions_from_the_base(spec):
    env = make(spec.id, observation_mode="numeric")
    first, *others = env.possible_agents
    space = env.numeric_observation_space(first)
    assert all(env.numeric_observation_space(a) is space for a in others)
    assert env.state_space is env.state_space
    observations, _ = env.reset(seed=0)
    assert space.contains(observations[first]) and env.state_space.contains(env.state())
    for agent in env.possible_agents:
        assert env.action_space(agent).n == len(env.action_names(agent))
    if hasattr(type(env), "all_actions"):
        assert env.action_names(first) == list(type(env).all_actions)


@pytest.mark.parametrize("spec", MARL_ENVS, ids=lambda spec: spec.id)
def test_a_rank_snapshot_is_a_picture_later_steps_leave_alone(spec):
    env = make(spec.id)
    env.reset(seed=0)
    before = env.rank_snapshot()
    kept = copy.deepcopy(before)
    env.step({agent: env.action_names(agent)[-1] for agent in env.agents})
    assert repr(before) == repr(kept)
    assert all(env.rank_states(agent, before, before) == 0 for agent in env.possible_agents)
    assert not hasattr(env, "save_episode")  # ranking pictures do not restore an env


def test_a_task_env_saves_and_restores_its_episode_and_has_no_ranking_picture():
    env = make("code/humaneval", n_agents=1, max_steps=2).unwrapped
    env.reset(seed=0)
    start = env.save_episode()
    env.step({"agent_0": "def has_close_elements(numbers, threshold):\n    return False\n"})
    assert env.save_episode() != start
    env.restore_episode(start)
    assert env.save_episode() == start and env.turn == 1
    assert not hasattr(env, "rank_snapshot")
