"""The runner on the real BabyAI-Text env with fake chat models: files, resume, learning, faults."""

import asyncio
import json
import signal
import time
from typing import Any

import pytest

from marlang.config import ConfigError, build_config
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from marlang.seeds import env_seeds
from tests.fakes import FakeRuleChatModel, babyai_rule


def make_config(**sections):
    data = {
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 4},
        "model": {"cache": False},
        "protocol": {"name": "bidirectional"},
        "run": {"episodes": 3, "parallel": 2, "progress": False},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return build_config(data)


def test_run_writes_every_file_of_the_run_directory(tmp_path):
    model = FakeRuleChatModel(rule=babyai_rule)
    result = Experiment(make_config(), tmp_path / "run", chat_model=model).run()
    rd = RunDirectory(result.run_dir)
    for name in ["config.yaml", "manifest.json", "episodes.jsonl", "metrics.csv", "llm_calls.csv",
                 "summary.json", "learning_curve.png", "iterations.csv", "updates.jsonl", "learner_state.json",
                 "checkpoints.sqlite"]:
        assert (rd.path / name).is_file(), name
    episodes = rd.load_episode_dicts()
    assert sorted(d["episode"] for d in episodes) == [0, 1, 2]
    assert [d["seed"] for d in sorted(episodes, key=lambda d: d["episode"])] == list(env_seeds(0, "train", range(3)))
    step = episodes[0]["steps"][0]
    assert [m["sender"] for m in step["messages"]] == ["agent_0", "agent_1"]
    assert step["decisions"]["agent_0"]["action"] == "go forward"
    assert "You" in step["observations"]["agent_0"]["text"]
    summary = json.loads((rd.path / "summary.json").read_text())
    assert summary["episodes"] == 3 and summary["setting"] == "bidirectional, reflexion"
    # run.parallel 2 -> K = 2 rollouts per update: iterations of 2 and 1 episodes
    assert [(it["iteration"], it["episodes"]) for it in summary["iterations"]] == [(0, 2), (1, 1)]
    assert [d["iteration"] for d in sorted(episodes, key=lambda d: d["episode"])] == [0, 0, 1]
    assert all(d["policy_versions"] == {"agent_0": 0, "agent_1": 0} for d in episodes)
    assert "infos" in step and step["terminations"] and episodes[0]["final_observations"]
    # per step: 2 messages + 2 actions; per episode: + 2 reflections
    n_steps = sum(d["n_steps"] for d in episodes)
    assert len(model.calls) == 4 * n_steps + 2 * 3
    # episodes count their acting calls; the learner's calls are counted per iteration
    assert summary["llm_calls_per_episode"]["mean"] == pytest.approx(4 * n_steps / 3)
    assert sum(it["reflector_calls"] for it in summary["iterations"]) == 2 * 3
    assert sum(it["actor_calls"] + it["speaker_calls"] for it in summary["iterations"]) == 4 * n_steps
    calls_csv = (rd.path / "llm_calls.csv").read_text().splitlines()
    assert len(calls_csv) == 1 + len(model.calls)
    manifest = json.loads((rd.path / "manifest.json").read_text())
    assert manifest["prompt_hashes"]["act"] and manifest["versions"]["langgraph"]


