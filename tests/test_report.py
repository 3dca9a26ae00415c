import math

from marlang.report import (
    markdown_table,
    mean_ci,
    plot_learning_curves,
    summarize_episodes,
    wilson_ci,
)


def test_mean_ci_uses_the_t_distribution():
    s = mean_ci([1.0, 2.0, 3.0, 4.0])
    assert s["mean"] == 2.5 and s["n"] == 4
    # sd = 1.291, se = 0.6455, t(3) = 3.182
    assert math.isclose(s["ci95"], 3.182 * 0.6455, rel_tol=1e-3)
    assert mean_ci([5.0])["ci95"] == 0.0
    assert math.isnan(mean_ci([])["mean"])


def test_wilson_interval_bounds():
    w = wilson_ci(0, 10)
    assert w["mean"] == 0 and w["low"] == 0 and 0.2 < w["high"] < 0.35
    w = wilson_ci(10, 10)
    assert w["high"] == 1 and 0.65 < w["low"] < 0.8


def _row(ep, success, steps, invalid=0, decisions=10):
    return {"episode": ep, "success": success, "steps": steps, "return": 0.5 if success else 0.0,
            "decisions": decisions, "invalid_actions": invalid, "invalid_rate": invalid / decisions,
            "llm_calls": 20, "tokens_in": 1000, "tokens_out": 100}


def test_summary_and_table(tmp_path):
    rows = [_row(0, True, 10, invalid=2), _row(1, False, 20), _row(2, True, 12)]
    s = summarize_episodes(rows)
    assert s["episodes"] == 3
    assert math.isclose(s["success_rate"]["mean"], 2 / 3)
    assert math.isclose(s["steps"]["mean"], 14.0)
    assert math.isclose(s["steps_when_solved"]["mean"], 11.0)
    assert math.isclose(s["invalid_action_rate"]["mean"], 2 / 30)
    assert s["tokens_per_episode"]["mean"] == 1100
    table = markdown_table({"none": s}, title="babyai/pickup")
    assert "| none " in table and "14.0 ±" in table and "6.7%" in table
    out = tmp_path / "curve.png"
    plot_learning_curves({"none": [10, 20, 12]}, out, reference={"scripted": 8})
    assert out.stat().st_size > 1000
