"""Intervals that never leave their quantity's range, and say so when n is too small."""

import random

import pytest

from marlang.run.record import with_sampling_cost
from marlang.statistics.intervals import (
    BOOTSTRAP,
    MIN_N,
    NO_SPREAD,
    TOO_FEW,
    mean_interval,
    pooled_interval,
    pooled_rate,
    show,
    wilson_interval,
)
from marlang.tables.report import markdown_table, pool_summaries, summarize_episodes


def _row(ep, success, steps, ret, calls=24, seed=None):
    return {"episode": ep, "iteration": 0, "seed": ep if seed is None else seed, "success": success, "steps": steps,
            "return": ret, "decisions": steps, "invalid_actions": 0, "invalid_rate": 0.0, "llm_calls": calls,
            "tokens_in": 900, "tokens_out": 100}


def test_two_episodes_say_n_too_small_instead_of_an_interval_outside_the_range():
    # the t-interval of these two episodes was "steps 3.0 ± 25.4", "return 0.410 ± 5.210"
    s = summarize_episodes([_row(0, True, 1, 0.82, calls=8), _row(1, False, 5, 0.0, calls=40)])
    for key in ("steps", "return", "llm_calls_per_episode", "tokens_per_episode"):
        assert s[key]["low"] is None and s[key]["high"] is None and s[key]["interval"] == TOO_FEW, key
    assert 0 <= s["success_rate"]["low"] < s["success_rate"]["high"] <= 1  # Wilson: sound at n = 2
    table = markdown_table({"none": s})
    assert "3.0 (n too small, n=2)" in table and "0.410 (n too small, n=2)" in table and "±" not in table
    assert "2 (2 levels)" in table and "Wilson" in table and "bootstrap percentile" in table


def test_a_bootstrap_interval_stays_inside_the_values_range_however_skewed():
    rng = random.Random(0)
    for n in (MIN_N, 8, 64):
        returns = [1.0 if rng.random() < 0.1 else 0.0 for _ in range(n - 1)] + [1.0]
        stat = mean_interval(returns)
        assert 0.0 <= stat["low"] <= stat["mean"] <= stat["high"] <= 1.0, stat
    steps = [1, 1, 1, 1, 200]
    stat = mean_interval(steps)
    assert 1 <= stat["low"] <= stat["high"] <= 200 and stat["interval"] == "bootstrap percentile"
    assert mean_interval(steps) == stat  # seeded: the same report every time


def test_values_all_equal_get_no_interval_rather_than_one_of_no_width():
    # six equal returns do not pin the mean down to [0.5, 0.5]
    assert mean_interval([0.5] * 6) == {"mean": 0.5, "low": None, "high": None, "n": 6, "interval": NO_SPREAD}
    assert show(mean_interval([0.5] * 6), 2) == "0.50 (no spread, n=6)"
    pooled = pooled_interval([[0.0] * 5, [0.0] * 5])
    assert (pooled["mean"], pooled["low"], pooled["iqm_low"], pooled["interval"]) == (0.0, None, None, NO_SPREAD)


def test_a_pooled_row_gives_mean_and_iqm_with_the_plain_interval_of_its_episodes():
    seeds = [[0.0, 0.2, 0.9, 1.0], [0.1, 0.1, 0.3], [1.0, 1.0, 0.8, 0.0, 0.6]]
    stat = pooled_interval(seeds)
    values = sorted(v for s in seeds for v in s)
    assert stat["n"] == 12 and abs(stat["mean"] - sum(values) / 12) < 1e-12
    assert abs(stat["iqm"] - sum(values[3:9]) / 6) < 1e-12  # the middle half
    assert 0 <= stat["low"] <= stat["mean"] <= stat["high"] <= 1
    assert 0 <= stat["iqm_low"] <= stat["iqm"] <= stat["iqm_high"] <= 1
    assert stat["seeds"] == [sum(s) / len(s) for s in seeds]
    # no narrower than one run of the same episodes: resampling within seeds dropped their spread
    plain = mean_interval([v for s in seeds for v in s])
    assert (stat["low"], stat["high"], stat["interval"]) == (plain["low"], plain["high"], BOOTSTRAP)
    few = pooled_interval([[0.0], [1.0]])
    assert few["interval"] == TOO_FEW and few["low"] is None and few["iqm_low"] is None


@pytest.mark.parametrize("seeds", [
    [[0.1], [0.5], [0.2], [0.3], [0.9]],  # 5 seeds of 1 episode
    [[0.9, 0.8, 0.85], [0.7], [0.95, 0.6]],  # a quantity seen once in one seed (steps when solved)
    [[0.4], [0.4, 0.9], [0.4, 0.1, 0.2]],
])
def test_a_seed_with_one_value_still_gets_an_interval_not_a_crash(seeds):
    # scipy's bootstrap needs two values in each sample it resamples: a stratum of one raised
    stat = pooled_interval(seeds)
    values = [v for s in seeds for v in s]
    assert stat["interval"] == BOOTSTRAP and min(values) <= stat["low"] <= stat["high"] <= max(values)
    assert min(values) <= stat["iqm_low"] <= stat["iqm_high"] <= max(values)


@pytest.mark.parametrize(("seeds", "solved"), [
    ([[1.0] * 3, [1.0] * 3], 6),  # 6/6 over two seeds printed [1.00, 1.00]
    ([[0.0] * 5, [0.0] * 5], 0),  # 0/10 printed [0.00, 0.00]
    ([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]], 1),  # 1 of 6 printed [0.00, 0.33], narrower than Wilson
])
def test_a_pooled_success_rate_is_as_wide_as_wilson_on_the_pooled_counts(seeds, solved):
    n = sum(len(s) for s in seeds)
    stat, wilson = pooled_rate(seeds), wilson_interval(solved, n)
    assert (stat["mean"], stat["low"], stat["high"], stat["n"]) == (wilson["mean"], wilson["low"], wilson["high"], n)
    assert stat["interval"] == "Wilson" and stat["low"] < stat["high"]
    assert stat["seeds"] == [sum(s) / len(s) for s in seeds]


