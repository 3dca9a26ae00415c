"""Cross-play: a pool of players (trained adapters of two runs, the scripted agent, the base
model) plays every pairing on the held-out levels; the matrix, the gap and the refusals."""

from __future__ import annotations

import json

import pytest
import yaml

from marlang.config import ConfigError, build_config
from marlang.evaluation.crossplay import Player, gap, parse_players, read_player
from marlang.seeds import env_seeds

ENV = {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2}


def _tiny_models(monkeypatch):
    import marlang.evaluation.compare as compare_module
    import marlang.run.build as build_module
    from marlang.testing import tiny_chat_model

    def build(model_config):
        return tiny_chat_model(max_tokens=8), None

    monkeypatch.setattr(compare_module, "build_chat_model", build)
    monkeypatch.setattr(build_module, "build_chat_model", build)


def _base():
    return {"env": dict(ENV), "agents": {"chain_of_thought": False, "action_selection": "score"},
            "model": {"cache": False}, "learning": {"method": "none"},
            "run": {"episodes": 1, "parallel": 2, "progress": False}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two PPO runs of the tiny model on two seeds: each trained adapters for both slots."""
    mp = pytest.MonkeyPatch()
    _tiny_models(mp)
    from marlang.evaluation.compare import run_comparison

    out = tmp_path_factory.mktemp("trained")
    ppo = {"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4, "lr": 0.05,
           "eval_episodes": 0, "lora": {"r": 2, "alpha": 4}}
    run_comparison({**_base(), "learning": ppo}, [("run.seed", [0, 1])], out, reference=False)
    mp.undo()
    return {seed: out / f"none--ppo--run.seed-{seed}" for seed in (0, 1)}


def test_a_pool_plays_every_pairing_on_the_held_out_levels(trained, tmp_path, monkeypatch, capsys):
    _tiny_models(monkeypatch)
    from marlang.cli import main

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(_base()))
    out = tmp_path / "xp"
    args = ["crossplay", str(config), "--players", f"A={trained[0]}", f"B={trained[1]}", "scripted", "base",
            "--episodes", "2", "--out", str(out)]
    assert main(args) == 0
    found = json.loads((out / "crossplay.json").read_text())
    names = ["A", "B", "scripted", "base"]
    assert [p["name"] for p in found["players"]] == names
    assert [p["what"] for p in found["players"]] == ["ppo adapters", "ppo adapters", "scripted", "base"]
    assert all(found["return"][i][j]["n"] == 2 for i in names for j in names)
    assert found["levels"] == 2 and found["gap"]["interval"].startswith("n too small")
    assert set(found["gap"]["players"]) == {"A", "B", "base"} and found["gap_leaves_out"] == ["scripted"]
    # the folder holds the matrix, not a training comparison's curve or cost front
    assert not (out / "learning_curve.png").exists() and not (out / "score_vs_cost.png").exists()
    assert "cross-play directory" in capsys.readouterr().out
    # every cell played the held-out levels (run.eval_seed's), the same ones
    held_out = {str(s) for s in env_seeds(0, "test", range(2))}
    for cell in out.glob("*/metrics.csv"):
        assert {line.split(",")[3] for line in cell.read_text().splitlines()[1:]} == held_out
    # A beside B: slot 0 plays the adapter A trained for it, slot 1 the one B trained for slot 1
    manifest = json.loads((out / "A---B" / "manifest.json").read_text())
    hashes = {seed: json.loads((trained[seed] / "learner_state.json").read_text())["adapters"] for seed in (0, 1)}
    assert manifest["adapters"] == {"agent_0": hashes[0]["agent_0"]["hash"], "agent_1": hashes[1]["agent_1"]["hash"]}
    table = (out / "table.md").read_text()
    assert table.startswith("## Cross-play") and "| A | " in table and "Cross-play gap" in table
    assert (out / "crossplay.png").stat().st_size > 0
    assert json.loads((out / "summary.json").read_text())["crossplay"]["players"] == found["players"]
    from marlang.view.collect import collect

    assert collect([out])["tables"][0]["crossplay"]["return"] == found["return"]  # marlang view's heat map
    # a rerun resumes (nothing left to play) and rebuilds the same matrix
    assert main(args) == 0
    assert json.loads((out / "crossplay.json").read_text())["return"] == found["return"]
    capsys.readouterr()
    assert main([*args[:3], "scripted", "base", *args[7:]]) == 2
    assert "holds a cross-play of other players" in capsys.readouterr().err


def test_the_gap_is_self_play_minus_cross_play_level_by_level():
    by_level = {("a", "a"): {"1": 1.0, "2": 1.0}, ("b", "b"): {"1": 0.5, "2": 1.0},
                ("a", "b"): {"1": 0.0, "2": 0.5}, ("b", "a"): {"1": 0.0, "2": 0.5}}
    found = gap(["a", "b"], by_level)
    # level 1: self 0.75, cross 0.0; level 2: self 1.0, cross 0.5
    assert found["mean"] == pytest.approx(0.625)
    assert found["players"]["a"]["mean"] == pytest.approx((1.0 + 0.5) / 2)
    assert gap(["a", "b"], {k: v for k, v in by_level.items() if k != ("b", "a")})["interval"] == "cells missing"


def _run_dir(tmp_path, name, env=ENV, state=None, kind="llm", method="reflexion"):
    path = tmp_path / name
    path.mkdir()
    (path / "config.yaml").write_text(yaml.safe_dump({"env": env, "agents": {"kind": kind},
                                                      "learning": {"method": method}}))
    if state is not None:
        (path / "learner_state.json").write_text(json.dumps(state))
    return path


def test_a_reflexion_run_plays_its_memory_and_a_langmarl_run_its_policy(tmp_path):
    memory = _run_dir(tmp_path, "reflexion", state={"policies": {"agent_0": "p0", "agent_1": "p1"},
                                                    "memories": {"agent_0": ["went left: wall"], "agent_1": []}})
    player = read_player("R", memory, ENV["id"], 2)
    assert player.what == "reflexion memory"
    assert player.slot("agent_0") == {"kind": "llm", "policy": "p0", "memory": ["went left: wall"]}
    assert player.slot("agent_1") == {"kind": "llm", "policy": "p1"}
    policy = _run_dir(tmp_path, "langmarl", method="langmarl",
                      state={"policies": {"agent_0": "go", "agent_1": "wait"}, "memories": {}})
    assert read_player("L", policy, ENV["id"], 2).slot("agent_1") == {"kind": "llm", "policy": "wait"}
    neural = _run_dir(tmp_path, "mappo", kind="neural", method="mappo")
    assert read_player("N", neural, ENV["id"], 2).slot("agent_0") == {"kind": "neural", "checkpoint": str(neural)}
    # a slot holding a memory starts the run with it
    config = build_config({**_base(), "team": {"agent_0": player.slot("agent_0")}})
    assert config.team["agent_0"].memory == ["went left: wall"]


def test_players_that_do_not_fit_are_refused_in_one_line(tmp_path):
    other = _run_dir(tmp_path, "other", env={**ENV, "id": "babyai/pickup"}, state={"policies": {}})
    with pytest.raises(ConfigError, match="trained on babyai/pickup with 2 agents; this cross-play plays "
                                          "babyai/goto-obj with 2"):
        parse_players([f"X={other}", "scripted"], ENV["id"], 2)
    untrained = _run_dir(tmp_path, "untrained")
    with pytest.raises(ConfigError, match="holds no trained player"):
        parse_players([f"X={untrained}", "scripted"], ENV["id"], 2)
    static = _run_dir(tmp_path, "static", method="none", state={"policies": {"agent_0": "p"}, "memories": {}})
    with pytest.raises(ConfigError, match=r"a static run \(learning.method none\) commits no update"):
        parse_players([f"X={static}", "scripted"], ENV["id"], 2)
    memory = _run_dir(tmp_path, "memory", state={"policies": {"agent_0": "p"}, "memories": {}})
    with pytest.raises(ConfigError, match="trained with protocol none; this cross-play plays protocol alternating-2"):
        parse_players([f"X={memory}", "scripted"], ENV["id"], 2, protocol="alternating-2", model="local:smollm2")
    with pytest.raises(ConfigError, match="trained with model local:smollm2; this cross-play plays model hf:other"):
        parse_players([f"X={memory}", "scripted"], ENV["id"], 2, protocol="none", model="hf:other")
    assert parse_players([f"X={memory}", "scripted"], ENV["id"], 2, "none", "local:smollm2")[0].what == \
        "reflexion policy"
    with pytest.raises(ConfigError, match="not a run directory"):
        parse_players([f"X={tmp_path / 'nowhere'}", "scripted"], ENV["id"], 2)
    with pytest.raises(ConfigError, match="give NAME=RUN_DIR, or one of scripted, base"):
        parse_players(["bot", "scripted"], ENV["id"], 2)
    with pytest.raises(ConfigError, match="at least two players"):
        parse_players(["scripted"], ENV["id"], 2)
    with pytest.raises(ConfigError, match="'scripted' is named twice"):
        parse_players(["scripted", "scripted"], ENV["id"], 2)
    with pytest.raises(ValueError, match="run.levels 'held_out' plays the held-out levels, which no learner"):
        build_config({**_base(), "learning": {"method": "reflexion"}, "run": {"levels": "held_out"}})
    with pytest.raises(ValueError, match="a scripted slot acts as the env's reference agent and has no model, "
                                         "adapters, policy, memory or role"):
        build_config({**_base(), "team": {"agent_1": {"kind": "scripted", "memory": ["x"]}}})
    assert Player("base", "base").slot("agent_0") == {"kind": "llm"}


@pytest.mark.parametrize(("config", "state"), [
    ("env: x\n", None),                                                   # a section of the wrong kind
    (f"env: {{id: {ENV['id']}, n_agents: two}}\nagents: {{kind: llm}}\n", None),  # a count that is text
    (f"env: {{id: {ENV['id']}, n_agents: 2}}\nlearning: [reflexion]\n", None),
    ("[a, list]\n", None),                                                # no mapping at all
    ("a: &a [*a]\n", None),                                               # an alias inside its own anchor
    (None, '{"policies": ["p"]}'),                                         # learner state of the wrong kind
    (None, '{"memories": {"agent_0": 5}, "policies": {}}'),
    (None, "[1, 2]"),
])
def test_a_players_files_of_the_wrong_kind_are_one_line_not_a_traceback(tmp_path, config, state):
    path = _run_dir(tmp_path, "odd", state={"policies": {}})
    if config is not None:
        (path / "config.yaml").write_text(config)
    if state is not None:
        (path / "learner_state.json").write_text(state)
    try:
        player = parse_players([f"X={path}", "scripted"], ENV["id"], 2)
    except ConfigError as err:
        assert "\n" not in str(err) and f"X={path}" in str(err)
    else:  # what is read is only what can be played
        assert player[0].memories in (None, {}) or all(isinstance(m, list) for m in player[0].memories.values())


def test_a_crossplay_plan_of_the_wrong_kind_or_a_fifo_is_one_line(tmp_path):
    import os

    from marlang.evaluation.crossplay import CROSSPLAY_FILE, matrix

    folder = tmp_path / "xp"
    folder.mkdir()
    (folder / CROSSPLAY_FILE).write_text("players: [a, b]\n")
    with pytest.raises(ConfigError, match="its players are not a list of named players"):
        matrix(folder)
    (folder / CROSSPLAY_FILE).unlink()
    os.mkfifo(folder / CROSSPLAY_FILE)  # a read of it would wait for a writer that never comes
    with pytest.raises(ConfigError, match="FIFO"):
        matrix(folder)


def test_a_fifo_comparison_plan_is_never_waited_on(tmp_path):
    import os

    from marlang.evaluation.compare import COMPARISON_FILE, planned_runs

    os.mkfifo(tmp_path / COMPARISON_FILE)
    assert planned_runs(tmp_path) is None


def test_a_comparison_over_seeds_plans_the_swapped_seed_check(trained, tmp_path):
    from marlang.evaluation.crossplay import swapped_seed_plans

    out = trained[0].parent
    plans = swapped_seed_plans(out, json.loads((out / "summary.json").read_text()))
    assert len(plans) == 1
    base, grid, folder = plans[0]
    assert folder == out / "crossplay" / "none--ppo--2-seeds-"
    names = [v["name"] for v in grid[0][1]]
    assert names == ["seed 0 / seed 0", "seed 0 / seed 1", "seed 1 / seed 0", "seed 1 / seed 1"]
    assert grid[0][1][1]["team"] == {"agent_0": {"kind": "llm", "adapters": str(trained[0])},
                                     "agent_1": {"kind": "llm", "adapters": str(trained[1])}}
    assert base["learning"] == {"method": "none"} and base["run"]["levels"] == "held_out"
    assert base["run"]["episodes"] == 32  # the runs held out none of their own: the default
    assert yaml.safe_load((folder / "crossplay.yaml").read_text())["players"][1]["source"] == str(trained[1])


def test_a_scripted_team_over_seeds_has_no_swapped_seed_check(tmp_path):
    from marlang.evaluation.crossplay import swapped_seed_plans

    runs = {}
    for seed in (3, 4):
        path = tmp_path / f"scripted--run.seed-{seed}"
        path.mkdir()
        (path / "config.yaml").write_text(yaml.safe_dump({"env": ENV, "agents": {"kind": "scripted"},
                                                          "run": {"seed": seed}}))
        (path / "learner_state.json").write_text(json.dumps({"policies": {}, "memories": {}}))
        runs[str(seed)] = {"setting": f"scripted, run.seed={seed}"}
    summaries = {ENV["id"]: {"scripted (2 seeds)": {"seeds": runs}}}
    assert swapped_seed_plans(tmp_path, summaries) == []


PPO = {"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4, "lr": 0.05,
       "eval_episodes": 0, "lora": {"r": 2, "alpha": 4}}


def test_the_swapped_seed_check_is_said_before_the_runs_and_sized(trained, tmp_path, monkeypatch, capsys):
    from marlang import cli
    from marlang.cli import evaluation_commands

    said = []

    def run_grid(base, grid, out, reference, executor=None, again=""):
        said.append((capsys.readouterr().err, base["run"].get("episodes"), out))
        return 0

    monkeypatch.setattr(evaluation_commands, "_run_grid", run_grid)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**_base(), "learning": PPO}))
    out = trained[0].parent
    args = ["compare", str(config), "--seeds", "0,1", "--out", str(out), "--no-reference"]
    assert cli.main([*args, "--crossplay-episodes", "3"]) == 0
    # said before the comparison's runs: its size, and how to size or skip it
    assert "1 setting(s) x 2^2 = 4 cells x 3 held-out episodes = 12 episodes" in said[0][0]
    assert "--crossplay-episodes 0 skips it" in said[0][0]
    assert said[1][1:] == (3, out / "crossplay" / "none--ppo--2-seeds-")
    assert "4 cells x 3 held-out episodes" in said[1][0]
    said.clear()
    assert cli.main([*args, "--crossplay-episodes", "0"]) == 0
    assert len(said) == 1 and "swapped-seed" not in said[0][0]


def test_an_interrupted_swapped_seed_check_announces_and_plays_no_further_one(trained, tmp_path, monkeypatch,
                                                                             capsys):
    import marlang.evaluation.crossplay
    from marlang import cli
    from marlang.cli import evaluation_commands

    ran = []

    def run_grid(base, grid, out, reference, executor=None, again=""):
        ran.append(out)
        return 0 if len(ran) == 1 else 130  # the comparison, then its first check interrupted

    plans = [({"run": {"episodes": 2}}, [("setting", ["a", "b"])], tmp_path / f"check-{k}") for k in range(2)]
    monkeypatch.setattr(evaluation_commands, "_run_grid", run_grid)
    monkeypatch.setattr(marlang.evaluation.crossplay, "swapped_seed_plans", lambda *a, **k: plans)
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({**_base(), "learning": PPO}))
    out = trained[0].parent
    assert cli.main(["compare", str(config), "--seeds", "0,1", "--out", str(out), "--no-reference"]) == 130
    assert ran[1:] == [tmp_path / "check-0"]
    assert "check-1" not in capsys.readouterr().err


def test_the_swapped_seed_check_plays_the_learners_held_out_size_by_default(tmp_path):
    from marlang.evaluation.crossplay import swapped_seed_outline

    base = {**_base(), "learning": {**PPO, "eval_episodes": 8}, "run": {**_base()["run"], "seeds": [0, 1, 2]}}
    line = swapped_seed_outline(base, [("protocol", ["none", "alternating-2"])])
    assert "2 setting(s) x 3^2 = 9 cells x 8 held-out episodes = 144 episodes" in line
    static = {**base, "learning": {"method": "none"}}
    assert swapped_seed_outline(static, []) is None  # nothing trained: no check


def _crossplay_folder(out, players, returns, success):
    """A cross-play folder whose cells are played: ``returns[(i, j)]`` per level, ``success`` alike."""
    from marlang.evaluation.compare import folder_name
    from marlang.evaluation.crossplay import CROSSPLAY_FILE, cell_name

    out.mkdir()
    (out / CROSSPLAY_FILE).write_text(yaml.safe_dump({"players": [{"name": n, "what": w} for n, w in players],
                                                      "slots": ["agent_0", "agent_1"]}))
    for (i, j), values in returns.items():
        cell = out / folder_name(cell_name(i, j))
        cell.mkdir()
        (cell / "summary.json").write_text(json.dumps({"success_defined": True}))
        rows = ["episode,return,success,seed"] + [f"{k},{v},{success[(i, j)][k]},{k}" for k, v in enumerate(values)]
        (cell / "metrics.csv").write_text("\n".join(rows) + "\n")


def test_the_gap_leaves_the_scripted_partner_out_and_the_heat_map_shows_what_it_measures(tmp_path, monkeypatch):
    import marlang.statistics.plots
    from marlang.evaluation.crossplay import write_matrix

    players = [("a", "ppo adapters"), ("b", "ppo adapters"), ("scripted", "scripted")]
    # a and b score 1 with themselves, 0 with each other; everything beside scripted scores 5
    returns = {(i, j): [1.0, 1.0] if i == j else [0.0, 0.0] for i in "ab" for j in "ab"}
    returns.update({(i, j): [5.0, 5.0] for i in ("a", "b", "scripted") for j in ("a", "b", "scripted")
                    if "scripted" in (i, j)})
    # success is the opposite of the return: a heat map of it would not show what the gap measures
    success = {c: [v == 0.0 for v in r] for c, r in returns.items()}
    _crossplay_folder(tmp_path / "xp", players, returns, success)
    drawn = {}
    draw = marlang.statistics.plots.crossplay_figure
    monkeypatch.setattr(marlang.statistics.plots, "crossplay_figure", lambda grid, names, title, slots=None:
                        drawn.update(grid=grid, title=title) or draw(grid, names, title, slots))
    found = write_matrix(tmp_path / "xp")
    assert found["gap"]["mean"] == pytest.approx(1.0)  # with scripted's cells it would be 1 - (0+0+5*4)/6
    assert found["gap_leaves_out"] == ["scripted"] and set(found["gap"]["players"]) == {"a", "b"}
    assert "scripted left out" in (tmp_path / "xp" / "table.md").read_text()
    assert drawn["grid"][0] == [1.0, 0.0, 5.0] and "mean return" in drawn["title"]


@pytest.mark.parametrize("planted", ["summary.json", "metrics.csv"])
def test_a_fifo_in_a_played_cell_is_left_out_of_the_matrix_never_waited_on(tmp_path, planted):
    import os

    from marlang.evaluation.compare import folder_name
    from marlang.evaluation.crossplay import cell_name, matrix

    players = [("a", "ppo adapters"), ("b", "ppo adapters")]
    returns = {(i, j): [1.0, 0.0] for i in "ab" for j in "ab"}
    _crossplay_folder(tmp_path / "xp", players, returns, {c: [True, False] for c in returns})
    cell = tmp_path / "xp" / folder_name(cell_name("a", "b"))
    (cell / planted).unlink()
    os.mkfifo(cell / planted)  # a read of it would wait for a writer that never comes
    found = matrix(tmp_path / "xp")
    assert found is not None
    assert found["return"]["a"]["b"] is None and found["return"]["a"]["a"]["mean"] == pytest.approx(0.5)
