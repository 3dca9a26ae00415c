"""A training checkpoint is read as data: every way LangGraph's serializer could build an object
from a stored name (msgpack constructor extensions, a LangChain constructor in JSON, a pickle)
is refused in one line when it names anything but what marlang's graphs store, and nothing in
it is imported or run; what marlang stores still loads."""

from __future__ import annotations

import pickle
import shutil
import sqlite3
from pathlib import Path

import ormsgpack
import pytest
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_METHOD_SINGLE_ARG,
    EXT_NUMPY_ARRAY,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
    JsonPlusSerializer,
)
from langgraph.types import Interrupt, Send

from marlang.cli import main
from marlang.graphs.checkpoint_serde import CHECKPOINT_TYPES, RefusedCheckpoint, StrictCheckpointSerializer

ONE_RUN = ("env: {id: babyai/goto-obj, n_agents: 2, max_steps: 2}\nagents: {kind: scripted}\n"
           "run: {name: one, episodes: 1, progress: false}\n")


def _ext(code: int, *fields) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(fields))


def _touch(marker: Path) -> str:
    return f"touch {marker}"


class _RunsOnLoad:
    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        import os

        return os.system, (self.command,)


# Each: (what the refusal names, the stored (type, bytes) whose loading would run `touch MARKER`)
def _msgpack(value) -> tuple[str, bytes]:
    return "msgpack", ormsgpack.packb({"v": 4, "channel_values": {"planted": value}})


PLANTED = {
    "single-arg constructor": lambda m: ("os.system", _msgpack(_ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system",
                                                                    _touch(m)))),
    "positional constructor": lambda m: ("os.system", _msgpack(_ext(EXT_CONSTRUCTOR_POS_ARGS, "os", "system",
                                                                    [_touch(m)]))),
    "keyword constructor": lambda m: ("subprocess.run", _msgpack(_ext(
        EXT_CONSTRUCTOR_KW_ARGS, "subprocess", "run", {"args": _touch(m), "shell": True}))),
    "method call": lambda m: ("posixpath.os.system", _msgpack(_ext(EXT_METHOD_SINGLE_ARG, "posixpath", "os",
                                                                   _touch(m), "system"))),
    "pydantic v1": lambda m: ("subprocess.run", _msgpack(_ext(EXT_PYDANTIC_V1, "subprocess", "run",
                                                              {"args": _touch(m), "shell": True}))),
    "pydantic v2": lambda m: ("subprocess.run", _msgpack(_ext(EXT_PYDANTIC_V2, "subprocess", "run",
                                                              {"args": _touch(m), "shell": True},
                                                              "model_validate_json"))),
    "inside an allowed type": lambda m: ("os.system", _msgpack(_ext(
        EXT_CONSTRUCTOR_POS_ARGS, "langgraph.types", "Send",
        ["act", _ext(EXT_CONSTRUCTOR_SINGLE_ARG, "os", "system", _touch(m))]))),
    "numpy array": lambda m: ("msgpack extension type 6", _msgpack(_ext(EXT_NUMPY_ARRAY, "|u1", [1], "C", b"\0"))),
    "unknown extension": lambda m: ("msgpack extension type 42", _msgpack(ormsgpack.Ext(42, b"\x90"))),
    "LangChain constructor": lambda m: ("os.system", ("json", (
        '{"v": 4, "planted": {"lc": 1, "type": "constructor", "id": ["os", "system"], '
        f'"kwargs": {{"command": "{_touch(m)}"}}}}}}').encode())),
    "LangChain v2 constructor": lambda m: ("os.system", ("json", (
        '{"v": 4, "planted": {"lc": 2, "type": "constructor", "id": ["os", "system"], '
        f'"args": ["{_touch(m)}"]}}}}').encode())),
    "LangChain secret": lambda m: ("HOME", ("json", b'{"lc": 1, "type": "secret", "id": ["HOME"]}')),
    "pickle": lambda m: ("'pickle'", ("pickle", pickle.dumps(_RunsOnLoad(_touch(m))))),
}


@pytest.mark.parametrize("kind", PLANTED)
def test_every_stored_constructor_is_refused_in_one_line_and_never_run(tmp_path, kind):
    marker = tmp_path / "ran"
    named, stored = PLANTED[kind](marker)
    serde = StrictCheckpointSerializer(tmp_path / "run" / "checkpoints.sqlite")
    with pytest.raises(RefusedCheckpoint) as info:
        serde.loads_typed(stored)
    line = str(info.value)
    assert "\n" not in line and named in line
    assert str(tmp_path / "run" / "checkpoints.sqlite") in line
    assert str(tmp_path / "run" / "episodes.jsonl") in line and "kept" in line
    assert not marker.exists()


