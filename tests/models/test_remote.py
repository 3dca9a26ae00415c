"""Remote backends: OpenAI-compatible servers, retries with backoff, unreachable servers."""

from __future__ import annotations

import asyncio
import csv
import socket
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from marlang.models import (
    ModelServerError,
    ModelUnreachableError,
    ResilientChatModel,
    SQLiteResponseCache,
    UsageRecorder,
    load_chat_model,
)
from marlang.testing import FAULTS, FakeOpenAIServer

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
    # A self-hosted server (base_url given) gets the limit as max_tokens by default.
    assert server.requests[1]["max_tokens"] == 8
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


class ServerError(Exception):
    status_code = 500


def test_a_500_to_a_json_schema_request_is_not_retried() -> None:
    # llama-cpp-python's server answers 500 to response_format json_schema: retrying only
    # delays the structured-reply fallback (json_object + schema). Other 500s are retried.
    schema = {"type": "json_schema", "json_schema": {"name": "credit", "schema": {"type": "object"}}}
    # it is raised at once, in one line that keeps the status (StructuredReplies.fall_back reads it)
    model = flaky([ServerError("unsupported response_format")])
    with pytest.raises(ModelServerError, match="model.structured") as info:
        model.invoke(MESSAGES, response_format=schema)
    assert model.inner._calls == 1 and info.value.status_code == 500
    model = flaky([ServerError("busy")])
    assert model.invoke(MESSAGES, response_format={"type": "json_object"}).content == "ok"
    assert model.inner._calls == 2
    model = flaky([ServerError("busy")])
    assert model.invoke(MESSAGES).content == "ok" and model.inner._calls == 2


def test_retry_waits_grow_exponentially(monkeypatch) -> None:
    waits: list[float] = []
    monkeypatch.setattr("time.sleep", waits.append)  # tenacity sleeps with time.sleep
    model = flaky([ConnectionError("x")] * 4, max_retries=3)
    model = model.model_copy(update={"initial_backoff_s": 0.5, "max_backoff_s": 1.5})
    with pytest.raises(ModelUnreachableError):
        model.invoke(MESSAGES)
    assert model.inner._calls == 4
    # 0.5, 1.0, then capped at 1.5 s, each plus at most 10% jitter.
    for wait, base in zip(waits, [0.5, 1.0, 1.5], strict=True):
        assert base <= wait <= 1.1 * base


ACTOR = {"metadata": {"marlang_role": "actor", "marlang_episode": 0}}
MISBEHAVIOURS = [*FAULTS, 500, 502, 503]


def on_faulty(server: FakeOpenAIServer, max_retries: int = 3) -> ResilientChatModel:
    return load_chat_model("openai:fake", base_url=server.base_url, api_key="k", max_retries=max_retries,
                           retry_backoff_s=0.001, timeout=30)


@pytest.mark.parametrize("fault", MISBEHAVIOURS)
def test_a_misbehaving_server_is_retried_like_a_timeout_and_the_retries_are_counted(fault, tmp_path) -> None:
    rec = UsageRecorder()
    with FakeOpenAIServer(reply="go forward", faults=[fault, fault]) as server:
        reply = on_faulty(server).invoke(MESSAGES, config={"callbacks": [rec], **ACTOR})
    assert reply.content == "go forward" and len(server.requests) == 3
    [row] = rec.rows
    assert row.retries == 2 and not row.error and row.output_tokens == 2
    assert rec.totals_by_role()["actor"]["retries"] == 2
    rec.append_csv(tmp_path / "llm_calls.csv")
    with open(tmp_path / "llm_calls.csv", newline="") as fh:
        [written] = list(csv.DictReader(fh))
    assert written["retries"] == "2" and written["role"] == "actor"


