"""Fixtures for model-layer tests: a fresh tiny random engine per test."""

from __future__ import annotations

import pytest

from marlang.models import LocalLM
from marlang.testing import tiny_local_lm


@pytest.fixture
def tiny_engine() -> LocalLM:
    """A fresh tiny engine per test, so its counters start at zero."""
    return tiny_local_lm()
