import subprocess
import sys
from pathlib import Path

from marlang.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_listing_commands(capsys):
    assert main(["envs"]) == 0
    assert "babyai/pickup" in capsys.readouterr().out
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    assert all(p in out for p in ["none", "bidirectional", "unidirectional", "alternating"])
    assert main(["models"]) == 0
    assert "local:smollm2" in capsys.readouterr().out


def test_invalid_config_exits_with_one_line_and_no_traceback(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("protocol: {name: shouting}\n")
    proc = subprocess.run([sys.executable, "-m", "marlang.cli", "run", str(cfg)], capture_output=True, text=True,
                          check=False, cwd=ROOT)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "protocol.name" in lines[0] and "valid choices: none, bidirectional" in lines[0]


def test_a_closed_pipe_stops_the_output_quietly():
    # `marlang envs | head -1`: the reader is gone before marlang writes.
    proc = subprocess.Popen([sys.executable, "-m", "marlang.cli", "envs"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_unknown_override_key(capsys):
    assert main(["run", str(ROOT / "configs/demo.yaml"), "--set", "run.episods=3"]) == 2
    err = capsys.readouterr().err
    assert "unknown config key 'run.episods'" in err and "episodes" in err


def test_scripted_comparison_table_and_report(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(["compare", str(ROOT / "configs/babyai_scripted.yaml"), "--no-reference",
                 "--set", "run.episodes=2", "--out", str(out)])
    assert code == 0
    table = (out / "table.md").read_text()
    # One setting on four levels: one table with a row per level.
    assert table.startswith("## scripted (model: scripted)")
    for env_id in ["babyai/goto-obj", "babyai/pickup", "babyai/unlock-pickup", "babyai/put-next"]:
        assert f"| {env_id} " in table
    assert (out / "summary.json").is_file()
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    assert "babyai/put-next" in capsys.readouterr().out


def test_run_and_resume_commands(tmp_path, capsys):
    out = tmp_path / "run"
    config = tmp_path / "one.yaml"  # a single run: the scripted config without its grid
    config.write_text("env: {id: babyai/goto-obj}\nagents: {kind: scripted}\nrun: {name: one}\n")
    args = ["run", str(config), "--set", "run.episodes=2", "--out", str(out)]
    assert main(args) == 0
    assert "run directory" in capsys.readouterr().out
    assert main(args) == 2  # refuses to overwrite
    assert "--resume" in capsys.readouterr().err
    assert main(["run", "--resume", str(out), "--set", "run.episodes=3"]) == 0
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 3


def test_run_of_a_grid_config_prints_one_row_per_overcooked_layout(tmp_path, capsys):
    out = tmp_path / "kitchens"
    args = ["run", str(ROOT / "configs/overcooked_scripted.yaml"), "--set", "run.episodes=2", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    rows = [line for line in printed.splitlines() if line.startswith("| overcooked/")]
    assert len(rows) == 5
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        mean_return = float(cells[5].split(" ")[0])
        assert mean_return > 0, row
    assert main(args) == 0  # a rerun resumes: every run is finished, same table
    assert capsys.readouterr().out.count("| overcooked/") == 5


def test_learners_are_listed(capsys):
    assert main(["learners"]) == 0
    out = capsys.readouterr().out
    assert all(m in out for m in ["none", "reflexion", "langmarl"])


def test_resume_and_compare_refuse_a_change_of_what_is_measured(tmp_path, capsys):
    out = tmp_path / "run"
    config = tmp_path / "one.yaml"
    config.write_text("env: {id: pistonball/n5}\nagents: {kind: scripted}\nrun: {name: one, episodes: 1}\n")
    assert main(["run", str(config), "--out", str(out)]) == 0
    capsys.readouterr()
    code = main(["run", "--resume", str(out), "--set", "env.id=pistonball/n10", "--set", "env.n_agents=10"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "'env.id'" in err[0] and "pistonball/n10" in err[0]
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 1  # nothing appended
    assert main(["run", "--resume", str(out), "--set", "run.episodes=2"]) == 0  # run length may change
    assert len((out / "episodes.jsonl").read_text().splitlines()) == 2

    cmp = tmp_path / "cmp"
    base = ["compare", str(config), "--grid", "env.max_steps=5", "--no-reference", "--out", str(cmp)]
    assert main(base) == 0
    capsys.readouterr()
    assert main([*base[:-2], "--set", "run.seed=7", "--out", str(cmp)]) == 2
    assert "'run.seed'" in capsys.readouterr().err


def test_review_command_shows_the_pending_update_and_continues_the_run(tmp_path, capsys):
    from marlang.testing import FakeOpenAIServer

    out = tmp_path / "run"
    with FakeOpenAIServer(reply='{"agent_0": "kept the door open", "agent_1": "wandered"}') as server:
        config = tmp_path / "lm.yaml"
        config.write_text(
            "env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\n"
            f"model: {{spec: 'openai:fake', base_url: '{server.base_url}', cache: false, max_retries: 0}}\n"
            "learning: {method: langmarl, rollouts: 1, iterations: 1, review: true}\n"
            "run: {progress: false}\n")
        assert main(["run", str(config), "--out", str(out)]) == 0
        assert f"marlang review {out}" in capsys.readouterr().out
        assert main(["review", str(out), "--show"]) == 0
        shown = capsys.readouterr().out
        assert "credit 0: kept the door open" in shown and "credit 0: wandered" in shown
        assert "old policy:" in shown and "new policy:" in shown
        policy = tmp_path / "p0.txt"
        policy.write_text("Open doors first.")
        assert main(["review", str(out), "--edit", f"agent_0={policy}", "--reject"]) == 0
        capsys.readouterr()
    import json

    rows = [json.loads(line) for line in (out / "policies.jsonl").read_text().splitlines()]
    assert {(r["agent"], r["accepted"]) for r in rows} == {("agent_0", True), ("agent_1", False)}
    assert json.loads((out / "learner_state.json").read_text())["policies"]["agent_0"] == "Open doors first."
    assert main(["review", str(out)]) == 2  # nothing waits any more


def test_report_of_a_finished_run_reads_its_summary_without_the_run_machinery(tmp_path, capsys):
    import os

    out = tmp_path / "run"
    config = tmp_path / "one.yaml"
    config.write_text("env: {id: babyai/goto-obj}\nagents: {kind: scripted}\nrun: {name: one, episodes: 2}\n")
    assert main(["run", str(config), "--out", str(out)]) == 0
    capsys.readouterr()
    script = ("import sys; from marlang.cli import main; code = main(['report', sys.argv[1]]); "
              "heavy = [m for m in ('marlang.run.experiment', 'torch', 'langgraph', 'marlang.envs') "
              "if m in sys.modules]; print('HEAVY', heavy); sys.exit(code)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "| scripted" in proc.stdout and "HEAVY []" in proc.stdout

    # episodes written after the summary (an interrupted resume): report rebuilds it
    summary = out / "summary.json"
    stale = summary.stat().st_mtime_ns - 10**9
    os.utime(summary, ns=(stale, stale))
    assert main(["report", str(out)]) == 0
    assert "| scripted" in capsys.readouterr().out
    assert summary.stat().st_mtime_ns > stale


def test_run_with_seeds_runs_each_seed_and_pools_them_and_report_rebuilds_the_table(tmp_path, capsys):
    config = tmp_path / "seeds.yaml"
    config.write_text("env: {id: babyai/goto-obj, max_steps: 8}\nagents: {kind: scripted}\n"
                      "run: {name: seeds, episodes: 2, progress: false, seeds: [0, 1]}\n")
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| scripted, 8 steps (2 seeds) " in printed
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "scripted--run.seed-0", "scripted--run.seed-1"]
    assert main(["report", str(out)]) == 0
    assert "| scripted, 8 steps (2 seeds) " in capsys.readouterr().out
    assert main(["run", "--resume", str(out)]) == 2  # a set of runs resumes by its own command
    assert "rerun the command" in capsys.readouterr().err
    # A config without run.seeds writes one run directory, as ever.
    single = tmp_path / "single"
    assert main(["run", str(config), "--unset", "run.seeds", "--out", str(single)]) == 0
    assert (single / "episodes.jsonl").is_file() and (single / "config.yaml").is_file()


def test_compare_seeds_option(tmp_path, capsys):
    config = tmp_path / "one.yaml"
    config.write_text("env: {id: babyai/goto-obj}\nagents: {kind: scripted}\nrun: {name: one, episodes: 1}\n")
    out = tmp_path / "cmp"
    assert main(["compare", str(config), "--seeds", "3,4", "--out", str(out)]) == 0
    assert "| scripted (2 seeds) " in capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["scripted--run.seed-3", "scripted--run.seed-4"]
    for bad, expected in [("3,x", "--seeds '3,x' must be integers"), ("3,3", "'run.seeds': seed 3 is listed twice")]:
        assert main(["compare", str(config), "--seeds", bad, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0]
    assert main(["compare", str(config), "--seeds", "0,1", "--set", "run.seed=5", "--out", str(out)]) == 2
    assert "run.seed is 5, not one of run.seeds [0, 1]" in capsys.readouterr().err
    assert main(["compare", str(config), "--seeds", "0,1", "--grid", "run.seed=0,1", "--out", str(out)]) == 2
    assert "seeds are given twice" in capsys.readouterr().err
