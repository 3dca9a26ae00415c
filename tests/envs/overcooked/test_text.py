"""The Overcooked text env on the real overcooked-ai package: text, subgoals, planner, scripted team."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs import make
from marlang.envs.overcooked import view
from marlang.envs.overcooked.kitchen import Kitchen
from marlang.envs.overcooked.package import (
    Direction,
    ObjectState,
    PlayerState,
    SoupState,
)
from marlang.envs.overcooked.subgoals import legal_subgoals
from marlang.envs.overcooked.text import LAYOUTS, OvercookedTextEnv

UP, DOWN, LEFT, RIGHT = Direction.NORTH, Direction.SOUTH, Direction.WEST, Direction.EAST


def hand_built(env: OvercookedTextEnv, players, objects=()):
    """The layout's start state with the given cooks ((pos, facing, held)) and objects."""
    state = env._mdp.get_standard_start_state()
    state.players = tuple(
        PlayerState(pos, facing, None if held is None else _object(held, pos)) for pos, facing, held in players
    )
    for obj in objects:
        state.add_object(obj)
    return state


def _object(name: str, pos):
    if name == "soup":
        return SoupState(pos, [ObjectState("onion", pos) for _ in range(3)], cooking_tick=20)
    return ObjectState(name, pos)


def pot_with(pos, onions: int, cooking_tick: int = -1) -> SoupState:
    return SoupState(pos, [ObjectState("onion", pos) for _ in range(onions)], cooking_tick=cooking_tick)




def test_package_imports_with_numpy_2_and_leaves_site_packages_alone():
    import overcooked_ai_py

    planners = Path(overcooked_ai_py.__file__).parent / "data" / "planners"
    before = sorted(planners.glob("*.pkl"))
    env = make("overcooked/counter-circuit")
    env.reset(seed=0)
    assert np.Inf == np.inf and np.linalg.norm(np.ones(4)) == 2.0
    assert sorted(planners.glob("*.pkl")) == before  # no planner pickles written into the package


def test_registry_ids_and_clear_errors():
    for layout in LAYOUTS:
        env = make(f"overcooked/{layout}")
        assert env.env_id == f"overcooked/{layout}" and env.horizon == 400
    with pytest.raises(ValueError, match="n_agents must be 2"):
        make("overcooked/cramped-room", n_agents=3)
    with pytest.raises(ValueError, match="action_mode must be one of"):
        make("overcooked/cramped-room", action_mode="macro")
    with pytest.raises(ValueError, match="unknown Overcooked layout"):
        OvercookedTextEnv("no_such_kitchen")


def test_text_observation_of_a_hand_built_state():
    env = OvercookedTextEnv("cramped-room")
    state = hand_built(
        env,
        [((1, 1), UP, "onion"), ((3, 2), DOWN, "dish")],
        [pot_with((2, 0), 2), ObjectState("dish", (4, 2))],
    )
    obs, _ = env.reset(options={"state": state})
    text, data = obs["agent_0"].text, obs["agent_0"].data
    assert "You are agent_0, at (1, 1) facing up, holding an onion." in text
    assert "agent_1 is at (3, 2) facing down, holding a dish; choosing what to do." in text
    # The pot is up and to the right: one move right to (2, 1) turns the cook right, one turn up.
    assert "Pot 1 at (2, 0): 2 onions, not cooking; 2 steps away." in text
    # Down to (1, 2), right twice: at (3, 2) facing the counter.
    assert "Counter 6 at (4, 2) holds a dish; 3 steps away." in text
    assert "Onion dispensers: (0, 1) 1 step away; (4, 1) 2 steps away." in text
    assert "Order: soup of 3 onions (cooks 20 ticks), worth 20 points." in text
    assert data["held"] == "onion" and data["position"] == [1, 1] and data["facing"] == "up"
    assert data["pots"][0]["ingredients"] == ["onion", "onion"] and data["pots"][0]["status"] == "filling"
    assert data["counters"] == [{"number": 6, "position": [4, 2], "item": "dish", "distance": 3}]
    assert data["others"][0]["held"] == "dish"
    # The other cook sees the same kitchen from its own place.
    assert "You are agent_1, at (3, 2) facing down, holding a dish." in obs["agent_1"].text
    assert "Counter 6 at (4, 2) holds a dish; 1 step away." in obs["agent_1"].text


