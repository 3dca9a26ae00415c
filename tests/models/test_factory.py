"""Spec strings: parsing, parameter checking, the listing, and backend-specific errors."""

from __future__ import annotations

import sys

import pytest

from marlang.models import (
    ModelNotAvailableError,
    ScoringNotSupportedError,
    list_model_specs,
    load_chat_model,
    make_scorer,
    parse_model_spec,
)


def test_unknown_prefix_names_the_valid_ones() -> None:
    with pytest.raises(ValueError) as info:
        load_chat_model("gpt4:turbo")
    for prefix in ("local:", "hf:", "openai:", "litellm:"):
        assert prefix in str(info.value)
    with pytest.raises(ValueError, match="names no model"):
        parse_model_spec("openai:")
    assert parse_model_spec("litellm:anthropic/claude") == ("litellm", "anthropic/claude")


def test_unknown_parameters_are_rejected_with_the_valid_list() -> None:
    with pytest.raises(TypeError, match="temprature") as info:
        load_chat_model("openai:m", base_url="http://127.0.0.1:1/v1", temprature=0.2)
    assert "temperature" in str(info.value)
    with pytest.raises(TypeError, match="base_url"):
        load_chat_model("local:smollm2", base_url="http://x")  # not a local-model param


def test_unknown_embedded_model() -> None:
    with pytest.raises(ValueError, match="local:smollm2"):
        load_chat_model("local:gpt5")


def test_list_model_specs_describes_every_form() -> None:
    specs = list_model_specs()
    assert set(specs) == {"local:smollm2", "hf:PATH", "openai:MODEL", "litellm:PROVIDER/MODEL"}
    assert all(isinstance(d, str) and d and "\n" not in d for d in specs.values())


def test_openai_without_key_or_server_says_what_to_set(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelNotAvailableError, match="OPENAI_API_KEY"):
        load_chat_model("openai:gpt-4o-mini")
    # A local OpenAI-compatible server needs no key.
    model = load_chat_model("openai:qwen", base_url="http://127.0.0.1:8000/v1")
    assert model.endpoint == "http://127.0.0.1:8000/v1"


def test_litellm_missing_package_gives_the_install_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_litellm", None)  # import fails
    with pytest.raises(ModelNotAvailableError, match="pip install langchain-litellm"):
        load_chat_model("litellm:anthropic/claude-3-5-haiku-latest")


def test_litellm_builds_a_resilient_model_when_installed() -> None:
    pytest.importorskip("langchain_litellm")
    model = load_chat_model(
        "litellm:openai/gpt-4o-mini", base_url="http://127.0.0.1:1", seed=3, max_retries=1
    )
    assert model.model_id == "litellm:openai/gpt-4o-mini"
    assert model.endpoint == "http://127.0.0.1:1"


def test_scoring_needs_a_local_model() -> None:
    with pytest.raises(ScoringNotSupportedError, match="local:smollm2") as info:
        make_scorer("openai:gpt-4o-mini")
    assert isinstance(info.value, NotImplementedError)
    with pytest.raises(ValueError, match="must start with"):
        make_scorer("vllm:x")


def test_every_public_name_resolves() -> None:
    from marlang import models

    for name in models.__all__:
        assert getattr(models, name) is not None
    with pytest.raises(AttributeError):
        models.no_such_name  # noqa: B018
