"""Per-agent credit for the neural learners (``learning.critic``): the critic seam, LLM-MCA
(a centralised LLM critic splits each team reward), LCA (agent-specific state rankings ->
Bradley-Terry potentials) and env difference rewards.

Only the options load with the package; torch loads with the critics themselves.
"""

from __future__ import annotations

from marlang.lazy import lazy_getattr
from marlang.methods.neural.critics.options import CRITICS, CreditOptions, check_credit_config

_LAZY = {
    "marlang.methods.neural.critics.critic": ("Critic", "build_critic"),
    "marlang.methods.neural.critics.lca": ("LCACritic",),
    "marlang.methods.neural.critics.llm_mca": ("LLMCreditCritic",),
    "marlang.methods.neural.critics.difference": ("DifferenceCritic",),
    "marlang.methods.neural.critics.records": ("StepRecords",),
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["CRITICS", "CreditOptions", "Critic", "DifferenceCritic", "LCACritic", "LLMCreditCritic", "StepRecords",
           "build_critic", "check_credit_config"]
