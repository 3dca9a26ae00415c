"""The side-by-side benchmark with the peers (benchmarks/peers.py) runs end to end at its dry-run
size: marlang's MAGRPO and GRPO and the peers' trainers (CoMLRL, TRL, in .venv-peers) each train a
step and their rows are printed and written; the peers' reward is marlang's sandboxed verdict."""

from __future__ import annotations

import json
import math


def test_dry_run_trains_both_sides_of_both_comparisons_and_writes_the_rows(benchmark_script, tmp_path, capsys):
    peers = benchmark_script("peers")
    rows = peers.main(["--dry-run", "--out", str(tmp_path / "peers.json")])
    printed = capsys.readouterr().out
    assert [r["case"] for r in rows] == ["MAGRPO, 2 agents", "GRPO, 1 agent"], printed
    assert [r["peer"] for r in rows] == ["CoMLRL 1.4.3 MAGRPOTrainer", "TRL 1.16.0 GRPOTrainer"]
    for r in rows:
        for side in ("marlang", "peer_figures"):  # each side trained, sampled tokens and was judged
            figures = r[side]
            assert figures["step_s"] > 0 and figures["tokens_per_step"] > 0 and figures["peak_rss_mb"] > 0, r
            assert figures["reward"]["n"] > 0 and 0.0 <= figures["reward"]["mean"] <= 1.0, r
        assert math.isfinite(r["speedup"]) and math.isfinite(r["memory_ratio"]), r
        assert set(r["verdicts"].values()) <= {"PASS", "MISS"}, r
        assert f"== {r['case']}: marlang vs {r['peer']} ==" in printed
    # a MAGRPO step of 1 problem x G 2 judges 2 joint answers on each side; GRPO's likewise
    assert [len(r["marlang"]["reward"]["seeds"]) for r in rows] == [1, 1]
    assert [r["peer_figures"]["reward"]["n"] for r in rows] == [2, 2]
    assert json.loads((tmp_path / "peers.json").read_text())[1]["case"] == "GRPO, 1 agent"


def test_the_peers_reward_is_marlangs_sandboxed_verdict_of_the_answer(benchmark_script):
    service_module = benchmark_script("reward_service", "peers")
    config = {"env": {"id": "code/humaneval", "n_agents": 1, "max_steps": 1,
                      "kwargs": {"structure": "sequential", "task_ids": ["HumanEval/28"]}},
              "model": {"spec": "local:smollm2", "cache": False, "max_tokens": 8},
              "agents": {"chain_of_thought": False, "history": 0},
              "learning": {"method": "grpo", "iterations": 1, "rollouts": 1, "max_new_tokens": 8, "eval_episodes": 0},
              "run": {"seed": 0}}
    service = service_module.RewardService(config)
    try:
        (messages,) = service.answer({"op": "prompts", "seeds": [3]})["prompts"][0]
        assert [m["role"] for m in messages] == ["system", "user"] and "concatenate" in messages[1]["content"]
        right = "```python\ndef concatenate(strings):\n    return ''.join(strings)\n```"
        wrong = "```python\ndef concatenate(strings):\n    return 'x'\n```"
        assert service.answer({"op": "reward", "seed": 3, "texts": [right]}) == {"reward": 1.0}
        assert service.answer({"op": "reward", "seed": 3, "texts": [wrong]})["reward"] < 1.0
    finally:
        service.env.close()
