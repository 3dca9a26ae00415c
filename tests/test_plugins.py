"""User plugins straight from a config: envs, protocols and learners named by import path
(``"package.module:attr"``) or by an installed distribution's entry points, through the CLI."""

import json
import sys
import textwrap

import pytest

from marlang.cli import main
from marlang.config import ConfigError, build_config
from marlang.registry import ENVS, LEARNERS, PROTOCOLS

PLUGIN = textwrap.dedent('''
    """A user's plugins: an env, a protocol and a learner outside marlang."""
    from marlang.graphs.protocols import build_no_communication
    from marlang.learners import Learner, LearnerOptions
    from marlang.types import Candidate

    used = []

    def make_small_room(n_agents=2, **kwargs):
        """A 5x5 GoTo room."""
        import marlang

        used.append("env")
        return marlang.make_env("babyai/goto-obj", n_agents=n_agents, **kwargs)

    make_small_room.default_agents = 3

    def leader(agents, config):
        """Nobody talks: the leader's plan is already in every policy."""
        used.append("protocol")
        return build_no_communication(agents, config)

    class LessonOptions(LearnerOptions):
        lesson: str = "look first"

    class Lessons(Learner):
        """Adds one fixed lesson to every agent's memory."""
        name = "lessons"
        options_model = LessonOptions

        async def update(self, state, trajectories):
            used.append("learner")
            return Candidate(memories={a: [self.options.lesson] for a in state.policies})
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """``myplugins`` importable from ``tmp_path``; every name it adds is removed afterwards."""
    (tmp_path / "myplugins.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = {r: set(r.names()) for r in (ENVS, PROTOCOLS, LEARNERS)}
    yield tmp_path
    monkeypatch.undo()  # off sys.path first, so the refresh below cannot read its entry points again
    for registry, names in before.items():
        for name in set(registry.names()) - names:
            registry.pop(name)
        registry.refresh_plugins()
    sys.modules.pop("myplugins", None)


def used() -> list[str]:
    return sys.modules["myplugins"].used


def fake_model(server) -> str:
    return f"{{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}"


def test_an_env_by_import_path_runs_from_the_cli(plugin, capsys):
    config = plugin / "env.yaml"
    config.write_text("env: {id: 'myplugins:make_small_room', n_agents: 2, max_steps: 4}\n"
                      "agents: {kind: scripted}\nrun: {name: plug, episodes: 2, progress: false}\n")
    out = plugin / "run"
    assert main(["run", str(config), "--out", str(out)]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2
    assert "env" in used()
    # the factory's own default_agents attribute is the env's default agent count
    assert build_config({"env": {"id": "myplugins:make_small_room"}}).env.n_agents == 3


def test_a_protocol_and_a_learner_by_import_path_run_from_the_cli(plugin, capsys):
    from marlang.testing import FakeOpenAIServer

    out = plugin / "run"
    with FakeOpenAIServer(reply="Action: go forward") as server:
        config = plugin / "lm.yaml"
        config.write_text(
            "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
            f"model: {fake_model(server)}\n"
            "protocol: {name: 'myplugins:leader'}\n"
            "learning: {method: 'myplugins:Lessons', lesson: 'open doors', rollouts: 1, "
            "iterations: 1}\n"
            "run: {episodes: 1, progress: false}\n")
        assert main(["run", str(config), "--out", str(out)]) == 0
    assert {"protocol", "learner"} <= set(used())
    state = json.loads((out / "learner_state.json").read_text())
    assert state["memories"]["agent_0"] == ["open doors"]
    assert LEARNERS.entry("myplugins:Lessons").metadata["agents_kind"] == "llm"


def test_a_comparison_grid_over_plugin_and_builtin_protocols(plugin, capsys):
    from marlang.testing import FakeOpenAIServer

    out = plugin / "cmp"
    with FakeOpenAIServer(reply="Action: go forward") as server:
        config = plugin / "cmp.yaml"
        config.write_text(
            "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
            f"model: {fake_model(server)}\nlearning: {{method: none}}\n"
            "run: {name: cmp, episodes: 1, progress: false}\n")
        code = main(["compare", str(config), "--no-reference", "--grid",
                     "protocol.name=none,myplugins:leader", "--out", str(out)])
    assert code == 0
    table = capsys.readouterr().out
    assert "myplugins:leader" in table
    assert "protocol" in used()


def test_plugins_from_an_installed_distribution_by_entry_point(plugin, capsys):
    """A distribution's ``entry_points.txt`` names plugins; a config uses the short names."""
    info = plugin / "myplugins-0.1.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text("Metadata-Version: 2.1\nName: myplugins\nVersion: 0.1\n")
    info.joinpath("entry_points.txt").write_text(
        "[marlang.envs]\nsmall-room = myplugins:make_small_room\n\n"
        "[marlang.protocols]\nleader = myplugins:leader\n\n"
        "[marlang.learners]\nlessons = myplugins:Lessons\n")
    for registry in (ENVS, PROTOCOLS, LEARNERS):
        registry.refresh_plugins()
    assert "leader" in PROTOCOLS.names() and "lessons" in LEARNERS.names()
    assert "small-room" in ENVS.names()
    assert not PROTOCOLS.entry("none").plugin  # a builtin keeps its name
    assert main(["protocols"]) == 0 and "leader" in capsys.readouterr().out

    config = plugin / "ep.yaml"
    config.write_text("env: {id: small-room, n_agents: 2, max_steps: 3}\nagents: {kind: scripted}\n"
                      "run: {name: ep, episodes: 1, progress: false}\n")
    assert main(["run", str(config), "--out", str(plugin / "run")]) == 0
    assert "env" in used()
    cfg = build_config({"protocol": "leader", "learning": {"method": "lessons", "lesson": "x"}})
    assert cfg.learning.options.lesson == "x" and cfg.learning.label == "lessons"


def test_plugin_errors_are_one_line(plugin, capsys):
    with pytest.raises(ConfigError) as err:
        build_config({"protocol": {"name": "myplugins:nobody"}})
    message = str(err.value)
    assert "\n" not in message
    assert "'myplugins:nobody'" in message and "has no attribute 'nobody'" in message

    with pytest.raises(ConfigError) as err:
        build_config({"env": {"id": "no_such_pkg.envs:make"}})
    assert "No module named 'no_such_pkg'" in str(err.value) and "\n" not in str(err.value)

    with pytest.raises(ConfigError) as err:
        build_config({"learning": {"method": "myplugins:leader"}})
    assert "not a Learner subclass" in str(err.value)

    config = plugin / "bad.yaml"
    config.write_text("protocol: {name: leadr}\n")
    assert main(["run", str(config), "--out", str(plugin / "run")]) == 2
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert len(err_lines) == 1
    assert "valid choices: none, bidirectional, unidirectional, alternating" in err_lines[0]
    assert "import path 'package.module:attr'" in err_lines[0]


def test_a_plugin_that_fails_on_import_is_one_line_naming_the_key(tmp_path, monkeypatch):
    (tmp_path / "brokenplug.py").write_text("raise RuntimeError('needs MY_TOKEN set')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as err:
        build_config({"learning": {"method": "brokenplug:Learner"}})
    assert "learning.method" in str(err.value) and "RuntimeError: needs MY_TOKEN set" in str(err.value)
    assert "brokenplug:Learner" not in LEARNERS
    sys.modules.pop("brokenplug", None)
