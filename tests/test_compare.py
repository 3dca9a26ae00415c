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
        ("babyai/goto-obj", "none"), ("babyai/pickup", "none"),
        ("babyai/goto-obj", "alternating-2"), ("babyai/pickup", "alternating-2"),
        ("babyai/goto-obj", "scripted (reference)"), ("babyai/pickup", "scripted (reference)"),
    ]
    assert settings[3].config.protocol.rounds == 2


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
