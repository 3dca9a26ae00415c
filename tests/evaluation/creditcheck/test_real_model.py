"""credit-check with the embedded SmolLM2 on two climbing-game steps (the LLM critics answer or
are counted malformed, every call is counted, and the table is written) and on one episode of a
user's graph (forked at each prompt, LangMARL's critic graded)."""

from __future__ import annotations

import pytest

from marlang.config import build_config
from marlang.evaluation.creditcheck import CreditCheckOptions, check, credit_check
from marlang.models import SQLiteResponseCache, load_chat_model
from marlang.registry import trusting_imports
from marlang.run.experiment import Experiment
from tests.evaluation.creditcheck.test_command import write_run

pytestmark = pytest.mark.real_model


def test_smollm2_critics_on_two_steps(tmp_path, monkeypatch, smollm2_engine, response_cache_path):
    run = write_run(tmp_path / "run", joints=[("action A", "action B"), ("action C", "action C")], episodes=1)
    cache = SQLiteResponseCache(response_cache_path)
    monkeypatch.setattr(check, "_chat_model",
                        lambda config, spec: load_chat_model(spec, engine=smollm2_engine, cache=cache))
    result = credit_check(run, CreditCheckOptions(critics=("lca", "llm_mca", "difference"), model="local:smollm2"))
    rows = {r["critic"]: r for r in result["critics"]}
    for name in ("lca", "llm_mca"):
        row = rows[name]
        assert row["model"] == "local:smollm2" and row["cost"]["calls"] >= 1
        assert row["credited"] + (row["malformed"] > 0) >= 1  # credits, or replies counted as malformed
        assert row["asked"] == 4
    assert rows["lca"]["malformed"] == 0  # the local model scores Yes/No: always an answer
    assert result["counts"]["steps"] == 2


def test_smollm2_forks_a_users_graph_and_langmarls_critic_is_graded(tmp_path, monkeypatch, smollm2_engine):
    """The graph oracle on the embedded model: one recorded episode of a planner -> coder graph
    forked twice at each prompt (its replies replayed up to the fork, sampled from there on)."""
    app = "tests.run.graph_app"
    config = build_config({
        "graph": {"build": f"{app}:build_graph", "input": "question", "output": "answer"},
        "task": {"data": f"{app}:problems", "reward": f"{app}:length_score"},
        "model": {"spec": "local:smollm2", "max_tokens": 8},
        "learning": {"method": "none"}, "run": {"episodes": 1, "progress": False},
    })
    player = load_chat_model("local:smollm2", engine=smollm2_engine, max_tokens=8, temperature=0.0)
    run = Experiment(config, tmp_path / "run", chat_model=player).run().run_dir
    monkeypatch.setattr(check, "_chat_model",
                        lambda config, spec: load_chat_model(spec, engine=smollm2_engine, max_tokens=8))
    with trusting_imports(True):
        result = credit_check(run, CreditCheckOptions(samples=2))
    cost = result["oracle"]["cost"]
    assert cost["graph_runs"] == 4 and cost["model_calls"] == 2 * 2 + 2 and cost["replayed_calls"] == 2
    (episode,) = result["episodes"]
    assert set(episode["values"]) == {"planning", "coding"}
    assert all(0.0 <= v <= 1.0 for v in episode["values"].values())
    (row,) = result["critics"]
    assert row["critic"] == "langmarl" and row["asked"] == 2 and row["cost"]["calls"] >= 1
