"""Narration on the real envs: world descriptions, one-agent step lines, and whole joint episodes
within a token budget that read the same after a JSON round trip."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from marlang.envs import make
from marlang.envs.core.narration import (
    GENERIC_WORLD,
    agent_trajectory,
    estimate_tokens,
    format_trajectory,
    narrator_for,
    step_summary,
    world_description,
)
from marlang.types import Decision, Message, Step, Trajectory


class RandomTeam:
    """Uniformly random legal actions, seeded: keeps a Pistonball ball away from the wall."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    def reset(self) -> None:
        pass

    def act(self, observations):
        return {a: self.rng.choice(o.legal_actions) for a, o in observations.items()}


def record_episode(
    env: Any, team: Any, seed: int = 0, talk_every: int = 0, override=None
) -> Trajectory:
    """Play one episode and record it as ``graphs/episode.py``'s ``decide_and_step`` does.

    ``talk_every``: agent_0 announces its action every that many steps; ``override(t, actions)``
    may change the joint action before it is stepped.
    """
    observations, _ = env.reset(seed=seed)
    team.reset()
    steps, success, t = [], False, 0
    while env.agents:
        actions = team.act(observations)
        if override is not None:
            actions = override(t, dict(actions))
        transcript = []
        if talk_every and t % talk_every == 0:
            transcript = [Message("agent_0", f"I will {actions['agent_0']} now.")]
        next_obs, rewards, terminations, truncations, infos = env.step(actions)
        step_success = any(bool(i.get("success")) for i in infos.values())
        success = success or step_success
        steps.append(
            Step(
                t=t,
                observations=observations,
                messages=transcript,
                decisions={a: Decision(action=act, raw="(scripted)") for a, act in actions.items()},
                rewards={a: float(r) for a, r in rewards.items()},
                terminated=any(terminations.values()),
                truncated=any(truncations.values()),
                info={"success": step_success},
                infos={a: dict(i) for a, i in infos.items()},
                terminations={a: bool(v) for a, v in terminations.items()},
                truncations={a: bool(v) for a, v in truncations.items()},
            )
        )
        observations, t = next_obs, t + 1
    return Trajectory(
        episode=0,
        seed=seed,
        env_id=env.env_id,
        protocol="scripted",
        agents=list(env.possible_agents),
        steps=steps,
        success=success,
        final_observations=observations,
    )


def _illegal_once(t: int, actions: dict[str, str]) -> dict[str, str]:
    if t == 3:
        actions["agent_1"] = "juggle onions"
    return actions


@pytest.fixture(scope="module")
def babyai():
    env = make("babyai/pickup", n_agents=2)
    return env, record_episode(env, env.scripted_team(), seed=0, talk_every=5)


@pytest.fixture(scope="module")
def overcooked():
    env = make("overcooked/cramped-room")
    return env, record_episode(
        env, env.scripted_team(), seed=0, talk_every=7, override=_illegal_once
    )


@pytest.fixture(scope="module")
def pistonball():
    env = make("pistonball/n20")
    return env, record_episode(env, RandomTeam(0), seed=0)


def _round_trip(traj: Trajectory) -> Trajectory:
    return Trajectory.from_dict(json.loads(json.dumps(traj.to_dict())))


# ----------------------------------------------------------------------------- world descriptions


def test_world_descriptions_differ_per_env_and_fall_back():
    worlds = {
        env_id: world_description(make(env_id, n_agents=n))
        for env_id, n in (
            ("babyai/goto-obj", 2),
            ("overcooked/cramped-room", 2),
            ("pistonball/n5", 5),
        )
    }
    assert len(set(worlds.values())) == 3
    assert "grid world" in worlds["babyai/goto-obj"]
    assert "kitchen" in worlds["overcooked/cramped-room"]
    assert "piston" in worlds["pistonball/n5"]
    for env_id in ("overcooked/cramped-room", "pistonball/n5"):
        assert "grid world" not in worlds[env_id]
    assert world_description(object()) == GENERIC_WORLD == "a shared environment"
    assert (
        worlds["overcooked/cramped-room"] == "a kitchen, as cooks who cook and deliver onion soups"
    )


# ----------------------------------------------------------------------------- step summaries