def test_cooking_and_ready_pots_are_described():
    env = OvercookedTextEnv("cramped-room")
    state = hand_built(env, [((1, 1), UP, None), ((3, 1), UP, None)], [pot_with((2, 0), 3, cooking_tick=5)])
    obs, _ = env.reset(options={"state": state})
    assert "Pot 1 at (2, 0): cooking 3 onions, 15 ticks left;" in obs["agent_0"].text
    state = hand_built(env, [((1, 1), UP, None), ((3, 1), UP, None)], [pot_with((2, 0), 3, cooking_tick=20)])
    obs, _ = env.reset(options={"state": state})
    assert "Pot 1 at (2, 0): soup of 3 onions ready;" in obs["agent_0"].text
    assert obs["agent_0"].data["pots"][0]["status"] == "ready"


def test_legal_subgoals_follow_what_the_cook_holds():
    env = OvercookedTextEnv("cramped-room")
    cases = [
        (None, pot_with((2, 0), 3), {"pick up onion", "pick up dish", "start cooking pot 1"}, "put onion"),
        ("onion", pot_with((2, 0), 1), {"put onion in pot 1", "place onion on counter 2"}, "pick up"),
        ("onion", pot_with((2, 0), 3), {"place onion on counter 2"}, "put onion in pot"),
        ("dish", pot_with((2, 0), 3, cooking_tick=4), {"fill dish from pot 1"}, "put"),
        ("dish", pot_with((2, 0), 2), set(), "fill dish"),
        ("soup", pot_with((2, 0), 0), {"deliver soup", "place soup on counter 2"}, "pick up"),
    ]
    for held, pot, expected, forbidden in cases:
        objects = [pot] if pot.ingredients else []
        state = hand_built(env, [((1, 1), UP, held), ((3, 1), UP, None)], objects)
        obs, _ = env.reset(options={"state": state})
        legal = obs["agent_0"].legal_actions
        assert expected <= set(legal), (held, legal)
        assert not any(a.startswith(forbidden) for a in legal), (held, legal)
        assert legal[-2:] == ["wait", "step aside"]
        assert sum(a.startswith("place") for a in legal) <= env.counter_options


def test_forced_coordination_offers_only_what_is_within_reach():
    env = OvercookedTextEnv("forced-coordination")
    # agent_1 is in the left room: onions and dishes, no pots. agent_0 has pots but no dispensers.
    state = hand_built(env, [((3, 1), UP, None), ((1, 2), LEFT, "onion")])
    obs, _ = env.reset(options={"state": state})
    left = obs["agent_1"].legal_actions
    assert not any(a.startswith("put onion in pot") for a in left)
    # Only counters on the middle column can hand the onion over: 5 (2, 1), 6 (2, 2), 8 (2, 3).
    assert {a for a in left if a.startswith("place")} == {
        "place onion on counter 5", "place onion on counter 6", "place onion on counter 8",
    }
    assert "Pot 1 at (3, 0): empty; out of your reach." in obs["agent_1"].text
    right = obs["agent_0"].legal_actions
    assert right == ["wait", "step aside"]  # nothing to pick up on its side yet


def test_a_subgoal_is_carried_out_by_the_planner():
    env = OvercookedTextEnv("cramped-room", wait_ticks=1)
    obs, _ = env.reset(seed=0)
    start = env.state_now.players[0].pos_and_or
    dispenser, distance = env.kitchen.nearest(start, env.kitchen.dispensers["onion"])
    obs, _, _, _, infos = env.step({"agent_0": "pick up onion", "agent_1": "wait"})
    # agent_1's one-tick wait ends first; agent_0's subgoal is still running and may continue.
    assert obs["agent_0"].legal_actions[0] == "continue"
    assert "Your subgoal: pick up onion (running for 1 tick" in obs["agent_0"].text
    ticks = infos["agent_0"]["ticks"]
    while infos["agent_0"]["subgoal_outcome"] is None:
        obs, _rewards, _terms, _truncs, infos = env.step({"agent_0": "continue", "agent_1": "wait"})
        ticks += infos["agent_0"]["ticks"]
    assert infos["agent_0"]["subgoal_outcome"] == "done"
    assert env.state_now.players[0].held_object.name == "onion"
    assert ticks == distance + 1 >= 3  # walk and turn, then interact
    assert env.state_now.players[0].pos_and_or in env.kitchen.goals[dispenser]
    assert "Note: finished 'pick up onion'" in obs["agent_0"].text
    assert "pick up onion" not in obs["agent_0"].legal_actions  # hands are full now