def test_reflections_of_one_wave_reach_the_prompts_of_the_next(tmp_path):
    counter = iter(range(1000))

    def rule(messages):
        if "The episode is over" in str(messages[-1].content):
            return f"Lesson number {next(counter)}."
        return "Action: turn left"

    model = FakeRuleChatModel(rule=rule)
    cfg = make_config(protocol={"name": "none"}, run={"episodes": 4, "parallel": 2})
    Experiment(cfg, tmp_path / "run", chat_model=model).run()
    rd = RunDirectory(tmp_path / "run")
    episodes = sorted(rd.load_episode_dicts(), key=lambda d: d["episode"])
    updates = [u for u in rd.read_jsonl("updates.jsonl") if u["iteration"] == 0]
    lessons = {u["agent"]: [r["text"] for r in u["reflections"]] for u in updates}
    assert len(set(lessons["agent_0"] + lessons["agent_1"])) == 4  # two agents x two episodes
    systems = [str(call[0].content) for call in model.calls if "The episode is over" not in str(call[-1].content)]
    first_wave_steps = sum(d["n_steps"] for d in episodes[:2])
    assert not any("Lesson number" in s for s in systems[: 2 * first_wave_steps])  # empty memory at first
    last_agent0 = [s for s in systems if s.startswith("You are agent_0")][-1]
    assert all(lesson in last_agent0 for lesson in lessons["agent_0"])
    assert not any(lesson in last_agent0 for lesson in lessons["agent_1"])  # memories are per agent


def test_malformed_output_is_counted_and_never_crashes(tmp_path):
    model = FakeRuleChatModel(rule=lambda msgs: "¯\\_(ツ)_/¯")
    cfg = make_config(protocol={"name": "none"}, learning={"method": "none"}, run={"episodes": 2})
    result = Experiment(cfg, tmp_path / "run", chat_model=model).run()
    assert result.summary["invalid_action_rate"]["mean"] == 1.0
    rows = [d["metrics"] for d in RunDirectory(tmp_path / "run").load_episode_dicts()]
    assert all(r["fallbacks"] == r["decisions"] and r["reprompts"] == r["decisions"] for r in rows)


def press_ctrl_c():
    """What Ctrl-C does: SIGINT to this process (asyncio cancels the run and re-raises)."""
    import signal

    signal.raise_signal(signal.SIGINT)


def test_interrupted_run_keeps_finished_episodes_and_resumes_exactly(tmp_path):
    cfg = make_config(run={"episodes": 5, "parallel": 1})
    model = FakeRuleChatModel(rule=babyai_rule)
    seen = []

    def stop_after_two(traj):
        seen.append(traj.episode)
        if len(seen) == 2:
            press_ctrl_c()

    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, tmp_path / "run", chat_model=model, on_episode=stop_after_two).run()
    rd = RunDirectory(tmp_path / "run")
    assert [d["episode"] for d in rd.load_episode_dicts()] == [0, 1]

    # A process killed mid-write leaves a torn line: it is dropped, not fatal.
    with open(rd.episodes_file, "a") as fh:
        fh.write('{"episode": 2, "steps": [')
    with pytest.raises(ConfigError, match="--resume"):
        Experiment(cfg, tmp_path / "run", chat_model=model).run()
    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model).run()
    assert result.episodes_run == 3
    episodes = [d["episode"] for d in rd.load_episode_dicts()]
    assert sorted(episodes) == [0, 1, 2, 3, 4] and len(episodes) == 5
    assert len(rd.metrics_file.read_text().splitlines()) == 1 + 5
    again = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model).run()
    assert again.episodes_run == 0 and again.summary["episodes"] == 5


