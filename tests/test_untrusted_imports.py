"""A config read from a directory imports no code: a plugin named by import path in a run's or a
comparison's config is refused in one line (exit 2) before it is imported, by every command that
reads one, unless the command runs with --trust-imports; and whoever names an import path, it
must be an env, protocol or learner, never a library callable such as ``subprocess:run``."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap

import pytest
import yaml

from marlang.cli import main
from marlang.config import ConfigError, UntrustedImportError, build_config, build_saved_config
from marlang.registry import ENVS, LEARNERS, PROTOCOLS, trusting_imports

ENV = {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2}
RUN = {"episodes": 1, "progress": False}

PLUGIN = textwrap.dedent('''
    """A module that leaves a mark when it is imported, with a protocol and an env factory."""
    import pathlib

    pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")
    built = []

    def leader(agents, config):
        from marlang.graphs.protocols import build_no_communication

        return build_no_communication(agents, config)

    def small_room(n_agents=2, **kwargs):
        import marlang

        built.append(n_agents)
        return marlang.make_env("babyai/goto-obj", n_agents=n_agents, **kwargs)
''')


@pytest.fixture
def plugin(tmp_path, monkeypatch, request):
    """A module of its own name per test (so no earlier import hides this one's), importable
    from ``tmp_path``; every registry name it adds is removed afterwards."""
    name = "planted_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")
    (tmp_path / f"{name}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    before = {r: set(r.names()) for r in (ENVS, PROTOCOLS, LEARNERS)}
    yield name
    monkeypatch.undo()
    for registry, names in before.items():
        for added in set(registry.names()) - names:
            registry.pop(added)
        registry.refresh_plugins()
    sys.modules.pop(name, None)


def imported(tmp_path) -> bool:
    return (tmp_path / "IMPORTED").exists()


def forget(module: str) -> None:
    """As a new process would: the plugin neither imported nor registered."""
    for registry in (ENVS, PROTOCOLS, LEARNERS):
        for name in [n for n in registry.names() if n.startswith(module + ":")]:
            registry.pop(name)
    sys.modules.pop(module, None)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished run of a scripted team (one episode)."""
    folder = tmp_path_factory.mktemp("finished")
    config = folder / "run.yaml"
    config.write_text(yaml.safe_dump({"env": ENV, "agents": {"kind": "scripted"}, "run": RUN}))
    assert main(["run", str(config), "--out", str(folder / "run")]) == 0
    return folder / "run"


def planted(finished_run, tmp_path, module: str) -> str:
    """A copy of the finished run whose config.yaml names ``module:leader`` as its protocol."""
    run = tmp_path / "theirs"
    shutil.copytree(finished_run, run)
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["protocol"]["name"] = f"{module}:leader"
    (run / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return str(run)


def refused_in_one_line(capsys, module: str, code: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "protocol.name" in err[0] and f"'{module}:leader'" in err[0]
    assert ".yaml: protocol.name is the import path" in err[0] and "add --trust-imports to the command" in err[0]
    return err[0]


@pytest.mark.parametrize("command", [["report"], ["run", "--resume"], ["credit-check"], ["review", "--show"]])
def test_a_run_directory_naming_an_import_path_is_refused_before_it_is_imported(
        finished_run, tmp_path, plugin, capsys, command):
    run = planted(finished_run, tmp_path, plugin)
    capsys.readouterr()
    code = main([*command, run])
    refused_in_one_line(capsys, plugin, code)
    assert not imported(tmp_path)


def test_view_reads_a_planted_run_as_data(finished_run, tmp_path, plugin, capsys):
    run = planted(finished_run, tmp_path, plugin)
    assert main(["view", run, "--out", str(tmp_path / "view.html")]) == 0
    assert not imported(tmp_path)


def test_a_comparison_folder_naming_an_import_path_is_refused_before_it_is_imported(tmp_path, plugin, capsys):
    base = {"env": ENV, "agents": {"kind": "scripted"}, "run": RUN}
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "comparison.yaml").write_text(yaml.safe_dump(
        {"base": {**base, "protocol": {"name": f"{plugin}:leader"}}, "grid": [{"run.seed": [0, 1]}],
         "reference": False, "runs": []}, sort_keys=False))
    config = tmp_path / "cmp.yaml"
    config.write_text(yaml.safe_dump(base))
    code = main(["compare", str(config), "--no-reference", "--grid", "run.seed=0,1", "--out", str(out)])
    line = refused_in_one_line(capsys, plugin, code)
    assert "comparison.yaml" in line
    assert not imported(tmp_path)


def test_the_swapped_seed_check_reads_the_seed_runs_configs_as_untrusted(tmp_path, plugin):
    from marlang.evaluation.crossplay import swapped_seed_plans

    runs = {}
    for seed in (0, 1):
        path = tmp_path / f"reflexion--run.seed-{seed}"
        path.mkdir()
        (path / "config.yaml").write_text(yaml.safe_dump(
            {"env": ENV, "protocol": {"name": f"{plugin}:leader"}, "learning": {"method": "reflexion"},
             "run": {"seed": seed}}))
        (path / "learner_state.json").write_text(json.dumps({"policies": {}, "memories": {}}))
        runs[str(seed)] = {"setting": f"reflexion, run.seed={seed}"}
    summaries = {ENV["id"]: {"reflexion (2 seeds)": {"seeds": runs}}}
    with pytest.raises(UntrustedImportError, match=f"protocol.name is the import path '{plugin}:leader'"):
        swapped_seed_plans(tmp_path, summaries)
    assert not imported(tmp_path)
    with trusting_imports():
        assert len(swapped_seed_plans(tmp_path, summaries)) == 1
    assert imported(tmp_path)


def test_a_neural_slot_reads_its_run_config_as_untrusted(tmp_path, plugin):
    from marlang.methods.neural.slot_policy import NeuralPolicy

    run = tmp_path / "neural"
    (run / "benchmarl" / "x" / "checkpoints").mkdir(parents=True)
    (run / "benchmarl" / "x" / "checkpoints" / "checkpoint_1.pt").write_bytes(b"")
    (run / "config.yaml").write_text(yaml.safe_dump(
        {"env": ENV, "agents": {"kind": "neural"}, "learning": {"method": "mappo"},
         "protocol": {"name": f"{plugin}:leader"}}))
    mine = build_config({"env": ENV})
    with pytest.raises(UntrustedImportError, match="protocol.name is the import path"):
        NeuralPolicy.load(str(run), mine, "team.agent_0.checkpoint")
    assert not imported(tmp_path)


def test_installed_plugins_and_registered_names_load_from_a_directory_config(tmp_path, plugin):
    info = tmp_path / f"{plugin}-0.1.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {plugin}\nVersion: 0.1\n")
    info.joinpath("entry_points.txt").write_text(f"[marlang.protocols]\nplanted-leader = {plugin}:leader\n")
    PROTOCOLS.refresh_plugins()
    config = build_saved_config({"protocol": {"name": "planted-leader"}}, tmp_path / "config.yaml")
    assert config.protocol.name == "planted-leader" and imported(tmp_path)


def test_your_own_import_path_plugin_runs_and_resumes_with_the_allowance(tmp_path, plugin, capsys):
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"env": {**ENV, "id": f"{plugin}:small_room"}, "agents": {"kind": "scripted"},
                                      "run": RUN}))
    run = tmp_path / "run"
    assert main(["run", str(config), "--out", str(run)]) == 0  # a config you name imports what it names
    assert sys.modules[plugin].built
    forget(plugin)
    (tmp_path / "IMPORTED").unlink()
    capsys.readouterr()
    assert main(["run", "--resume", str(run), "--set", "run.episodes=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "env.id" in err and f"'{plugin}:small_room'" in err and "add --trust-imports" in err
    assert not imported(tmp_path)
    assert main(["run", "--resume", str(run), "--set", "run.episodes=2", "--trust-imports"]) == 0
    assert len((run / "episodes.jsonl").read_text().splitlines()) == 2
    assert sys.modules[plugin].built
    forget(plugin)  # resumed with your config named too, the run may import what it names
    assert main(["run", str(config), "--resume", str(run), "--set", "run.episodes=3"]) == 0
    assert len((run / "episodes.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize("key", ["env.id", "protocol.name", "learning.method"])
@pytest.mark.parametrize("path", ["subprocess:run", "os:system", "subprocess:Popen", "shutil:copyfile"])
def test_an_import_path_must_name_a_plugin_not_a_library_callable(key, path):
    section, name = key.split(".")
    with pytest.raises(ConfigError) as err:
        build_config({section: {name: path}})  # a config the user named: trusted, yet refused
    message = str(err.value)
    assert key in message and repr(path) in message and "\n" not in message


def test_a_subprocess_env_id_is_refused_before_it_is_called(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump({"env": {"id": "subprocess:run", "kwargs": {"args": "touch CALLED",
                                                                                 "shell": True}},
                                      "agents": {"kind": "scripted"}, "run": RUN}))
    assert main(["run", str(config), "--out", str(tmp_path / "run"), "--trust-imports"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'subprocess:run'" in err[0] and "not an env factory" in err[0]
    assert not (tmp_path / "CALLED").exists() and not (tmp_path / "run").exists()


def test_a_function_named_where_it_was_imported_is_not_a_plugin(tmp_path, monkeypatch):
    (tmp_path / "reexports.py").write_text("from subprocess import run\n\ndef run_room(n_agents=2): ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ConfigError, match="defined in subprocess, not in reexports"):
            build_config({"env": {"id": "reexports:run"}})
        with pytest.raises(ConfigError, match="not a protocol builder"):
            build_config({"protocol": {"name": "reexports:run_room"}})
    finally:
        sys.modules.pop("reexports", None)


def test_a_resume_given_your_config_loads_the_import_paths_it_names(tmp_path, plugin):
    """As in a Ray worker, which gets the config unpickled, not validated: the directory's
    config may name what the config the run is resumed with names."""
    from marlang.run.experiment import Experiment
    from marlang.run.resume import check_directory
    from marlang.rundir import RunDirectory

    data = {"env": {**ENV, "id": f"{plugin}:small_room"}, "agents": {"kind": "scripted"}, "run": RUN}
    run = tmp_path / "run"
    Experiment(build_config(data), run).run()
    longer = build_config({**data, "run": {**RUN, "episodes": 2}})
    forget(plugin)
    check_directory(RunDirectory(run), longer, resume=True)  # the saved config is checked against it
    other = build_config({**data, "protocol": {"name": "bidirectional"}})
    forget(plugin)
    with pytest.raises(ConfigError, match="'protocol.name' is \"none\" in the saved run"):
        check_directory(RunDirectory(run), other, resume=True)
    Experiment(longer, run, resume=True).run()
    assert len((run / "episodes.jsonl").read_text().splitlines()) == 2


def test_the_command_that_continues_a_run_adds_the_allowance_its_config_needs(tmp_path, plugin):
    from marlang.cli.outcomes import _resume_command

    mine, builtin = tmp_path / "mine", tmp_path / "builtin"
    for run, env_id in ((mine, f"{plugin}:small_room"), (builtin, ENV["id"])):
        run.mkdir()
        (run / "config.yaml").write_text(yaml.safe_dump({"env": {**ENV, "id": env_id}, "run": RUN}))
    assert _resume_command(mine) == f"marlang run --resume {mine} --trust-imports"
    assert not imported(tmp_path)  # asking imported nothing
    assert _resume_command(builtin) == f"marlang run --resume {builtin}"