async def test_a_server_with_one_bad_reply_in_seven_serves_every_call() -> None:
    # Concurrent calls, each fault kind in turn on every seventh request: each call gets its
    # answer, and the retries add up to the faults sent.
    kinds = MISBEHAVIOURS

    def faults(n: int) -> str | int | None:
        return kinds[(n // 7) % len(kinds)] if n % 7 == 0 else None

    rec = UsageRecorder()
    bound = asyncio.Semaphore(8)  # as model.max_concurrency bounds a run's calls

    async def call(model: ResilientChatModel) -> Any:
        async with bound:
            return await model.ainvoke(MESSAGES, config={"callbacks": [rec], **ACTOR})

    with FakeOpenAIServer(reply="go forward", faults=faults) as server:
        model = on_faulty(server)
        replies = await asyncio.gather(*(call(model) for _ in range(40)))
    assert [r.content for r in replies] == ["go forward"] * 40
    sent = sum(1 for n in range(1, len(server.requests) + 1) if faults(n) is not None)
    assert sent >= 5 and len(server.requests) == 40 + sent
    assert rec.totals_by_role()["actor"]["retries"] == sent


@pytest.mark.parametrize(("fault", "kind"), [("cut", "a malformed reply"), ("empty", "a malformed reply"),
                                             ("closed", "the connection closed mid-reply"), (502, "HTTP 502")])
def test_a_server_that_stays_broken_raises_one_line_naming_it_the_fault_and_what_to_check(fault, kind) -> None:
    rec = UsageRecorder()
    with FakeOpenAIServer(faults=lambda n: fault) as server, pytest.raises(ModelServerError) as info:
        on_faulty(server, max_retries=2).invoke(MESSAGES, config={"callbacks": [rec], **ACTOR})
    message = str(info.value)
    assert not isinstance(info.value, ModelUnreachableError)
    assert "\n" not in message and server.base_url in message and kind in message
    assert "failed 3 attempt(s)" in message and "model.max_retries" in message and "server's log" in message
    assert info.value.url == server.base_url and info.value.attempts == 3 and len(server.requests) == 3
    [row] = rec.rows
    assert row.retries == 2 and "ModelServerError" in row.error


def test_a_file_begun_without_the_retries_column_keeps_its_columns(tmp_path) -> None:
    path = tmp_path / "llm_calls.csv"
    old = "time,model,role,agent,episode,step,input_tokens,output_tokens,latency_s,cached,error,iteration\n"
    path.write_text(old)
    rec = UsageRecorder()
    with FakeOpenAIServer(faults=[503]) as server:
        on_faulty(server).invoke(MESSAGES, config={"callbacks": [rec], **ACTOR})
    rec.append_csv(path)
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == old.strip().split(",") and len(rows[1]) == len(rows[0]) and rows[1][2] == "actor"


def test_wrapper_identifies_model_and_endpoint_for_the_cache() -> None:
    model = load_chat_model("openai:m", base_url="http://127.0.0.1:1/v1", api_key="k", seed=3)
    params = model._identifying_params
    assert params["model_id"] == "openai:m"
    assert params["endpoint"] == "http://127.0.0.1:1/v1"
    assert params["seed"] == 3


TEN_WORDS = "one two three four five six seven eight nine ten"


def llama_cpp_like(model_params: dict[str, Any], **server_kwargs: Any) -> Any:
    """A loopback server that honours only ``max_tokens`` (like llama.cpp's), and a model on it."""
    server = FakeOpenAIServer(reply=TEN_WORDS, limit_fields=("max_tokens",), **server_kwargs)
    server.__enter__()
    model = load_chat_model(
        "openai:fake", base_url=server.base_url, api_key="k", retry_backoff_s=0.01, **model_params
    )
    return server, model


async def test_the_token_limit_reaches_a_server_that_honours_only_max_tokens() -> None:
    server, model = llama_cpp_like({"max_tokens": 3})
    try:
        reply = await model.ainvoke(MESSAGES)
        per_call = await model.ainvoke(MESSAGES, max_tokens=5)  # as agents pass their budgets
    finally:
        server.__exit__(None, None, None)
    assert reply.content == "one two three"
    assert reply.response_metadata["finish_reason"] == "length"
    assert per_call.content == "one two three four five"
    assert [r.get("max_tokens") for r in server.requests] == [3, 5]
    assert all("max_completion_tokens" not in r for r in server.requests)


async def test_a_structured_reply_cut_at_its_token_limit_is_returned_not_raised() -> None:
    # The openai client raises LengthFinishReasonError for a call with a response_format that
    # stops at max_tokens; the cut reply is kept (the credit parsers keep its complete steps).
    server, model = llama_cpp_like({"max_tokens": 3})
    fmt = {"type": "json_object", "schema": {"type": "object"}}
    try:
        reply = model.invoke(MESSAGES, response_format=fmt)
        again = await model.ainvoke(MESSAGES, response_format=fmt, max_tokens=4)
    finally:
        server.__exit__(None, None, None)
    assert reply.content == "one two three" and reply.response_metadata["finish_reason"] == "length"
    assert again.content == "one two three four"
    assert len(server.requests) == 2  # not retried


def test_max_completion_tokens_alone_is_ignored_by_such_a_server() -> None:
    # Why the field matters: langchain-openai's own choice runs on to the end of the reply.
    server, model = llama_cpp_like({"max_tokens": 3, "token_limit_field": "max_completion_tokens"})
    with server:
        reply = model.invoke(MESSAGES, max_tokens=2)
    assert reply.content == TEN_WORDS
    assert server.requests[0]["max_completion_tokens"] == 2 and "max_tokens" not in server.requests[0]


def test_both_fields_carry_the_limit() -> None:
    server, model = llama_cpp_like({"max_tokens": 4, "token_limit_field": "both"})
    with server:
        assert model.invoke(MESSAGES).content == "one two three four"
        model.invoke(MESSAGES, max_tokens=2)
    assert [(r["max_tokens"], r["max_completion_tokens"]) for r in server.requests] == [(4, 4), (2, 2)]


def test_openai_itself_gets_max_completion_tokens_by_default(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for base_url in (None, "https://api.openai.com/v1"):
        model = load_chat_model("openai:gpt-4o-mini", api_key="k", base_url=base_url, max_tokens=7)
        payload = model.inner._get_request_payload(MESSAGES, max_tokens=9)
        assert payload["max_completion_tokens"] == 9 and "max_tokens" not in payload
        assert model.inner._get_request_payload(MESSAGES)["max_completion_tokens"] == 7
    with pytest.raises(ValueError, match="token_limit_field must be one of"):
        load_chat_model("openai:m", api_key="k", token_limit_field="max_length")


def test_the_cache_tells_token_limits_and_limit_fields_apart(tmp_path) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    server, model = llama_cpp_like({"max_tokens": 3, "cache": cache})
    with server:
        replies = [model.invoke(MESSAGES, max_tokens=n).content for n in (2, 4, 2)]
        default = model.invoke(MESSAGES).content
        both = load_chat_model(
            "openai:fake",
            base_url=server.base_url,
            api_key="k",
            max_tokens=3,
            cache=cache,
            token_limit_field="both",
        )
        both.invoke(MESSAGES)
    assert replies == ["one two", "one two three four", "one two"]
    assert default == "one two three"
    # max_tokens=2 the second time came from the cache; another field is another key.
    assert [r["max_tokens"] for r in server.requests] == [2, 4, 3, 3]
    assert cache.hits == 1


def test_litellm_takes_only_the_field_it_sends() -> None:
    pytest.importorskip("langchain_litellm")
    url = "http://127.0.0.1:1"
    load_chat_model("litellm:openai/m", base_url=url, token_limit_field="max_tokens")
    with pytest.raises(ValueError, match="LiteLLM maps"):
        load_chat_model("litellm:openai/m", base_url=url, token_limit_field="both")


# every served fault, named in one line ----------------------------------------------------------
REFUSALS = {400: "context length", 401: "model.api_key_env", 402: "credit", 403: "permissions",
            405: "API root", 410: "its message says why", 413: "shorten the prompts", 415: "OpenAI-compatible",
            418: "its message says why", 422: "model.structured", 451: "its message says why",
            501: "check its log", 505: "check its log"}


@pytest.mark.parametrize("status", sorted(REFUSALS))
def test_every_refused_status_is_one_line_at_once_naming_it_the_url_the_model_and_what_to_check(status) -> None:
    with FakeOpenAIServer(faults=lambda n: status, keep_alive=True) as server, \
            pytest.raises(ModelServerError) as info:
        on_faulty(server, max_retries=2).invoke(MESSAGES)
    message = str(info.value)
    assert "\n" not in message and f"HTTP {status}" in message and server.base_url in message
    assert "'fake'" in message and REFUSALS[status] in message and "Traceback" not in message
    assert not isinstance(info.value, ModelUnreachableError) and "Could not reach" not in message
    assert len(server.requests) == 1 and info.value.status_code == status  # no retry mends a refusal


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 507, 520])
def test_every_status_retrying_may_mend_is_retried_then_named_in_one_line(status) -> None:
    with FakeOpenAIServer(faults=lambda n: status, keep_alive=True) as server, \
            pytest.raises(ModelServerError) as info:
        on_faulty(server, max_retries=1).invoke(MESSAGES)
    message = str(info.value)
    assert "\n" not in message and f"HTTP {status}" in message and server.base_url in message
    assert "openai:fake" in message and "failed 2 attempt(s)" in message and len(server.requests) == 2


def test_a_404_says_the_model_name_is_likely_wrong_when_the_server_lists_others() -> None:
    with FakeOpenAIServer(served_models=["smollm2", "qwen"]) as server, pytest.raises(ModelServerError) as info:
        on_faulty(server).invoke(MESSAGES)
    message = str(info.value)
    assert "\n" not in message and "HTTP 404" in message and server.base_url in message
    assert "model name is likely wrong" in message and "smollm2, qwen" in message and "'fake'" in message


def test_a_404_says_base_url_likely_lacks_v1_when_nothing_is_served_there() -> None:
    with FakeOpenAIServer(served_models=["fake"]) as server, pytest.raises(ModelServerError) as info:
        root = server.base_url.removesuffix("/v1")
        load_chat_model("openai:fake", base_url=root, api_key="k", max_retries=2, retry_backoff_s=0.001).invoke(
            MESSAGES)
    message = str(info.value)
    assert "\n" not in message and "HTTP 404" in message and f"try {root}/v1" in message


BODY_FAULT_NAMES = {"not_utf8": "not valid UTF-8", "deep": "nested too deep", "reset": "the connection was reset",
                    "stall": "the reply stalled mid-body", "trickle": "the reply came too slowly",
                    "redirect": "a redirect loop"}


@pytest.mark.parametrize("fault", sorted(BODY_FAULT_NAMES))
async def test_each_broken_body_or_connection_is_named_for_what_happened(fault) -> None:
    # the deadline (model.timeout) is short here, so the stall and the trickle end within it
    with FakeOpenAIServer(faults=lambda n: fault, keep_alive=True, trickle_s=0.05) as server:
        model = load_chat_model("openai:fake", base_url=server.base_url, api_key="k", max_retries=1,
                                retry_backoff_s=0.001, timeout=0.6)
        with pytest.raises(ModelServerError) as info:
            await model.ainvoke(MESSAGES)
    message = str(info.value)
    assert "\n" not in message and server.base_url in message and BODY_FAULT_NAMES[fault] in message
    assert not isinstance(info.value, ModelUnreachableError) and "Could not reach" not in message
    if fault in ("not_utf8", "deep"):
        assert "a malformed reply" in message
    if fault in ("stall", "trickle"):
        assert "model.timeout" in message


@pytest.mark.parametrize("invoke", ["sync", "async"])
def test_a_trickled_reply_is_cut_at_the_calls_deadline_and_retried_like_a_timeout(invoke) -> None:
    import time

    rec = UsageRecorder()
    with FakeOpenAIServer(faults=["trickle"], keep_alive=True, trickle_s=0.05) as server:
        model = load_chat_model("openai:fake", base_url=server.base_url, api_key="k", max_retries=2,
                                retry_backoff_s=0.001, timeout=0.5)
        config = {"callbacks": [rec], **ACTOR}
        started = time.monotonic()
        reply = model.invoke(MESSAGES, config=config) if invoke == "sync" else \
            asyncio.run(model.ainvoke(MESSAGES, config=config))
        took = time.monotonic() - started
    # the trickle (a byte every 0.05 s of a ~300-byte body) would take 15 s; the deadline cuts it
    assert reply.content == "go forward" and took < 2.0 and len(server.requests) == 2
    assert rec.rows[0].retries == 1


@pytest.mark.parametrize("invoke", ["sync", "async"])
def test_headers_trickled_past_the_deadline_are_cut_and_retried_like_a_timeout(invoke) -> None:
    import time

    with FakeOpenAIServer(faults=["trickle_headers"], keep_alive=True, trickle_s=0.05) as server:
        model = load_chat_model("openai:fake", base_url=server.base_url, api_key="k", max_retries=2,
                                retry_backoff_s=0.001, timeout=0.5)
        started = time.monotonic()
        reply = model.invoke(MESSAGES, config=ACTOR) if invoke == "sync" else \
            asyncio.run(model.ainvoke(MESSAGES, config=ACTOR))
        took = time.monotonic() - started
    # ~300 bytes of status line and headers at a byte every 0.05 s would take 15 s
    assert reply.content == "go forward" and took < 2.0 and len(server.requests) == 2


def test_a_429_waits_as_long_as_its_retry_after_asks() -> None:
    import time

    with FakeOpenAIServer(faults=[429], retry_after="1") as server:
        started = time.monotonic()
        reply = on_faulty(server).invoke(MESSAGES)  # a backoff of 0.001 s, but the server asks for 1 s
        took = time.monotonic() - started
    assert reply.content == "go forward" and len(server.requests) == 2 and took >= 0.95


def test_retry_after_reads_seconds_and_http_dates() -> None:
    from email.utils import formatdate

    from marlang.models.remote import retry_after_s

    class Reply:
        def __init__(self, value: str) -> None:
            self.headers = {"retry-after": value}

    class RateLimited(Exception):
        def __init__(self, value: str) -> None:
            self.response = Reply(value)

    now = 1_700_000_000.0
    assert retry_after_s(RateLimited("7"), now) == 7.0
    assert retry_after_s(RateLimited(formatdate(now + 30, usegmt=True)), now) == pytest.approx(30.0)
    assert retry_after_s(RateLimited(formatdate(now - 30, usegmt=True)), now) == 0.0  # already past
    assert retry_after_s(RateLimited("soon"), now) is None and retry_after_s(ValueError("x"), now) is None


def test_a_reply_far_longer_than_its_token_limit_allows_is_cut_and_says_so(caplog) -> None:
    with FakeOpenAIServer(faults=["huge"]) as server:
        model = load_chat_model("openai:fake", base_url=server.base_url, api_key="k", max_tokens=16,
                                max_retries=0)
        reply = model.invoke(MESSAGES)
    assert len(reply.content) == 1024 and reply.content.startswith("go go")
    assert reply.response_metadata["marlang_reply_cut_from"] == 21_000_000
    assert any("a reply of 21000000 characters for a limit of 16 tokens" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("usage", [
    {"prompt_tokens": -5, "completion_tokens": 3, "total_tokens": -2},
    {"prompt_tokens": 4, "completion_tokens": 10**30, "total_tokens": 10**30},
    {"prompt_tokens": 1.5, "completion_tokens": "many", "total_tokens": 3},
])
def test_usage_that_cannot_be_is_distrusted_and_counted(usage, tmp_path) -> None:
    rec = UsageRecorder()
    with FakeOpenAIServer(usage=usage) as server:
        reply = on_faulty(server).invoke(MESSAGES, config={"callbacks": [rec], **ACTOR})
    assert reply.content == "go forward"
    [row] = rec.rows
    assert not row.error and 0 <= row.input_tokens <= 4 and 0 <= row.output_tokens <= 3
    assert rec.distrusted_usage == 1
    rec.append_csv(tmp_path / "llm_calls.csv")
    with open(tmp_path / "llm_calls.csv", newline="") as fh:
        [written] = list(csv.DictReader(fh))
    assert int(written["input_tokens"]) >= 0 and len(written["output_tokens"]) < 4


def test_one_model_serves_calls_from_one_event_loop_after_another_on_a_keep_alive_server() -> None:
    # as a grid's settings, and a credit critic's batches, each run on an event loop of its own
    with FakeOpenAIServer(reply="go forward", keep_alive=True) as server:
        model = on_faulty(server, max_retries=0)
        replies = [asyncio.run(model.ainvoke(MESSAGES)).content for _ in range(3)]
        again = load_chat_model("openai:fake", base_url=server.base_url, api_key="k", max_retries=0)
        replies.append(asyncio.run(again.ainvoke(MESSAGES)).content)
    assert replies == ["go forward"] * 4
