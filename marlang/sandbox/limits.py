"""Resource limits of one sandboxed run (`SandboxLimits`), validated on construction.

Frozen and hashable, so a limits object can key the process-wide shared pools.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from numbers import Real

# (field, integer?, minimum): the minimum memory leaves room for the forked interpreter itself.
_RULES: dict[str, tuple[bool, float]] = {
    "cpu_seconds": (False, 0.0), "wall_seconds": (False, 0.0), "memory_mb": (True, 64),
    "max_processes": (True, 1), "file_size_mb": (True, 1), "disk_mb": (True, 1),
    "output_chars": (True, 1),
    "test_timeout": (False, 0.0),
}


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every run. Times in seconds, sizes in MiB.

    cpu_seconds: CPU time of the program process (RLIMIT_CPU, rounded up to whole seconds).
    wall_seconds: wall time of the whole run; past it every process of the run is killed.
    memory_mb: address space per process (RLIMIT_AS).
    max_processes: processes and threads the run may have at once (RLIMIT_NPROC).
    file_size_mb: largest file the program may write (RLIMIT_FSIZE, at most disk_mb).
    disk_mb: most the program may write in all: the namespace levels' work directory is a
        tmpfs of this size; at the other levels the judge measures the work directory every
        10 ms while it waits on the program and stops the run past it (status "killed",
        error type "DiskLimit").
    output_chars: stdout and stderr are each cut to this many characters, with a marker.
    test_timeout: wall time of each test snippet.
    """

    cpu_seconds: float = 5.0
    wall_seconds: float = 10.0
    memory_mb: int = 512
    max_processes: int = 16
    file_size_mb: int = 16
    disk_mb: int = 64
    output_chars: int = 2000
    test_timeout: float = 3.0

    def __post_init__(self) -> None:
        for f in fields(self):
            integer, minimum = _RULES[f.name]
            value = getattr(self, f.name)
            kind = "an integer" if integer else "a number"
            valid_type = isinstance(value, int if integer else Real) and not isinstance(value, bool)
            if not valid_type or not math.isfinite(value) or value < minimum or (
                    not integer and value == 0):
                bound = f">= {minimum:g}" if integer else "> 0 and finite"
                raise ValueError(f"SandboxLimits.{f.name} must be {kind} {bound}, got {value!r}")

    def to_dict(self) -> dict:
        return asdict(self)
