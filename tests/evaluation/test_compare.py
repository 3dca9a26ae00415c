"""Comparison grids: settings expansion, the scripted reference rows, the written table."""

from marlang.evaluation.compare import expand_grid, write_comparison
from marlang.run import Experiment


def _base(max_steps):
    return {"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": max_steps},
            "run": {"episodes": 2, "progress": False}}


def test_grid_is_every_combination_plus_one_reference_per_env():
    settings = expand_grid(_base(None), [("protocol", ["none", "alternating-2"]),
                                         ("env.id", ["babyai/goto-obj", "babyai/pickup"])])
    assert [(s.group, s.name) for s in settings] == [
        ("babyai/goto-obj", "none, reflexion"), ("babyai/pickup", "none, reflexion"),
        ("babyai/goto-obj", "alternating-2, reflexion"), ("babyai/pickup", "alternating-2, reflexion"),
        ("babyai/goto-obj", "scripted (reference)"), ("babyai/pickup", "scripted (reference)"),
    ]
    assert settings[3].config.protocol.rounds == 2


def test_a_grid_over_learners_labels_each_learner():
    learners = [{"method": "langmarl"}, {"method": "langmarl", "credit": "global"}, {"method": "reflexion"},
                {"method": "none"}]
    settings = expand_grid(_base(None), [("learning", learners)], reference=False)
    assert [s.name for s in settings] == [
        "none, langmarl", "none, langmarl w/o credit", "none, reflexion", "none, static"]


def test_a_step_cap_adds_a_reference_on_the_levels_own_limit():
    settings = expand_grid(_base(3), [("protocol", ["none"])])
    assert [s.config.agents.kind for s in settings] == ["llm", "scripted", "scripted"]
    refs = {s.name: s.config.env.max_steps for s in settings[1:]}
    assert refs == {"scripted (reference)": 3, "scripted (level's step limit)": None}


def test_capped_and_uncapped_scripted_rows_in_the_table(tmp_path):
    for i, s in enumerate(expand_grid(_base(3), [("protocol", ["none"])])[1:]):
        Experiment(s.config, tmp_path / "cmp" / f"ref{i}").run()
    result = write_comparison(tmp_path / "cmp")
    rows = result.summaries["babyai/goto-obj"]
    assert {"scripted, 3 steps", "scripted"} <= set(rows)
    assert rows["scripted"]["success_rate"]["mean"] == 1.0  # solves on the level's own limit
    assert rows["scripted, 3 steps"]["steps"]["mean"] <= 3
    assert "scripted, 3 steps" in result.table and (tmp_path / "cmp" / "learning_curve.png").is_file()


def test_comparison_and_run_summaries_are_strict_json(tmp_path):
    import json

    def strict(path):
        def refuse(token):
            raise ValueError(f"{path}: non-standard JSON constant {token}")

        return json.loads(path.read_text(), parse_constant=refuse)

    # The scripted team cannot solve the level in one step: "steps when solved" is undefined.
    ref = expand_grid(_base(1), [("protocol", ["none"])])[1]
    Experiment(ref.config, tmp_path / "cmp" / "ref").run()
    run_summary = strict(tmp_path / "cmp" / "ref" / "summary.json")
    assert run_summary["steps_when_solved"]["mean"] is None
    # A summary written before undefined values were null (NaN) is cleaned on the way through.
    legacy = tmp_path / "cmp" / "ref" / "summary.json"
    legacy.write_text(legacy.read_text().replace('"low": null', '"low": NaN'))
    write_comparison(tmp_path / "cmp")
    table = strict(tmp_path / "cmp" / "summary.json")
    assert table["babyai/goto-obj"]["scripted, 1 steps"]["steps_when_solved"]["low"] is None


