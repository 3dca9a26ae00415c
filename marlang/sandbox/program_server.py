"""The judged program's side of the sandbox: loads the program, then serves the judge's calls.

Standard library only (the sandbox worker imports it as a sibling script). It runs in the
program process G, which was forked before its job process read the job, so nothing of the
job is in its memory: no test, no `check`, no expected value. It reads one load request from
the judge (the program and the import lines of the test setup), runs them in a fresh module
(not `__main__`), reports how that went, then answers the judge's lookups and calls with
plain data (`plain_data`) until the judge closes the channel. Everything it sends is believed
only as data: the judge compares the values itself.
"""

# This file runs untrusted code: it must exec it and catch anything it raises, BaseException
# included, so that every request gets an answer.
# ruff: noqa: BLE001, S102, S110

from __future__ import annotations

import builtins
import json
import os
import signal
import sys
import traceback
import types
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING or __package__:  # mypy reads the package branch; at run time `__package__` decides
    from . import exception_text, helper_probe, plain_data
else:  # imported by runner.py started as a script, with this directory on sys.path
    import exception_text
    import helper_probe
    import plain_data

PROGRAM_MODULE = "sandboxed_program"  # not "__main__": `if __name__ == "__main__":` stays off
PROGRAM_FILE = helper_probe.PROGRAM_FILE
CALL_FD, REPLY_FD = 3, 4  # G's ends of the request and reply pipes

# Bound at import, before any program runs: a program that rebinds builtins cannot change them.
_type, _callable, _isinstance, _str = type, callable, isinstance, str
_ModuleType = types.ModuleType


class _CallTimeout(BaseException):
    """Raised by SIGALRM inside a call; BaseException so `except Exception` cannot swallow it."""


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _safe_str(exc: BaseException) -> str:
    return exception_text.message(exc, _CallTimeout)


def _where(exc: BaseException) -> str:
    """' (program line N)' for the innermost program frame: for feedback."""
    return exception_text.line_note(exc, PROGRAM_FILE, "program")


