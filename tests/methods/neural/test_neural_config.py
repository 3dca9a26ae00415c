"""Config validation of neural learners: method <-> agents pairing, their own keys, one-line
errors naming the offending key, and the registry listing them."""

from __future__ import annotations

import pytest

from marlang.cli import main
from marlang.config import ConfigError, build_config
from marlang.envs import register_env
from marlang.envs.registry import DEFAULT_REGISTRY
from marlang.methods.neural import NeuralPPOOptions, QMIXOptions, is_neural_method


def neural(method: str = "mappo", env: str = "matrix/climbing", **learning):
    return {"env": {"id": env}, "agents": {"kind": "neural"}, "learning": {"method": method, **learning}}


def error(data) -> str:
    with pytest.raises(ConfigError) as info:
        build_config(data)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_each_method_validates_its_own_options():
    for method, model in (("mappo", NeuralPPOOptions), ("ippo", NeuralPPOOptions), ("qmix", QMIXOptions)):
        cfg = build_config(neural(method, frames=2000, frames_per_batch=500, n_envs=5))
        assert isinstance(cfg.learning.options, model)
        assert cfg.learning.options.batches == 4
        assert cfg.learning.label == method
    assert build_config(neural("vdn", frames=1001, frames_per_batch=500)).learning.options.batches == 3
    assert is_neural_method("vdn") and not is_neural_method("reflexion")


def test_neural_agents_need_a_neural_method_and_back():
    message = error({"agents": {"kind": "neural"}, "learning": {"method": "reflexion"},
                     "env": {"id": "matrix/climbing"}})
    assert "agents.kind 'neural'" in message and "mappo, ippo, qmix, vdn" in message
    message = error({"env": {"id": "matrix/climbing"}, "learning": {"method": "qmix"}})
    assert "learning.method 'qmix'" in message and "agents.kind: neural" in message
    # A scripted team ignores the method (the scripted reference row of a neural comparison).
    build_config({"env": {"id": "matrix/climbing"}, "agents": {"kind": "scripted"}, "learning": {"method": "mappo"}})


def test_unknown_and_misplaced_keys_name_the_key():
    message = error(neural(mixing_embed_dim=16))  # a QMIX key given to MAPPO
    assert "'learning.mixing_embed_dim'" in message and "frames" in message and "epochs" in message
    assert "learning.iterations" in error(neural(iterations=3))
    assert "'learning.frames_per_batch'" in error(neural(n_envs=3, frames_per_batch=1000))
    assert "'learning.minibatch_size'" in error(neural(frames_per_batch=100, n_envs=10, minibatch_size=400))
    assert "'learning.evaluation_interval'" in error(neural(frames_per_batch=100, n_envs=10, evaluation_interval=150))
    message = error(neural(device="gpu"))
    assert "'learning.device'" in message and "cuda" in message
    assert "'learning.hidden'" in error(neural(hidden=[]))
    assert "'agents.kind'" in error({"agents": {"kind": "robot"}})


def test_reward_hook_must_be_importable():
    build_config(neural(reward_hook="tests.methods.neural.climbing_credit:difference_rewards"))
    message = error(neural(reward_hook="difference_rewards"))
    assert "'learning.reward_hook'" in message and "package.module:function" in message
    assert "cannot import module 'tests.methods.neural.nowhere'" in error(
        neural(reward_hook="tests.methods.neural.nowhere:difference_rewards"))
    assert "has no attribute 'nothing'" in error(neural(reward_hook="tests.methods.neural.climbing_credit:nothing"))


def test_neural_agents_need_numeric_observations():
    register_env("test/text-only", lambda n_agents=2: None, "an env without numeric observations")
    try:
        message = error(neural(env="test/text-only"))
    finally:
        DEFAULT_REGISTRY.unregister("test/text-only")
    assert "env.id 'test/text-only'" in message and "matrix/climbing" in message


def test_learners_command_lists_the_neural_methods(capsys):
    assert main(["learners"]) == 0
    out = capsys.readouterr().out
    for method in ("mappo", "ippo", "qmix", "vdn"):
        assert f"| {method} " in out


def test_neural_ppo_options_have_cleanrl_names_only():
    options = NeuralPPOOptions(clip_coef=0.1, ent_coef=0.02, vf_coef=0.3, gae_lambda=0.8, max_grad_norm=2.0)
    assert (options.clip_coef, options.ent_coef, options.vf_coef, options.gae_lambda, options.max_grad_norm) == \
        (0.1, 0.02, 0.3, 0.8, 2.0)
    # BenchMARL's names are given only where its configs are built (methods/neural/learner.py)
    assert not [name for name in ("clip_epsilon", "entropy_coef", "critic_coef", "lmbda", "clip_grad_norm")
                if hasattr(options, name)]


def test_benchmarl_gets_the_cleanrl_keys_values(tmp_path):
    from marlang.config import build_config
    from marlang.methods.neural.learner import benchmarl_configs

    cfg = build_config({"agents": {"kind": "neural"}, "env": {"id": "matrix/climbing"},
                        "learning": {"method": "mappo", "clip_coef": 0.1, "ent_coef": 0.03, "vf_coef": 0.4,
                                     "gae_lambda": 0.7, "max_grad_norm": 2.0, "share_param_critic": False}})
    algorithm, _model, experiment = benchmarl_configs(cfg, tmp_path)
    assert (algorithm.clip_epsilon, algorithm.entropy_coef, algorithm.critic_coef, algorithm.lmbda,
            algorithm.share_param_critic) == (0.1, 0.03, 0.4, 0.7, False)
    assert experiment.clip_grad_norm and experiment.clip_grad_val == 2.0


def test_a_neural_learner_without_a_run_directory_says_so():
    from marlang.learners.context import LearnerContext
    from marlang.methods.neural.algorithms import MAPPOLearner

    config = build_config(neural())
    learner = MAPPOLearner(config.learning.options, LearnerContext(agents=["agent_0", "agent_1"], config=config))
    with pytest.raises(ValueError, match="run directory; give the learner's context a run_dir"):
        learner.start()
