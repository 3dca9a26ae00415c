"""``marlang credit-check`` on a recorded run: every critic graded on the same steps with a
scripted model, malformed replies counted, the file written and shown by ``marlang view``, and
bad input ending in one line."""

from __future__ import annotations

import json
import re

import pytest

from marlang.cli import main
from marlang.envs import make
from marlang.evaluation.creditcheck import check
from marlang.rundir import RunDirectory
from marlang.testing import ScriptedChatModel
from tests.evaluation.creditcheck.helpers import record

A, B, C = "action A", "action B", "action C"
JOINTS = [(A, B), (C, C), (B, B), (A, A)]


def write_run(path, env_id="matrix/climbing", joints=JOINTS, episodes=2):
    rd = RunDirectory(path)
    rd.create(f"env:\n  id: {env_id}\n  max_steps: {len(joints)}\nrun:\n  name: t\n", {})
    for e in range(episodes):
        env = make(env_id, max_steps=len(joints))
        rd.append_episode(record(env, e, [{"agent_0": a, "agent_1": b} for a, b in joints], episode=e), {})
    return path


def fake_critic(messages, langmarl_reply=None):
    text = messages[-1].text
    labels = re.findall(r"^(t\d+):", text, flags=re.MULTILINE)
    if labels:  # LLM-MCA: agent_0 always gets the larger share
        return json.dumps({lab: {"agent_0": 1.0, "agent_1": 0.0, "why": "-"} for lab in labels})
    if "contributed" in messages[0].text + text:  # LangMARL's critic
        return langmarl_reply or json.dumps({"agent_0": {"score": 2, "feedback": "good"},
                                             "agent_1": {"score": -1, "feedback": "poor"}})
    return "Yes"  # LCA's ranker


@pytest.fixture
def scripted_model(monkeypatch):
    made = {}

    def chat_model(config, spec, reply=None):
        made["model"] = ScriptedChatModel(reply_fn=lambda m: fake_critic(m, made.get("langmarl")), model_id=spec)
        return made["model"]

    monkeypatch.setattr(check, "_chat_model", chat_model)
    return made


def test_every_critic_is_graded_on_the_same_steps(tmp_path, scripted_model, capsys):
    run = write_run(tmp_path / "run")
    assert main(["credit-check", str(run)]) == 0
    out = capsys.readouterr().out
    result = json.loads((run / "credit_check.json").read_text())
    counts = result["counts"]
    assert {k: counts[k] for k in ("episodes", "steps", "levels")} == {"episodes": 2, "steps": 8, "levels": 2}
    assert set(counts) == {"episodes", "steps", "levels", "oracle_ties"} and 0 <= counts["oracle_ties"] < 8
    rows = {r["critic"]: r for r in result["critics"]}
    assert list(rows) == ["langmarl", "llm_mca", "llm_taca", "lca", "difference"]
    assert rows["langmarl"]["unit"] == "episode" and rows["langmarl"]["credited"] == 2
    assert all(rows[c]["credited"] == 8 for c in ("llm_mca", "llm_taca", "lca", "difference"))
    assert all(r["malformed"] == 0 for r in rows.values())
    assert rows["lca"]["oracle_ties"] + rows["lca"]["graded"] == 8
    assert rows["lca"]["spearman"]["n"] == 0  # "Yes" for both agents: no order, no correlation
    assert rows["lca"]["top_agent"]["mean"] == pytest.approx(rows["lca"]["top_agent_chance"])
    assert rows["difference"]["cost"]["calls"] == 0 and rows["difference"]["cost"]["env_steps"] > 0
    assert rows["llm_mca"]["cost"]["calls"] >= 1
    assert result["oracle"]["cost"]["env_steps"] > 0 and "D_i(t)" in result["oracle"]["formulas"]["difference"]
    step = result["steps"][0]
    assert set(step["critics"]) == {"llm_mca", "llm_taca", "lca", "difference"}
    assert abs(step["efficiency_gap"]) < 1e-9
    assert "| llm_mca |" in out and "wrote" in out


def test_malformed_replies_are_counted_never_a_crash(tmp_path, scripted_model, capsys):
    run = write_run(tmp_path / "run")
    scripted_model["langmarl"] = "I cannot say."
    out_file = tmp_path / "elsewhere" / "cc.json"
    assert main(["credit-check", str(run), "--critics", "langmarl,difference", "--out", str(out_file),
                 "--steps", "2", "--no-shapley"]) == 0
    result = json.loads(out_file.read_text())
    rows = {r["critic"]: r for r in result["critics"]}
    assert rows["langmarl"]["malformed"] == 4 and rows["langmarl"]["asked"] == 4
    assert rows["langmarl"]["credited"] == 0 and rows["langmarl"]["top_agent"]["mean"] is None
    assert result["counts"]["steps"] == 4 and result["oracle"]["shapley"] is False
    assert not (run / "credit_check.json").exists()


def test_the_view_shows_the_credit_check(tmp_path, scripted_model):
    from marlang.view.collect import collect

    run = write_run(tmp_path / "run", episodes=1)
    assert main(["credit-check", str(run), "--critics", "difference"]) == 0
    data = collect([run])
    shown = data["runs"][0]["credit_check"]
    assert shown["critics"][0]["critic"] == "difference" and "steps" not in shown


