"""A run's cost from its own files, prices, pooling over seeds, the table's cost columns and
the score-against-cost front, on hand-written run files and fake models."""

import json

import pytest

from marlang.config import ConfigError, build_config
from marlang.tables.cost import (
    cost_columns,
    cost_of,
    pareto_front,
    per_episode,
    pool_costs,
    price_usd,
    prices_of,
    run_cost,
    score_and_cost,
)

CALLS = """time,model,role,agent,episode,step,input_tokens,output_tokens,latency_s,cached,error,iteration,retries
2026-01-01T00:00:00.000+00:00,local:a,actor,agent_0,0,0,100,10,2.0,False,,0,0
2026-01-01T00:00:01.000+00:00,local:a,actor,agent_1,1,0,100,10,2.0,False,,0,0
2026-01-01T00:00:05.000+00:00,local:a,actor,agent_0,1,1,50,5,0.001,True,,0,0
2026-01-01T00:00:06.000+00:00,local:a,critic,,,,300,30,1.0,False,,0,0
2026-01-01T00:00:08.000+00:00,local:a,actor,agent_0,0,1,0,0,0.5,False,TimeoutError: late,0,1
"""
"""Two overlapping actor calls (0-2 s and 1-3 s: 3 s busy), a cache hit, a critic call of no
episode (shared by the iteration's two episodes) and a failed call (no tokens)."""

METRICS = "episode,iteration,phase\n0,0,train\n1,0,train\n"


def _run(tmp_path, config, device="cuda:0", calls=CALLS):
    run = tmp_path / "run"
    run.mkdir()
    (run / "llm_calls.csv").write_text(calls)
    (run / "metrics.csv").write_text(METRICS)
    (run / "config.yaml").write_text(json.dumps(config))
    (run / "manifest.json").write_text(json.dumps({"model_id": "local:a", **({"device": device} if device else {})}))
    return run


def test_a_runs_cost_counts_every_call_by_model_and_role_with_cached_calls_apart(tmp_path):
    run = _run(tmp_path, {"model": {"spec": "local:a", "price": {"input": 1.0, "output": 10.0}}})
    cost = run_cost(run)
    assert (cost["llm_calls"], cost["cached_calls"], cost["errors"]) == (5, 1, 1)
    assert (cost["tokens_in"], cost["tokens_out"]) == (550, 55)  # the failed call brings none
    assert cost["call_seconds"] == pytest.approx(5.5)  # latencies summed, the cache hit apart
    assert cost["model_seconds"] == pytest.approx(4.5)  # the two overlapping calls: 3 s busy, not 4
    assert cost["cached"] == {"llm_calls": 1, "tokens_in": 50, "tokens_out": 5, "seconds": 0.001}
    assert cost["by_role"]["critic"]["tokens_in"] == 300 and cost["by_role"]["actor"]["llm_calls"] == 4
    assert cost["gpu_seconds"] == pytest.approx(4.5) and cost["device"] == "cuda:0"
    # 550 in at 1 USD and 55 out at 10 USD per million tokens
    assert cost["price_usd"] == pytest.approx(550e-6 + 550e-6) and cost["priced"] == "all"
    # per episode: its own calls, and half the critic's (no episode: shared within its iteration)
    per = cost["per_episode"]
    assert per["tokens"] == [110 + 0 + 165, 110 + 55 + 165]
    assert per["llm_calls"] == [2.5, 2.5] and sum(per["model_seconds"]) == pytest.approx(4.5)
    assert sum(per["usd"]) == pytest.approx(cost["price_usd"])
    assert per_episode(cost, "gpu_seconds")["mean"] == pytest.approx(2.25)


def test_no_gpu_no_price_and_tree_sampling(tmp_path):
    run = _run(tmp_path, {"model": {"spec": "local:a"}}, device="cpu")
    iterations = [{"iteration": 0, "completions_sampled": 4, "tokens_prompt": 400, "tokens_sampled": 40}]
    cost = run_cost(run, iterations=iterations)
    assert cost["gpu_seconds"] is None and per_episode(cost, "gpu_seconds") is None
    assert cost["price_usd"] is None and cost["priced"] == "none" and "usd" not in cost["per_episode"]
    assert cost["sampled"] == {"completions": 4, "tokens_in": 400, "tokens_out": 40}
    assert cost["tokens_in"] == 950 and cost["per_episode"]["llm_calls"] == [4.5, 4.5]


