"""A grid on a served model: every setting and seed of `marlang compare` runs through against a
server that keeps its connections alive (each setting runs on an event loop of its own); and the
token counts a served model reports cannot break a run's tables, its report or its resume."""

from __future__ import annotations

import json

from marlang.cli import main
from marlang.testing import FakeOpenAIServer


def test_a_grid_of_every_llm_learner_and_two_seeds_runs_through_on_a_keep_alive_server(tmp_path, capsys):
    out = tmp_path / "cmp"
    with FakeOpenAIServer(reply="Action: go forward", keep_alive=True) as server:
        config = tmp_path / "c.yaml"
        config.write_text(
            "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
            f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}\n"
            "learning: {rollouts: 1, iterations: 1}\n"
            "run: {name: grid, progress: false}\n")
        code = main(["compare", str(config), "--grid", "learning.method=none,reflexion,langmarl", "--seeds", "0,1",
                     "--no-reference", "--no-crossplay", "--out", str(out)])
        err = capsys.readouterr().err
    assert code == 0, err
    assert "Event loop is closed" not in err
    runs = sorted(p.parent.name for p in out.glob("*/summary.json"))
    assert len(runs) == 6, runs  # three learners, two seeds each
    assert all(json.loads((out / r / "summary.json").read_text()) for r in runs)
    # the connections were kept alive and reused within a setting: fewer connections than calls
    assert server.connections < len(server.requests)


def test_report_and_resume_of_a_run_whose_llm_calls_hold_impossible_token_counts(tmp_path, capsys):
    # a server (or a hand) put negative, absurd and fractional token counts in llm_calls.csv
    import csv

    out = tmp_path / "run"
    with FakeOpenAIServer(reply="Action: go forward", keep_alive=True) as server:
        config = tmp_path / "c.yaml"
        config.write_text(
            "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
            f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}\n"
            "learning: {method: reflexion, rollouts: 1, iterations: 1}\n"
            "run: {name: bad-usage, progress: false}\n")
        assert main(["run", str(config), "--out", str(out)]) == 0
        path = out / "llm_calls.csv"
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        for row, (tin, tout) in zip(rows, [("-5", "1e+30"), (str(10**30), "-1"), ("2.5", "nan")] * len(rows)):
            row["input_tokens"], row["output_tokens"] = tin, tout
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        capsys.readouterr()
        assert main(["report", str(out)]) == 0
        shown = capsys.readouterr().out
        assert "-5" not in shown and "e+30" not in shown and "1000000000000000000000000000000" not in shown
        assert main(["run", "--resume", str(out), "--set", "learning.iterations=2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    cost = summary["cost"]
    assert 0 <= cost["tokens_in"] < 10**8 and 0 <= cost["tokens_out"] < 10**8


def test_an_iterations_tokens_read_back_from_llm_calls_drop_impossible_counts():
    # a resumed iteration reads its earlier calls from llm_calls.csv, as strings
    from marlang.tables.report import iteration_row

    calls = [{"iteration": "0", "role": "critic", "input_tokens": "1e+30", "output_tokens": "-5", "error": ""},
             {"iteration": "0", "role": "critic", "input_tokens": "7", "output_tokens": "2.5", "error": ""},
             {"iteration": "0", "role": "critic", "input_tokens": "3", "output_tokens": "4", "error": ""}]
    row = iteration_row(0, [], calls)
    assert row["critic_calls"] == 3 and row["critic_tokens"] == 7 + 3 + 4


def test_an_llm_critic_on_a_keep_alive_server_credits_batch_after_batch_across_seeds(tmp_path, capsys):
    # the LLM-MCA critic asks once per batch, each batch on an event loop of its own
    out = tmp_path / "cmp"
    reply = json.dumps({"t1": {"agent_0": 0.5, "agent_1": 0.5}})
    with FakeOpenAIServer(reply=reply, keep_alive=True) as server:
        config = tmp_path / "c.yaml"
        config.write_text(
            "env: {id: matrix/climbing}\nagents: {kind: neural}\n"
            f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}\n"
            "learning: {method: mappo, frames: 200, frames_per_batch: 100, n_envs: 2, epochs: 1, minibatch_size: 100,\n"
            "           hidden: [8], evaluation_episodes: 1, critic: llm_mca, critic_steps: 10}\n"
            "run: {name: critic-grid, progress: false}\n")
        code = main(["compare", str(config), "--seeds", "0,1", "--no-reference", "--no-crossplay",
                     "--out", str(out)])
        err = capsys.readouterr().err
    assert code == 0, err
    assert "Event loop is closed" not in err
    assert len(list(out.glob("*/summary.json"))) == 2
    assert len(server.requests) >= 4  # two batches credited in each seed's run