class LineReader:
    """Reads newline-terminated lines from a raw fd (so it can share a selector)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False

    def feed(self) -> bool:
        data = os.read(self.fd, 1 << 16)
        if not data:
            self.eof = True
        self.buffer += data
        return bool(data)

    def readline(self) -> bytes | None:
        while b"\n" not in self.buffer:
            if self.eof or not self.feed():
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line


class ProgramServer:
    """Loads the program, then answers the judge's lookups and calls.

    Nothing it sends is believed beyond being data: whatever the program does to this object
    or to the pipes, the judge only ever receives plain values to compare itself.
    """

    def __init__(self) -> None:
        self.handles: list[object] = []
        self.namespace: dict = {}
        self.requests = LineReader(CALL_FD)
        self.watch: helper_probe.HelperWatch | None = None

    def send(self, message: dict) -> None:
        write_all(REPLY_FD, (json.dumps(message, ensure_ascii=True) + "\n").encode())

    def _load_request(self) -> tuple[str, str, dict | None] | None:
        line = self.requests.readline()
        if line is None:
            return None
        request = json.loads(line)
        helpers = request.get("helpers")
        return (_str(request.get("imports", "")), _str(request["program"]),
                helpers if _type(helpers) is dict else None)

    def run(self) -> None:
        loaded = self._load_request()
        if loaded is None:  # the judge stopped before sending the program
            return
        module = types.ModuleType(PROGRAM_MODULE)
        module.__dict__["__builtins__"] = builtins
        sys.modules[PROGRAM_MODULE] = module
        self.namespace = namespace = module.__dict__
        try:
            codes = [compile(loaded[0], "<setup>", "exec"),
                     compile(loaded[1], PROGRAM_FILE, "exec")]
        except (SyntaxError, ValueError) as exc:
            where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
            message = exc.msg if isinstance(exc, SyntaxError) else _safe_str(exc)
            self.send({"kind": "load", "status": "syntax_error", "error_type": type(exc).__name__,
                       "message": f"{message}{where}"})
            return
        helpers = loaded[2]
        del loaded
        try:
            for code in codes:
                exec(code, namespace)
        except BaseException as exc:
            self._print_traceback(exc)
            self.send({"kind": "load", "status": "error", "error_type": type(exc).__name__,
                       "message": _safe_str(exc) + _where(exc)})
            return
        finally:
            self._flush()
        if helpers is not None:
            self._watch(helpers)
        self.send({"kind": "load", "status": "ok"})
        signal.signal(signal.SIGALRM, self._on_alarm)
        while True:
            line = self.requests.readline()
            if line is None:  # the judge is done
                return
            request = json.loads(line)
            self.send(self._answer(request))

    def _watch(self, helpers: dict) -> None:
        """Wrap the helpers (`helper_probe`) now that the program's own code has run."""
        try:
            self.watch = helper_probe.HelperWatch(self.namespace, helpers)
        except BaseException:
            self.watch = None  # the judge then gets no report: the helpers count as unused

    @staticmethod
    def _on_alarm(signum, frame) -> None:
        raise _CallTimeout()

    @staticmethod
    def _flush() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass

    @staticmethod
    def _print_traceback(exc: BaseException) -> None:
        try:
            traceback.print_exception(exc, limit=-8, file=sys.stderr)
        except BaseException:
            pass

    def _handle(self, value: object) -> object:
        """A non-plain value stays here; the judge gets a handle it can only hand back."""
        self.handles.append(value)
        return {"h": [len(self.handles) - 1, plain_data.type_name(value)]}

    def _resolve(self, tag: str, body: object) -> object:
        if tag == "h":  # the judge's own reference, [index, type name], as `_handle` made it
            return self.handles[cast("list[int]", body)[0]]
        return self.namespace[body]  # "fn": a program function, by name

    def _encode(self, value: object) -> dict:
        try:
            encoded = plain_data.Encoder(self._handle).encode(value)
            text = json.dumps(encoded, ensure_ascii=True)
        except (plain_data.PlainDataError, RecursionError, ValueError) as exc:
            return {"error": _safe_str(exc)}
        if len(text) > plain_data.MAX_BYTES:
            return {"error": f"it is larger than {plain_data.MAX_BYTES >> 20} MiB"}
        return {"value": encoded}

    def _answer(self, request: dict) -> dict:
        ident = request.get("id")
        if request.get("op") == "get":
            return {"id": ident, **self._lookup(request["name"])}
        if request.get("op") == "helpers":
            if self.watch is None:
                return {"id": ident, "missing": True}
            return {"id": ident, "nonce": request.get("nonce"), **self.watch.report()}
        signal.setitimer(signal.ITIMER_REAL, float(request["timeout"]))
        try:
            try:
                reply = self._call(request)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _CallTimeout:
            reply = {"timeout": True}
        except BaseException as exc:  # the timeout fired while an exception was being read
            reply = {"raised": [_type(exc).__name__, "", False]}
        self._flush()
        return {"id": ident, **reply}

    def _lookup(self, name: str) -> dict:
        namespace = self.namespace
        if name not in namespace:
            return {"missing": True}
        value = namespace[name]
        if _isinstance(value, _ModuleType):
            return {"module": _str(getattr(value, "__name__", ""))}
        if _callable(value):
            return {"callable": True}
        return self._encode(value)

    def _call(self, request: dict) -> dict:
        try:
            target = request["target"]
            if "h" in target:
                function = self.handles[target["h"]]
            else:
                function = self.namespace[target["name"]]
            args = [plain_data.decode(a, self._resolve) for a in request["args"]]
            kwargs = {k: plain_data.decode(v, self._resolve)
                      for k, v in request["kwargs"].items()}
            watch = self.watch
            if watch is not None and watch.serve(target.get("name")):
                watch.serving = True
                try:
                    result = function(*args, **kwargs)
                finally:
                    watch.serving = False
                    watch.check()
            else:
                result = function(*args, **kwargs)
        except _CallTimeout:
            raise
        except BaseException as exc:
            return {"raised": [_type(exc).__name__, _safe_str(exc) + _where(exc),
                               _isinstance(exc, Exception)]}
        return self._encode(result)
