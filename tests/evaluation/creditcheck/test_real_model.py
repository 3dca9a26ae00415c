"""credit-check with the embedded SmolLM2 on two climbing-game steps: the LLM critics answer or
are counted malformed, every call is counted, and the table is written."""

from __future__ import annotations

import pytest

from marlang.evaluation.creditcheck import CreditCheckOptions, check, credit_check
from marlang.models import SQLiteResponseCache, load_chat_model
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