def test_a_blocked_cook_gives_up_with_a_note_instead_of_deadlocking():
    env = OvercookedTextEnv("forced-coordination", patience=4)
    # Both cooks in the right corridor (3, 1)-(3, 3); agent_1 stands on the only cell next to
    # the serving spot and keeps waiting there.
    state = hand_built(env, [((3, 1), DOWN, "soup"), ((3, 3), UP, None)])
    obs, _ = env.reset(options={"state": state})
    ticks = 0
    actions = {"agent_0": "deliver soup", "agent_1": "wait"}
    while True:
        obs, _, _, _, infos = env.step(actions)
        ticks += infos["agent_0"]["ticks"]
        if infos["agent_0"]["subgoal_outcome"] is not None:
            break
        actions = {"agent_0": "continue", "agent_1": "wait"}
    assert infos["agent_0"]["subgoal_outcome"] == "aborted"
    assert ticks <= 1 + 4  # one move to (3, 2), then patience ticks blocked
    note = obs["agent_0"].data["notes"][0]
    assert "deliver soup" in note and "agent_1 was in the way" in note
    assert "Note: gave up 'deliver soup'" in obs["agent_0"].text
    assert env.state_now.players[0].held_object.name == "soup"


def test_cooks_heading_for_each_others_cells_get_past_each_other():
    env = OvercookedTextEnv("coordination-ring")
    # agent_0 wants an onion next to (1, 3), where agent_1 stands; agent_1 wants pot 1 from
    # (3, 1), where agent_0 stands: on the ring one of them must go round the other way.
    state = hand_built(env, [((3, 1), UP, None), ((1, 3), DOWN, "onion")])
    env.reset(options={"state": state})
    actions = {"agent_0": "pick up onion", "agent_1": "put onion in pot 1"}
    outcomes = {}
    for _ in range(10):
        _obs, _, _, _, infos = env.step(actions)
        for agent, info in infos.items():
            if info["subgoal_outcome"] is not None:
                outcomes.setdefault(agent, info["subgoal_outcome"])
        if len(outcomes) == 2:
            break
        actions = {a: "continue" if a not in outcomes else "wait" for a in actions}
    assert outcomes == {"agent_0": "done", "agent_1": "done"}
    assert env.tick <= 12
    assert env.state_now.players[0].held_object.name == "onion"
    assert env.state_now.get_object((3, 0)).ingredients == ["onion"]


def test_illegal_subgoal_is_flagged_and_the_cook_waits():
    env = OvercookedTextEnv("cramped-room")
    env.reset(seed=0)
    _obs, _, _, _, infos = env.step({"agent_0": "deliver soup", "agent_1": "fly away"})
    assert infos["agent_0"]["illegal_action"] and infos["agent_1"]["illegal_action"]
    assert env.tick == env._runner.wait_ticks


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_scripted_team_delivers_soup_on_every_layout(layout):
    env = make(f"overcooked/{layout}")
    obs, _ = env.reset(seed=0)
    team = env.scripted_team()
    team.reset()
    total = 0.0
    while env.agents:
        obs, rewards, _, truncations, _infos = env.step(team.act(obs))
        total += rewards["agent_0"]
        assert rewards["agent_0"] == rewards["agent_1"]  # shared reward
    assert env.tick == 400 and all(truncations.values())
    assert env.soups_delivered >= 1
    assert total == 20 * env.soups_delivered


