import math

from scipy import stats

from marlang.rundir import save_figure
from marlang.statistics.intervals import mean_interval
from marlang.statistics.intervals import wilson_interval as wilson_ci
from marlang.tables.report import (
    iteration_figure,
    markdown_table,
    paired_change,
    summarize_episodes,
    table_rows,
)


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
    assert "| none " in table and "14.0 (n too small, n=3)" in table and "6.7%" in table
    out = tmp_path / "curve.png"
    rows = [{"iteration": i, "return_mean": m, "return_low": m - 0.1, "return_high": m + 0.1, "success_rate": m}
            for i, m in enumerate([0.2, 0.5])]
    save_figure(iteration_figure({"none": rows}, reference={"scripted": 0.9}), out)
    assert out.stat().st_size > 1000


def test_learners_greedy_evaluations_before_and_after_get_their_own_column():
    plain = summarize_episodes([_row(0, True, 10), _row(1, False, 20)])
    assert "eval return" not in markdown_table({"none": plain})
    trained = {**plain, "evaluation_initial": {"iteration": 0, "return": mean_interval([0.0, 0.5])},
               "evaluation": {"iteration": 8, "return": mean_interval([1.0, 0.5])}}
    table = markdown_table({"ppo": trained, "none": plain})
    ppo_row = next(line for line in table.splitlines() if line.startswith("| ppo"))
    none_row = next(line for line in table.splitlines() if line.startswith("| none"))
    assert "0.250 (n too small, n=2) -> 0.750 (n too small, n=2)" in ppo_row and none_row.rstrip(" |").endswith("-")
    assert "before the first update and after the last" in table
    assert "eval success" not in table  # the evaluations carry no success rate here


def test_learners_greedy_success_before_and_after_sits_beside_the_return():
    """A learner's comparable figure is its greedy held-out success, not the success of its
    sampled training rollouts (the main columns)."""
    plain = summarize_episodes([_row(0, True, 10), _row(1, False, 20)])
    before = [{**_row(i, i < 13, 10), "seed": 100 + i} for i in range(64)]
    after = [{**_row(i, 5 <= i < 35, 10), "seed": 100 + i} for i in range(64)]
    trained = {**plain, "evaluation_initial": {"iteration": 0, **summarize_episodes(before)},
               "evaluation": {"iteration": 8, **summarize_episodes(after)},
               "evaluation_change": paired_change(before, after)}
    table = markdown_table({"ppo": trained, "none": plain})
    header = next(line for line in table.splitlines() if line.startswith("| setting"))
    assert header.rstrip(" |").endswith("eval success (before -> after)")
    ppo_row = next(line for line in table.splitlines() if line.startswith("| ppo"))
    change = trained["evaluation_change"]
    assert (change["gained"], change["lost"], change["episodes"]) == (22, 5, 64)
    low, high = change["success"]["low"], change["success"]["high"]
    assert -1 <= low < 0.27 < high <= 1
    assert f"13/64 (0.20) -> 30/64 (0.47); paired +0.27 [{low:+.2f}, {high:+.2f}]" in ppo_row
    assert "the same held-out seeds" in table


def test_paired_change_matches_episodes_by_seed_not_by_order():
    before = [{"seed": s, "success": s % 2 == 0, "return": float(s % 2 == 0)} for s in range(10)]
    after = list(reversed(before))  # the very same outcomes, listed the other way round
    change = paired_change(before, after)
    assert change["success"]["mean"] == 0 and change["gained"] == change["lost"] == 0
    assert change["return"]["mean"] == 0 and change["return"]["interval"] == "no spread"  # every difference 0
    assert paired_change(before, [{"seed": 99, "success": True, "return": 1.0}]) is None


def test_wilson_interval_known_values():
    low, high = wilson_ci(5, 10)["low"], wilson_ci(5, 10)["high"]
    assert math.isclose(low, 0.2366, abs_tol=1e-4) and math.isclose(high, 0.7634, abs_tol=1e-4)
    assert math.isclose(wilson_ci(0, 10)["high"], 0.2775, abs_tol=1e-4)  # z^2 / (n + z^2)
    for k, n in [(0, 10), (3, 7), (29, 30), (12, 200)]:
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        w = wilson_ci(k, n)
        assert math.isclose(w["low"], ci.low, abs_tol=1e-9)
        assert math.isclose(w["high"], ci.high, abs_tol=1e-9)


def test_undefined_statistics_are_none_and_shown_as_a_dash():
    unsolved = summarize_episodes([_row(0, False, 20), _row(1, False, 20)])
    assert unsolved["steps_when_solved"]["mean"] is None and unsolved["steps_when_solved"]["n"] == 0
    assert wilson_ci(0, 0)["mean"] is None and wilson_ci(0, 0)["low"] is None
    assert mean_interval([1.0, float("nan")])["mean"] is None
    row = table_rows({"none": unsolved})[0]
    assert row[4] == "-" and row[3] == "20.0 (n too small, n=2)"
    empty = dict(unsolved, episodes=0, success_rate=wilson_ci(0, 0))
    assert table_rows({"none": empty})[0][2] == "-"
    # summaries written before undefined values were null hold NaN
    legacy = dict(unsolved, steps_when_solved={"mean": float("nan"), "ci95": float("nan"), "n": 0})
    assert table_rows({"none": legacy})[0][4] == "-"


