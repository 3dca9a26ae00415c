"""Reward hooks for the PPO tests (``learning.reward_hook: tests.methods.ppo.ppo_hooks:...``)."""


def one_per_step(trajectory, agent):
    """Every agent earns 1 at every step: a signal the value heads must learn."""
    return [1.0] * len(trajectory.steps)


CALLS: list[dict] = []
"""What ``recorded_progress`` saw: the gamma PPO handed it and each call's trajectory."""


def recorded_progress(trajectory, agent, gamma=1.0):
    """``goal_progress``, remembering its calls (the test checks PPO's side of the seam)."""
    from marlang.envs.babyai.shaping import goal_progress

    rewards = goal_progress(trajectory, agent, gamma=gamma)
    CALLS.append({"gamma": gamma, "agent": agent, "trajectory": trajectory, "rewards": rewards})
    return rewards
