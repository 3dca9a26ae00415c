"""``marlang credit-check RUN``: marlang's credit critics graded against a counterfactual oracle.
``check`` runs it and writes ``credit_check.json``; ``oracle``, ``critics`` and ``grading`` are
its three parts, ``graph_oracle`` the oracle of a user's graph (docs/howto/credit-check.md).
"""

from __future__ import annotations

from marlang.evaluation.creditcheck.check import (
    CREDIT_CHECK_FILE,
    CreditCheckOptions,
    credit_check,
    credit_table,
    write_credit_check,
)

__all__ = ["CREDIT_CHECK_FILE", "CreditCheckOptions", "credit_check", "credit_table", "write_credit_check"]