def test_babyai_step_summary_has_pose_view_action_reward_and_words(babyai):
    env, traj = babyai
    first = traj.steps[0]
    line = step_summary(env, first, "agent_0")
    x, y = first.observations["agent_0"].data["position"]
    assert "\n" not in line
    assert line.startswith(f"step 0: at ({x}, {y}) facing ")
    assert f"did '{first.decisions['agent_0'].action}'" in line
    assert "said 'I will" in line  # agent_0 spoke at step 0
    assert "said" not in step_summary(env, first, "agent_1")
    last = traj.steps[-1]
    winner = next(i["completed_by"] for i in last.infos.values())
    assert f"reward {last.rewards[winner]:g}" in step_summary(env, last, winner)
    pickups = [
        step_summary(env, s, a, after)
        for s, after in zip(
            traj.steps, [*(s.observations for s in traj.steps[1:]), traj.final_observations]
        )
        for a in s.decisions
        if s.decisions[a].action == "pick up"
    ]
    assert any("picked up" in line for line in pickups)
    assert any("sees " in step_summary(env, s, "agent_0") for s in traj.steps)


def test_overcooked_step_summary_names_subgoal_rewards_and_flags(overcooked):
    env, traj = overcooked
    lines = {(s.t, a): step_summary(env, s, a) for s in traj.steps for a in s.decisions}
    assert all("\n" not in line for line in lines.values())
    first = traj.steps[0]
    assert lines[(0, "agent_0")].startswith("step 0 (ticks 1-")
    assert first.decisions["agent_0"].action in lines[(0, "agent_0")]
    delivered = [(s.t, a) for s in traj.steps for a, i in s.infos.items() if i["sparse_reward"] > 0]
    shaped = [(s.t, a) for s in traj.steps for a, i in s.infos.items() if i["shaped_reward"] > 0]
    assert delivered and shaped
    for key in delivered:
        assert "delivered soup (+20 team reward)" in lines[key]
    for key in shaped:
        assert "shaped reward +" in lines[key]
    assert "'juggle onions' was not a legal action" in lines[(3, "agent_1")]
    gave_up = [
        (s.t, a)
        for s in traj.steps
        for a, i in s.infos.items()
        if i["subgoal_outcome"] == "aborted"
    ]
    assert gave_up and all("gave up" in lines[key] for key in gave_up)


def test_pistonball_step_summary_has_height_ball_action_reward(pistonball):
    env, traj = pistonball
    step = traj.steps[5]
    data = step.observations["agent_7"].data
    line = step_summary(env, step, "agent_7")
    assert line.startswith("cycle 6; height ")
    assert f"height {data['height']}/16" in line
    assert f"{data['ball_wall_distance']:.1f} from the wall" in line
    assert f"did '{step.decisions['agent_7'].action}'" in line
    assert f"reward {step.rewards['agent_7']:+.2f}" in line


def test_generic_fallback_for_other_envs(babyai):
    _, traj = babyai
    other = object()
    assert narrator_for(other).__class__.__name__ == "Narrator"
    line = step_summary(other, traj.steps[0], "agent_0")
    seen = traj.steps[0].observations["agent_0"].text.splitlines()[0]
    assert line.startswith(
        f"step 0: saw '{seen}'; did '{traj.steps[0].decisions['agent_0'].action}'"
    )
    text = format_trajectory(other, traj, max_tokens=200)
    assert estimate_tokens(text) <= 200
    assert "agent_0" in text and "agent_1" in text
    assert text.splitlines()[-1].startswith("Outcome: success")


# ----------------------------------------------------------------------------- whole trajectories


@pytest.mark.parametrize("budget", [300, 1500])
@pytest.mark.parametrize("name", ["babyai", "overcooked", "pistonball"])
def test_format_trajectory_fits_the_budget_names_everyone_and_ends_with_the_outcome(
    name, budget, request
):
    env, traj = request.getfixturevalue(name)
    text = format_trajectory(env, traj, max_tokens=budget)
    assert estimate_tokens(text) <= budget
    for agent in traj.agents:
        assert agent in text
    last = text.splitlines()[-1]
    assert last.startswith("Outcome: ")
    assert ("success" in last) == traj.success
    assert f"{traj.n_steps} " in last
    # a real tokenizer's count, here words, bounds it just the same
    words = format_trajectory(
        env, traj, max_tokens=budget // 2, count_tokens=lambda s: len(s.split())
    )
    assert len(words.split()) <= budget // 2


def test_long_episodes_are_the_full_length_ones_asked_for(overcooked, pistonball):
    assert next(iter(overcooked[1].steps[-1].infos.values()))["tick"] == 400
    assert pistonball[1].n_steps == 125 and not pistonball[1].success


