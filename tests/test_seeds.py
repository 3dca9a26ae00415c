"""Env seeds as independent streams: run seeds share no level; settings of one seed share all."""

import pytest

from marlang.config import build_config
from marlang.learners.base import Learner
from marlang.seeds import PHASES, env_seed, env_seeds, stream_base


def test_run_seeds_share_no_env_seed_in_any_phase():
    played = {}
    for run_seed in range(20):
        for phase in PHASES:
            for seed in env_seeds(run_seed, phase, range(2000)):
                assert seed not in played, (run_seed, phase, played.get(seed))
                played[seed] = (run_seed, phase)
    assert all(0 <= s < 2 ** 53 for s in played)  # exact in JSON readers that hold doubles


def test_two_run_seeds_of_two_episodes_play_four_levels():
    # the old scheme (run.seed + e) played 3 distinct levels here: seed 1 repeated seed 0's second
    seeds = {s for run_seed in (0, 1) for s in Learner.rollout_plan(None, 0, 0, 2, run_seed).seeds}
    assert len(seeds) == 4


def test_streams_are_the_same_on_every_call_and_consecutive_within_a_stream():
    assert env_seeds(3, "train", range(4)) == tuple(stream_base(3, "train") + i for i in range(4))
    assert env_seed(3, "train", 2) == env_seeds(3, "train", [2])[0]
    # a finite problem set (problem = seed % n) is covered once per n episodes of a stream
    assert {s % 8 for s in env_seeds(5, "train", range(8))} == set(range(8))
    assert stream_base(0, "train") != stream_base(0, "test") != stream_base(1, "test")


def test_bad_phase_or_index_is_refused():
    with pytest.raises(ValueError, match="not one of train, eval, test"):
        env_seed(0, "training", 0)
    with pytest.raises(ValueError, match="negative"):
        env_seed(0, "train", -1)


def test_a_learner_seed_follows_the_run_seed_unless_set():
    ppo = {"learning": {"method": "ppo"}, "env": {"id": "babyai/goto-obj"}, "model": {"spec": "local:smollm2"}}
    assert build_config({**ppo, "run": {"seed": 7}}).learning.options.seed == 7
    set_one = {**ppo, "learning": {"method": "ppo", "seed": 3}, "run": {"seed": 7}}
    assert build_config(set_one).learning.options.seed == 3


def test_the_held_out_set_is_one_for_every_training_seed_unless_eval_seed_says_otherwise():
    import functools

    from marlang.methods.lora.trainer import evaluation_plan
    from marlang.methods.ppo.options import PPOOptions

    held = functools.partial(evaluation_plan, PPOOptions(eval_episodes=4, eval_every=1))
    assert held(0, 0).seeds == held(3, 0).seeds  # the same levels at every evaluation
    assert set(held(0, 0).seeds).isdisjoint(held(0, 1).seeds)  # another run.eval_seed: another set
    assert set(held(0, 0).seeds).isdisjoint(env_seeds(0, "train", range(10_000)))
    with pytest.raises(Exception, match="run.eval_seed"):
        build_config({"run": {"eval_seed": True}})
