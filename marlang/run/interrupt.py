"""Ctrl-C during a run: the first sets the run's `StopFlag` and cancels the run (what is
finished is kept), a second stops at once; and the count of model calls in flight that the
first one says it waits for."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from marlang.types import StopFlag


class InFlightCalls(BaseCallbackHandler):
    """Counts the model calls started and not yet answered (what a Ctrl-C waits for)."""

    run_inline = True

    def __init__(self) -> None:
        self._open: set[Any] = set()

    @property
    def count(self) -> int:
        return len(self._open)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._open.add(run_id)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._open.add(run_id)

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._open.discard(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._open.discard(run_id)


def handle_ctrl_c(stop: StopFlag, notify: Callable[[str], None], cancel: Callable[[], Any],
                  in_flight: Callable[[], InFlightCalls | None]) -> Callable[[], None]:
    """Install the run's SIGINT handler where Ctrl-C means KeyboardInterrupt (Python's own
    handler, on the main thread; an ignored SIGINT stays ignored). ``cancel()`` gives the
    function that cancels the run (None: nothing to cancel, stop at once). Returns the
    function that puts the previous handler back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return lambda: None

    def handler(signum: int, frame: Any) -> None:
        cancelling = cancel()
        if stop.is_set() or cancelling is None:
            notify("stopping now")
            raise KeyboardInterrupt
        stop.set()
        calls = in_flight()
        notify(f"interrupted: saving what is finished and stopping the {calls.count if calls else 0} model "
               "call(s) in flight (the local engine at its next token); Ctrl-C again to stop now")
        try:
            cancelling()
        except RuntimeError:  # the loop has just closed: nothing is left to cancel
            raise KeyboardInterrupt from None

    signal.signal(signal.SIGINT, handler)
    return lambda: signal.signal(signal.SIGINT, previous)