def test_resumed_run_matches_an_uninterrupted_one(tmp_path):
    cfg = make_config(run={"episodes": 4, "parallel": 2})
    Experiment(cfg, tmp_path / "full", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()

    def stop(traj):
        press_ctrl_c()

    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, tmp_path / "cut", chat_model=FakeRuleChatModel(rule=babyai_rule), on_episode=stop).run()
    Experiment(cfg, tmp_path / "cut", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()

    def key(path):
        rd = RunDirectory(path)
        ds = sorted(rd.load_episode_dicts(), key=lambda d: d["episode"])
        return ([(d["episode"], d["n_steps"], [s["decisions"] for s in d["steps"]]) for d in ds],
                rd.read_json("learner_state.json"), rd.read_jsonl("updates.jsonl"))

    assert key(tmp_path / "full") == key(tmp_path / "cut")


def test_scripted_team_runs_without_a_model(tmp_path):
    cfg = make_config(agents={"kind": "scripted"}, env={"max_steps": None}, run={"episodes": 3})
    result = Experiment(cfg, tmp_path / "run").run()
    assert result.summary["setting"] == "scripted"
    assert result.summary["learner"] == "none"
    assert result.summary["success_rate"]["mean"] == 1.0


def test_action_selection_follows_the_model(tmp_path):
    generating = FakeRuleChatModel(rule=babyai_rule)
    Experiment(make_config(run={"episodes": 1}), tmp_path / "gen", chat_model=generating).run()
    assert not any("choices" in kw for kw in generating.call_kwargs)  # auto -> generate

    scoring = FakeRuleChatModel(rule=babyai_rule, supports_choices=True)
    Experiment(make_config(run={"episodes": 1}), tmp_path / "score", chat_model=scoring).run()
    assert any("choices" in kw for kw in scoring.call_kwargs)  # auto -> score

    with pytest.raises(ConfigError, match="agents.action_selection: 'score' needs a local model"):
        Experiment(make_config(agents={"action_selection": "score"}), tmp_path / "bad",
                   chat_model=generating).run()
    with pytest.raises(ConfigError, match="agents.calibration 'content_free' calibrates scored actions"):
        Experiment(make_config(agents={"calibration": "content_free"}), tmp_path / "bad2",
                   chat_model=generating).run()  # auto -> generate: nothing to calibrate
    assert not (tmp_path / "bad2").exists()


def test_a_finished_run_whose_last_episode_record_is_torn_plays_that_episode_again(tmp_path):
    cfg = make_config(protocol={"name": "none"}, run={"episodes": 4, "parallel": 2})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    rd = RunDirectory(tmp_path / "run")
    lines = rd.episodes_file.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    rd.episodes_file.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])  # the last record torn

    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert result.episodes_run == 1
    episodes = rd.load_episode_dicts()
    assert sorted(d["episode"] for d in episodes) == [0, 1, 2, 3]
    replayed = next(d for d in episodes if d["episode"] == last["episode"])
    assert replayed["steps"] == last["steps"]  # the same episode, played again
    assert result.summary["episodes"] == 4
    assert sum(r["episodes"] for r in rd.read_iterations()) == 4
    assert len(rd.metrics_file.read_text().splitlines()) == 1 + 4


def test_a_resume_keeps_the_manifest_start_and_command_and_names_the_weights(tmp_path):
    class FakeWeighted(FakeRuleChatModel):
        weights_id: str = "sha256:fakeweights"

    cfg = make_config(protocol={"name": "none"}, run={"episodes": 1, "parallel": 1})
    Experiment(cfg, tmp_path / "run", chat_model=FakeWeighted(rule=babyai_rule)).run()
    rd = RunDirectory(tmp_path / "run")
    first = rd.read_json("manifest.json")
    assert first["weights_id"] == "sha256:fakeweights" and "resumes" not in first
    longer = make_config(protocol={"name": "none"}, run={"episodes": 2, "parallel": 1})
    Experiment(longer, tmp_path / "run", resume=True, chat_model=FakeWeighted(rule=babyai_rule)).run()
    Experiment(longer, tmp_path / "run", resume=True, chat_model=FakeWeighted(rule=babyai_rule)).run()
    manifest = rd.read_json("manifest.json")
    assert manifest["started"] == first["started"] and manifest["command"] == first["command"]
    assert len(manifest["resumes"]) == 2 and all({"at", "command"} <= set(r) for r in manifest["resumes"])
    assert manifest["weights_id"] == "sha256:fakeweights"


def test_every_file_of_a_run_directory_has_the_same_permissions(tmp_path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        Experiment(make_config(run={"episodes": 2}), tmp_path / "run",
                   chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "run").iterdir() if p.is_file()}
    assert {"config.yaml", "manifest.json", "summary.json", "episodes.jsonl", "learner_state.json"} <= set(modes)
    assert set(modes.values()) == {0o644}, modes