def test_overcooked_rendering_tells_decisions_and_events(overcooked):
    env, traj = overcooked
    full = format_trajectory(env, traj, max_tokens=100_000)
    assert "omitted" not in full
    assert len([line for line in full.splitlines() if line.startswith("step ")]) == traj.n_steps
    assert "agent_1 delivered soup +20" in full
    assert "pot 1: cooking 3 onions" in full and "pot 1: 2 onions" in full
    assert "+3 shaped" in full and "(ILLEGAL 'juggle onions')" in full
    assert "agent_0 said: I will" in full
    assert full.splitlines()[-1] == (
        f"Outcome: success; {int(traj.team_return // 20)} soups delivered; team score "
        f"{traj.team_return:g}; {traj.n_steps} decision points over 400 ticks."
    )
    short = format_trajectory(env, traj, max_tokens=1500)
    lines = short.splitlines()
    omitted = next(line for line in lines if "omitted" in line)
    shown = [line for line in lines if line.startswith("step ")]
    assert omitted == f"... ({traj.n_steps - len(shown)} decision points omitted) ..."
    assert shown[0].startswith("step 0 ") and shown[-1].startswith(f"step {traj.n_steps - 1} ")


def test_pistonball_rendering_samples_windows_of_cycles(pistonball):
    env, traj = pistonball
    text = format_trajectory(env, traj, max_tokens=1500)
    windows = [line for line in text.splitlines() if line.startswith("cycle")]
    assert "omitted" not in text and 1 < len(windows) < traj.n_steps
    assert windows[0].startswith("cycles 1-") and windows[-1].split(":")[0].endswith("-125")
    heights = windows[0].split("; heights ")[1].split("; moves ")[0].split()
    assert heights == [str(traj.steps[0].observations[a].data["height"]) for a in traj.agents]
    assert "Moves up/stay/down per piston: agent_0 " in text
    full = format_trajectory(env, traj, max_tokens=100_000)
    assert len([line for line in full.splitlines() if line.startswith("cycle ")]) == 125


def test_babyai_rendering_tells_positions_actions_and_messages(babyai):
    env, traj = babyai
    full = format_trajectory(env, traj, max_tokens=100_000)
    x, y = traj.steps[0].observations["agent_1"].data["position"]
    assert "step 0: agent_0 " in full and f"agent_1 ({x},{y})" in full
    assert "agent_0 said: I will" in full and "picked up" in full
    assert "mission completed by" in full


def test_a_tiny_budget_keeps_only_the_cut_outcome(overcooked):
    env, traj = overcooked
    text = format_trajectory(env, traj, max_tokens=12)
    assert estimate_tokens(text) <= 12 and text.startswith("Outcome: success")
    with pytest.raises(ValueError, match="max_tokens"):
        format_trajectory(env, traj, max_tokens=0)


@pytest.mark.parametrize("name", ["babyai", "overcooked", "pistonball"])
def test_round_trip_through_json_reads_the_same(name, request):
    env, traj = request.getfixturevalue(name)
    loaded = _round_trip(traj)
    for budget in (300, 1500):
        assert format_trajectory(env, loaded, max_tokens=budget) == format_trajectory(
            env, traj, max_tokens=budget
        )
    assert agent_trajectory(env, loaded, "agent_1", max_tokens=400) == agent_trajectory(
        env, traj, "agent_1", max_tokens=400
    )
    assert [step_summary(env, s, "agent_0") for s in loaded.steps] == [
        step_summary(env, s, "agent_0") for s in traj.steps
    ]


def test_agent_trajectory_shows_only_that_agents_steps(pistonball, overcooked):
    env, traj = pistonball
    text = agent_trajectory(env, traj, "agent_3", max_tokens=500)
    assert estimate_tokens(text) <= 500
    lines = text.splitlines()
    assert lines[-1].startswith("Outcome: failure") and lines[-2].startswith("agent_3 totals: ")
    assert not any(f"agent_{i} " in text for i in range(20) if i != 3)
    omitted = next(line for line in lines if "omitted" in line)
    assert (
        omitted
        == f"... ({125 - sum(line.startswith('cycle ') for line in lines)} cycles omitted) ..."
    )
    env, traj = overcooked
    full = agent_trajectory(env, traj, "agent_1", max_tokens=100_000)
    after = [*(s.observations for s in traj.steps[1:]), traj.final_observations]
    assert full.splitlines()[: traj.n_steps] == [
        step_summary(env, s, "agent_1", a) for s, a in zip(traj.steps, after)
    ]
