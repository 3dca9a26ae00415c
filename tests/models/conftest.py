"""Fixtures for model-layer tests: the tiny random engine (fast) and the embedded SmolLM2."""

from __future__ import annotations

import pytest

from marlang.models import LocalLM, ModelNotAvailableError
from marlang.testing import tiny_local_lm


@pytest.fixture
def tiny_engine() -> LocalLM:
    """A fresh tiny engine per test, so its counters start at zero."""
    return tiny_local_lm()


@pytest.fixture(scope="session")
def smollm2_engine() -> LocalLM:
    """The embedded SmolLM2 (converted once into the user cache, then loaded from it)."""
    try:
        return LocalLM.from_spec("local:smollm2")
    except ModelNotAvailableError as exc:
        pytest.skip(str(exc))