def test_a_comparison_shows_its_own_grid_and_names_earlier_runs_in_its_folder(tmp_path):
    from marlang.evaluation.compare import run_comparison

    base = {"env": {"id": "babyai/goto-obj", "n_agents": 2}, "agents": {"kind": "scripted"},
            "run": {"episodes": 1, "progress": False}}
    out = tmp_path / "cmp"
    first = run_comparison(base, [("env.max_steps", [3])], out, reference=False)
    assert "scripted, 3 steps" in first.table
    second = run_comparison(base, [("env.max_steps", [4, 5])], out, reference=False)
    rows = second.summaries["babyai/goto-obj"]
    assert set(rows) == {"scripted, 4 steps", "scripted, 5 steps"}
    assert "| scripted, 3 steps" not in second.table
    assert "Not in this grid" in second.table and "scripted--env.max_steps-3" in second.table
    # The folder's report still shows every run in it.
    assert set(write_comparison(out).summaries["babyai/goto-obj"]) == {
        "scripted, 3 steps", "scripted, 4 steps", "scripted, 5 steps"}


def test_a_grid_over_learning_methods_gives_each_method_only_its_own_keys():
    from pathlib import Path

    import yaml

    base = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs/demo.yaml").read_text())
    base.pop("grid")
    base["learning"] = {"method": "none", "memory_size": 3}
    settings = expand_grid(base, [("learning.method", ["none", "reflexion"])], reference=False)
    assert [s.name for s in settings] == ["none, static", "none, reflexion"]
    assert settings[1].config.learning.options.memory_size == 3
    # the loop's own keys go with the methods that take them (langmarl), not to the others
    base["learning"] = {"method": "none", "accept": "improved", "memory_size": 3}
    mixed = expand_grid(base, [("learning.method", ["langmarl", "reflexion"])], reference=False)
    assert [s.config.learning.loop.accept for s in mixed] == ["improved", "always"]
    assert mixed[1].config.learning.options.memory_size == 3
    base["learning"] = {"method": "none", "memory_size": 3}
    # A key of no method in the grid is still an error naming it.
    import pytest

    from marlang.config import ConfigError

    with pytest.raises(ConfigError, match="learning.memory_sise"):
        expand_grid({**base, "learning": {"method": "reflexion", "memory_sise": 2}},
                    [("learning.method", ["none", "reflexion"])], reference=False)


def test_a_setting_grid_changes_several_keys_together_and_puts_neural_rows_beside_llm_rows():
    import pytest

    from marlang.config import ConfigError

    base = {"env": {"id": "babyai-marl/goto-obj", "n_agents": 2, "max_steps": 5},
            "agents": {"chain_of_thought": False, "action_selection": "score"},
            "learning": {"method": "none"}}
    grid = [("setting", [
        {"name": "untrained", "learning": {"method": "none"}},
        {"name": "reflexion", "learning": {"method": "reflexion", "memory_size": 2}},
        {"name": "mappo + pseudo reward", "agents": {"kind": "neural"},
         "env.kwargs": {"pseudo_reward": True}, "learning": {"method": "mappo", "frames": 2000}},
    ])]
    settings = expand_grid(base, grid, reference=False)
    assert [s.name for s in settings] == ["untrained", "reflexion", "mappo + pseudo reward"]
    assert {s.group for s in settings} == {"babyai-marl/goto-obj"}  # one table
    untrained, reflexion, mappo = (s.config for s in settings)
    assert untrained.learning.method == "none" and untrained.agents.action_selection == "score"
    assert reflexion.learning.options.memory_size == 2
    assert mappo.agents.kind == "neural" and mappo.learning.method == "mappo"
    assert mappo.env.kwargs == {"pseudo_reward": True} and untrained.env.kwargs == {}
    assert (mappo.env.n_agents, mappo.env.max_steps) == (2, 5)  # a dotted key leaves the rest
    for bad in ({"learning": {"method": "none"}}, {"name": "only a name"}, "none"):
        with pytest.raises(ConfigError, match="'setting' value must be a mapping with a 'name'"):
            expand_grid(base, [("setting", [bad])], reference=False)


