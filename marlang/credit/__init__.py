"""Per-agent credit for the neural learners (``learning.critic``): the critic seam, LLM-MCA
(a centralised LLM critic splits each team reward), LCA (agent-specific state rankings ->
Bradley-Terry potentials) and env difference rewards.

Only the options load with the package; torch loads with the critics themselves.
"""

from __future__ import annotations

import importlib
from typing import Any

from marlang.credit.options import CRITICS, CreditOptions, check_credit_config

_LAZY = {
    "Critic": "marlang.credit.critic",
    "build_critic": "marlang.credit.critic",
    "LCACritic": "marlang.credit.lca",
    "LLMCreditCritic": "marlang.credit.llm_mca",
    "DifferenceCritic": "marlang.credit.difference",
    "StepRecords": "marlang.credit.records",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CRITICS", "CreditOptions", "Critic", "DifferenceCritic", "LCACritic", "LLMCreditCritic", "StepRecords",
           "build_critic", "check_credit_config"]
