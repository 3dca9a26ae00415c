"""Per-agent credit for the neural learners (``learning.critic``): the critic seam, LLM-MCA
(a centralised LLM critic splits each team reward), LCA (agent-specific state rankings ->
Bradley-Terry potentials) and env difference rewards.

Only the options load with the package; torch loads with the critics themselves.
"""

from __future__ import annotations

from marlang.credit.options import CRITICS, CreditOptions, check_credit_config
from marlang.lazy import lazy_getattr

_LAZY = {
    "Critic": "marlang.credit.critic",
    "build_critic": "marlang.credit.critic",
    "LCACritic": "marlang.credit.lca",
    "LLMCreditCritic": "marlang.credit.llm_mca",
    "DifferenceCritic": "marlang.credit.difference",
    "StepRecords": "marlang.credit.records",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["CRITICS", "CreditOptions", "Critic", "DifferenceCritic", "LCACritic", "LLMCreditCritic", "StepRecords",
           "build_critic", "check_credit_config"]
