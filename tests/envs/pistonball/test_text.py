"""Pistonball text env: text from physics, piston moves, PettingZoo's rewards, seeding, rules."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from pettingzoo.butterfly import pistonball_v6
from pettingzoo.test import parallel_api_test

from marlang.envs.pistonball.text import (
    PISTONBALL_ACTIONS,
    PistonballRuleTeam,
    PistonballTextEnv,
)

LOWEST_Y = 491  # screen y of a fully lowered piston body: 560 - 40 - (40 - 11)


def place(env: PistonballTextEnv, *, heights=None, ball=None, velocity=(0.0, 0.0)) -> None:
    """Hand-build a state: piston heights (positions 0..16), ball centre and velocity."""
    raw = env.raw
    if heights is not None:
        for piston, h in zip(raw.pistonList, heights, strict=True):
            piston.position = (piston.position[0], LOWEST_Y - 4 * h)
    if ball is not None:
        raw.ball.position = ball
    raw.ball.velocity = velocity


def stay(env: PistonballTextEnv) -> dict[str, str]:
    return dict.fromkeys(env.agents, "stay")


# ----------------------------------------------------------------------------- text from physics


def test_ball_side_distance_and_heights_follow_a_hand_built_state():
    env = PistonballTextEnv(10)
    env.reset(seed=0)
    heights = [0, 3, 16, 5, 9, 2, 7, 1, 12, 4]
    # Ball centre in the middle of piston 4's column [200, 240), 300 pixels down.
    place(env, heights=heights, ball=(220.0, 300.0))
    for i, agent in enumerate(env.possible_agents):
        obs = env.observe(agent)
        side = "left" if i > 4 else "above" if i == 4 else "right"
        word = {"left": "to your left", "above": "above you", "right": "to your right"}[side]
        assert obs.data["ball_relative"] == side
        assert obs.data["ball_distance"] == pytest.approx(abs(i - 4))
        assert f"The ball is {word}, its centre {abs(i - 4):.1f} piston widths from yours." in (
            obs.text
        )
        assert obs.data["height"] == heights[i]
        assert f"Your height is {heights[i]} of 16" in obs.text
        assert obs.data["left_height"] == (heights[i - 1] if i > 0 else None)
        assert obs.data["right_height"] == (heights[i + 1] if i < 9 else None)
        assert obs.data["index"] == i and obs.data["n_pistons"] == 10
        assert f"You are piston {i} of pistons 0..9" in obs.text
    first, middle, last = (env.observe(a) for a in ("agent_0", "agent_4", "agent_9"))
    assert "On your left is the left wall." in first.text
    assert "Your right neighbour, piston 1, is at height 3." in first.text
    assert "Your left neighbour, piston 3, is at height 5." in middle.text
    assert "Your right neighbour, piston 5, is at height 2." in middle.text
    assert "On your right is the right wall." in last.text
    # Ball underside at y = 340; piston 4's top at 491 - 4 * 9 - 5 = 450: 110 px = 27.5 units.
    assert middle.data["ball_clearance"] == pytest.approx(27.5)
    assert "The bottom of the ball is 27.5 height units above the top of your piston." in (
        middle.text
    )
    # Its left edge is at 180, the wall's face at 40: 3.5 piston widths to go.
    assert "The ball is 3.5 piston widths from the left wall." in middle.text
    assert middle.data["ball_x"] == pytest.approx(220.0)
    assert middle.data["ball_y"] == pytest.approx(300.0)


def test_column_boundaries_and_off_centre_distances():
    env = PistonballTextEnv(5)
    env.reset(seed=1)
    # x = 120 is the left edge of piston 2's column [120, 160): above piston 2, right of 1.
    place(env, ball=(120.0, 250.0))
    sides = [env.observe(a).data["ball_relative"] for a in env.possible_agents]
    assert sides == ["right", "right", "above", "left", "left"]
    assert env.observe("agent_2").data["ball_distance"] == pytest.approx(0.5)
    place(env, ball=(159.0, 250.0))
    sides = [env.observe(a).data["ball_relative"] for a in env.possible_agents]
    assert sides == ["right", "right", "above", "left", "left"]
    # 159 is 1.525 widths from piston 4's centre (220) and 0.475 from piston 2's (140).
    assert env.observe("agent_4").data["ball_distance"] == pytest.approx(61 / 40)
    assert "its centre 1.5 piston widths from yours" in env.observe("agent_4").text
    assert env.observe("agent_2").data["ball_distance"] == pytest.approx(19 / 40)


@pytest.mark.parametrize(
    ("velocity", "sentence"),
    [
        ((0.0, 0.0), "The ball is at rest."),
        ((1.0, -0.5), "The ball is at rest."),
        ((-80.0, 0.0), "The ball is moving left at 2.0 piston widths per second."),
        ((40.0, -40.0), "The ball is moving right and up at 1.4 piston widths per second."),
        ((-2.0, 60.0), "The ball is moving down at 1.5 piston widths per second."),
    ],
)
def test_ball_velocity_in_words(velocity, sentence):
    env = PistonballTextEnv(4)
    env.reset(seed=0)
    place(env, velocity=velocity)
    obs = env.observe("agent_1")
    assert sentence in obs.text
    assert obs.data["ball_velocity"] == pytest.approx(list(velocity))


def test_ball_below_a_piston_top_is_reported_below():
    env = PistonballTextEnv(4)
    env.reset(seed=0)
    # Ball resting low on the right; piston 0 fully up: top at 491 - 64 - 5 = 422.
    place(env, heights=[16, 0, 0, 0], ball=(160.0, 446.0))
    obs = env.observe("agent_0")
    assert obs.data["ball_clearance"] == pytest.approx((422 - 486) / 4)
    assert "The bottom of the ball is 16.0 height units below the top of your piston." in obs.text


def test_observation_record_shape_and_cycle_count():
    env = PistonballTextEnv(3, max_steps=40)
    observations, infos = env.reset(seed=2)
    assert set(observations) == set(infos) == {"agent_0", "agent_1", "agent_2"}
    obs = observations["agent_1"]
    assert obs.legal_actions == ["move down", "stay", "move up"] == list(PISTONBALL_ACTIONS)
    assert "left wall" in obs.mission and "0.1" in obs.mission
    assert "Cycle 0 of 40 has passed." in obs.text
    assert all(text.strip() for text in obs.text.splitlines())
    observations, *_ = env.step(stay(env))
    assert "Cycle 1 of 40 has passed." in observations["agent_1"].text
    assert observations["agent_1"].data["cycle"] == 1
    assert observations["agent_1"].data["max_cycles"] == 40
    assert env.state().shape == (3 + 4,)


# ----------------------------------------------------------------------------- piston moves


def test_move_up_raises_one_position_per_cycle_until_the_cap_and_move_down_lowers():
    env = PistonballTextEnv(6)
    env.reset(seed=0)
    place(env, heights=[3] * 6)
    y_before = env.raw.pistonList[2].position[1]

    def cycle(action: str) -> dict:
        # Hold the ball high on the right so the episode cannot end while the piston moves.
        place(env, ball=(270.0, 150.0))
        observations, *_ = env.step(stay(env) | {"agent_2": action})
        return observations

    raised = [cycle("move up")["agent_2"].data["height"] for _ in range(15)]
    assert env.raw.pistonList[2].position[1] < y_before  # action 2 really raises (y grows down)
    assert raised == [*range(4, 17), 16, 16]
    observations = cycle("stay")
    assert "Your height is 16 of 16" in observations["agent_2"].text
    assert observations["agent_1"].data["right_height"] == 16
    assert observations["agent_3"].data["left_height"] == 16
    assert observations["agent_1"].data["height"] == 3  # "stay" keeps the neighbours put
    lowered = [cycle("move down")["agent_2"].data["height"] for _ in range(18)]
    assert lowered == [*range(15, -1, -1), 0, 0]


def test_illegal_action_is_stay_and_flagged():
    env = PistonballTextEnv(3)
    env.reset(seed=4)
    place(env, heights=[2, 2, 2])
    observations, _, _, _, infos = env.step({"agent_0": "jump", "agent_1": "move up", "agent_2": 7})
    assert [observations[a].data["height"] for a in env.possible_agents] == [2, 3, 2]
    assert infos["agent_0"]["illegal_action"] is True
    assert infos["agent_1"]["illegal_action"] is False
    assert infos["agent_2"]["illegal_action"] is True
    # An index into PISTONBALL_ACTIONS is accepted as well.
    observations, _, _, _, infos = env.step({"agent_0": 2, "agent_1": 0, "agent_2": 1})
    assert [observations[a].data["height"] for a in env.possible_agents] == [3, 2, 2]
    assert not any(info["illegal_action"] for info in infos.values())


# ----------------------------------------------------------------------------- rewards


def _compare_with_pettingzoo(n: int, seed: int, policy: str, max_steps: int) -> tuple[bool, int]:
    text_env = PistonballTextEnv(n, max_steps=max_steps)
    pz_env = pistonball_v6.parallel_env(n_pistons=n, continuous=False, max_cycles=max_steps)
    observations, _ = text_env.reset(seed=seed)
    pz_env.reset(seed=seed)
    team = text_env.scripted_team()
    rng = np.random.default_rng(seed)
    while text_env.agents:
        if policy == "rule":
            actions = team.act(observations)
        else:
            actions = {a: PISTONBALL_ACTIONS[int(rng.integers(3))] for a in text_env.agents}
        pz_actions = {
            f"piston_{a.split('_')[1]}": PISTONBALL_ACTIONS.index(act) for a, act in actions.items()
        }
        observations, rewards, terms, truncs, infos = text_env.step(actions)
        _, pz_rewards, pz_terms, pz_truncs, _ = pz_env.step(pz_actions)
        assert set(rewards.values()) == set(pz_rewards.values())  # shared, and PettingZoo's
        assert len(set(rewards.values())) == 1
        assert terms["agent_0"] == pz_terms["piston_0"]
        if not terms["agent_0"]:
            assert truncs["agent_0"] == pz_truncs["piston_0"]
        assert infos["agent_0"]["success"] == pz_terms["piston_0"]
        assert tuple(text_env.raw.ball.position) == tuple(pz_env.unwrapped.ball.position)
    pz_env.close()
    return infos["agent_0"]["success"], text_env.step_count


def test_rewards_and_termination_match_pettingzoo():
    success, cycles = _compare_with_pettingzoo(5, seed=3, policy="rule", max_steps=125)
    assert success and cycles < 125  # the episode ends at the wall, as PettingZoo's does
    success, cycles = _compare_with_pettingzoo(6, seed=8, policy="random", max_steps=30)
    assert not success and cycles == 30


def test_truncation_after_max_steps():
    env = PistonballTextEnv(3, max_steps=3, random_drop=False, random_rotate=False)
    env.reset(seed=0)
    for _ in range(2):
        _, _, terms, truncs, _ = env.step(stay(env))
        assert not any(truncs.values()) and env.agents
    _, _, terms, truncs, infos = env.step(stay(env))
    assert all(truncs.values()) and not any(terms.values())
    assert not infos["agent_0"]["success"]
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})


# ----------------------------------------------------------------------------- seeding, API


def _rollout(env: PistonballTextEnv, seed: int, cycles: int) -> list:
    observations, _ = env.reset(seed=seed)
    trace = [{a: o.text for a, o in observations.items()}]
    for _ in range(cycles):
        if not env.agents:
            break
        actions = {a: env.action_space(a).sample() for a in env.agents}
        observations, rewards, *_ = env.step(actions)
        trace.append(({a: o.text for a, o in observations.items()}, rewards))
    return trace


def test_reset_with_a_seed_is_deterministic():
    first = _rollout(PistonballTextEnv(5), seed=11, cycles=25)
    again = _rollout(PistonballTextEnv(5), seed=11, cycles=25)
    env = PistonballTextEnv(5)
    _rollout(env, seed=2, cycles=5)
    same_env = _rollout(env, seed=11, cycles=25)
    assert first == again == same_env
    assert _rollout(PistonballTextEnv(5), seed=12, cycles=25) != first


def test_invalid_arguments():
    for bad in (1, 21, 0, 2.5, True, "5"):
        with pytest.raises(ValueError, match=r"2\.\.20"):
            PistonballTextEnv(bad)
    with pytest.raises(ValueError, match="max_steps"):
        PistonballTextEnv(3, max_steps=0)
    with pytest.raises(ValueError, match="render_mode"):
        PistonballTextEnv(3, render_mode="human")
    env = PistonballTextEnv(3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"missing: \['agent_2'\]"):
        env.step({"agent_0": "stay", "agent_1": "stay"})
    with pytest.raises(ValueError, match=r"unknown: \['agent_9'\]"):
        env.step({"agent_0": "stay", "agent_1": "stay", "agent_2": "stay", "agent_9": "stay"})
    assert env.step_count == 0  # a rejected step changes nothing


def test_pettingzoo_parallel_api():
    env = PistonballTextEnv(4, max_steps=40)
    parallel_api_test(env, num_cycles=60)
    assert env.action_space("agent_0").contains("move up")
    env.reset(seed=0)
    assert env.observation_space("agent_0").contains(env.observe("agent_0"))


def test_render_returns_the_rgb_frame():
    env = PistonballTextEnv(6, render_mode="rgb_array")
    env.reset(seed=0)
    place(env, ball=(200.0, 250.0))
    frame = env.render()
    assert frame.dtype == np.uint8 and frame.shape == (560, 80 + 40 * 6, 3)
    # The ball's colour inside it, opposite the line the package draws from its centre.
    angle = env.raw.ball.angle + np.pi
    x, y = round(200 + 20 * np.cos(angle)), round(250 + 20 * np.sin(angle))
    assert tuple(frame[y, x]) == (65, 159, 221)
    assert tuple(frame[250, 260]) == (255, 255, 255)  # empty play area right of the ball
    assert tuple(frame[250, 300]) == (58, 64, 65)  # the right wall
    no_mode = PistonballTextEnv(6)
    no_mode.reset(seed=0)
    with pytest.warns(UserWarning, match="render_mode"):
        assert no_mode.render() is None


# ----------------------------------------------------------------------------- rule team


def test_rule_team_acts_from_data_only():
    env = PistonballTextEnv(5)
    env.reset(seed=0)
    place(env, ball=(140.0, 250.0))  # above piston 2
    team = env.scripted_team()
    assert isinstance(team, PistonballRuleTeam)
    observations = {a: env.observe(a) for a in env.agents}
    assert team.act(observations) == {
        "agent_0": "move down",
        "agent_1": "move down",
        "agent_2": "move down",
        "agent_3": "move up",
        "agent_4": "move up",
    }
    # Only data is read: blanking the text changes nothing.
    for obs in observations.values():
        obs.text = ""
    assert team.act(observations)["agent_4"] == "move up"


def test_rule_team_clears_the_ball_with_five_pistons():
    env = PistonballTextEnv(5)
    team = env.scripted_team()
    returns, successes = [], 0
    for seed in range(5):
        observations, _ = env.reset(seed=seed)
        team.reset()
        total, infos = 0.0, {}
        while env.agents:
            actions = team.act(observations)
            assert set(actions) == set(env.agents)
            observations, rewards, _, _, infos = env.step(actions)
            total += rewards["agent_0"]
        returns.append(total)
        successes += infos["agent_0"]["success"]
    assert successes >= 4
    assert statistics.mean(returns) > 60
