"""Comparison grids: settings expansion, the scripted reference rows, the written table."""

from marlang.compare import expand_grid, write_comparison
from marlang.experiment import Experiment


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
    legacy.write_text(legacy.read_text().replace('"ci95": null', '"ci95": NaN'))
    write_comparison(tmp_path / "cmp")
    table = strict(tmp_path / "cmp" / "summary.json")
    assert table["babyai/goto-obj"]["scripted, 1 steps"]["steps_when_solved"]["ci95"] is None