def test_a_run_directory_with_no_finished_episode_starts_afresh(tmp_path):
    def refuse(messages):
        raise RuntimeError("the model failed at its first call")

    cfg = make_config(protocol={"name": "none"}, run={"episodes": 1, "parallel": 1})
    with pytest.raises(RuntimeError):
        Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=refuse)).run()
    rd = RunDirectory(tmp_path / "run")
    assert rd.exists() and not rd.load_episode_dicts()
    # Corrected (another setting): neither a plain run nor --resume is refused.
    fixed = make_config(protocol={"name": "bidirectional"}, run={"episodes": 1, "parallel": 1})
    result = Experiment(fixed, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert result.episodes_run == 1 and result.summary["setting"] == "bidirectional, reflexion"
    assert "resumes" not in rd.read_json("manifest.json")
    with pytest.raises(ConfigError, match="already holds a run"):  # now it holds one
        Experiment(fixed, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()


def test_ctrl_c_says_at_once_what_it_waits_for(tmp_path):
    said = []

    def stop(traj):
        press_ctrl_c()
        said.append(list(messages))

    messages = []
    cfg = make_config(run={"episodes": 3, "parallel": 1})
    # as in a fresh process: Python's own SIGINT handler, which asyncio.run replaces with its own
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule), on_episode=stop,
                       notify=messages.append).run()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert said == [[messages[0]]]  # printed by the time Ctrl-C returned, not after the wait
    assert "model call(s) in flight" in messages[0] and "Ctrl-C again to stop now" in messages[0]


def test_llm_calls_agree_with_the_episodes_after_a_resume(tmp_path):
    import csv

    cfg = make_config(run={"episodes": 4, "parallel": 2})

    def stop(traj):
        press_ctrl_c()  # the other episode of the iteration is half played

    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule), on_episode=stop).run()
    Experiment(cfg, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    rd = RunDirectory(tmp_path / "run")
    episodes = {d["episode"]: d["metrics"]["llm_calls"] for d in rd.load_episode_dicts()}
    with open(rd.llm_calls_file, newline="") as fh:
        rows = list(csv.DictReader(fh))
    acting = [r for r in rows if r["role"] != "reflector"]
    assert sorted(episodes) == [0, 1, 2, 3]
    assert {int(r["episode"]) for r in acting} == set(episodes)
    for episode, calls in episodes.items():
        assert sum(1 for r in acting if int(r["episode"]) == episode) == calls, episode
    assert sum(1 for r in rows if r["role"] == "reflector") == 2 * 4  # each agent reflects once per episode
    with open(rd.metrics_file, newline="") as fh:
        assert sorted(int(r["episode"]) for r in csv.DictReader(fh)) == [0, 1, 2, 3]


def test_a_damaged_record_in_the_middle_is_replayed_and_every_other_one_kept(tmp_path):
    cfg = make_config(protocol={"name": "none"}, run={"episodes": 4, "parallel": 2})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    rd = RunDirectory(tmp_path / "run")
    lines = rd.episodes_file.read_bytes().splitlines(keepends=True)
    damaged = json.loads(lines[1])
    lines[1] = lines[1][:30] + b"\x00" * 8 + lines[1][38:]  # a bad sector in the second record
    rd.episodes_file.write_bytes(b"".join(lines))

    said = []
    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule),
                        notify=said.append).run()
    assert result.episodes_run == 1 and not result.already_finished
    episodes = {d["episode"]: d for d in rd.load_episode_dicts()}
    assert sorted(episodes) == [0, 1, 2, 3]
    assert episodes[damaged["episode"]]["steps"] == damaged["steps"]  # the same episode, played again
    assert result.summary["episodes"] == 4
    assert said == [(f"replayed episode(s) {damaged['episode']}: their records in {rd.episodes_file} "
                     "were lost or damaged")]
    assert (rd.path / "episodes.damaged").is_file()  # the damaged bytes are set aside, not destroyed
    assert len(rd.metrics_file.read_text().splitlines()) == 1 + 4