def test_price_arithmetic_and_prices_per_model():
    assert price_usd(1_000_000, 2_000_000, {"input": 0.15, "output": 0.60}) == pytest.approx(1.35)
    config = {"model": {"spec": "local:a", "price": {"input": 1, "output": 2}},
              "team": {"agent_0": {"model": {"spec": "openai:b"}}, "agent_1": {"model": {"temperature": 0.5}},
                       "agent_2": {"model": {"spec": "openai:c", "price": {"input": 3, "output": 4}}}}}
    # a slot on another model takes no price from the top-level one; one on the same model does
    assert prices_of(config) == {"local:a": {"input": 1, "output": 2}, "openai:b": None,
                                 "openai:c": {"input": 3, "output": 4}}


def test_a_row_partly_priced_says_so_instead_of_pricing_part(tmp_path):
    calls = CALLS + "2026-01-01T00:00:09.000+00:00,openai:b,actor,agent_1,0,1,1000,100,1.0,False,,0,0\n"
    config = {"model": {"spec": "local:a", "price": {"input": 1, "output": 2}},
              "team": {"agent_1": {"model": {"spec": "openai:b"}}}}
    cost = run_cost(_run(tmp_path, config, calls=calls))
    assert cost["price_usd"] is None and cost["priced"] == "part" and cost["unpriced"] == ["openai:b"]
    assert cost["by_model"]["local:a"]["price_usd"] == pytest.approx((550 * 1 + 55 * 2) / 1e6)
    headers, rows, note = cost_columns({"row": {"cost": cost}})
    assert headers == ["model s/ep", "GPU s/ep", "USD/ep"]
    assert rows[0][2] == "partly priced (no model.price for openai:b)"
    assert "every model call" in note and "learner roles" in note


@pytest.mark.parametrize(("price", "says"), [
    ({"input": -1, "output": 1}, "invalid value for 'model.price.input': "),
    ({"input": 1}, "invalid value for 'model.price.output': Field required"),
    ({"input": 1, "output": 1, "cached": 0.5}, "unknown config key 'model.price.cached'; valid keys here: input, o"),
    ({"input": "cheap", "output": 1}, "invalid value for 'model.price.input': "),
    (0.15, "invalid value for 'model.price': 0.15 is no price; give USD per million tokens as {input: X, output: Y}"),
    ({"input": True, "output": 1}, "invalid value for 'model.price.input': true is a boolean"),
])
def test_a_bad_model_price_is_one_line_naming_the_key(price, says):
    with pytest.raises(ConfigError) as err:
        build_config({"model": {"price": price}})
    assert str(err.value).startswith(says) and "\n" not in str(err.value)


def test_a_good_price_validates_and_a_slot_has_its_own():
    config = build_config({"model": {"price": {"input": 0.15, "output": 0.6}},
                           "team": {"agent_0": {"model": {"spec": "openai:b", "price": {"input": 1, "output": 2}}}}})
    assert config.model.price.output == 0.6
    with pytest.raises(ConfigError, match=r"^invalid value for 'team.agent_0.model.price.output'"):
        build_config({"team": {"agent_0": {"model": {"price": {"input": 1, "output": -2}}}}})


def test_the_pareto_front_keeps_ties_and_a_lone_setting():
    points = {"cheap": (0.2, 10.0), "good": (0.8, 100.0), "worse": (0.5, 120.0), "twin": (0.8, 100.0),
              "same cost, lower": (0.1, 10.0)}
    assert pareto_front(points) == ["cheap", "good", "twin"]
    assert pareto_front({"only": (0.0, 0.0)}) == ["only"]
    assert pareto_front({}) == []