def test_weight_space_rows_train_on_models_of_their_own(tmp_path, monkeypatch):
    # Two PPO rows in one comparison: each attaches adapters named after the agents, so on a
    # shared model the second could not add its own (and untrained rows after them would act
    # on a wrapped model). The shared model serves only rows that neither train nor play back.
    import marlang.evaluation.compare as compare_module
    import marlang.run.build as build_module
    from marlang.testing import tiny_chat_model

    built = []

    def build(model_config):
        built.append(tiny_chat_model(max_tokens=8))
        return built[-1], None

    monkeypatch.setattr(compare_module, "build_chat_model", build)
    monkeypatch.setattr(build_module, "build_chat_model", build)
    ppo = {"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
           "eval_episodes": 1, "lora": {"r": 2, "alpha": 4}}
    base = {"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
            "agents": {"chain_of_thought": False, "action_selection": "score"},
            "model": {"cache": False}, "learning": {"method": "none"},
            "run": {"episodes": 1, "parallel": 2, "progress": False}}
    grid = [("setting", [
        {"name": "ppo", "learning": ppo},
        {"name": "ppo central", "learning": {**ppo, "value": "central"}},
        {"name": "untrained", "learning": {"method": "none"}},
    ])]
    result = compare_module.run_comparison(base, grid, tmp_path / "cmp", reference=False)
    assert set(result.summaries["babyai/goto-obj"]) == {"ppo", "ppo central", "untrained"}
    for name in ("ppo", "ppo-central"):
        assert (tmp_path / "cmp" / name / "adapters" / "0" / "agent_0").is_dir()
    assert (tmp_path / "cmp" / "untrained" / "summary.json").is_file()
    shared, *own = built
    assert len(own) == 2  # one model per PPO row, loaded by its run
    assert shared.engine.adapters is None  # the untrained row's model never got adapters


def test_seeds_are_the_grids_last_axis_over_run_seed_and_the_reference_runs_once():
    import pytest

    from marlang.config import ConfigError
    from marlang.evaluation.compare import parse_seeds

    base = _base(3)
    base["run"]["seeds"] = [4, 7]
    settings = expand_grid(base, [("protocol", ["none", "alternating-2"])])
    assert [(s.name, s.config.run.seed) for s in settings] == [
        ("none, reflexion, run.seed=4", 4), ("none, reflexion, run.seed=7", 7),
        ("alternating-2, reflexion, run.seed=4", 4), ("alternating-2, reflexion, run.seed=7", 7),
        ("scripted (reference)", 4), ("scripted (level's step limit)", 4)]
    assert all(s.config.run.seeds is None for s in settings)  # each run is one seed
    # The same settings as a grid over run.seed: one mechanism.
    plain = expand_grid(_base(3), [("protocol", ["none", "alternating-2"]), ("run.seed", [4, 7])])
    assert [(s.name, s.config) for s in plain] == [(s.name, s.config) for s in settings]
    with pytest.raises(ConfigError, match="seeds are given twice"):
        expand_grid(base, [("run.seed", [0, 1])])
    with pytest.raises(ConfigError, match="'run.seeds': seed 4 is listed twice"):
        expand_grid({**base, "run": {**base["run"], "seeds": [4, 4]}}, [])
    assert parse_seeds("0,1, 2") == [0, 1, 2]
    with pytest.raises(ConfigError, match="--seeds '0,x' must be integers separated by commas"):
        parse_seeds("0,x")


def _scripted_seeds(tmp_path):
    from marlang.evaluation.compare import run_comparison

    base = {"env": {"id": "babyai/goto-obj", "n_agents": 2}, "agents": {"kind": "scripted"},
            "run": {"episodes": 3, "progress": False, "seeds": [0, 1]}}
    return run_comparison(base, [("env.max_steps", [8, 12])], tmp_path / "cmp")