@pytest.mark.parametrize(("args", "says"), [
    (["--critics", "llm-mca,oracle"], ("unknown critic oracle; valid choices: langmarl, llm_mca, llm_taca, "
                                       "lca, difference")),
    (["--critics", " , "], "unknown critic (none given); valid choices: langmarl"),
    (["--samples", "0"], "--samples must be at least 1"),
])
def test_bad_options_are_one_line(tmp_path, capsys, args, says):
    run = write_run(tmp_path / "run", episodes=1)
    assert main(["credit-check", str(run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and "\n" not in err


def test_an_env_that_cannot_restore_and_a_run_without_episodes(tmp_path, capsys):
    rd = RunDirectory(tmp_path / "code")
    rd.create("env:\n  id: code/humaneval\nrun:\n  name: t\n", {})
    assert main(["credit-check", str(tmp_path / "code")]) == 2
    err = capsys.readouterr().err.strip()
    assert "env code/humaneval cannot restore" in err and "overcooked/*" in err and "\n" not in err
    empty = RunDirectory(tmp_path / "empty")
    empty.create("env:\n  id: matrix/climbing\nrun:\n  name: t\n", {})
    assert main(["credit-check", str(tmp_path / "empty")]) == 2
    assert "holds no recorded episode" in capsys.readouterr().err
    assert main(["credit-check", str(tmp_path / "nothing")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_an_episode_that_does_not_replay_is_refused(tmp_path, capsys):
    run = write_run(tmp_path / "run", episodes=1)
    lines = (run / "episodes.jsonl").read_text().replace("action B", "action C", 1)  # agent_1's first action
    (run / "episodes.jsonl").write_text(lines)
    assert main(["credit-check", str(run), "--critics", "difference"]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not restore this episode" in err and "\n" not in err


def test_langmarl_scores_are_read_from_score_only_replies():
    from marlang.evaluation.creditcheck.critics import reply_scores, score_opening

    agents = ["agent_0", "agent_1"]
    assert score_opening(agents) == '{"agent_0": {"score": '
    assert reply_scores(['{"agent_0": {"score": 3}, "Agent 1": 1.5}'], agents) == {"agent_0": 3.0, "agent_1": 1.5}
    assert reply_scores(['{"agent_0": {"score": true}}', '{"agent_0": {"score": 2}}'], agents) == {"agent_0": 2.0}
    assert reply_scores(["no JSON here", '{"agent_0": {"score": 1'], agents) == {}


def test_a_model_that_cannot_load_is_one_line(tmp_path, monkeypatch, capsys):
    from marlang.models import ModelNotAvailableError

    def missing(config, spec):
        raise ModelNotAvailableError(f"model {spec} is not installed")

    monkeypatch.setattr(check, "_chat_model", missing)
    run = write_run(tmp_path / "run", episodes=1)
    assert main(["credit-check", str(run), "--critics", "lca", "--model", "local:nope"]) == 3
    err = capsys.readouterr().err.strip()
    assert "local:nope is not installed" in err and "\n" not in err


def test_an_output_path_that_cannot_be_written_is_refused_before_any_model_call(tmp_path, scripted_model, capsys):
    run = write_run(tmp_path / "run", episodes=1)
    (tmp_path / "a_file").write_text("x")
    for out, says in ((tmp_path, "is a directory"), (tmp_path / "a_file" / "check.json", "is not a directory")):
        assert main(["credit-check", str(run), "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err
    assert "model" not in scripted_model  # refused before the critics' model was even built


def test_a_damaged_episode_record_is_skipped_and_the_others_graded(tmp_path, scripted_model, capsys, caplog):
    run = write_run(tmp_path / "run", episodes=2)
    lines = (run / "episodes.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["steps"] = "not a list of steps"  # valid JSON with the record's keys, but no trajectory
    (run / "episodes.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert main(["credit-check", str(run), "--critics", "difference"]) == 0
    result = json.loads((run / "credit_check.json").read_text())
    assert result["counts"]["episodes"] == 1
    assert "episode 0 is damaged" in caplog.text


def test_progress_is_shown_and_an_earlier_result_is_not_overwritten_unasked(tmp_path, scripted_model, capsys):
    run = write_run(tmp_path / "run", episodes=2)
    assert main(["credit-check", str(run), "--critics", "difference"]) == 0
    err = capsys.readouterr().err
    assert "credit-check: oracle" in err and "8/8" in err  # 2 episodes of 4 graded steps
    assert "credit-check: critics" in err and "1/1" in err
    first = (run / "credit_check.json").read_text()
    # a rerun is refused in one line naming the option, before anything is computed
    assert main(["credit-check", str(run), "--critics", "difference,lca"]) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds a credit check; pass --overwrite" in err and "\n" not in err
    assert (run / "credit_check.json").read_text() == first and "model" not in scripted_model
    assert main(["credit-check", str(run), "--critics", "difference,lca", "--overwrite"]) == 0
    assert [c["critic"] for c in json.loads((run / "credit_check.json").read_text())["critics"]] == [
        "difference", "lca"]


def test_a_critic_is_named_either_way_and_written_in_one_spelling(tmp_path, scripted_model, capsys):
    from marlang.evaluation.creditcheck import CreditCheckOptions, credit_check

    run = write_run(tmp_path / "run", episodes=1)
    assert main(["credit-check", str(run), "--critics", "llm-mca,llm_taca,llm_mca"]) == 0
    assert "| llm_mca |" in capsys.readouterr().out
    assert [r["critic"] for r in json.loads((run / "credit_check.json").read_text())["critics"]] == [
        "llm_mca", "llm_taca"]
    found = credit_check(run, CreditCheckOptions(critics=("llm-taca",)))  # the API takes both spellings too
    assert [r["critic"] for r in found["critics"]] == ["llm_taca"]