def test_pooled_cost_sums_the_seeds_and_pools_the_episodes(tmp_path):
    cost = cost_of([{"model": "m", "role": "actor", "episode": 0, "iteration": 0, "input_tokens": 10,
                     "output_tokens": 2, "latency_s": 1.0, "cached": "False", "time": ""}],
                   [{"episode": 0, "iteration": 0}], prices={"m": {"input": 1, "output": 1}})
    pooled = pool_costs([cost, cost])
    assert pooled["tokens_in"] == 20 and pooled["price_usd"] == pytest.approx(24e-6)
    assert per_episode(pooled, "tokens")["mean"] == 12 and pooled["by_model"]["m"]["llm_calls"] == 2
    assert pool_costs([cost, None]) is None


def _row(score, low, high, tokens, usd=None):
    per = {"tokens": [tokens] * 6, "llm_calls": [1] * 6, "model_seconds": [1.0] * 6}
    if usd is not None:
        per["usd"] = [usd] * 6
    return {"return": {"mean": score - 1, "low": None, "high": None},
            "evaluation": {"return": {"mean": score, "low": low, "high": high}},
            "cost": {"episodes": 6, "llm_calls": 6, "price_usd": None if usd is None else usd * 6,
                     "per_episode": per}}


def test_score_against_cost_picks_its_axes_and_names_the_front():
    rows = {"a": _row(0.5, 0.4, 0.6, 100), "b": _row(0.7, 0.6, 0.8, 300), "c": _row(0.4, 0.3, 0.5, 200),
            "scripted": {"model": "scripted", "return": {"mean": 1.0}}}
    found = score_and_cost(rows)
    assert found["score"] == "held-out evaluation return after training"
    assert found["cost"] == "tokens per episode (every model call)" and found["frontier"] == ["a", "b"]
    assert set(found["points"]) == {"a", "b", "c"} and found["points"]["a"]["score_low"] == 0.4
    priced = score_and_cost({"a": _row(0.5, 0.4, 0.6, 100, usd=0.002), "b": _row(0.7, 0.6, 0.8, 300, usd=0.001)})
    assert priced["cost"] == "price, USD per episode" and priced["frontier"] == ["b"]
    # a neural learner without model calls costs frames and seconds: named, not drawn at zero
    neural = {"agents": "neural", "return": {"mean": 0.9}, "frames": 2000,
              "cost": {"episodes": 50, "llm_calls": 0, "frames": 2000, "train_seconds": 12.0, "per_episode": {}}}
    found = score_and_cost({**rows, "mappo": neural})
    assert "mappo" not in found["points"] and found["frontier"] == ["a", "b"]
    assert found["left_out"] == {"mappo": "no model calls; a neural learner: 2000 frames (12 s)"}
    assert cost_columns({"mappo": neural})[1] == [["2000 (12 s)"]]
    # one row without a held-out evaluation: every row is scored by its mean return
    del rows["c"]["evaluation"]
    assert score_and_cost(rows)["score"] == "mean return per episode (training rollouts)"


def test_a_compare_draws_score_against_cost_and_lists_its_front(tmp_path, monkeypatch):
    import marlang.evaluation.compare as compare_module
    from tests.fakes import FakeRuleChatModel, babyai_rule

    monkeypatch.setattr(compare_module, "build_chat_model", lambda cfg: (
        FakeRuleChatModel(rule=babyai_rule, model_id="local:smollm2"), None))
    base = {"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2}, "learning": {"method": "none"},
            "model": {"cache": False, "price": {"input": 0.15, "output": 0.60}},
            "run": {"episodes": 2, "progress": False, "seeds": [0, 1]}}
    out = tmp_path / "cmp"
    result = compare_module.run_comparison(base, [("protocol", ["none", "alternating-1"])], out)
    rows = result.summaries["babyai/goto-obj"]
    pooled = rows["none, static (2 seeds)"]["cost"]
    assert pooled["priced"] == "all" and pooled["price_usd"] > 0 and pooled["episodes"] == 4
    assert "USD/ep" in result.table
    assert "model s/ep" in result.table and "every model call" in result.table
    summary = json.loads((out / "summary.json").read_text())
    front = summary["score_vs_cost"]["babyai/goto-obj"]
    assert front["cost"] == "price, USD per episode" and front["frontier"]
    assert set(front["points"]) == {"none, static (2 seeds)", "alternating-1, static (2 seeds)"}
    assert (out / "score_vs_cost.png").is_file() and "score_vs_cost.png" in result.table


