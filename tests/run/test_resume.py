"""Where a run starts: the named decisions a training checkpoint gives, and the loop's own
options read once from where users write them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from marlang.config import ConfigError, build_config
from marlang.run.loop import LoopOptions
from marlang.run.resume import Resume, decide


def _snapshot(values=None, next_=(), waiting=False):
    task = SimpleNamespace(interrupts=("pending",) if waiting else ())
    return SimpleNamespace(values=values or {}, next=next_, tasks=[task])


def test_each_checkpoint_gives_its_named_decision():
    done, more = (lambda state: True), (lambda state: False)
    assert decide(_snapshot(), done, None) is Resume.FRESH
    assert decide(_snapshot({"policy": {}}, ("update",)), done, None) is Resume.CONTINUE
    assert decide(_snapshot({"policy": {}}), done, None) is Resume.FINISHED
    assert decide(_snapshot({"policy": {}}), more, None) is Resume.EXTEND
    assert decide(_snapshot({"policy": {}}, ("commit",), waiting=True), done, None) is Resume.AWAIT_REVIEW
    assert decide(_snapshot({"policy": {}}, ("commit",), waiting=True), done, {"agent_0": {}}) \
        is Resume.APPLY_REVIEW
    with pytest.raises(ConfigError, match="RUN: no update is waiting for review"):
        decide(_snapshot({"policy": {}}), done, {"agent_0": {}}, "RUN")
    assert not Resume.FINISHED.runs and not Resume.AWAIT_REVIEW.runs and Resume.EXTEND.runs


def test_loop_options_are_read_once_from_the_learning_keys():
    from marlang.learners import learner_entry

    config = build_config({"learning": {"method": "langmarl", "accept": "improved", "review": True,
                                        "eval_rollouts": 5}})
    options = LoopOptions.from_config(config, learner_entry("langmarl").learner_class)
    assert options == LoopOptions(accept="improved", review=True, eval_rollouts=5, iterations=None)
    assert LoopOptions.from_config(config, None) == LoopOptions()  # a run that does not learn
    neural = build_config({"env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
                           "learning": {"method": "mappo"}})
    assert LoopOptions.from_config(neural, learner_entry("mappo").learner_class).iterations == 1


def test_adapters_for_a_team_without_llm_agents_is_one_line_naming_the_key(tmp_path):
    from marlang.run import Experiment

    config = build_config({"env": {"id": "babyai/goto-obj", "n_agents": 2}, "agents": {"kind": "scripted"},
                           "model": {"adapters": str(tmp_path)}, "run": {"episodes": 1, "progress": False}})
    with pytest.raises(ConfigError, match="model.adapters plays a trained team of LLM agents back"):
        Experiment(config, tmp_path / "run").run()
    assert not (tmp_path / "run").exists()
