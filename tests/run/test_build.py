"""Building a run is config to components: nothing written, and one config builds equal parts."""

from __future__ import annotations

from pathlib import Path

from marlang.config import build_config
from marlang.prompts import PromptLibrary
from marlang.run.build import build_run
from marlang.types import StopFlag
from tests.fakes import FakeRuleChatModel, babyai_rule


def _config():
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
        "model": {"cache": False}, "protocol": {"name": "bidirectional"}, "learning": {"method": "reflexion"},
        "run": {"episodes": 2, "parallel": 2, "progress": False},
    })


def _build(config, run_path: Path):
    return build_run(config, prompts=PromptLibrary(), run_path=run_path, stop=StopFlag(),
                     trajectory=lambda episode: None, chat_model=FakeRuleChatModel(rule=babyai_rule))


def _shape(parts):
    return {
        "options": parts.options, "learner": (type(parts.learner).__name__, parts.learner.name),
        "agents": {a: (agent.policy, agent.action_selection, agent.role) for a, agent in parts.agents.items()},
        "slots": sorted(parts.slot_models), "adapters": parts.adapters, "decides": parts.decide is not None,
        "episode_graph": sorted(parts.episode_graph.get_graph().nodes),
        "call": (parts.call.seed, [type(c).__name__ for c in parts.call.callbacks]),
        "world": parts.learner.context.instructions,
    }


def test_building_twice_from_one_config_gives_equal_parts_and_writes_nothing(tmp_path):
    run = tmp_path / "run"
    first, second = _build(_config(), run), _build(_config(), run)
    assert _shape(first) == _shape(second)
    assert first.agents["agent_0"] is not second.agents["agent_0"]  # each build its own components
    assert not run.exists() and list(tmp_path.iterdir()) == []


def test_the_loop_is_given_every_part_at_construction():
    import dataclasses

    from marlang.run.loop import RunLoop

    fields = {f.name: f for f in dataclasses.fields(RunLoop)}
    required = [n for n, f in fields.items() if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    assert required == ["config", "record", "setting", "make_env", "learner", "episode_graph", "recorder", "call"]
    assert all("Any" not in str(f.type) for f in fields.values() if f.init), \
        {n: f.type for n, f in fields.items() if "Any" in str(f.type)}


def test_each_agent_memory_keeps_what_the_learner_declares(tmp_path):
    reflexion = _config()
    reflexion.learning.options.memory_size = 5
    assert {a.memory.capacity for a in _build(reflexion, tmp_path / "a").agents.values()} == {5}
    static = build_config({**_config().model_dump(exclude={"learning"}), "learning": {"method": "none"}})
    assert {a.memory.capacity for a in _build(static, tmp_path / "b").agents.values()} == {3}


def test_an_env_that_runs_no_code_names_no_sandbox_in_the_manifest(tmp_path):
    from marlang.run.build import manifest

    parts = _build(_config(), tmp_path / "run")
    assert parts.env is not None and parts.env.sandbox is None
    assert "sandbox" not in manifest(_config(), setting="s", model_id="m", prompts=PromptLibrary(), env=parts.env)


def test_an_env_of_ones_own_that_is_a_plain_parallel_env_starts_and_is_named_without_a_sandbox():
    from pettingzoo import ParallelEnv

    from marlang.run.build import manifest, start_sandbox

    class PlainEnv(ParallelEnv):
        """What the own-env how-to writes: no marlang base class."""

    start_sandbox(PlainEnv())
    assert "sandbox" not in manifest(_config(), setting="s", model_id="m", prompts=PromptLibrary(), env=PlainEnv())