def test_primitive_mode_moves_and_interacts_one_tick_per_step():
    env = make("overcooked/cramped-room", action_mode="primitive")
    obs, _ = env.reset(seed=0)
    assert obs["agent_0"].legal_actions == ["up", "down", "left", "right", "stay", "interact"]
    assert "subgoal" not in obs["agent_0"].text.lower()
    # agent_0 at (1, 2): left turns it toward the counter at (0, 2); up moves to (1, 1).
    obs, _, _, _, infos = env.step({"agent_0": "up", "agent_1": "stay"})
    assert obs["agent_0"].data["position"] == [1, 1] and env.tick == 1
    obs, _, _, _, _ = env.step({"agent_0": "left", "agent_1": "stay"})
    assert obs["agent_0"].data["facing"] == "left" and obs["agent_0"].data["position"] == [1, 1]
    obs, _, _, _, infos = env.step({"agent_0": "interact", "agent_1": "jump"})
    assert obs["agent_0"].data["held"] == "onion"
    assert infos["agent_1"]["illegal_action"] and not infos["agent_0"]["illegal_action"]


def test_shaped_rewards_are_reported_per_cook():
    env = make("overcooked/cramped-room", action_mode="primitive")
    state = hand_built(env, [((2, 1), UP, "onion"), ((3, 1), UP, None)], [pot_with((2, 0), 1)])
    env.reset(options={"state": state})
    _, rewards, _, _, infos = env.step({"agent_0": "interact", "agent_1": "stay"})
    assert rewards == {"agent_0": 0.0, "agent_1": 0.0}
    assert infos["agent_0"]["shaped_reward"] == 3 and infos["agent_1"]["shaped_reward"] == 0


def test_horizon_random_start_and_determinism():
    env = make("overcooked/cramped-room", max_steps=5, action_mode="primitive", random_start=True)
    first, _ = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    assert first["agent_0"].text == again["agent_0"].text
    starts = {tuple(env.reset(seed=s)[0]["agent_0"].data["position"]) for s in range(8)}
    assert len(starts) > 1
    for t in range(5):
        _, _, _, truncations, _ = env.step({"agent_0": "stay", "agent_1": "stay"})
    assert all(truncations.values()) and env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": "stay", "agent_1": "stay"})


def test_pettingzoo_parallel_api_and_render():
    env = make("overcooked/cramped-room", max_steps=60, render_mode="rgb_array")
    parallel_api_test(env, num_cycles=30)
    env.reset(seed=0)
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
    assert frame.shape[0] > 100 and frame.shape[1] > 100


def _rendered_afresh(env: OvercookedTextEnv, fresh: Kitchen, agent: str):
    """``env.observe(agent)`` made with ``fresh`` (a kitchen of the same layout) after it forgot
    every remembered table: lines, orders, placing orders, offers, ways."""
    kept = env.kitchen
    fresh.forget()
    env.kitchen = fresh
    try:
        return env.observe(agent)
    finally:
        env.kitchen = kept


@pytest.mark.parametrize("layout", ["cramped-room", "counter-circuit"])
@pytest.mark.parametrize("mode", ["primitive", "subgoal", "scripted"])
def test_remembered_lines_give_the_same_observations_as_fresh_ones(layout, mode):
    """The text is made from lines remembered per layout; every observation of seeded episodes
    (random and scripted cooks, soups cooking and items on counters) matches one made afresh."""
    env = OvercookedTextEnv(layout, action_mode="primitive" if mode == "primitive" else "subgoal",
                            max_steps=150, random_start=True)
    rng = np.random.default_rng(3)
    team = env.scripted_team() if mode == "scripted" else None
    fresh = Kitchen(env._mdp)
    for seed in (0, 1):
        obs, _ = env.reset(seed=seed)
        if team is not None:
            team.reset()
        while env.agents:
            for agent, seen in obs.items():
                assert seen == _rendered_afresh(env, fresh, agent)
            joint = team.act(obs) if team is not None else {}
            for agent, seen in obs.items():
                if agent not in joint or rng.random() < 0.15:
                    joint[agent] = seen.legal_actions[int(rng.integers(len(seen.legal_actions)))]
            obs, *_ = env.step(joint)