def test_one_iteration_gets_a_readable_axis_and_overlapping_settings_stay_apart():
    import matplotlib.pyplot as plt

    from marlang.tables.report import iteration_figure

    row = {"iteration": 0, "return_mean": 0.5, "return_low": 0.4, "return_high": 0.6, "success_rate": 0.5}
    fig = iteration_figure({"none": [row], "bidirectional": [dict(row)]})
    ax_r, ax_s = fig.axes
    for ax in (ax_r, ax_s):
        low, high = ax.get_xlim()
        assert high - low >= 1.0 and low < 0 < high  # not -0.04..0.04 around a lone point
        assert list(ax.get_xticks()) == [0.0]
    lines = [ln for ln in ax_r.get_lines() if ln.get_label() in ("none", "bidirectional")]
    assert len({ln.get_marker() for ln in lines}) == 2  # one marker shape per setting
    assert lines[0].get_xdata()[0] != lines[1].get_xdata()[0]  # equal points drawn side by side
    plt.close(fig)


def test_neural_curves_run_against_frames_with_their_greedy_evaluations():
    import matplotlib.pyplot as plt

    from marlang.tables.report import iteration_figure

    rows = [{"iteration": i, "frames": 200 * (i + 1), "return_mean": -80.0 + i, "return_low": -85.0 + i,
             "return_high": -75.0 + i,
             "success_rate": 0.0, "eval_return": 120.0 if i == 1 else None} for i in range(3)]
    fig = iteration_figure({"mappo": rows}, final={"mappo": (600, 125.0)}, success=False)
    assert len(fig.axes) == 1  # no success panel for an env without success
    ax = fig.axes[0]
    assert ax.get_xlabel() == "frames"
    train = next(ln for ln in ax.get_lines() if ln.get_label() == "mappo")
    assert list(train.get_xdata()) == [200.0, 400.0, 600.0]
    greedy = next(ln for ln in ax.get_lines() if ln.get_label() == "mappo: greedy evaluation")
    assert list(zip(greedy.get_xdata(), greedy.get_ydata())) == [(400.0, 120.0), (600.0, 125.0)]
    assert greedy.get_markerfacecolor() == "white"  # hollow: evaluation, not training
    plt.close(fig)


def test_seeds_of_a_setting_are_pooled_into_one_curve():
    from marlang.tables.report import iteration_figure, pool_seeds

    def run(returns, success, eval_at_end=None):
        return [{"iteration": i, "frames": 100 * (i + 1), "return_mean": r, "return_low": r, "return_high": r,
                 "success_rate": s, "eval_return": eval_at_end if i == len(returns) - 1 else None}
                for i, (r, s) in enumerate(zip(returns, success))]

    curves = {"ippo, run.seed=0": run([0.0, 1.0], [0.0, 0.5]),
              "ippo, run.seed=1": run([2.0, 3.0, 4.0], [1.0, 1.0, 1.0], eval_at_end=4.5),
              "ippo+lca, run.seed=0": run([1.0], [1.0]),
              "mappo": run([5.0], [1.0])}
    final = {"ippo, run.seed=0": (200, 1.0), "ippo, run.seed=1": (300, 3.0)}
    pooled, pooled_final = pool_seeds(curves, final)
    assert list(pooled) == ["ippo (2 seeds)", "ippo+lca, run.seed=0", "mappo"]
    rows = pooled["ippo (2 seeds)"]
    assert [r["frames"] for r in rows] == [100.0, 200.0, 300.0]
    assert [r["return_mean"] for r in rows] == [1.0, 2.0, 4.0]  # the third x: the one seed that got there
    assert rows[0]["return_low"] is None and rows[0]["return_high"] is None  # two seeds: n too small
    assert [r["success_rate"] for r in rows] == [0.5, 0.75, 1.0]
    assert [r["eval_return"] for r in rows] == [None, None, 4.5]
    assert pooled_final == {"ippo (2 seeds)": (300, 2.0)}
    assert pooled["mappo"] is curves["mappo"] and pool_seeds(curves)[1] is None

    import matplotlib.pyplot as plt

    many = {f"setting {k}, run.seed={s}": run([float(k)], [1.0]) for k in range(9) for s in range(3)}
    fig = iteration_figure(pool_seeds(many)[0])
    assert fig.axes[0].get_legend() is None and len(fig.legends) == 1  # nine entries: under the panels
    assert fig.get_size_inches()[1] > 4
    plt.close(fig)
