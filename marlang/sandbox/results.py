"""What one sandboxed run reports: `SandboxResult` and one `TestOutcome` per finished test.

Both are plain dataclasses with JSON-safe `to_dict` / `from_dict`, so environments can store
them in trajectories and run directories.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

STATUSES: tuple[str, ...] = ("ok", "syntax_error", "error", "timeout", "killed", "crashed")


@dataclass
class TestOutcome:
    """One test snippet's outcome. `expected`/`got` are truncated reprs for assert-tests."""

    __test__ = False  # not a pytest test class

    index: int
    source: str
    passed: bool
    error_type: str | None = None
    message: str | None = None
    timed_out: bool = False
    expected: str | None = None
    got: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TestOutcome:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class SandboxResult:
    """The outcome of running a program and its tests.

    status: "ok" (the program loaded and its tests ran; see `tests` for which passed),
    "syntax_error", "error" (the program raised while loading, or ended its own process),
    "timeout" (wall or CPU limit of the whole run), "killed" (a signal, e.g. memory),
    "crashed" (the sandbox machinery failed; `message` says why).
    `tests` holds the finished tests only: after a timeout or kill it is a prefix of them.
    """

    status: str
    tests: list[TestOutcome] = field(default_factory=list)
    total: int = 0
    error_type: str | None = None
    message: str | None = None
    stdout: str = ""
    stderr: str = ""
    wall_seconds: float = 0.0
    isolation: str = ""
    probe: dict | None = None
    """What a run with a `HelperProbe` saw, when every test ran: ``outputs`` (a digest of the
    entry point's results), ``values`` (each result's own digest, None where it raised or
    timed out) and, where it wrapped the helpers, ``helpers`` (``calls`` and
    ``raised`` while the entry point ran, ``intact``: still the functions their agents
    wrote; None when the program process gave no trustworthy count)."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"SandboxResult.status must be one of {list(STATUSES)}, "
                             f"got {self.status!r}")

    @property
    def passed(self) -> int:
        return sum(1 for t in self.tests if t.passed)

    @property
    def all_passed(self) -> bool:
        return self.status == "ok" and self.passed == self.total

    def to_dict(self) -> dict:
        data = asdict(self)
        data["passed"] = self.passed
        data["all_passed"] = self.all_passed
        return data

    @classmethod
    def from_dict(cls, data: dict) -> SandboxResult:
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["tests"] = [t if isinstance(t, TestOutcome) else TestOutcome.from_dict(t)
                           for t in data.get("tests", [])]
        return cls(**kwargs)