def _stored_types(checkpoints: Path) -> set[tuple[str, str]]:
    """The (module, name) of every object the checkpoint file stores, read without building any."""
    found: set[tuple[str, str]] = set()

    def names(code: int, data: bytes) -> None:
        fields = ormsgpack.unpackb(data, ext_hook=names, option=ormsgpack.OPT_NON_STR_KEYS)
        found.add((fields[0], fields[1]))

    with sqlite3.connect(checkpoints) as db:
        rows = [*db.execute("SELECT type, checkpoint FROM checkpoints"), *db.execute("SELECT type, value FROM writes")]
    for kind, blob in rows:
        assert kind in ("msgpack", "null")
        if kind == "msgpack":
            ormsgpack.unpackb(blob, ext_hook=names, option=ormsgpack.OPT_NON_STR_KEYS)
    return found


@pytest.mark.parametrize("learning", [{"method": "langmarl", "review": True}, {"method": "reflexion"},
                                      {"method": "langmarl", "iterations": 2, "accept": "improved"}])
def test_the_allowed_types_are_what_a_training_run_stores(tmp_path, learning):
    from marlang.config import build_config
    from marlang.run import Experiment
    from tests.fakes import FakeRuleChatModel, langmarl_rule

    config = build_config({"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2}, "model": {"cache": False},
                           "protocol": {"name": "none"}, "learning": learning,
                           "run": {"episodes": 4, "parallel": 2, "progress": False}})
    result = Experiment(config, tmp_path / "run", chat_model=FakeRuleChatModel(rule=langmarl_rule)).run()
    stored = _stored_types(tmp_path / "run" / "checkpoints.sqlite")
    if learning.get("review"):  # a paused review stores every allowed type: the list is no wider
        assert result.paused and stored == set(CHECKPOINT_TYPES)
    assert stored <= set(CHECKPOINT_TYPES)
    # and what it stored loads back through the strict serializer, whole
    with sqlite3.connect(tmp_path / "run" / "checkpoints.sqlite") as db:
        rows = [*db.execute("SELECT type, checkpoint FROM checkpoints"), *db.execute("SELECT type, value FROM writes")]
    serde = StrictCheckpointSerializer(tmp_path / "run" / "checkpoints.sqlite")
    for row in rows:
        serde.loads_typed(tuple(row))


def test_what_the_training_graph_stores_loads_back():
    value = {"policy": {"policies": {"agent_0": "go left"}, "extra": {"n": [1, 2.5, None]}},
             "tasks": [Send("critic", {"episode": 3})], "pause": Interrupt(value={"update": 1}, id="x")}
    stored = JsonPlusSerializer().dumps_typed(value)
    assert StrictCheckpointSerializer("c.sqlite").loads_typed(stored) == value


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("finished")
    (root / "one.yaml").write_text(ONE_RUN)
    assert main(["run", str(root / "one.yaml"), "--out", str(root / "run")]) == 0
    return root / "run"


def _plant(checkpoints: Path, stored: tuple[str, bytes]) -> None:
    """Put ``stored`` in place of the run's latest checkpoint, as someone editing the file would."""
    with sqlite3.connect(checkpoints) as db:
        (latest,) = db.execute("SELECT checkpoint_id FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
        db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE checkpoint_id = ?", (*stored, latest))


def _plant_write(checkpoints: Path, stored: tuple[str, bytes]) -> None:
    """Add ``stored`` as a pending write of the run's latest checkpoint (read with it on resume)."""
    with sqlite3.connect(checkpoints) as db:
        (thread, latest) = db.execute(
            "SELECT thread_id, checkpoint_id FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1").fetchone()
        db.execute("INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value) "
                   "VALUES (?, '', ?, 'planted', 0, 'policy', ?, ?)", (thread, latest, *stored))


@pytest.mark.parametrize(("kind", "plant"), [
    *[(kind, _plant) for kind in ("single-arg constructor", "keyword constructor", "pydantic v2",
                                  "inside an allowed type", "LangChain constructor", "pickle")],
    *[(kind, _plant_write) for kind in ("positional constructor", "pickle")]])
def test_resuming_a_planted_checkpoint_stops_in_one_line_runs_nothing_and_keeps_the_episodes(
        finished_run, tmp_path, capsys, kind, plant):
    out = tmp_path / "run"
    shutil.copytree(finished_run, out)
    marker = tmp_path / "ran"
    named, stored = PLANTED[kind](marker)
    plant(out / "checkpoints.sqlite", stored)
    episodes = (out / "episodes.jsonl").read_bytes()
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--set", "run.episodes=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(out / "checkpoints.sqlite") in err and named in err and "episodes.jsonl are kept" in err
    assert not marker.exists()
    assert (out / "episodes.jsonl").read_bytes() == episodes
