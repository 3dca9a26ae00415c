"""Shared pytest fixtures: keep every test's caches and runs inside its tmp dir."""

from __future__ import annotations

import pytest


@pytest.fixture
def response_cache_path(tmp_path):
    return tmp_path / "responses.sqlite"
