"""Reward hooks for the PPO tests (``learning.reward_hook: tests.trainers.ppo_hooks:...``)."""


def one_per_step(trajectory, agent):
    """Every agent earns 1 at every step: a signal the value heads must learn."""
    return [1.0] * len(trajectory.steps)
