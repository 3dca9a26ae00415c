"""``marlang export``: a critic run's timesteps become a Hugging Face dataset (parquet or jsonl)
that ``datasets`` loads, holding what the learner trained on; a resumed run's recollected
iterations are exported once."""

from __future__ import annotations

import json

import datasets
import pytest

from marlang.cli import main
from marlang.methods.neural.critics.dataset import COLUMNS, read_timesteps
from tests.methods.neural.critics.test_llm_mca import _run, credit_agent_0_for_a


@pytest.fixture
def critic_run(tmp_path, monkeypatch):
    return _run(tmp_path, monkeypatch, credit_agent_0_for_a)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_export_writes_a_loadable_dataset_of_every_trained_timestep(critic_run, tmp_path, fmt, capsys):
    _, _, probe, rows, _, run = critic_run
    out = tmp_path / f"dataset-{fmt}"
    assert main(["export", str(run), "--format", fmt, "--out", str(out)]) == 0
    assert "200 timesteps" in capsys.readouterr().out
    data = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert data.num_rows == 2 * 100 and set(data.column_names) == set(COLUMNS)
    why = {(r["batch"], r["position"]): r["why"] for r in rows}
    for item in data:
        assert item["credits"] == pytest.approx(probe.rewards[item["iteration"]][item["position"]], abs=1e-5)
        assert item["team_reward"] == pytest.approx(sum(item["rewards"]) / 2)
        assert item["agents"] == ["agent_0", "agent_1"] and len(item["observations"]) == 2
        assert item["actions"][0] == f"action {'ABC'[item['action_ids'][0]]}"
        assert item["explanation"] == why[(item["iteration"], item["position"])]
    card = (out / "README.md").read_text()
    assert "matrix/climbing" in card and "llm_mca" in card and "200 timesteps in 2 batches" in card


def test_export_of_a_run_without_a_critic_says_why(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{}")
    assert main(["export", str(tmp_path)]) == 2
    assert "learning.critic" in capsys.readouterr().err


def test_a_recollected_iteration_replaces_the_first_collection(tmp_path):
    credit = tmp_path / "credit"
    credit.mkdir()
    # iterations 0, 1, 2, then the run resumed from the checkpoint after 0: 1 and 2 again; then
    # interrupted while collecting 2, and resumed from the checkpoint after 1: 2 once more
    blocks = [(0, "a"), (1, "a"), (2, "a"), (1, "b"), (2, "b"), (2, "c")]
    lines = [{"session": tag, "iteration": it, "position": p, "tag": tag} for it, tag in blocks for p in range(2)]
    (credit / "timesteps.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{\"iteration\": 3, \"pos")
    kept = list(read_timesteps(tmp_path))
    assert [(r["iteration"], r["tag"]) for r in kept] == [(0, "a"), (0, "a"), (1, "b"), (1, "b"), (2, "c"), (2, "c")]
    assert all("session" not in r for r in kept)


def test_record_timesteps_false_writes_no_timesteps(tmp_path, monkeypatch):
    _, _, probe, rows, _, run = _run(tmp_path, monkeypatch, credit_agent_0_for_a, record_timesteps=False)
    assert len(probe.rewards) == 2 and rows  # the critic ran as before
    assert not (run / "credit" / "timesteps.jsonl").exists()
