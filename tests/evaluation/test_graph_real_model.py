"""`marlang compare --seeds` on a user's graph played by the embedded SmolLM2: a row per
setting over both seeds, every node call counted under its marked role with the tokens the
engine reports, and the cost columns filled from them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from marlang.models import load_chat_model
from tests.evaluation.test_graph_evaluation import PLAYED, base

pytestmark = pytest.mark.real_model


def test_compare_over_two_seeds_of_a_graph_on_smollm2(tmp_path, monkeypatch, smollm2_engine):
    import marlang.evaluation.compare as compare_module
    import marlang.run.graph_build as graph_build_module
    from marlang.cli import main

    def build(model_config: Any) -> Any:
        return load_chat_model("local:smollm2", engine=smollm2_engine, max_tokens=8, temperature=0.0), None

    for module in (compare_module, graph_build_module):
        monkeypatch.setattr(module, "build_chat_model", build)
    config = tmp_path / "graph.yaml"
    config.write_text(yaml.safe_dump({**base(episodes=2), "model": {"spec": "local:smollm2", "cache": False}}))
    out = tmp_path / "cmp"
    assert main(["compare", str(config), "--seeds", "0,1", "--out", str(out)]) == 0
    row = json.loads((out / "summary.json").read_text())[PLAYED]["graph, static (2 seeds)"]
    assert row["episodes"] == 4 and set(row["seeds"]) == {"0", "1"}
    roles = row["cost"]["by_role"]
    assert set(roles) == {"planner", "coder"} and all(r["llm_calls"] == 4 for r in roles.values())
    assert all(r["tokens_in"] > 0 and 0 < r["tokens_out"] <= 4 * 8 for r in roles.values())
    assert row["tokens_per_episode"]["mean"] > 0 and "tokens/ep" in (out / "table.md").read_text()