def test_a_table_over_seeds_pools_every_seeds_episodes_and_says_which_interval():
    def run(seed, returns):
        rows = [_row(e, r > 0.5, 3, r, seed=1000 * seed + e) for e, r in enumerate(returns)]
        return summarize_episodes(rows)

    summaries = {f"none, run.seed={s}": run(s, [0.1 * (s + e) for e in range(4)]) for s in range(3)}
    (row,) = pool_summaries(summaries).values()
    assert row["episodes"] == 12 and row["levels"] == 12
    assert row["return"]["interval"] == BOOTSTRAP
    assert 0 <= row["return"]["low"] <= row["return"]["high"] <= 1
    assert row["success_rate"] == {**wilson_interval(0, 12), "seeds": [0.0, 0.0, 0.0]}  # 0/12 is not [0, 0]
    table = markdown_table(pool_summaries(summaries))
    assert "IQM" in table and "12 (12 levels)" in table
    # the footnote names each column's interval, and one only
    assert ("success rate: Wilson on the counts (a pooled row: of all its seeds); steps, steps when solved, "
            "return (and its IQM), LLM calls/ep, tokens/ep: bootstrap percentile over the episodes") in table
    assert "stratified" not in table and "no spread" in table


def test_a_pooled_table_shows_the_seeds_honest_success_intervals():
    def run(seed, solved):
        return summarize_episodes([_row(e, e < solved, 3, float(e < solved), seed=10 * seed + e) for e in range(3)])

    table = markdown_table(pool_summaries({f"none, run.seed={s}": run(s, 3) for s in range(2)}))
    line = next(r for r in table.splitlines() if r.startswith("| none (2 seeds)"))
    assert "1.00 [0.61, 1.00]" in line and "[1.00, 1.00]" not in line
    assert "1.000 (no spread, n=6); IQM 1.000 (no spread, n=6)" in line  # every return 1.0: no interval


def test_show_names_the_interval_or_its_absence():
    assert show(wilson_interval(1, 4), 2) == "0.25 [0.05, 0.70]"
    assert show(mean_interval([3.0]), 1) == "3.0 (n too small, n=1)"
    assert show(mean_interval([]), 1) == "-"


def test_trees_sampling_counts_in_the_cost_columns():
    # MAGRPO's episodes record no calls of their own: the trees' sampling is shared among them
    rows = [{**_row(e, False, 1, 0.0, calls=0), "tokens_in": 0, "tokens_out": 0} for e in range(2)]
    iterations = [{"iteration": "0", "completions_sampled": "16", "tokens_prompt": "4000", "tokens_sampled": "800"}]
    costed = with_sampling_cost(rows, iterations)
    assert [r["llm_calls"] for r in costed] == [8, 8]
    assert [r["tokens_in"] + r["tokens_out"] for r in costed] == [2400, 2400]
    summary = summarize_episodes(costed)
    assert summary["llm_calls_per_episode"]["mean"] == 8 and summary["tokens_per_episode"]["mean"] == 2400
    assert with_sampling_cost(rows, [{"iteration": "0"}]) == rows  # a learner that samples nothing itself


def test_the_curve_of_two_episodes_keeps_its_axis_inside_the_returns_range():
    # two episodes' t-interval drew a return in [0, 1] on an axis from -5 to 6
    from types import SimpleNamespace

    import matplotlib.pyplot as plt

    from marlang.tables.report import iteration_figure, iteration_row

    episodes = [SimpleNamespace(team_return=r, success=r > 0, metrics={}) for r in (0.82, 0.0)]
    rows = [iteration_row(i, episodes, []) for i in range(2)]
    assert rows[0]["return_low"] is None and rows[0]["return_high"] is None
    fig = iteration_figure({"none": rows})
    low, high = fig.axes[0].get_ylim()
    assert -0.5 < low and high < 1.5, (low, high)
    plt.close(fig)


def test_a_task_envs_levels_are_its_problems_not_its_seeds():
    from marlang import make_env
    from marlang.run.record import episode_metrics
    from marlang.types import Step, Trajectory

    env = make_env("code/humaneval", n_agents=1, structure="sequential", task_ids=["HumanEval/0", "HumanEval/2"],
                   max_steps=1)
    rows = []
    for seed in range(6):  # six seeds, two problems
        observations, _ = env.reset(seed=seed)
        traj = Trajectory(episode=seed, seed=seed, env_id="code/humaneval", protocol="none", agents=["agent_0"],
                          steps=[Step(t=0, observations=observations, messages=[], decisions={}, rewards={})])
        rows.append({**_row(seed, False, 1, 0.0), "level": episode_metrics(traj)["level"]})
    env.close()
    assert summarize_episodes(rows)["levels"] == 2
    assert summarize_episodes([_row(e, False, 1, 0.0) for e in range(6)])["levels"] == 6  # no problem: seeds


def test_a_mean_without_an_interval_says_why_whatever_its_n():
    from marlang.statistics.intervals import show
    from marlang.tables.cost import per_episode

    # a neural learner's cost is kept as totals: thousands of episodes, yet no interval
    totals = per_episode({"episodes": 5066, "llm_calls": 0, "tokens_in": 0, "tokens_out": 0}, "llm_calls")
    assert show(totals) == "0.0 (totals only, n=5066)"
    assert show(mean_interval([2.0] * 8)) == "2.0 (no spread, n=8)"
    assert show(mean_interval([1.0, 2.0])) == "1.5 (n too small, n=2)"
