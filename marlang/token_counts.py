"""Token counts from outside marlang (a server's ``usage``, a run's ``llm_calls.csv``), distrusted
like any field: a count that is not a whole number from 0 to `MAX_CALL_TOKENS` is dropped, so no
negative, fractional or absurd count reaches a table, a price or an interval.
"""

from __future__ import annotations

import math
from typing import Any

MAX_CALL_TOKENS = 10**8
"""More tokens than any model reads or writes in one call: a larger count is a broken server's."""


def trusted_tokens(value: Any) -> int | None:
    """``value`` as a call's token count, or None if it cannot be one (negative, fractional,
    over `MAX_CALL_TOKENS`, not a number; a bool is no count)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip()) if value.strip() else 0
        except ValueError:
            return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_CALL_TOKENS:
        return None
    return value
