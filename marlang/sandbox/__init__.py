"""Runs untrusted generated code (HumanEval/MBPP-style programs) against tests, confined.

`Sandbox` keeps a pool of warm worker processes; each run gets a fresh child in its own
namespaces (or the strongest isolation this machine offers), with rlimits and a scrubbed
environment. See `confinement` for what each isolation level does.
"""

from marlang.sandbox.confinement import LEVELS
from marlang.sandbox.helper_probe import HelperProbe
from marlang.sandbox.isolation import (
    IsolationInfo,
    IsolationUnavailableError,
    detect_isolation,
)
from marlang.sandbox.limits import SandboxLimits
from marlang.sandbox.pool import Sandbox, shared_sandbox
from marlang.sandbox.results import STATUSES, SandboxResult, TestOutcome

__all__ = [
    "LEVELS",
    "STATUSES",
    "HelperProbe",
    "IsolationInfo",
    "IsolationUnavailableError",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "TestOutcome",
    "detect_isolation",
    "shared_sandbox",
]