def test_the_kept_pot_and_counter_lines_stay_within_their_budget(monkeypatch):
    """Past the budget every place drops its pot and counter lines, and what is made again is
    what a fresh kitchen makes."""
    monkeypatch.setattr(view, "_MAX_BLOCKS", 5)
    env = OvercookedTextEnv("counter-circuit", max_steps=60)
    env.kitchen.forget()  # (a shared kitchen: start from no lines, under the small budget)
    fresh = Kitchen(env._mdp)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    before, dropped = 0, 0
    while env.agents:
        made = env.kitchen.text_cache
        kept = sum(len(p.pot_blocks) + len(p.counter_blocks) for p in made.places.values())
        assert kept <= 5
        dropped += kept < before
        before = kept
        for agent, seen in obs.items():
            assert seen == _rendered_afresh(env, fresh, agent)
        obs, *_ = env.step({a: o.legal_actions[int(rng.integers(len(o.legal_actions)))] for a, o in obs.items()})
    assert dropped  # (the budget was reached, and the lines made again)
    env.kitchen.forget()  # (leave no lines made under the small budget behind)


def test_no_counters_offered_when_counter_options_is_zero():
    env = OvercookedTextEnv("cramped-room")
    env.reset(seed=0)
    state = env.state_now
    state.players[0].set_object(ObjectState("onion", state.players[0].position))
    offers = [s.action for s in legal_subgoals(env.kitchen, state, 0, counter_options=0)]
    assert offers and not any(a.startswith("place ") for a in offers)
    assert any(a.startswith("place ") for a in (s.action for s in legal_subgoals(env.kitchen, state, 0)))


def test_envs_of_one_layout_share_its_kitchen_and_play_alike():
    """The kitchen (planner and remembered tables) is made once per layout and process, also
    when envs are made in threads at once; each env keeps its own game and plays as a lone one."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        envs = list(pool.map(lambda _: OvercookedTextEnv("coordination-ring"), range(4)))
    assert all(env.kitchen is envs[0].kitchen for env in envs)
    assert len({id(env._mdp) for env in envs}) == 4
    assert OvercookedTextEnv("cramped-room").kitchen is not envs[0].kitchen

    def play(env, seed):
        team, seen = env.scripted_team(), []
        obs, _ = env.reset(seed=seed)
        team.reset()
        while env.agents:
            seen.append({agent: (o.text, o.legal_actions) for agent, o in obs.items()})
            obs, *_ = env.step(team.act(obs))
        return seen, env.soups_delivered

    first, second = envs[0], envs[1]
    alone = play(first, 0)
    # Another env of the layout plays (and fills the shared tables) in between.
    play(second, 1)
    again = play(first, 0)
    assert again == alone and alone[1] > 0


def test_shared_data_records_refuse_to_change_and_copy_as_plain_data():
    """The records below an observation's top-level ``data`` are shared between observations:
    changing one is refused, while JSON, pickle, deepcopy and ``to_dict`` see plain data."""
    import copy
    import json
    import pickle

    env = OvercookedTextEnv("cramped-room")
    obs, _ = env.reset(seed=0)
    data = obs["agent_0"].data
    pot, dispensers = data["pots"][0], data["dispensers"]
    for change in (
        lambda: pot.__setitem__("status", "ready"), lambda: pot.update(status="ready"),
        lambda: pot["position"].append(1), lambda: data["serving"].clear(),
        lambda: dispensers["onion"].pop(), lambda: data["orders"][0]["ingredients"].sort(),
        lambda: data["others"][0].pop("held"),
    ):
        with pytest.raises(TypeError, match="shared between Overcooked observations"):
            change()
    assert env.observe("agent_0").data == data
    plain = json.loads(json.dumps(data))
    assert plain == data and pickle.loads(pickle.dumps(data)) == data
    assert copy.deepcopy(data) == data and obs["agent_0"].to_dict()["data"] == plain
    data["tick"] = -1  # the top level is the observation's own
    assert env.observe("agent_0").data["tick"] == 0
