"""Per-agent credit for the neural learners (``learning.critic``): the critic seam, LLM-MCA
(a centralised LLM critic splits each team reward), LCA (agent-specific state rankings ->
Bradley-Terry potentials) and env difference rewards.

Only the options load with the package; torch loads with the critics themselves.
"""

from __future__ import annotations

from marlang.lazy import lazy_getattr
from marlang.methods.neural.critics.options import CRITICS, CreditOptions, check_credit_config

_LAZY = {
    "Critic": "marlang.methods.neural.critics.critic",
    "build_critic": "marlang.methods.neural.critics.critic",
    "LCACritic": "marlang.methods.neural.critics.lca",
    "LLMCreditCritic": "marlang.methods.neural.critics.llm_mca",
    "DifferenceCritic": "marlang.methods.neural.critics.difference",
    "StepRecords": "marlang.methods.neural.critics.records",
}

__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = ["CRITICS", "CreditOptions", "Critic", "DifferenceCritic", "LCACritic", "LLMCreditCritic", "StepRecords",
           "build_critic", "check_credit_config"]