def test_a_comparison_pools_each_settings_seeds_into_one_row(tmp_path):
    import json

    from marlang.statistics.intervals import pooled_interval, pooled_rate, show

    result = _scripted_seeds(tmp_path)
    out = tmp_path / "cmp"
    # 2 settings x 2 seeds, and no reference: the settings are the scripted team already
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "scripted--env.max_steps-12--run.seed-0", "scripted--env.max_steps-12--run.seed-1",
        "scripted--env.max_steps-8--run.seed-0", "scripted--env.max_steps-8--run.seed-1"]
    rows = result.summaries["babyai/goto-obj"]
    assert set(rows) == {"scripted, 8 steps (2 seeds)", "scripted, 12 steps (2 seeds)"}
    for steps in (8, 12):
        row = rows[f"scripted, {steps} steps (2 seeds)"]
        own = {seed: json.loads((out / f"scripted--env.max_steps-{steps}--run.seed-{seed}" / "summary.json")
                                .read_text()) for seed in (0, 1)}
        assert set(row["seeds"]) == {"0", "1"} and row["seeds"]["1"] == own[1]
        for key in ("return", "steps", "success_rate"):
            # all the seeds' episodes together: Wilson on their counts, the bootstrap of their means
            pooled = pooled_rate if key == "success_rate" else pooled_interval
            assert row[key] == pooled([own[0]["per_episode"][key], own[1]["per_episode"][key]]), key
        assert row["episodes"] == 6 and row["levels"] == 6  # the two seeds share no level
        line = next(r for r in result.table.splitlines() if r.startswith(f"| scripted, {steps} steps (2 seeds) "))
        assert show(row["return"], 3) in line and "IQM" in line
    assert own[0]["return"]["mean"] != own[1]["return"]["mean"]  # the seeds differ: a real interval
    written = json.loads((out / "summary.json").read_text())["babyai/goto-obj"]
    assert written["scripted, 12 steps (2 seeds)"]["seeds"]["0"]["setting"] == "scripted, 12 steps, run.seed=0"
    assert (out / "learning_curve.png").is_file()

    # Rerunning the same comparison repeats nothing: every seed's run has finished.
    episodes = {p: p.read_text() for p in out.glob("*/episodes.jsonl")}
    again = _scripted_seeds(tmp_path)
    assert {p: p.read_text() for p in out.glob("*/episodes.jsonl")} == episodes
    assert again.summaries == result.summaries

    # The viewer lists the seeds' runs in the table's order.
    from marlang.view.collect import find_runs

    runs, table = find_runs(out)
    assert [p.name for p in runs][:2] == ["scripted--env.max_steps-12--run.seed-0",
                                          "scripted--env.max_steps-12--run.seed-1"]
    assert "(2 seeds)" in table


def test_llm_settings_pool_their_seeds_beside_a_reference_run_once(tmp_path, monkeypatch):
    import marlang.evaluation.compare as compare_module
    from tests.fakes import FakeRuleChatModel, babyai_rule

    monkeypatch.setattr(compare_module, "build_chat_model", lambda cfg: (FakeRuleChatModel(rule=babyai_rule), None))
    base = {"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2}, "learning": {"method": "none"},
            "model": {"cache": False}, "run": {"episodes": 2, "progress": False, "seeds": [0, 1]}}
    result = compare_module.run_comparison(base, [("protocol", ["none", "alternating-1"])], tmp_path / "cmp")
    rows = result.summaries["babyai/goto-obj"]
    assert list(rows) == ["none, static (2 seeds)", "alternating-1, static (2 seeds)", "scripted", "scripted, 2 steps"]
    assert "seeds" not in rows["scripted"] and rows["none, static (2 seeds)"]["llm_calls_per_episode"]["n"] == 4
    assert "| none, static (2 seeds) " in result.table