def test_more_episodes_fill_a_partly_filled_last_iteration(tmp_path):
    def run(episodes):
        cfg = make_config(protocol={"name": "none"}, learning={"method": "none"},
                          run={"episodes": episodes, "parallel": 2})
        return Experiment(cfg, tmp_path / "run", resume=(tmp_path / "run").exists(),
                          chat_model=FakeRuleChatModel(rule=babyai_rule)).run()

    assert run(4).summary["episodes"] == 4
    assert run(5).summary["episodes"] == 5  # a last iteration of one episode
    longer = run(6)
    assert longer.episodes_run == 1 and not longer.already_finished and longer.summary["episodes"] == 6
    episodes = RunDirectory(tmp_path / "run").load_episode_dicts()
    assert sorted(d["episode"] for d in episodes) == [0, 1, 2, 3, 4, 5]
    assert run(6).already_finished


def test_a_given_chat_model_is_the_model_the_run_names(tmp_path):
    cfg = make_config(run={"episodes": 1})
    result = Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule,
                                                                         model_id="fake:mine")).run()
    assert RunDirectory(result.run_dir).read_json("manifest.json")["model_id"] == "fake:mine"
    assert result.summary["model"] == "fake:mine"
    assert json.loads((result.run_dir / "summary.json").read_text())["model"] == "fake:mine"


def test_a_run_directory_held_by_another_process_is_refused_and_left_alone(tmp_path):
    import os

    from tests.test_rundir import hold_lock

    cfg = make_config(run={"episodes": 1})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    before = (tmp_path / "run" / "episodes.jsonl").read_bytes()
    fd = hold_lock(tmp_path / "run")
    try:
        longer = make_config(run={"episodes": 2})
        with pytest.raises(ConfigError, match="in use by process 4242"):  # its --resume too
            Experiment(longer, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
        fd_new = hold_lock(tmp_path / "new")
        try:
            with pytest.raises(ConfigError, match="in use by process 4242"):
                Experiment(cfg, tmp_path / "new", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
        finally:
            os.close(fd_new)
    finally:
        os.close(fd)
    assert (tmp_path / "run" / "episodes.jsonl").read_bytes() == before
    assert not (tmp_path / "new" / "config.yaml").exists()


def test_a_resume_removes_adapter_saves_a_kill_left_unfinished(tmp_path):
    cfg = make_config(run={"episodes": 1})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    partial = tmp_path / "run" / "adapters" / "0" / ".marlang-save-k9x.partial"
    (partial / "agent_0").mkdir(parents=True)
    Experiment(make_config(run={"episodes": 2}), tmp_path / "run", resume=True,
               chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert not partial.exists()


def test_a_run_whose_every_record_is_damaged_is_resumed_not_started_afresh(tmp_path):
    cfg = make_config(protocol={"name": "none"}, learning={"method": "none"}, run={"episodes": 2, "parallel": 2})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    rd = RunDirectory(tmp_path / "run")
    before = sorted(rd.load_episode_dicts(), key=lambda d: d["episode"])
    rd.episodes_file.write_bytes(b"".join(line[:25] + b"\n" for line in rd.episodes_file.read_bytes().splitlines()))
    with pytest.raises(ConfigError, match="already holds a run"):
        Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert result.episodes_run == 2
    assert sorted(rd.load_episode_dicts(), key=lambda d: d["episode"]) == before


class SlowToCancelChatModel(FakeRuleChatModel):
    """A model whose calls take a while and, when cancelled, a while more to let go (as a
    network client closing its connection): the event loop sits waiting meanwhile."""

    on_call: Any = None

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if self.on_call is not None:
            self.on_call(len(self.calls))
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            await asyncio.sleep(1.0)
            raise
        return self._generate(messages, stop, **kwargs)


def press_ctrl_c_twice_from_another_thread(gap_s: float = 0.3) -> Any:
    """Two Ctrl-C as a person presses them, while the run's event loop waits; the thread."""
    import os
    import threading

    def press():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(gap_s)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=press, daemon=True)
    thread.start()
    return thread


def stray_ctrl_c(thread: Any) -> int:
    """Wait for ``thread`` to have pressed; how many Ctrl-C landed after the run (here)."""
    stray = 0
    while thread.is_alive():
        try:
            thread.join(0.05)
        except KeyboardInterrupt:
            stray += 1
    try:
        time.sleep(0.1)  # a signal sent last is handled at the next bytecode of this thread
    except KeyboardInterrupt:
        stray += 1
    return stray


def test_two_ctrl_c_leave_the_sigint_handler_as_it_was_and_a_later_run_stops_gracefully(tmp_path):
    from tests.conftest import live_database_threads

    cfg = make_config(protocol={"name": "none"}, run={"episodes": 4, "parallel": 1})
    pressing = []

    def on_call(n):
        # in a later episode than the first, which is on disk by then
        if not pressing and (tmp_path / "run" / "episodes.jsonl").is_file():
            pressing.append(press_ctrl_c_twice_from_another_thread())

    model = SlowToCancelChatModel(rule=babyai_rule, on_call=on_call)
    messages = []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    try:
        with pytest.raises(KeyboardInterrupt):
            Experiment(cfg, tmp_path / "run", chat_model=model, notify=messages.append).run()
    finally:
        stray = stray_ctrl_c(pressing[0])
    assert stray == 0 and messages[-1] == "stopping now"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # not a finished run's handler
    assert not live_database_threads()
    kept = len(RunDirectory(tmp_path / "run").load_episode_dicts())
    assert kept >= 1

    # The same process runs again: one Ctrl-C stops it gracefully (the run says so, then raises).
    later = []

    def stop(traj):
        press_ctrl_c()

    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule),
                   on_episode=stop, notify=later.append).run()
    assert len(later) == 1 and "Ctrl-C again to stop now" in later[0]
    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    episodes = [d["episode"] for d in RunDirectory(tmp_path / "run").load_episode_dicts()]
    assert sorted(episodes) == [0, 1, 2, 3] and result.summary["episodes"] == 4