def test_a_neural_learners_cost_is_its_frames_and_seconds_over_its_training_episodes(tmp_path):
    run = tmp_path / "mappo"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"agents": "neural", "device": "cuda", "frames": 4000}))
    (run / "iterations.csv").write_text("iteration,frames,episodes,train_seconds\n0,2000,30,10.5\n1,4000,20,20.0\n")
    (run / "metrics.csv").write_text("episode,iteration,phase\n0,1,eval\n")  # its closing evaluation
    cost = run_cost(run)
    assert (cost["frames"], cost["train_seconds"], cost["episodes"]) == (4000, 20.0, 50)
    assert cost["gpu_seconds"] == 20.0 and cost["llm_calls"] == 0
    assert per_episode(cost, "gpu_seconds")["mean"] == pytest.approx(0.4)


REFLECTOR_CALLS = CALLS.splitlines()[0] + """
2026-01-01T00:00:00.000+00:00,local:a,actor,agent_0,0,0,100,10,1.0,False,,0,0
2026-01-01T00:00:02.000+00:00,local:a,actor,agent_0,1,0,100,10,1.0,False,,0,0
2026-01-01T00:00:04.000+00:00,local:a,reflector,agent_0,,,400,40,1.0,False,,0,0
"""
"""Two episodes of one acting call each, and a reflector call of no episode (shared by both)."""


def test_the_table_and_the_score_against_cost_plot_count_tokens_per_episode_alike():
    from marlang.tables.report import markdown_table, summarize_episodes

    rows = [{"episode": e, "iteration": 0, "success": True, "steps": 1, "return": 1.0, "llm_calls": 1,
             "tokens_in": 100, "tokens_out": 10, "decisions": 1, "invalid_actions": 0, "seed": e} for e in (0, 1)]
    summary = {**summarize_episodes(rows), "setting": "reflexion", "model": "local:a"}
    summary["cost"] = cost_of(list(csv_rows(REFLECTOR_CALLS)), rows)
    plotted = score_and_cost({"reflexion": summary})
    assert plotted["cost"] == "tokens per episode (every model call)"
    assert plotted["points"]["reflexion"]["cost"] == 110 + 440 / 2  # the reflector's call shared by both episodes
    table = markdown_table({"reflexion": summary})
    cells = [c.strip() for c in table.splitlines()[2].split("|")]
    headers = [c.strip() for c in table.splitlines()[0].split("|")]
    assert cells[headers.index("tokens/ep")].startswith("330")  # the same count, not the acting calls' 110
    assert cells[headers.index("LLM calls/ep")].startswith("1.5")
    assert "Cost: LLM calls/ep, tokens/ep, model s/ep count every model call that made the row (acting, speaking, " \
           "learner roles such as reflector" in table
    assert "the score-against-cost plot's tokens per episode too" in table


def csv_rows(text):
    import csv
    import io

    return csv.DictReader(io.StringIO(text))


def test_model_seconds_of_a_row_answered_from_the_cache_read_as_cached_not_zero():
    cached = CALLS.replace(",False,", ",True,")
    cost = cost_of(list(csv_rows(cached)), [{"episode": 0, "iteration": 0}, {"episode": 1, "iteration": 0}])
    assert cost["model_seconds"] == 0 and cost["cached_calls"] == cost["llm_calls"]
    headers, cells, note = cost_columns({"cached": {"cost": cost}})
    assert cells[0][headers.index("model s/ep")] == "cached, not measured" and "'cached, not measured'" in note
    measured = cost_of(list(csv_rows(CALLS)), [{"episode": 0, "iteration": 0}, {"episode": 1, "iteration": 0}])
    assert cost_columns({"measured": {"cost": measured}})[1][0][0] != "cached, not measured"