def test_seeds_of_one_episode_pool_and_a_deleted_seed_is_named_then_rerun(tmp_path, capsys):
    import json
    import shutil
    from pathlib import Path

    from marlang.cli import main

    config = Path(__file__).resolve().parents[2] / "configs/babyai_scripted.yaml"
    out = tmp_path / "cmp"
    command = ["compare", str(config), "--seeds", "0,1,2,3,4", "--set", "run.episodes=1", "--set",
               "env.id=babyai/goto-obj", "--grid", "env.max_steps=8", "--out", str(out)]
    # each seed's one value of a quantity made scipy's stratified bootstrap raise, in compare and report
    assert main(command) == 0
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    line = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| scripted, 8 steps (5 seeds)"))
    assert "5 (5 levels)" in line and "n too small" not in line.split("|")[4]  # steps: an interval over 5
    first = json.loads((out / "summary.json").read_text())
    assert "missing_runs" not in first

    seed1 = out / "scripted--env.max_steps-8--run.seed-1"
    shutil.rmtree(seed1)
    assert main(["report", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "| scripted, 8 steps (4 seeds) " in shown
    assert "- scripted, 8 steps (4 seeds): without seed 1 (scripted--env.max_steps-8--run.seed-1)" in shown
    written = json.loads((out / "summary.json").read_text())
    assert written["missing_runs"] == {seed1.name: {"setting": "scripted, 8 steps (4 seeds)", "seed": "1"}}
    assert written["babyai/goto-obj"]["scripted, 8 steps (4 seeds)"]["missing_seeds"] == ["1"]

    # the same command reruns the missing seed alone, and the table is whole again
    kept = {p: p.read_text() for p in out.glob("*/episodes.jsonl")}
    assert main(command) == 0
    assert {p: p.read_text() for p in out.glob("*/episodes.jsonl") if p in kept} == kept
    assert (seed1 / "episodes.jsonl").is_file()
    assert json.loads((out / "summary.json").read_text()) == first
    assert "Missing runs" not in (out / "table.md").read_text()


def test_a_seed_missing_from_a_comparison_is_named_beside_its_row(tmp_path):
    import json

    import yaml

    from marlang.tables.report import summarize_episodes

    out = tmp_path / "cmp"
    planned = [f"{setting}--run.seed-{seed}" for setting in ("none", "alternating-2") for seed in (0, 1, 2)]
    out.mkdir()
    (out / "comparison.yaml").write_text(yaml.safe_dump({"base": {}, "grid": [], "runs": planned}))
    for folder in planned:
        setting, seed = folder.split("--run.seed-")
        if folder in ("none--run.seed-1", "alternating-2--run.seed-0", "alternating-2--run.seed-2"):
            continue  # deleted: the rows would be over 2 seeds and 1 seed without a word
        rows = [{"episode": e, "seed": 10 * int(seed) + e, "success": e == 0, "steps": 3, "return": float(e == 0),
                 "decisions": 3, "invalid_actions": 0, "llm_calls": 0, "tokens_in": 0, "tokens_out": 0}
                for e in range(2)]
        (out / folder).mkdir()
        summary = {**summarize_episodes(rows), "setting": f"{setting}, run.seed={seed}", "env_id": "babyai/goto-obj",
                   "model": "fake", "cost": None}
        (out / folder / "summary.json").write_text(json.dumps(summary))
    result = write_comparison(out)
    assert set(result.summaries["babyai/goto-obj"]) == {"none (2 seeds)", "alternating-2, run.seed=1"}
    assert "- none (2 seeds): without seed 1 (none--run.seed-1)\n" in result.table
    assert "- alternating-2, run.seed=1: without seed 0 (alternating-2--run.seed-0)\n" in result.table
    assert "- alternating-2, run.seed=1: without seed 2 (alternating-2--run.seed-2)\n" in result.table
    written = json.loads((out / "summary.json").read_text())
    assert written["missing_runs"]["none--run.seed-1"] == {"setting": "none (2 seeds)", "seed": "1"}
    assert written["babyai/goto-obj"]["alternating-2, run.seed=1"]["missing_seeds"] == ["0", "2"]
