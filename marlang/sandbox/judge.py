"""The judge: runs a job's trusted test code outside the program's process and decides there.

Standard library only (the sandbox worker imports it as a sibling script). The judge lives in
the job process C; the program runs in its child G. A name a test uses that the test's own
setup does not define, and that is not a builtin, is looked up in the program: a function
becomes a proxy whose calls run in G and whose result crosses back as plain data
(`plain_data`), a value crosses as plain data, a module is the judge's own import of it. Every
comparison, builtin and helper a test evaluates is the judge's own, so nothing the program
does inside its process (patched builtins, `__eq__` overrides, exits, printed text, writes to
its pipes) can turn a failing test into a passing one: at worst it fails tests or ends its run.
"""

# The judge runs trusted test code and must report anything it raises as the test's outcome.
# ruff: noqa: BLE001, S102, S110

from __future__ import annotations

import ast
import builtins
import importlib
import json
import os
import select
import signal
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING or __package__:  # mypy reads the package branch; at run time `__package__` decides
    from . import exception_text, plain_data
else:  # imported by runner.py started as a script, with this directory on sys.path
    import exception_text
    import plain_data

MAX_REPR = 300
SETTLE_SECONDS = 1.0
"""How long a program may take to answer after its test timed out before its run is stopped."""
MAX_VALUES = 10_000
"""The most watched results a probe reports one by one (a run's hidden tests make far fewer)."""
TESTS_MODULE = "sandboxed_tests"

_BUILTIN_NAMES = frozenset(vars(builtins))
_EXCEPTIONS = {name: value for name, value in vars(builtins).items()
               if isinstance(value, type) and issubclass(value, Exception)}
_BASE_ONLY = frozenset(name for name, value in vars(builtins).items()
                       if isinstance(value, type) and issubclass(value, BaseException)
                       and not issubclass(value, Exception))
# Standard-library modules a test never gets through the program's names (they act on the
# machine or the screen when imported).
_NO_IMPORT = frozenset({"antigravity", "this", "turtle", "turtledemo", "tkinter", "idlelib",
                        "webbrowser", "pydoc", "venv", "ensurepip"})


class TestTimeout(BaseException):
    """The test ran past its time limit (BaseException: test code cannot swallow it)."""


class WallTimeout(BaseException):
    """The whole run ran past its wall limit."""


class ChannelClosed(BaseException):
    """The program process ended (or closed its end of the channel)."""


class StopRun(BaseException):
    """The program broke the protocol or stopped answering: (status, error_type, message)."""


class ProgramAborted(BaseException):
    """A call into the program raised SystemExit, KeyboardInterrupt or another BaseException."""


