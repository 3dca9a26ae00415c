"""The registries configs validate against (``marlang.registry``): builtins known by entry point
before their modules are imported, and names registered at runtime valid in configs too."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marlang.config import ConfigError, build_config
from marlang.registry import LEARNERS, Registry

ROOT = Path(__file__).resolve().parents[1]


def test_ppo_keys_validate_without_importing_the_trainer_first():
    script = textwrap.dedent("""
        import sys
        from marlang.config import ConfigError, build_config
        from marlang.registry import LEARNERS

        assert "marlang.methods.ppo.learner" not in sys.modules
        assert "ppo" in LEARNERS and not LEARNERS.entry("ppo").loaded
        cfg = build_config({"learning": {"method": "ppo", "lr": 3e-4, "epochs": 2}})
        assert (cfg.learning.options.lr, cfg.learning.options.epochs) == (3e-4, 2)
        assert cfg.learning.label == "ppo"
        from marlang.methods.ppo.learner import PPOLearner, PPOOptions

        assert isinstance(cfg.learning.options, PPOOptions)
        declared = LEARNERS.entry("ppo").metadata["agents_kind"]
        assert declared == getattr(PPOLearner, "agents_kind", "llm")
        try:
            build_config({"learning": {"method": "ppo", "learning_rate": 1e-3}})
        except ConfigError as err:
            print(err)
        else:
            raise AssertionError("an unknown learning key validated")
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    message = proc.stdout.strip()
    assert "\n" not in message
    assert "unknown config key 'learning.learning_rate' for learning.method 'ppo'" in message
    assert "valid keys here: method, iterations, rollouts, lr, epochs, minibatch_size" in message


def test_runtime_registrations_validate_in_configs():
    from marlang.envs import register_env
    from marlang.envs.registry import DEFAULT_REGISTRY
    from marlang.graphs import list_protocols, register_protocol
    from marlang.graphs.protocols import build_no_communication

    register_env("test/four", lambda n_agents=4: None, "a test env", default_agents=4)
    register_protocol("test-quiet", build_no_communication, "a test protocol")
    try:
        cfg = build_config({"env": {"id": "test/four"}, "protocol": {"name": "test-quiet"}})
        assert cfg.env.n_agents == 4 and "test-quiet" in list_protocols()
    finally:
        DEFAULT_REGISTRY.unregister("test/four")
        from marlang.registry import PROTOCOLS

        PROTOCOLS.unregister("test-quiet")
    with pytest.raises(ConfigError, match="unknown env id 'test/four'; valid choices: "):
        build_config({"env": {"id": "test/four"}})


def test_entries_load_on_first_use_and_name_a_broken_entry_point():
    registry = Registry("widget")
    registry.register("json", "json:dumps", "from the standard library", size=1)
    registry.register("gone", "marlang.nowhere:thing")
    assert registry.describe() == {"json": "from the standard library", "gone": ""}
    assert not registry.entry("json").loaded and registry.entry("json").metadata == {"size": 1}
    import json

    assert registry.load("json") is json.dumps and registry.entry("json").loaded
    with pytest.raises(ImportError, match="cannot load entry point 'marlang.nowhere:thing'"):
        registry.load("gone")
    with pytest.raises(ValueError, match="unknown widget 'gear'; valid choices: json, gone"):
        registry.entry("gear")
    with pytest.raises(ValueError, match="not an entry point"):
        registry.register("bad", "no-colon-here")


def test_builtin_learners_are_declared_with_their_kind():
    from marlang.learners import learner_entry

    for name in ("none", "langmarl", "reflexion", "mappo", "ippo", "qmix", "vdn"):
        declared = LEARNERS.entry(name).metadata["agents_kind"]
        assert getattr(learner_entry(name).learner_class, "agents_kind", "llm") == declared