def test_ctrl_c_inside_the_checkpoint_database_start_leaves_no_thread_running(tmp_path, monkeypatch):
    """A Ctrl-C right after aiosqlite has started its connection's thread (before it connects)
    once left that non-daemon thread waiting forever: the process never exited."""
    import aiosqlite.core

    from tests.conftest import live_database_threads

    async def interrupted_connect(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(aiosqlite.core.Connection, "_connect", interrupted_connect)
    with pytest.raises(KeyboardInterrupt):
        Experiment(make_config(run={"episodes": 1}), tmp_path / "run",
                   chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    assert not live_database_threads()


def test_the_manifest_and_the_saved_config_keep_no_secret_of_the_command_line(tmp_path, monkeypatch):
    import sys

    url = "https://bob:sk-url-0123456789@llm.example.com/v1"
    monkeypatch.setattr(sys, "argv", ["marlang", "run", "c.yaml", "--set", f"model.base_url={url}",
                                      "--set", "env.kwargs.hf_token=hf_0123456789", "--set", "run.episodes=1"])
    cfg = make_config(protocol={"name": "none"}, model={"cache": False, "base_url": url}, run={"episodes": 1})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=babyai_rule)).run()
    manifest, saved = (tmp_path / "run" / "manifest.json").read_text(), (tmp_path / "run" / "config.yaml").read_text()
    for text in (manifest, saved):
        assert "sk-url-0123456789" not in text and "hf_0123456789" not in text
    assert json.loads(manifest)["command"][4:] == ["model.base_url=https://bob:***@llm.example.com/v1", "--set",
                                                   "env.kwargs.hf_token=***", "--set", "run.episodes=1"]
    assert "https://bob:***@llm.example.com/v1" in saved