class ProgramError(Exception):
    """A call into the program raised an exception that is not a builtin one."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class NotPlainData(Exception):
    """A test used a value the program returned that is not plain data."""


class _Expired(Exception):
    """A deadline passed while waiting on the program (internal)."""


def program_imports(setup: str) -> str:
    """The import statements at the top level of the test setup: all of it the program's
    process gets (the setup's other statements, `check` and `METADATA` among them, run only
    in the judge). A setup that does not parse gives none; the judge reports it."""
    try:
        tree = ast.parse(setup)
    except (SyntaxError, ValueError):
        return ""
    return "\n".join(ast.unparse(node) for node in tree.body
                     if isinstance(node, (ast.Import, ast.ImportFrom)))


class DiskWatch:
    """Where the work directory is an ordinary host directory (the levels without a mount
    namespace, whose work directory is a size-capped tmpfs), the judge measures it while it
    waits on the program and stops the run when it holds more than the limit."""

    INTERVAL = 0.01
    MAX_ENTRIES = 10_000

    def __init__(self, path: str, limit_mb: int) -> None:
        self.path = path
        self.limit_mb = limit_mb
        self.next_check = 0.0
        self.over: str | None = None

    def exceeded(self) -> bool:
        now = time.monotonic()
        if self.over is None and now >= self.next_check:
            self.next_check = now + self.INTERVAL
            self.over = self._measure()
        return self.over is not None

    def _measure(self) -> str | None:
        used, entries, stack = 0, 0, [self.path]
        while stack:
            try:
                with os.scandir(stack.pop()) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > self.MAX_ENTRIES:
                            return f"more than {self.MAX_ENTRIES} files"
                        info = entry.stat(follow_symlinks=False)
                        used += info.st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
            except OSError:
                continue
        if used > self.limit_mb << 20:
            return f"more than {self.limit_mb} MiB"
        return None

    def message(self) -> str:
        return f"the program wrote {self.over} to its work directory (limit: disk_mb)"


class RemoteFunction:
    """A program function as the tests see it: calling it runs the call in the program."""

    __slots__ = ("_judge", "_name")

    def __init__(self, judge: Judge, name: str) -> None:
        self._judge = judge
        self._name = name

    def __call__(self, *args, **kwargs):
        return self._judge.call({"name": self._name}, self._name, args, kwargs)

    def __repr__(self) -> str:
        return f"<program function {self._name}>"


class Handle:
    """A value the program returned that is not plain data. It can be handed back to the
    program (as an argument, or called); any other use fails the test."""

    __slots__ = ("_id", "_judge", "_type")

    def __init__(self, judge: Judge, ident: int, type_name: str) -> None:
        self._judge = judge
        self._id = ident
        self._type = type_name

    def describe(self) -> str:
        return f"<{self._type} object of the program: not plain data>"

    def __call__(self, *args, **kwargs):
        self._judge.handles_used.add(self._id)
        return self._judge.call({"h": self._id}, self._type, args, kwargs)

    def __getattr__(self, name: str):
        self._judge.misuse(self._type, f"its attribute {name!r} was read")


def _refusal(what: str):
    def refuse(self, *args):
        self._judge.misuse(self._type, what)
    return refuse


for _name, _what in {
    "__eq__": "compared", "__ne__": "compared", "__lt__": "compared", "__le__": "compared",
    "__gt__": "compared", "__ge__": "compared", "__hash__": "hashed",
    "__bool__": "tested for truth", "__len__": "measured", "__iter__": "iterated",
    "__contains__": "searched", "__getitem__": "indexed", "__repr__": "shown",
    "__str__": "shown", "__format__": "shown", "__int__": "converted", "__float__": "converted",
    "__index__": "converted", "__abs__": "used in arithmetic", "__neg__": "used in arithmetic",
    **{f"__{op}__": "used in arithmetic" for op in (
        "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and", "or", "xor",
        "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow", "rand", "ror",
        "rxor")},
}.items():
    setattr(Handle, _name, _refusal(_what))


class _Namespace(dict):
    """The tests' globals: their own names first, then builtins, then the program's names."""

    judge: Judge

    def __missing__(self, name: str):
        if name in _BUILTIN_NAMES or (name.startswith("__") and name.endswith("__")):
            raise KeyError(name)  # the interpreter goes on to the judge's own builtins
        return self.judge.lookup(name)


def show(value: object) -> str:
    """A bounded repr of a test-side value; handles and proxies are described, never asked."""
    parts: list[str] = []
    _show(value, parts, [MAX_REPR + 1], 0)
    text = "".join(parts)
    return text if len(text) <= MAX_REPR else text[:MAX_REPR] + "..."


def _show(value: object, out: list[str], budget: list[int], depth: int) -> None:
    if budget[0] <= 0:
        return
    kind = type(value)
    # exact types (never isinstance): each cast restates the test just made
    if kind is Handle:
        text = cast(Handle, value).describe()
    elif kind is RemoteFunction:
        text = repr(value)
    elif kind in (str, bytes):
        text = repr(cast("str | bytes", value)[:budget[0]])
    elif kind is int:
        try:
            text = repr(value)
        except ValueError:  # more digits than int -> str allows
            text = f"<an int of {cast(int, value).bit_length()} bits>"
    elif value is None or kind in (bool, float):
        text = repr(value)
    elif kind in (list, tuple, set, frozenset, dict) and depth < 20:
        items: list = (list(cast(dict, value).items()) if kind is dict
                       else list(cast("Iterable[object]", value)))
        if not items and kind in (set, frozenset):
            out.append(f"{kind.__name__}()")
            budget[0] -= len(out[-1])
            return
        opening, closing = {list: ("[", "]"), tuple: ("(", ")"), set: ("{", "}"),
                            frozenset: ("frozenset({", "})"), dict: ("{", "}")}[kind]
        out.append(opening)
        budget[0] -= len(opening)
        for i, item in enumerate(items):
            if budget[0] <= 0:
                return
            if i:
                out.append(", ")
                budget[0] -= 2
            if kind is dict:
                _show(item[0], out, budget, depth + 1)
                out.append(": ")
                budget[0] -= 2
                _show(item[1], out, budget, depth + 1)
            else:
                _show(item, out, budget, depth + 1)
        if kind is tuple and len(items) == 1:
            out.append(",")
        out.append(closing)
        budget[0] -= len(closing) + 1
        return
    else:
        try:  # a value the trusted test made itself
            text = repr(value)
        except TestTimeout:
            raise
        except BaseException:
            text = f"<unrepresentable {kind.__name__}>"
    text = text[:budget[0] + 1]
    out.append(text)
    budget[0] -= len(text)


def _safe_str(exc: BaseException) -> str:
    return exception_text.message(exc, TestTimeout)


class Judge:
    """Runs one job's tests against the program process, streaming events to the worker.

    ctl_fd: where events go (JSON lines, read by the worker). call_fd / reply_fd: the request
    and reply pipes to the program process `program_pid`. deadline: the run's wall deadline
    (time.monotonic()).
    """

    def __init__(self, job: dict, ctl_fd: int, call_fd: int, reply_fd: int, program_pid: int,
                 deadline: float, disk: DiskWatch | None = None) -> None:
        self.job = job
        self.disk = disk
        self.test_timeout = float(job["limits"]["test_timeout"])
        self.ctl_fd = ctl_fd
        self.call_fd = call_fd
        self.reply_fd = reply_fd
        self.program_pid = program_pid
        self.wall_deadline = deadline
        self.test_deadline = deadline
        self.buffer = bytearray()
        self.eof = False
        self.next_id = 0
        self.in_flight: int | None = None
        self.proxies: dict[str, object] = {}
        self.halt: BaseException | None = None
        self.timed_out = False
        self.stop: list | None = None
        self.setup_failure: str | None = None
        self._reset_test()
        os.set_blocking(call_fd, False)
        os.set_blocking(reply_fd, False)
        try:
            self.pidfd: int | None = os.pidfd_open(program_pid)
        except (AttributeError, OSError):  # kernels before 5.3: poll
            self.pidfd = None
        self.namespace = _Namespace(__builtins__=builtins, __name__=TESTS_MODULE)
        self.namespace.judge = self
        # The entry point whose results are recorded, for the helper check (`helper_probe`).
        self.watched = job.get("watch") if type(job.get("watch")) is str else None
        self.outputs = None
        self.values: list[str | None] = []
        """Each watched result's own digest (None: it raised or timed out), up to `MAX_VALUES`:
        what tells a perturbed run's different answers from its failures."""
        if self.watched is not None:
            import hashlib  # only here: the worker never imports it (it slows every fork)

            self.outputs = hashlib.sha256()
            self._digest = hashlib.sha256

    def _reset_test(self) -> None:
        self.handles_issued: dict[int, str] = {}
        self.handles_used: set[int] = set()
        self.misused: str | None = None
        self.aborted: tuple[str, str] | None = None

    # ------------------------------------------------------------------ events to the worker

    def emit(self, event: dict) -> None:
        data = memoryview((json.dumps(event, ensure_ascii=True) + "\n").encode())
        while data:
            data = data[os.write(self.ctl_fd, data):]

    # ------------------------------------------------------------------ the channel

    def _program_exited(self, ready: list[int]) -> bool:
        if self.pidfd is not None:
            return self.pidfd in ready
        return os.waitid(os.P_PID, self.program_pid,
                         os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None

    def _wait(self, deadline: float, write: bool) -> bool:
        """Wait until the channel is ready; False when the program process has exited."""
        fd = self.call_fd if write else self.reply_fd
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Expired
            watch = [self.pidfd] if self.pidfd is not None else []
            timeout = remaining if self.pidfd is not None else min(remaining, 0.01)
            if self.disk is not None:
                if self.disk.exceeded():
                    raise self._halt(StopRun("killed", "DiskLimit", self.disk.message()))
                timeout = min(timeout, DiskWatch.INTERVAL)
            readable, writable, _ = select.select(watch + ([] if write else [fd]),
                                                  [fd] if write else [], [], timeout)
            if fd in readable or fd in writable:
                return True
            if self._program_exited(readable):
                return False

    def _send(self, message: dict, deadline: float) -> None:
        data = memoryview((json.dumps(message, ensure_ascii=True) + "\n").encode())
        while data:
            try:
                data = data[os.write(self.call_fd, data):]
                continue
            except BlockingIOError:
                pass
            except BrokenPipeError:
                raise self._halt(ChannelClosed()) from None
            if not self._wait(deadline, write=True):
                raise self._halt(ChannelClosed())

    def _receive(self, deadline: float) -> dict:
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[:newline + 1]
                try:
                    message = json.loads(line)
                except (ValueError, RecursionError):
                    message = None
                if type(message) is not dict:
                    raise self._halt(StopRun("error", "SandboxProtocolError",
                                             "the program wrote something that is not a "
                                             "sandbox message to the sandbox's channel"))
                return message
            if len(self.buffer) > plain_data.MAX_BYTES + 4096:
                raise self._halt(StopRun("error", "SandboxProtocolError",
                                         "the program sent more than "
                                         f"{plain_data.MAX_BYTES >> 20} MiB in one message"))
            if self.eof:
                raise self._halt(ChannelClosed())
            alive = self._wait(deadline, write=False)
            try:
                chunk = os.read(self.reply_fd, 1 << 16)
            except BlockingIOError:
                chunk = None
            if chunk:
                self.buffer += chunk
            elif chunk == b"" or not alive:  # end of file, or the process is gone and its
                self.eof = True              # last words are read
                if self.buffer.find(b"\n") < 0:
                    raise self._halt(ChannelClosed())

    def _halt(self, exc: BaseException) -> BaseException:
        """Remember why the run stops (test code may swallow the exception; this may not)."""
        if self.halt is None:
            self.halt = exc
        return exc

    def _expired(self) -> BaseException:
        if time.monotonic() >= self.wall_deadline:
            return self._halt(WallTimeout())
        return TestTimeout()

    def _settle(self) -> None:
        """Wait for the answer to a call whose test timed out before the next request."""
        if self.in_flight is None:
            return
        deadline = min(time.monotonic() + SETTLE_SECONDS, self.wall_deadline)
        try:
            while True:
                reply = self._receive(deadline)
                ident = reply.get("id")
                if type(ident) is int and ident >= self.in_flight:
                    break
        except _Expired:
            if time.monotonic() >= self.wall_deadline:
                raise self._halt(WallTimeout()) from None
            raise self._halt(StopRun(
                "timeout", "Timeout", "the program did not return from a call within "
                f"{SETTLE_SECONDS:g} s after its test's time limit; the remaining tests did "
                "not run")) from None
        self.in_flight = None

    def request(self, message: dict) -> dict:
        """Send one request to the program and wait for its reply, within the test's time."""
        if self.halt is not None:
            raise self.halt
        signal.setitimer(signal.ITIMER_REAL, 0)  # the channel keeps its own deadlines
        self._settle()
        self.next_id += 1
        ident = self.next_id
        message["id"] = ident
        message["timeout"] = max(self.test_deadline - time.monotonic(), 0.001)
        self.in_flight = ident
        try:
            self._send(message, self.test_deadline)
            while True:
                reply = self._receive(self.test_deadline)
                if reply.get("id") == ident:
                    break
                if type(reply.get("id")) is not int or reply["id"] > ident:
                    raise self._halt(StopRun("error", "SandboxProtocolError",
                                             "the program answered a request it was not sent"))
        except _Expired:
            raise self._expired() from None
        self.in_flight = None
        left = self.test_deadline - time.monotonic()
        if left <= 0:
            raise self._expired()
        signal.setitimer(signal.ITIMER_REAL, left)
        return reply

    # ------------------------------------------------------------------ values

    def misuse(self, type_name: str, what: str) -> None:
        message = (f"the program returned a value of type {type_name}, which is not plain "
                   f"data ({plain_data.PLAIN_TYPES}), and the test {what} it")
        self.misused = self.misused or message
        raise NotPlainData(message)

    def _from_program(self, tag: str, body: object) -> object:
        if (tag != "h" or type(body) is not list or len(body) != 2 or type(body[0]) is not int
                or type(body[1]) is not str):
            raise plain_data.PlainDataError(f"malformed reference {tag!r}")
        handle = Handle(self, body[0], exception_text.clip(body[1], 100))
        self.handles_issued.setdefault(body[0], handle._type)
        return handle

    def _decode(self, encoded: object) -> object:
        try:
            return plain_data.decode(encoded, self._from_program)
        except (plain_data.PlainDataError, RecursionError) as exc:
            self.misused = self.misused or f"the program sent malformed data: {exc}"
            raise NotPlainData(self.misused) from None

    def _to_program(self, value: object) -> object:
        kind = type(value)
        # exact types (a test's subclass is no proxy): the casts restate the `is` tests
        if kind is RemoteFunction:
            return {"fn": cast(RemoteFunction, value)._name}
        if kind is Handle:
            handle = cast(Handle, value)
            self.handles_used.add(handle._id)
            return {"h": [handle._id, handle._type]}
        raise TypeError(f"the test passes a {kind.__name__} to the program; only plain data "
                        f"({plain_data.PLAIN_TYPES}) and the program's own functions and "
                        "objects can cross to it")

    def lookup(self, name: str) -> object:
        """What a program name is, for the tests (raises KeyError when it has none)."""
        known = self.proxies.get(name)
        if known is not None:
            return known
        reply = self.request({"op": "get", "name": name})
        if reply.get("missing"):
            raise KeyError(name)
        if "module" in reply:
            module = self._module(reply["module"], name)
            self.proxies[name] = module
            return module
        if reply.get("callable"):
            proxy = RemoteFunction(self, name)
            self.proxies[name] = proxy
            return proxy
        if "value" not in reply:
            raise self._halt(StopRun("error", "SandboxProtocolError",
                                     "the program answered a lookup with no value"))
        return self._decode(reply["value"])

    @staticmethod
    def _module(module: object, name: str) -> object:
        root = module.split(".")[0] if type(module) is str else ""
        if type(module) is not str or root not in sys.stdlib_module_names or root in _NO_IMPORT:
            raise NameError(f"the test uses {name!r}, which the program binds to a module the "
                            f"tests do not import (only standard-library modules are)")
        return importlib.import_module(module)

    def call(self, target: dict, label: str, args: tuple, kwargs: dict) -> object:
        """Call a program function (or handle) with plain arguments; its result as plain data."""
        encoder = plain_data.Encoder(self._to_program)
        message = {"op": "call", "target": target,
                   "args": [encoder.encode(a) for a in args],
                   "kwargs": {str(k): encoder.encode(v) for k, v in kwargs.items()}}
        try:
            reply = self.request(message)
        except TestTimeout:
            self._record(target, {"timeout": True})
            raise
        self._record(target, reply)
        if reply.get("timeout"):
            raise TestTimeout()
        raised = reply.get("raised")
        if raised is not None:
            raise self._program_exception(raised, label)
        if "error" in reply:
            error = reply["error"] if type(reply["error"]) is str else "an unreadable error"
            text = f"the value {label} returned cannot cross as plain data: {exception_text.clip(error, 300)}"
            self.misused = self.misused or text
            raise NotPlainData(text)
        if "value" not in reply:
            raise self._halt(StopRun("error", "SandboxProtocolError",
                                     "the program answered a call with no value"))
        return self._decode(reply["value"])

    def _record(self, target: dict, reply: dict) -> None:
        """Add a result of the watched entry point to the digest: its value as it crossed, or
        what it raised (the type only: messages may hold addresses), or that it timed out."""
        if self.outputs is None or target.get("name") != self.watched:
            return
        raised = reply.get("raised")
        if reply.get("timeout"):
            item: list = ["timeout"]
        elif raised is not None:
            item = ["raised", raised[0] if type(raised) is list and raised else None]
        elif "value" in reply:
            item = ["value", reply["value"]]
        else:
            item = ["unreadable"]
        try:
            line = json.dumps(item, sort_keys=True)
        except (ValueError, RecursionError):  # nested too deep to write again: fails decoding
            line = '["unreadable"]'
        self.outputs.update(line.encode() + b"\n")
        if len(self.values) < MAX_VALUES:
            self.values.append(self._digest(line.encode()).hexdigest()[:16] if item[0] == "value" else None)

    def _helper_report(self) -> dict | None:
        """The program process's count of the helpers' calls (`helper_probe.HelperWatch`),
        tied to this request by a nonce it cannot have seen before; None when it has none."""
        nonce = os.urandom(16).hex()
        try:
            self._arm()
            try:
                reply = self.request({"op": "helpers", "nonce": nonce})
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except TestTimeout:
            return None
        calls, raised, intact = reply.get("calls"), reply.get("raised"), reply.get("intact")
        if (reply.get("nonce") != nonce or type(calls) is not int or type(raised) is not int
                or type(intact) is not bool):
            return None
        return {"calls": calls, "raised": raised, "intact": intact}

    def _probe(self) -> dict | None:
        if self.outputs is None:
            return None
        probe: dict = {"outputs": self.outputs.hexdigest(), "values": self.values}
        if type(self.job.get("helpers")) is dict:
            probe["helpers"] = self._helper_report()
        return probe

    def _program_exception(self, raised: object, label: str) -> BaseException:
        if (type(raised) is list and len(raised) == 3 and type(raised[0]) is str
                and type(raised[1]) is str):
            name, message, builtin = exception_text.clip(raised[0], 100), exception_text.clip(raised[1]), raised[2]
        else:
            name, message, builtin = "Exception", "an exception the sandbox could not read", True
        if name in _BASE_ONLY or (name not in _EXCEPTIONS and builtin is not True):
            text = (f"the program raised {name} in a call to {label}"
                    f"{': ' + message if message and message != name else ''}; a test cannot "
                    "pass that way")
            self.aborted = self.aborted or (name, text)
            return ProgramAborted(text)
        cls = _EXCEPTIONS.get(name)
        if cls is not None:
            try:
                return cls(message)
            except Exception:  # a builtin whose constructor wants other arguments
                pass
        return ProgramError(name, message)

    # ------------------------------------------------------------------ running tests

    def _on_alarm(self, signum, frame) -> None:
        raise self._expired()

    def _arm(self) -> None:
        now = time.monotonic()
        self.test_deadline = min(now + self.test_timeout, self.wall_deadline)
        if self.test_deadline <= now:
            raise self._halt(WallTimeout())
        signal.setitimer(signal.ITIMER_REAL, self.test_deadline - now)

    def run(self) -> None:
        """Receive the program's load report, run every test, stream the events."""
        signal.signal(signal.SIGALRM, self._on_alarm)
        try:
            self._run()
        except WallTimeout:
            self.timed_out = True
        except ChannelClosed:
            pass
        except StopRun as stop:
            self.stop = list(stop.args)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def _first_message(self) -> dict:
        try:
            return self._receive(self.wall_deadline)
        except _Expired:
            raise self._halt(WallTimeout()) from None

    def _run(self) -> None:
        setup = self._first_message()
        if setup.get("kind") == "setup_error":
            self.emit({"kind": "setup_error", "message": exception_text.clip(str(setup.get("message")))})
            return
        if setup.get("kind") != "setup":
            raise self._halt(StopRun("error", "SandboxProtocolError",
                                     "the program process did not report its setup"))
        self.emit({"kind": "setup", **{k: v for k, v in setup.items()
                                       if k in ("proc", "process_limit", "sockets_blocked")
                                       and type(v) in (bool, str) and len(str(v)) < 200}})
        # The program process holds nothing of the job until now, and then only these two.
        try:
            load = {"op": "load", "program": self.job["program"],
                    "imports": program_imports(self.job.get("setup", ""))}
            if type(self.job.get("helpers")) is dict:
                load["helpers"] = self.job["helpers"]
            self._send(load, self.wall_deadline)
        except _Expired:
            raise self._halt(WallTimeout()) from None
        load = self._first_message()
        status = load.get("status")
        if load.get("kind") != "load" or status not in ("ok", "syntax_error", "error"):
            raise self._halt(StopRun("error", "SandboxProtocolError",
                                     "the program process did not report how it loaded"))
        event = {"kind": "load", "status": status}
        if status != "ok":
            event["error_type"] = exception_text.clip(str(load.get("error_type")), 100)
            event["message"] = exception_text.clip(str(load.get("message")))
        self.emit(event)
        if status != "ok":
            return
        if self.outputs is not None:
            # Runs whose results are compared draw the same test inputs: tests that pick them
            # with `random` (HumanEval/53's 100 random pairs) see one seeded sequence.
            import random

            random.seed(0)
        self._run_setup()
        for index, source in enumerate(self.job["tests"]):
            if time.monotonic() >= self.wall_deadline:
                raise self._halt(WallTimeout())
            outcome = self._run_test(index, source)
            self.emit({"kind": "test", **outcome})
        probe = self._probe()
        self.emit({"kind": "done", **({"probe": probe} if probe is not None else {})})

    def _run_setup(self) -> None:
        source = self.job.get("setup", "")
        if not source.strip():
            return
        try:
            self._arm()
            try:
                exec(compile(source, "<setup>", "exec"), self.namespace)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except (WallTimeout, ChannelClosed, StopRun):
            raise
        except BaseException as exc:
            if self.halt is not None:
                raise self.halt from None
            self.setup_failure = f"{type(exc).__name__}: {_safe_str(exc)}"
        if self.halt is not None:
            raise self.halt

    def _run_test(self, index: int, source: str) -> dict:
        outcome: dict[str, object] = {"index": index, "passed": False, "error_type": None, "message": None,
                                      "timed_out": False, "expected": None, "got": None}
        if self.setup_failure:
            outcome.update(error_type="TestSetupError",
                           message=f"the test setup failed: {self.setup_failure}")
            return outcome
        filename = f"<test {index}>"
        self._reset_test()
        try:
            try:
                tree = ast.parse(source, filename, "exec")
            except (SyntaxError, ValueError) as exc:
                outcome.update(error_type=type(exc).__name__, message=_safe_str(exc))
                return outcome
            self._arm()
            try:
                if len(tree.body) == 1 and isinstance(tree.body[0], ast.Assert):
                    self._run_assert(tree.body[0], filename, outcome)
                else:
                    exec(compile(tree, filename, "exec"), self.namespace)
                    outcome["passed"] = True
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except TestTimeout:
            outcome.update(passed=False, timed_out=True, error_type="Timeout",
                           message=f"test exceeded its time limit of {self.test_timeout:g} s")
        except (WallTimeout, ChannelClosed, StopRun):
            raise
        except BaseException as exc:
            if self.halt is not None:
                raise self.halt from None
            kind = exc.type_name if isinstance(exc, ProgramError) else type(exc).__name__
            message = outcome["message"] or _safe_str(exc) + exception_text.line_note(exc, filename, "test")
            if isinstance(exc, ProgramAborted) and self.aborted is not None:
                kind, message = self.aborted
            outcome.update(passed=False, error_type=kind, message=message)
        if self.halt is not None:  # test code swallowed it: the run stops all the same
            raise self.halt
        self._integrity(outcome)
        return outcome

    def _integrity(self, outcome: dict) -> None:
        """A test passes only if nothing the program returned was misused or kept back."""
        if not outcome["passed"]:
            return
        unused = [t for i, t in self.handles_issued.items() if i not in self.handles_used]
        problem = None
        if self.aborted is not None:
            problem = self.aborted
        elif self.misused is not None:
            problem = ("NotPlainData", self.misused)
        elif unused:
            problem = ("NotPlainData", (f"the program returned a value of type {unused[0]}, "
                                        f"which is not plain data ({plain_data.PLAIN_TYPES})"))
        if problem is not None:
            outcome.update(passed=False, error_type=problem[0], message=problem[1])

    def _eval(self, node: ast.expr, filename: str) -> object:
        return eval(compile(ast.Expression(body=node), filename, "eval"), self.namespace)

    def _run_assert(self, node: ast.Assert, filename: str, outcome: dict) -> None:
        """Evaluate each side of `assert a == b` / `a != b` once, to report expected and got."""
        test = node.test
        if (isinstance(test, ast.Compare) and len(test.ops) == 1
                and isinstance(test.ops[0], (ast.Eq, ast.NotEq))):
            got = self._eval(test.left, filename)
            outcome["got"] = show(got)
            expected = self._eval(test.comparators[0], filename)
            equal = isinstance(test.ops[0], ast.Eq)
            outcome["expected"] = show(expected) if equal else "!= " + show(expected)
            passed = bool(got == expected) if equal else bool(got != expected)
            default = f"expected {outcome['expected']}, got {outcome['got']}"
        else:
            value = self._eval(test, filename)
            outcome["got"] = show(value)
            passed = bool(value)
            default = f"assertion is false: {ast.unparse(test)[:MAX_REPR]}"
        if passed:
            outcome["passed"] = True
            return
        message = default
        if node.msg is not None:
            message = show(self._eval(node.msg, filename))
        outcome["message"] = message
        raise AssertionError(message)
