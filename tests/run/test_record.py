"""The run directory as a run writes it: the in-memory episode index answers every question a
run asks of its episodes, so a run never reads its whole episodes.jsonl again."""

from __future__ import annotations

import json

from marlang.config import build_config
from marlang.run import Experiment
from marlang.run.record import RunRecord
from marlang.rundir import RunDirectory
from tests.fakes import FakeRuleChatModel, babyai_rule


def _config(episodes: int = 4):
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
        "model": {"cache": False}, "protocol": {"name": "none"}, "learning": {"method": "reflexion"},
        "run": {"episodes": episodes, "parallel": 2, "progress": False},
    })


def test_a_run_never_reads_its_whole_episodes_file(tmp_path, monkeypatch):
    reads = []
    original = RunDirectory.load_episode_dicts

    def counted(self):
        reads.append(self.path)
        return original(self)

    monkeypatch.setattr(RunDirectory, "load_episode_dicts", counted)
    Experiment(_config(), tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert reads == []
    # a resume given more episodes reads it once, when it checks the directory
    Experiment(_config(6), tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert len(reads) == 1
    assert len(original(RunDirectory(tmp_path / "run"))) == 6


def test_the_index_reads_a_trajectory_back_from_its_byte_range(tmp_path):
    Experiment(_config(), tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    record = RunRecord(RunDirectory(tmp_path / "run"))
    record.load()
    assert len(record.episodes) == 4 and not record.episodes.played
    assert record.episodes.done("train", 0) == {0, 1} and record.episodes.done("train", 1) == {2, 3}
    on_disk = {d["episode"]: d for d in RunDirectory(tmp_path / "run").load_episode_dicts()}
    for episode in range(4):
        assert json.loads(json.dumps(record.episodes.trajectory(episode).to_dict(), default=str)) == \
            on_disk[episode]
    assert [r["episode"] for r in record.episodes.metrics_rows("train")] == [0, 1, 2, 3]


def test_a_damaged_line_is_left_out_of_the_index_and_the_records_after_it_kept(tmp_path):
    Experiment(_config(), tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    rd = RunDirectory(tmp_path / "run")
    lines = rd.episodes_file.read_bytes().splitlines(keepends=True)
    rd.episodes_file.write_bytes(lines[0] + b"{not json\n" + b"".join(lines[1:]))
    record = RunRecord(rd)
    record.load()
    assert sorted(e for _, _, e in record.episodes.recorded()) == [0, 1, 2, 3]
    assert record.episodes.trajectory(3).episode == 3


def test_iterations_are_appended_as_lines_and_rewritten_only_for_a_new_column(tmp_path):
    rd = RunDirectory(tmp_path)
    record = RunRecord(rd)
    record.append_iteration_csv({"iteration": 0, "return_mean": 1.0})
    record.append_iteration_csv({"iteration": 1, "return_mean": 2.0})
    record.append_iteration_csv({"iteration": 2, "return_mean": 3.0, "eval_return": None})
    record.append_iteration_csv({"iteration": 1, "return_mean": 5.0})  # a replayed commit replaces its row
    assert rd.iterations_file.read_text().splitlines() == [
        "iteration,return_mean,eval_return", "0,1.0,", "1,5.0,", "2,3.0,"]
    assert [r["return_mean"] for r in rd.read_iterations()] == [1.0, 5.0, 3.0]
