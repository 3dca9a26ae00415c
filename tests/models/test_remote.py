"""Remote backends: OpenAI-compatible servers, retries with backoff, unreachable servers."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from marlang.models import (
    ModelUnreachableError,
    ResilientChatModel,
    SQLiteResponseCache,
    UsageRecorder,
    load_chat_model,
)
from marlang.testing import FakeOpenAIServer

MESSAGES = [HumanMessage("Which action?")]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeFlakyChatModel(BaseChatModel):
    """Raises ``errors`` one per call, then answers "ok"."""

    errors: list[Any]
    _calls: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "fake-flaky"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self._calls += 1
        if self._calls <= len(self.errors):
            raise self.errors[self._calls - 1]
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])


def flaky(errors: list[Exception], max_retries: int = 3) -> ResilientChatModel:
    return ResilientChatModel(
        inner=FakeFlakyChatModel(errors=errors),
        model_id="openai:flaky",
        endpoint="http://flaky.invalid/v1",
        max_retries=max_retries,
        initial_backoff_s=0.001,
    )


def test_unreachable_server_raises_a_clear_error_after_retries() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = load_chat_model(
        "openai:test-model",
        base_url=url,
        api_key="x",
        max_retries=2,
        retry_backoff_s=0.01,
        timeout=2,
    )
    assert isinstance(model, BaseChatModel)
    with pytest.raises(ModelUnreachableError) as info:
        model.invoke(MESSAGES)
    message = str(info.value)
    assert url in message and "after 3 attempt(s)" in message
    for what in ("server is running", "base_url", "network", "API key"):
        assert what in message
    assert info.value.url == url and info.value.attempts == 3


async def test_unreachable_server_async() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    model = load_chat_model(
        "openai:test-model", base_url=url, api_key="x", max_retries=1, retry_backoff_s=0.01
    )
    with pytest.raises(ModelUnreachableError, match="after 2 attempt"):
        await model.ainvoke(MESSAGES)


def test_openai_compatible_server_end_to_end(tmp_path) -> None:
    rec = UsageRecorder()
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    with FakeOpenAIServer(reply="go forward", fail_first=1) as server:
        model = load_chat_model(
            "openai:fake-model",
            base_url=server.base_url,
            api_key="k",
            temperature=0.0,
            max_tokens=8,
            seed=4,
            retry_backoff_s=0.01,
            cache=cache,
        )
        meta = {"callbacks": [rec], "metadata": {"marlang_role": "actor", "marlang_episode": 0}}
        first = model.invoke(MESSAGES, config=meta)
        again = model.invoke(MESSAGES, config=meta)
        other_seed = model.invoke(MESSAGES, config=meta, seed=5)
    assert first.content == again.content == other_seed.content == "go forward"
    # One 503 retried, then one request each for the two distinct cache keys.
    assert len(server.requests) == 3
    assert server.requests[1]["seed"] == 4 and server.requests[2]["seed"] == 5
    assert server.requests[1]["max_completion_tokens"] == 8
    assert first.usage_metadata["output_tokens"] == 2
    assert [r.cached for r in rec.rows] == [False, True, False]
    assert {r.model for r in rec.rows} == {"openai:fake-model"}
    # three answered calls (one from the cache), each counted with its tokens
    assert rec.totals_by_role()["actor"]["input_tokens"] == 3 * first.usage_metadata["input_tokens"]


def test_environment_supplies_base_url_and_key(monkeypatch) -> None:
    with FakeOpenAIServer(reply="hi") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "from-env")
        model = load_chat_model("openai:m")
        assert model.invoke(MESSAGES).content == "hi"
        assert model.endpoint == server.base_url


def test_transient_errors_are_retried_with_backoff() -> None:
    model = flaky([ConnectionError("refused"), TimeoutError("slow")])
    assert model.invoke(MESSAGES).content == "ok"
    assert model.inner._calls == 3
    assert [model.backoff_s(k) for k in range(3)] == [0.001, 0.002, 0.004]
    capped = model.model_copy(update={"initial_backoff_s": 1.0, "max_backoff_s": 3.0})
    assert [capped.backoff_s(k) for k in range(4)] == [1.0, 2.0, 3.0, 3.0]


async def test_errors_that_retrying_cannot_fix_are_raised_at_once() -> None:
    model = flaky([ValueError("bad request")])
    with pytest.raises(ValueError, match="bad request"):
        await model.ainvoke(MESSAGES)
    assert model.inner._calls == 1


def test_retry_waits_grow_exponentially(monkeypatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("marlang.models.remote.time.sleep", waits.append)
    model = flaky([ConnectionError("x")] * 4, max_retries=3)
    model = model.model_copy(update={"initial_backoff_s": 0.5, "max_backoff_s": 1.5})
    with pytest.raises(ModelUnreachableError):
        model.invoke(MESSAGES)
    assert model.inner._calls == 4
    # 0.5, 1.0, then capped at 1.5 s, each plus at most 10% jitter.
    for wait, base in zip(waits, [0.5, 1.0, 1.5], strict=True):
        assert base <= wait <= 1.1 * base


def test_wrapper_identifies_model_and_endpoint_for_the_cache() -> None:
    model = load_chat_model("openai:m", base_url="http://127.0.0.1:1/v1", api_key="k", seed=3)
    params = model._identifying_params
    assert params["model_id"] == "openai:m"
    assert params["endpoint"] == "http://127.0.0.1:1/v1"
    assert params["seed"] == 3
