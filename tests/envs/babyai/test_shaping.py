"""Go-to distance on the real BabyAI env, and the potential-based progress reward built on it,
attacked: circling, turning away and waiting earn nothing over the episode."""

from __future__ import annotations

import copy
import random

import pytest
from minigrid.core.world_object import Ball
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel
from minigrid.envs.babyai.core.verifier import GoToInstr, ObjDesc

from marlang.envs import ACTIONS, BabyAITextEnv, make
from marlang.envs.babyai.shaping import DEFAULT_SCALE, goal_progress, potential
from marlang.methods.ppo.options import load_hook
from marlang.types import Step, TextObservation, Trajectory


class GoToRedBall(RoomGridLevel):
    """One 7x7 room (cells 1..5): a red ball at (3, 3), a grey ball (same type, other colour)
    at (4, 4); agent_0 at (1, 5) facing east; mission: go to the red ball."""

    def __init__(self, **kwargs):
        super().__init__(num_rows=1, num_cols=1, room_size=7, **kwargs)

    def gen_mission(self) -> None:
        self.put_obj(Ball("red"), 3, 3)
        self.put_obj(Ball("grey"), 4, 4)
        self.agent_pos, self.agent_dir = (1, 5), 0
        self.instrs = GoToInstr(ObjDesc("ball", "red"))


def distance(env: BabyAITextEnv, agent: str = "agent_0") -> int | None:
    return env.observe(agent).data["goal_distance"]


def test_distance_counts_turns_and_moves_to_face_the_named_object_only():
    env = BabyAITextEnv(GoToRedBall(), n_agents=2, max_steps=20)
    env.reset(seed=0, options={"agent_starts": {"agent_1": {"position": (5, 1), "direction": "north"}}})
    # forward, forward, turn left, forward: at (3, 4) facing north, the red ball ahead
    assert distance(env) == 4
    for action, left in [("go forward", 3), ("go forward", 2), ("turn left", 1), ("turn right", 2),
                         ("go forward", 5)]:  # at (4, 5) facing east: back west, then north
        env.step({"agent_0": action, "agent_1": "drop"})
        assert distance(env) == left
    # facing the grey ball (same type, other colour; it blocks the way north): not the goal
    _, _, terminations, _, infos = env.step({"agent_0": "turn left", "agent_1": "drop"})
    assert env.observe("agent_0").data["front"]["object"]["color"] == "grey"
    assert distance(env) == 4 and not infos["agent_0"]["success"] and not terminations["agent_0"]


def test_a_mission_that_is_not_a_go_to_has_no_distance():
    env = make("babyai/pickup", n_agents=2)
    env.reset(seed=0)
    assert distance(env) is None


@pytest.mark.parametrize("seed", range(6))
def test_following_the_distance_reaches_the_goal_in_exactly_that_many_steps(seed):
    """The distance agrees with the env's own movement and verifier: from any start, some
    action lowers it by one (checked by stepping a copy of the env with each action), no
    action lowers it by more, and it reaches 0 exactly when the env says the mission is done."""
    env = make("babyai/goto-obj", n_agents=2, max_steps=40, room_size=6, num_dists=3)
    env.reset(seed=seed)
    d = distance(env)
    assert d is not None and d > 0
    for _ in range(d):
        after = {}
        for action in ACTIONS:
            trial = copy.deepcopy(env)
            _, _, _, _, infos = trial.step({"agent_0": action, "agent_1": "drop"})
            after[action] = (distance(trial), infos["agent_0"]["success"])
        assert min(v for v, _ in after.values()) == d - 1
        assert all(v >= d - 1 for v, _ in after.values())
        assert all(success == (v == 0) for v, success in after.values())
        action = min(after, key=lambda a: after[a][0])
        _, _, terminations, _, infos = env.step({"agent_0": action, "agent_1": "drop"})
        d -= 1
        assert distance(env) == d
    assert infos["agent_0"]["success"] and terminations["agent_0"]


# ------------------------------------------------------------------ the progress reward


def play(seed: int, policy, n_agents: int = 2, max_steps: int = 8) -> Trajectory:
    """An episode of the real env as a Trajectory (what PPO's reward hook receives)."""
    env = make("babyai/goto-obj", n_agents=n_agents, max_steps=max_steps, room_size=5, num_dists=1)
    obs, _ = env.reset(seed=seed)
    traj = Trajectory(episode=seed, seed=seed, env_id="babyai/goto-obj", protocol="none",
                      agents=list(env.possible_agents))
    t = 0
    while env.agents:
        actions = {a: policy(t, a, obs[a]) for a in env.agents}
        nxt, rewards, terms, truncs, infos = env.step(actions)
        traj.steps.append(Step(t=t, observations=dict(obs), messages=[], decisions={},
                               rewards=dict(rewards), terminated=any(terms.values()),
                               truncated=any(truncs.values()), infos=dict(infos),
                               terminations=dict(terms), truncations=dict(truncs)))
        obs, t = nxt, t + 1
    traj.final_observations = dict(obs)
    traj.success = any(i["success"] for i in traj.steps[-1].infos.values())
    return traj


