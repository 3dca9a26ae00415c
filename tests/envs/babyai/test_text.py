"""Multi-agent BabyAI env: blocking, seeing each other, shared success, rewards, seeding, render."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import numpy as np
import pytest
from minigrid.core.world_object import Ball, Door, Key, WorldObj
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.envs.babyai.core.verifier import ObjDesc, PickupInstr
from pettingzoo.test import parallel_api_test

from marlang.envs import ACTIONS, AGENT_COLORS, BabyAITextEnv, list_envs, make
from marlang.types import TextObservation

Placement = list[tuple[WorldObj, tuple[int, int]]]


class FakePickupRoom(RoomGridLevel):
    """One 7x7 room (cells 1..5), fixed objects, agent_0 at (1, 5) facing east;
    mission: pick up the red ball."""

    def __init__(self, objects: Callable[[], Placement], **kwargs):
        self._objects = objects
        super().__init__(num_rows=1, num_cols=1, room_size=7, **kwargs)

    def gen_mission(self) -> None:
        for obj, (x, y) in self._objects():
            self.put_obj(obj, x, y)
        self.agent_pos, self.agent_dir = (1, 5), 0
        self.instrs = PickupInstr(ObjDesc("ball", "red"))


def room_env(objects: Callable[[], Placement], **kwargs) -> BabyAITextEnv:
    return BabyAITextEnv(FakePickupRoom(objects), **kwargs)


def start(env: BabyAITextEnv, **starts: tuple[tuple[int, int], str]):
    agent_starts = {name: {"position": pos, "direction": d} for name, (pos, d) in starts.items()}
    return env.reset(seed=0, options={"agent_starts": agent_starts})


def noop_for(env: BabyAITextEnv) -> dict[str, str]:
    return {agent: "drop" for agent in env.agents}  # empty hands: changes nothing


# ----------------------------------------------------------------------------- blocking


def test_agent_cannot_walk_into_a_teammate():
    env = room_env(lambda: [(Ball("red"), (5, 1))])
    start(env, agent_1=((2, 5), "north"))
    _, _, _, _, infos = env.step({"agent_0": "go forward", "agent_1": "drop"})
    assert env.agent_states["agent_0"].position == (1, 5)
    assert infos["agent_0"]["blocked"] is True
    assert infos["agent_0"]["illegal_action"] is False
    # Once the teammate has moved on, the cell is free again.
    env.step({"agent_0": "drop", "agent_1": "go forward"})
    env.step({"agent_0": "go forward", "agent_1": "drop"})
    assert env.agent_states["agent_0"].position == (2, 5)


def test_actions_apply_in_agent_order_and_drop_onto_a_teammate_is_blocked():
    env = room_env(lambda: [(Ball("red"), (5, 1)), (Key("blue"), (2, 5))])
    start(env, agent_1=((3, 5), "west"))
    # agent_0 acts first: it takes the key, so agent_1 can step into the freed cell.
    env.step({"agent_0": "pick up", "agent_1": "go forward"})
    assert env.agent_states["agent_0"].carrying.type == "key"
    assert env.agent_states["agent_1"].position == (2, 5)
    _, _, _, _, infos = env.step({"agent_0": "drop", "agent_1": "drop"})
    assert infos["agent_0"]["blocked"] is True
    assert env.agent_states["agent_0"].carrying is not None
    assert env.level.grid.get(2, 5) is None


def test_door_cannot_be_closed_on_a_teammate():
    env = room_env(lambda: [(Ball("red"), (5, 1)), (Door("green", is_open=True), (2, 5))])
    start(env, agent_1=((2, 5), "north"))
    _, _, _, _, infos = env.step({"agent_0": "toggle", "agent_1": "drop"})
    assert infos["agent_0"]["blocked"] is True
    assert env.level.grid.get(2, 5).is_open


# ----------------------------------------------------------------------------- perception


def test_agents_see_each_other():
    env = room_env(lambda: [(Ball("red"), (5, 1))])
    observations, _ = start(env, agent_1=((3, 5), "west"))
    assert "You see agent_1 2 steps forward" in observations["agent_0"].text.splitlines()
    assert "You see agent_0 2 steps forward" in observations["agent_1"].text.splitlines()
    observations, *_ = env.step({"agent_0": "turn left", "agent_1": "drop"})
    # agent_0 now faces north; agent_1 is 2 cells to its right.
    assert "You see agent_1 2 steps right" in observations["agent_0"].text.splitlines()
    seen = observations["agent_0"].data["visible_agents"]
    assert seen == [
        {
            "name": "agent_1",
            "position": [3, 5],
            "relative": {"right": 2, "forward": 0},
            "direction": "west",
            "carrying": None,
        }
    ]


def test_observation_record():
    env = room_env(lambda: [(Ball("red"), (3, 5))])
    observations, _ = start(env, agent_1=((1, 2), "south"))
    obs = observations["agent_0"]
    assert isinstance(obs, TextObservation)
    assert obs.mission == "pick up the red ball" == env.mission
    assert obs.legal_actions == list(ACTIONS)
    assert obs.text.splitlines() == [
        "You are at (1, 5) facing east",
        "You see a wall 5 steps forward",
        "You see a wall 1 step right",
        "You see a red ball 2 steps forward",
        "You see agent_1 3 steps left",
    ]
    data = obs.data
    assert json.loads(json.dumps(obs.to_dict())) == obs.to_dict()
    assert data["agent"] == "agent_0"
    assert data["step"] == 0
    assert data["front"] == {"position": [2, 5], "object": None, "agent": None}
    assert data["team"]["agent_1"] == {"position": [1, 2], "direction": "south", "carrying": None}
    assert data["grid_size"] == [7, 7]
    assert data["max_steps"] == env.max_steps


# ----------------------------------------------------------------------------- mission and reward


def test_either_agent_completes_the_mission_and_everyone_is_rewarded():
    env = room_env(lambda: [(Ball("red"), (4, 2))])
    start(env, agent_1=((4, 3), "north"))  # agent_1 faces the red ball
    _, rewards, terminations, truncations, infos = env.step(
        {"agent_0": "turn left", "agent_1": "pick up"}
    )
    expected = 1 - 0.9 * 1 / env.max_steps
    assert rewards == {"agent_0": pytest.approx(expected), "agent_1": pytest.approx(expected)}
    assert terminations == {"agent_0": True, "agent_1": True}
    assert truncations == {"agent_0": False, "agent_1": False}
    assert all(info["success"] and info["completed_by"] == "agent_1" for info in infos.values())
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": "drop", "agent_1": "drop"})


def test_reward_formula_and_later_agents_are_skipped_after_success():
    env = room_env(lambda: [(Ball("red"), (2, 5))])  # right in front of agent_0
    start(env, agent_1=((3, 4), "north"))
    env.step(noop_for(env))
    env.step(noop_for(env))
    _, rewards, terminations, _, infos = env.step({"agent_0": "pick up", "agent_1": "go forward"})
    assert env.step_count == 3
    assert rewards["agent_0"] == rewards["agent_1"] == pytest.approx(1 - 0.9 * 3 / env.max_steps)
    assert all(terminations.values())
    assert infos["agent_0"]["completed_by"] == "agent_0"
    assert infos["agent_1"]["skipped"] is True
    assert env.agent_states["agent_1"].position == (3, 4)  # its move was not applied


def test_truncation_at_max_steps():
    env = room_env(lambda: [(Ball("red"), (5, 1))], max_steps=3)
    start(env, agent_1=((3, 3), "north"))
    for _ in range(2):
        _, rewards, terminations, truncations, _ = env.step(noop_for(env))
        assert not any(truncations.values()) and not any(terminations.values())
    _, rewards, terminations, truncations, infos = env.step(noop_for(env))
    assert truncations == {"agent_0": True, "agent_1": True}
    assert terminations == {"agent_0": False, "agent_1": False}
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0}
    assert not infos["agent_0"]["success"]
    assert env.agents == []


def test_unknown_action_is_a_flagged_no_op_and_indices_are_accepted():
    env = room_env(lambda: [(Ball("red"), (5, 1))])
    start(env, agent_1=((3, 3), "north"))
    before = dict(env.agent_states)
    _, _, _, _, infos = env.step({"agent_0": "dance", "agent_1": None})
    assert env.agent_states == before
    assert infos["agent_0"]["illegal_action"] and infos["agent_1"]["illegal_action"]
    env.step({"agent_0": ACTIONS.index("go forward"), "agent_1": "drop"})
    assert env.agent_states["agent_0"].position == (2, 5)


def test_step_needs_one_action_per_live_agent():
    env = room_env(lambda: [(Ball("red"), (5, 1))])
    start(env, agent_1=((3, 3), "north"))
    with pytest.raises(ValueError, match="missing: \\['agent_1'\\]"):
        env.step({"agent_0": "drop"})
    with pytest.raises(ValueError, match="unknown: \\['agent_9'\\]"):
        env.step({"agent_0": "drop", "agent_1": "drop", "agent_9": "drop"})


# ----------------------------------------------------------------------------- levels and seeding


@pytest.mark.parametrize("env_id", sorted(e for e in list_envs() if e.startswith("babyai/")))
def test_reset_is_deterministic_under_a_seed(env_id):
    env = make(env_id, n_agents=3)
    rng = random.Random(0)
    actions = [{a: rng.choice(ACTIONS) for a in env.possible_agents} for _ in range(25)]

    def rollout(seed: int) -> list:
        observations, _ = env.reset(seed=seed)
        trace = [{a: o.to_dict() for a, o in observations.items()}]
        for joint in actions:
            if not env.agents:
                break
            result = env.step({a: joint[a] for a in env.agents})
            trace.append(json.dumps([{a: o.to_dict() for a, o in result[0].items()}, *result[1:]]))
        return trace

    assert rollout(7) == rollout(7)
    assert rollout(7) != rollout(8)


@pytest.mark.parametrize("env_id", sorted(e for e in list_envs() if e.startswith("babyai/")))
def test_initial_placement(env_id):
    env = make(env_id, n_agents=3)
    for seed in range(5):
        env.reset(seed=seed)
        level, states = env.level, env.agent_states
        level_start = tuple(int(v) for v in level.agent_pos)  # the level's own agent start
        assert states["agent_0"].position == level_start
        positions = [s.position for s in states.values()]
        assert len(set(positions)) == len(positions)
        room = level.room_from_pos(*level_start)
        for state in states.values():
            assert room.pos_inside(*state.position)
            assert level.grid.get(*state.position) is None
            assert state.carrying is None


def test_invalid_constructor_arguments():
    with pytest.raises(ValueError, match="n_agents"):
        room_env(list, n_agents=1)
    with pytest.raises(ValueError, match="max_steps"):
        room_env(list, max_steps=0)
    with pytest.raises(ValueError, match="render_mode"):
        room_env(list, render_mode="human")
    with pytest.raises(TypeError, match="RoomGridLevel"):
        BabyAITextEnv(object())


def test_an_agent_start_that_is_no_cell_is_refused():
    env = room_env(lambda: [(Ball("red"), (5, 1))])
    for position in ((2, 3, 0), (2,)):
        with pytest.raises(ValueError, match=r"agent_1.*not an \(x, y\) pair"):
            env.reset(seed=0, options={"agent_starts": {"agent_1": {"position": position}}})


def test_pettingzoo_parallel_api():
    env = make("babyai/goto-obj", n_agents=2)
    parallel_api_test(env, num_cycles=100)
    assert env.action_space("agent_0").contains("go forward")
    assert env.observation_space("agent_0").contains(env.observe("agent_0"))


def test_global_state_marks_every_agent():
    env = make("babyai/pickup", n_agents=2)
    env.reset(seed=1)
    state = env.state()
    assert state.shape == (env.level.width, env.level.height, 3)
    for index, agent in enumerate(env.possible_agents):
        x, y = env.agent_states[agent].position
        assert state[x, y, 0] == 10 and state[x, y, 1] == index


# ----------------------------------------------------------------------------- rendering


def test_render_draws_every_agent():
    env = make("babyai/pickup", n_agents=3, render_mode="rgb_array")
    env.reset(seed=2)
    image = env.render()
    tile = 32
    assert image.shape == (env.level.height * tile, env.level.width * tile, 3)
    assert image.dtype == np.uint8
    for index, agent in enumerate(env.possible_agents):
        x, y = env.agent_states[agent].position
        cell = image[y * tile : (y + 1) * tile, x * tile : (x + 1) * tile].reshape(-1, 3)
        colour = np.array(AGENT_COLORS[index])
        assert (np.abs(cell.astype(int) - colour).sum(axis=1) == 0).sum() > 50, agent


def test_render_without_render_mode_returns_none():
    env = make("babyai/pickup", n_agents=2)
    env.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert env.render() is None
