"""Pistonball with 5 pistons: the sparse reward, numeric observations vs text, the reference team."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs import make
from marlang.envs.pistonball.numeric import NUMERIC_FEATURES, PistonballNumericEnv
from marlang.envs.pistonball.text import PistonballTextEnv

LOWEST_Y = 491  # screen y of a fully lowered piston body


def sparse(**kwargs) -> PistonballNumericEnv:
    return make("pistonball/n5-sparse", **kwargs)


def test_parallel_api_in_both_modes():
    for mode in ("text", "numeric"):
        parallel_api_test(sparse(observation_mode=mode), num_cycles=60)


def test_sparse_reward_is_minus_a_tenth_per_cycle_plus_one_at_the_wall():
    env = sparse(observation_mode="numeric")
    team = env.scripted_team()
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        rewards = []
        while env.agents:
            obs, r, term, trunc, infos = env.step(team.act(obs))
            assert len(set(r.values())) == 1
            rewards.append(r["agent_0"])
        assert all(term.values()) and not any(trunc.values()) and infos["agent_0"]["success"]
        assert rewards[:-1] == [pytest.approx(-0.1)] * (len(rewards) - 1)
        assert rewards[-1] == pytest.approx(0.9)
        assert len(rewards) <= 20


def test_sparse_time_limit_truncates_with_only_penalties():
    env = sparse(observation_mode="numeric", max_steps=4)
    env.reset(seed=0)
    total = 0.0
    while env.agents:
        _, r, term, trunc, _ = env.step(dict.fromkeys(env.agents, "stay"))
        total += r["agent_0"]
    assert all(trunc.values()) and not any(term.values())
    assert total == pytest.approx(-0.4)


def test_text_env_keeps_dense_reward_by_default_and_offers_sparse():
    dense, sparse_text = PistonballTextEnv(5), PistonballTextEnv(5, reward_mode="sparse")
    assert dense.reward_mode == "dense" and "100 for the whole way" in dense.mission
    assert "1 when the ball reaches the left wall" in sparse_text.mission
    totals, cycles = {}, {}
    for env in (dense, sparse_text):
        team = env.scripted_team()
        obs, _ = env.reset(seed=1)
        totals[env.reward_mode] = 0.0
        while env.agents:
            obs, r, term, *_ = env.step(team.act(obs))
            totals[env.reward_mode] += r["agent_0"]
        assert all(term.values())
        cycles[env.reward_mode] = env.step_count
    assert cycles["dense"] == cycles["sparse"]  # same physics, only the reward differs
    assert totals["dense"] > 50
    assert totals["sparse"] == pytest.approx(1.0 - 0.1 * cycles["sparse"])
    with pytest.raises(ValueError, match="reward_mode must be one of"):
        PistonballTextEnv(5, reward_mode="shaped")
    assert make("pistonball/n5", reward_mode="sparse").reward_mode == "sparse"


def _parse_text(text: str) -> dict[str, float]:
    values = {"height": float(re.search(r"Your height is (\d+) of 16", text)[1])}
    left = re.search(r"Your left neighbour, piston \d+, is at height (\d+)", text)
    right = re.search(r"Your right neighbour, piston \d+, is at height (\d+)", text)
    values["left_height"] = float(left[1]) if left else None
    values["right_height"] = float(right[1]) if right else None
    side, distance = re.search(
        r"The ball is (to your left|above you|to your right), its centre ([\d.]+) piston widths",
        text,
    ).groups()
    values["ball_side"] = side
    values["ball_distance"] = float(distance)
    values["wall"] = float(
        re.search(r"The ball is ([\d.]+) piston widths from the left wall", text)[1]
    )
    return values


def test_ego_text_and_numeric_observation_describe_the_same_scene():
    env = sparse()
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    index = {name: i for i, name in enumerate(NUMERIC_FEATURES)}
    for _ in range(12):
        for agent in env.agents:
            text = _parse_text(obs[agent].text)
            numbers = env.numeric_observation(agent)
            assert text["height"] == pytest.approx(numbers[index["height"]] * 16)
            for side in ("left_height", "right_height"):
                flag = numbers[index["has_" + side.split("_")[0]]]
                if text[side] is None:
                    assert flag == 0
                else:
                    assert flag == 1 and text[side] == pytest.approx(numbers[index[side]] * 16)
            dx = float(numbers[index["ball_dx"]])
            assert text["ball_distance"] == pytest.approx(abs(dx), abs=0.051)
            if text["ball_side"] == "to your left":
                assert dx < -0.5
            elif text["ball_side"] == "to your right":
                assert dx >= 0.5
            assert text["wall"] == pytest.approx(numbers[index["ball_wall_distance"]], abs=0.051)
        if not env.agents:
            break
        obs, *_ = env.step({a: int(rng.integers(3)) for a in env.agents})


def test_numeric_steps_build_no_text(monkeypatch):
    env = sparse(observation_mode="numeric")

    def no_text(*args, **kwargs):
        raise AssertionError("text was built in numeric mode")

    monkeypatch.setattr(env.pistons, "observe", no_text)
    env.reset(seed=0)
    for _ in range(5):
        env.step(dict.fromkeys(env.agents, 2))


def test_rank_states_rewards_progress_near_the_ball_and_slope_elsewhere():
    env = sparse(observation_mode="numeric")
    env.reset(seed=0)
    raw = env.pistons.raw
    for piston, h in zip(raw.pistonList, [2, 2, 2, 2, 2], strict=True):
        piston.position = (piston.position[0], LOWEST_Y - 4 * h)
    raw.ball.position = (140.0, 300.0)  # above piston 2 (column [120, 160))
    far = env.rank_snapshot()
    raw.ball.position = (120.0, 300.0)
    nearer = env.rank_snapshot()
    assert env.rank_states("agent_2", far, nearer) == 1  # the ball moved toward the wall
    assert env.rank_states("agent_2", nearer, far) == -1
    # Piston 4 is far from the ball: only its own shape counts (it should be high).
    raw.pistonList[4].position = (raw.pistonList[4].position[0], LOWEST_Y - 4 * 9)
    raised = env.rank_snapshot()
    assert env.rank_states("agent_4", nearer, raised) == 1
    assert env.rank_states("agent_4", far, nearer) == 0
    # Piston 0 is left of the ball: it should sink.
    raw.pistonList[0].position = (raw.pistonList[0].position[0], LOWEST_Y)
    assert env.rank_states("agent_0", raised, env.rank_snapshot()) == 1