def discounted(rewards, gamma):
    return sum(r * gamma**t for t, r in enumerate(rewards))


def random_policy(rng):
    return lambda t, a, obs: rng.choice(obs.legal_actions)


def circling(t, a, obs):
    return "turn left"


def waiting(t, a, obs):
    return "drop"  # carrying nothing: changes nothing


def away_and_back(t, a, obs):
    return "turn left" if t % 2 == 0 else "turn right"


@pytest.mark.parametrize("gamma", [1.0, 0.95, 0.5])
@pytest.mark.parametrize("name", ["random", "circling", "waiting", "away_and_back"])
def test_the_shaping_of_an_episode_is_fixed_by_its_first_and_last_states(gamma, name):
    """sum_t gamma^t (r'_t - r_t) = gamma^T Phi(s_T) - Phi(s_0), Phi(terminal) = 0: no way of
    playing collects shaping beyond where the episode starts and ends."""
    rng = random.Random(7)
    policies = {"random": random_policy(rng), "circling": circling, "waiting": waiting,
                "away_and_back": away_and_back}
    for seed in range(8):
        traj = play(seed, policies[name])
        for agent in traj.agents:
            env_r = [s.rewards[agent] for s in traj.steps]
            shaped = goal_progress(traj, agent, gamma=gamma)
            start = potential(traj.steps[0].observations[agent])
            terminal = traj.steps[-1].terminations[agent]
            end = 0.0 if terminal else potential(traj.final_observations[agent])
            assert discounted(shaped, gamma) - discounted(env_r, gamma) == pytest.approx(
                gamma ** len(traj.steps) * end - start, abs=1e-9)


def test_each_step_pays_progress_toward_the_goal():
    """A step that brings the agent one action nearer pays about ``scale``, one that takes it
    further costs about as much; a step that changes nothing pays (1 - gamma) of the
    potential, nothing with gamma 1."""
    traj = play(3, random_policy(random.Random(0)), n_agents=2, max_steps=12)
    shaped = goal_progress(traj, "agent_0", gamma=1.0)
    ds = [s.observations["agent_0"].data["goal_distance"] for s in traj.steps]
    final = traj.final_observations["agent_0"].data["goal_distance"]
    for t, step in enumerate(traj.steps):
        after = 0 if step.terminations["agent_0"] else (ds[t + 1] if t + 1 < len(ds) else final)
        assert shaped[t] - step.rewards["agent_0"] == pytest.approx(DEFAULT_SCALE * (ds[t] - after))


def test_success_outscores_every_way_of_not_succeeding_as_the_env_says():
    """Under the shaped reward, as under the env's, the team that reaches the goal earns more
    (discounted, from the same start) than one that circles, waits or turns back and forth."""
    gamma = 0.95
    seed = 3
    env = make("babyai/goto-obj", n_agents=2, max_steps=8, room_size=5, num_dists=1)
    env.reset(seed=seed)
    plan = []
    while (d := distance(env)) and d > 0:
        best = min(ACTIONS, key=lambda a: _after(env, a))
        plan.append(best)
        env.step({"agent_0": best, "agent_1": "drop"})
    assert plan
    solver = play(seed, lambda t, a, obs: plan[t] if a == "agent_0" else "drop", max_steps=8)
    assert solver.success
    solved = discounted(goal_progress(solver, "agent_0", gamma=gamma), gamma)
    for policy in (circling, waiting, away_and_back):
        other = play(seed, policy, max_steps=8)
        assert not other.success
        # other episodes are cut off: the learner adds gamma^T V(s_T) >= gamma^T Phi-free 0
        gained = discounted(goal_progress(other, "agent_0", gamma=gamma), gamma)
        assert gained < solved


def _after(env: BabyAITextEnv, action: str) -> int:
    trial = copy.deepcopy(env)
    trial.step({"agent_0": action, "agent_1": "drop"})
    return distance(trial) if distance(trial) is not None else 99


def test_observations_without_a_distance_are_refused_in_one_line():
    obs = TextObservation(text="", mission="go to the box", legal_actions=["a", "b"], data={})
    traj = Trajectory(episode=0, seed=0, env_id="x", protocol="none", agents=["agent_0"],
                      steps=[Step(t=0, observations={"agent_0": obs}, messages=[], decisions={},
                                  rewards={"agent_0": 0.0}, terminated=True)])
    with pytest.raises(ValueError, match="goal_distance"):
        goal_progress(traj, "agent_0")


def test_ppo_hands_its_discount_to_a_hook_that_takes_one():
    hook = load_hook("marlang.envs.babyai.shaping:goal_progress", 0.9)
    assert hook.keywords == {"gamma": 0.9}
    plain = load_hook("tests.methods.ppo.ppo_hooks:one_per_step", 0.9)
    assert not hasattr(plain, "keywords")
