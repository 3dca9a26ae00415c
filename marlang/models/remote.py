"""Retries with exponential backoff for remote chat models (OpenAI-compatible, LiteLLM).

`ResilientChatModel` wraps any LangChain chat model: faults retrying may mend (connection
errors, timeouts and missed deadlines, rate limits, 5xx, a cut or malformed body, no choices, a
connection reset or closed mid-reply) are retried with backoff (tenacity; a 429's Retry-After
honoured), and a server still failing after the retries raises `ModelServerError`
(`ModelUnreachableError` if it could not be reached) naming the URL, the fault and what to
check; a refusal (HTTP 4xx, a redirect loop) raises it at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterator, Sequence
from email.utils import parsedate_to_datetime
from typing import Any, NoReturn

from langchain_core import exceptions as lc_exceptions
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field
from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from marlang.models.errors import MalformedReplyError, ModelServerError, ModelUnreachableError
from marlang.models.served_http import CallDeadlineError, ReplyTooLargeError

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_PERMANENT_STATUS = frozenset({501, 505})
"""Server errors that say the server cannot ever serve the request: not retried."""
UNREACHABLE = "unreachable"
CLOSED_MID_REPLY = "the connection closed mid-reply"
RESET = "the connection was reset (by the server or a proxy)"
STALLED = "the reply stalled (no data within model.timeout)"
SEND_FAILED = "the connection broke while the request was sent"
REDIRECT_LOOP = "a redirect loop"
MALFORMED = "a malformed reply"
MAX_RETRY_AFTER_S = 120.0
"""The longest wait a server's Retry-After may ask for between two attempts."""
REPLY_CHARS_PER_TOKEN = 32
"""A reply longer than this many characters per token of its limit (at least 1024) is cut to
that length: no tokenizer spends more, so the rest is a broken server's."""


def _exception_types(module: Any, names: Sequence[str]) -> tuple[type[BaseException], ...]:
    return tuple(t for n in names if isinstance(t := getattr(module, n, None), type))


@functools.cache
def _provider_exception_types() -> tuple[
    tuple[type[BaseException], ...], tuple[type[BaseException], ...]
]:
    """(unreachable, transient) exception types from the libraries that are installed.

    langchain-core >= 1.0 normalizes provider errors (ModelConnectionError, ...); the
    openai SDK's own types cover older integrations and LiteLLM, whose errors subclass them.
    """
    unreachable = _exception_types(lc_exceptions, ["ModelConnectionError", "ModelTimeoutError"])
    transient = _exception_types(lc_exceptions, ["ModelRateLimitError", "ModelAPIError"])
    try:
        import openai
    except ImportError:
        pass
    else:
        unreachable += _exception_types(openai, ["APIConnectionError"])  # includes timeouts
        transient += _exception_types(openai, ["RateLimitError", "InternalServerError"])
    try:
        import httpx
    except ImportError:
        pass
    else:
        unreachable += _exception_types(httpx, ["TransportError"])
    return unreachable + (ConnectionError, TimeoutError), transient


class ResilientChatModel(BaseChatModel):
    """A chat model that retries its ``inner`` model's transient failures with backoff.

    Attempt ``k`` (0-based) that fails in a way `fault_kind` names waits
    ``min(max_backoff_s, initial_backoff_s * backoff_multiplier**k)`` seconds (plus up to
    10% jitter) before the next; after ``max_retries`` retries an unreachable server raises
    `ModelUnreachableError`, any other fault `ModelServerError`. Errors that retrying cannot
    fix (bad request, authentication) are raised at once. Each retry is reported to the
    call's callbacks (``on_retry``: `UsageRecorder` counts it). Put the inner model's own
    retries to 0 so the two do not multiply.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    inner: BaseChatModel
    model_id: str
    """marlang spec of the model, e.g. ``openai:gpt-4o-mini``."""
    endpoint: str
    """The server URL, named in error messages and part of the cache key."""
    max_retries: int = Field(default=3, ge=0)
    initial_backoff_s: float = Field(default=0.5, ge=0.0)
    max_backoff_s: float = Field(default=8.0, ge=0.0)
    backoff_multiplier: float = Field(default=2.0, ge=1.0)

    @property
    def _llm_type(self) -> str:
        return f"marlang-resilient-{self.inner._llm_type}"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "endpoint": self.endpoint,
            **self.inner._identifying_params,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = self.inner._get_ls_params(stop=stop, **kwargs)
        params["ls_model_name"] = self.model_id
        return params

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools as the inner model formats them, keeping the retries."""
        bound = self.inner.bind_tools(tools, **kwargs)
        return self.bind(**getattr(bound, "kwargs", {}))

    def backoff_s(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (0-based), before jitter."""
        return min(self.max_backoff_s, self.initial_backoff_s * self.backoff_multiplier**attempt)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        attempts = 0

        def attempt() -> ChatResult:
            nonlocal attempts
            attempts += 1
            try:
                return self._checked(self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs),
                                     kwargs)
            except Exception as exc:
                if (cut := self._cut_reply(exc)) is not None:
                    return cut
                if (refusal := self._refusal(exc, kwargs, attempts)) is not None:
                    raise refusal from exc
                raise

        def before_sleep(state: RetryCallState) -> None:
            self._log_retry(state)
            if run_manager is not None:
                run_manager.on_retry(state)

        return Retrying(before_sleep=before_sleep, **self._retry_policy(kwargs))(attempt)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        attempts = 0

        async def attempt() -> ChatResult:
            nonlocal attempts
            attempts += 1
            try:
                return self._checked(
                    await self.inner._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs), kwargs)
            except Exception as exc:
                if (cut := self._cut_reply(exc)) is not None:
                    return cut
                # a 404 asks the server which models it serves: off the event loop
                if (refusal := await asyncio.to_thread(self._refusal, exc, kwargs, attempts)) is not None:
                    raise refusal from exc
                raise

        async def before_sleep(state: RetryCallState) -> None:
            self._log_retry(state)
            if run_manager is not None:
                await run_manager.on_retry(state)

        return await AsyncRetrying(before_sleep=before_sleep, **self._retry_policy(kwargs))(attempt)

    def _cut_reply(self, exc: BaseException) -> ChatResult | None:
        """The reply of a call that carried a ``response_format`` and stopped at its token
        limit: the openai client raises ``LengthFinishReasonError`` for it, holding the
        completion. It is returned as it came (``finish_reason`` length), since the parsers
        keep what a cut-off reply completed; None for any other error."""
        completion = getattr(exc, "completion", None)
        create = getattr(self.inner, "_create_chat_result", None)
        if type(exc).__name__ != "LengthFinishReasonError" or completion is None or create is None:
            return None
        return create(completion)

    def _checked(self, result: ChatResult, kwargs: dict[str, Any]) -> ChatResult:
        """``result``, unless the server's reply held no completion (``"choices": []``); a
        reply far longer than its token limit allows is cut (`REPLY_CHARS_PER_TOKEN`), saying so."""
        if not result.generations:
            raise MalformedReplyError("the reply has no choices")
        limit = next((v for v in (kwargs.get("max_tokens"), kwargs.get("max_completion_tokens"),
                                  getattr(self.inner, "max_tokens", None)) if v is not None), None)
        if not isinstance(limit, int) or limit <= 0:
            return result
        keep = max(1024, REPLY_CHARS_PER_TOKEN * limit)
        for generation in result.generations:
            message = getattr(generation, "message", None)
            content = getattr(message, "content", None)
            if message is not None and isinstance(content, str) and len(content) > keep:
                logger.warning("%s at %s: a reply of %d characters for a limit of %d tokens; kept its first %d "
                               "(the server ignores the token limit? see model.token_limit_field)",
                               self.model_id, self.endpoint, len(content), limit, keep)
                message.content = content[:keep]
                message.response_metadata = {**message.response_metadata, "marlang_reply_cut_from": len(content)}
                generation.text = message.content
        return result

    def _refusal(self, exc: BaseException, kwargs: dict[str, Any], attempts: int) -> ModelServerError | None:
        """The one-line error for a call the server refused outright (an HTTP status retrying
        cannot mend, a redirect loop), or None for any other error."""
        if isinstance(exc, ModelServerError) or fault_kind(exc, kwargs) is not None:
            return None
        if _named_transport_fault(exc) == REDIRECT_LOOP:
            return ModelServerError(
                f"The model server for {self.model_id} at {self.endpoint} answered with {REDIRECT_LOOP} "
                f"({_one_line(exc)}). Check base_url: the server (or a proxy in front of it) redirects the "
                "request back to itself; an http:// URL for an https:// server, or a missing or extra "
                "trailing path, often does this.", url=self.endpoint, attempts=attempts)
        status = getattr(exc, "status_code", None)
        if not isinstance(status, int) or status < 400:
            return None
        if status == 404:
            advice = self._not_found_advice()
        elif _refused_schema(exc, kwargs):
            advice = ("the server may not take response_format json_schema: set model.structured to "
                      "json_object or none")
        else:
            advice = _STATUS_ADVICE.get(status) or (
                "the server refused the request; its message says why" if status < 500
                else "the server failed the request; check its log")
        return ModelServerError(
            f"The model server for {self.model_id} at {self.endpoint} refused the call to model "
            f"{_served_name(self.inner)!r} with HTTP {status} ({_one_line(exc)[:200]}): {advice}.",
            url=self.endpoint, attempts=attempts, status_code=status)

    def _not_found_advice(self) -> str:
        """Which of a wrong model name and a ``base_url`` without its API root a 404 is
        likely to be, from what ``GET {base_url}/models`` lists."""
        name = _served_name(self.inner)
        served = _served_models(self.endpoint, _api_key(self.inner))
        if served is None:
            root = self.endpoint.rstrip("/")
            hint = (f"base_url likely lacks its API root (try {root}/v1)" if not root.endswith("/v1")
                    else "base_url may be wrong")
            return f"nothing is served at {root}/models either: {hint}"
        if name not in served:
            listed = ", ".join(served[:8]) + (", ..." if len(served) > 8 else "") or "none"
            return (f"the model name is likely wrong: the server serves {listed}; set model.spec to "
                    "openai:<one of them>")
        return (f"the server lists {name!r} but has no chat completions for it there: check base_url and "
                "that the model is a chat model")

    def _retry_policy(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """tenacity's settings for one call: `backoff_policy` over what `fault_kind` names;
        the last failure becomes `ModelUnreachableError` or `ModelServerError`."""
        return {
            **backoff_policy(self.max_retries, self.backoff_s, lambda exc: fault_kind(exc, kwargs) is not None),
            "retry_error_callback": self._give_up,
        }

    def _give_up(self, state: RetryCallState) -> NoReturn:
        exc = state.outcome.exception() if state.outcome is not None else None
        assert exc is not None  # tenacity gives up only after a failed attempt
        raise server_error(self.model_id, self.endpoint, state.attempt_number, exc) from exc

    def _log_retry(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        logger.warning(
            "%s at %s: %s (%s); retry %d/%d in %.2f s",
            self.model_id,
            self.endpoint,
            fault_kind(exc) if exc is not None else "failed",
            _one_line(exc),
            state.attempt_number,
            self.max_retries,
            state.upcoming_sleep,
        )


def backoff_policy(max_retries: int, backoff_s: Callable[[int], float],
                   retryable: Callable[[BaseException], bool]) -> dict[str, Any]:
    """tenacity's ``retry``, ``stop`` and ``wait`` for marlang's calls to servers: an error
    ``retryable`` accepts is retried ``max_retries`` times, failed attempt ``k`` (0-based)
    waiting ``backoff_s(k)`` seconds plus up to 10% jitter, or as long as the reply's
    ``Retry-After`` asks when that is longer (at most `MAX_RETRY_AFTER_S`); anything else is
    raised at once."""

    def wait(state: RetryCallState) -> float:
        backoff = backoff_s(state.attempt_number - 1) * (1.0 + 0.1 * random.random())
        exc = state.outcome.exception() if state.outcome is not None else None
        after = retry_after_s(exc) if exc is not None else None
        return max(backoff, min(after, MAX_RETRY_AFTER_S)) if after is not None else backoff

    return {"retry": retry_if_exception(retryable), "stop": stop_after_attempt(max_retries + 1), "wait": wait}


def retry_after_s(exc: BaseException, now: float | None = None) -> float | None:
    """The seconds a failed reply's ``Retry-After`` header asks to wait (a number of seconds
    or an HTTP date), None if it has none or an unreadable one."""
    for seen in _chain(exc):
        headers = getattr(getattr(seen, "response", None), "headers", None)
        value = headers.get("retry-after") if headers is not None and hasattr(headers, "get") else None
        if value is None:
            continue
        try:
            seconds = float(value)
        except ValueError:
            try:
                seconds = parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now)
            except (TypeError, ValueError, IndexError, OverflowError):
                return None
        return max(0.0, seconds) if math.isfinite(seconds) else None
    return None


_STATUS_ADVICE = {
    400: "check model.max_tokens and the prompts against the model's context length, and the sampling "
         "params the server takes (temperature, top_p, seed; model.structured for response_format)",
    401: "the server refused the API key: set it in the variable model.api_key_env names "
         "(OPENAI_API_KEY by default)",
    402: "the account behind the API key has no credit left",
    403: "the API key may not use this model or endpoint: check the key's permissions (model.api_key_env)",
    405: "that URL takes no chat completions: base_url should be the API root, usually ending in /v1",
    413: "the request is larger than the server accepts: shorten the prompts (fewer agents, shorter "
         "messages or history) or raise the server's request size limit",
    415: "the server does not take a JSON chat request there: is base_url an OpenAI-compatible API?",
    422: "the server could not process the request's fields: check model.max_tokens, temperature, top_p "
         "and model.structured (response_format), and that the server speaks the OpenAI chat API",
}


def _served_name(model: BaseChatModel) -> str:
    """The model name a chat model sends to its server."""
    for attr in ("model_name", "model"):
        if isinstance(value := getattr(model, attr, None), str) and value:
            return value
    return type(model).__name__


def _api_key(model: BaseChatModel) -> str | None:
    key = getattr(model, "openai_api_key", None) or getattr(model, "api_key", None)
    value = key.get_secret_value() if key is not None and hasattr(key, "get_secret_value") else key
    return value if isinstance(value, str) else None


def _served_models(endpoint: str, api_key: str | None) -> list[str] | None:
    """The model ids ``GET {endpoint}/models`` lists, None if it lists none (not found, not
    JSON, not reached)."""
    if not endpoint.startswith(("http://", "https://")):
        return None
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        reply = httpx.get(endpoint.rstrip("/") + "/models", headers=headers, timeout=5.0)
        if reply.status_code != 200 or len(reply.content) > 2**20:
            return None
        data = reply.json().get("data")
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m] if isinstance(data, list) else None
    except (httpx.HTTPError, ValueError, AttributeError, TypeError, RecursionError):
        return None


def _one_line(exc: BaseException | None) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300] if exc is not None else ""


def fault_kind(exc: BaseException, kwargs: dict[str, Any] | None = None) -> str | None:
    """What went wrong, when retrying may mend it (as it may a timeout): ``unreachable``,
    ``the connection closed mid-reply``, a reset, a stall, a missed deadline (`CallDeadlineError`
    says how far the reply got), ``HTTP <status>``, ``a malformed reply``; None for errors that
    retrying cannot fix (a bad request, a refused key, 501, a redirect loop). A 500 to a request that
    asked for a ``json_schema`` reply is how llama-cpp-python's server refuses that format:
    None, so the caller can ask again in a form the server takes (`StructuredReplies.fall_back`)."""
    if isinstance(exc, ModelServerError):
        return None
    unreachable, transient = _provider_exception_types()
    if (named := _named_transport_fault(exc)) is not None:
        return None if named == REDIRECT_LOOP else named
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status in _PERMANENT_STATUS:
        return None
    if isinstance(status, int) and (status in _RETRYABLE_STATUS or isinstance(exc, transient)):
        return None if _refused_schema(exc, kwargs) else f"HTTP {status}"
    if isinstance(exc, unreachable):
        return UNREACHABLE
    if isinstance(exc, transient):
        return "a server error"
    if isinstance(exc, (MalformedReplyError, json.JSONDecodeError)):
        return MALFORMED
    return None


def _chain(exc: BaseException, depth: int = 8) -> Iterator[BaseException]:
    """``exc`` and the errors beneath it (its cause or context), nearest first."""
    seen: BaseException | None = exc
    for _ in range(depth):
        if seen is None:
            return
        yield seen
        seen = seen.__cause__ or seen.__context__


def _named_transport_fault(exc: BaseException) -> str | None:
    """What a connection or a reply did, read from the httpx error beneath the client's own
    (the openai client calls each of them a connection error): a missed deadline, a reply too
    large, a redirect loop, a connection closed, reset or broken while sending, a stall."""
    try:
        import httpx
    except ImportError:
        return None
    for seen in _chain(exc):
        if isinstance(seen, CallDeadlineError):
            return seen.kind
        if isinstance(seen, ReplyTooLargeError):
            return f"{MALFORMED} ({seen})"
        if isinstance(seen, httpx.TooManyRedirects):
            return REDIRECT_LOOP
        if type(seen).__name__ == "RemoteProtocolError":  # httpx's or httpcore's
            return CLOSED_MID_REPLY
        if isinstance(seen, httpx.ReadError):
            return RESET
        if isinstance(seen, httpx.ReadTimeout):
            return STALLED
        if isinstance(seen, (httpx.WriteError, httpx.WriteTimeout)):
            return SEND_FAILED
    return None


def server_error(model_id: str, url: str, attempts: int, exc: BaseException) -> ModelServerError:
    """The error that ends a call whose retries ran out: `ModelUnreachableError` for a server
    that could not be reached, else `ModelServerError`; each one line naming the server, the
    fault and what to check."""
    kind = fault_kind(exc) or "failed"
    if kind == UNREACHABLE:
        return ModelUnreachableError(unreachable_message(model_id, url, attempts, exc), url=url, attempts=attempts)
    return ModelServerError(fault_message(model_id, url, attempts, kind, exc), url=url, attempts=attempts)


def _refused_schema(exc: BaseException, kwargs: dict[str, Any] | None) -> bool:
    response_format = (kwargs or {}).get("response_format")
    return (getattr(exc, "status_code", None) == 500 and isinstance(response_format, dict)
            and response_format.get("type") == "json_schema")


def unreachable_message(model_id: str, url: str, attempts: int, exc: BaseException) -> str:
    """What failed and what to check, for `ModelUnreachableError`."""
    return (
        f"Could not reach the model server for {model_id} at {url} after {attempts} "
        f"attempt(s) ({type(exc).__name__}: {exc}). Check that: the server is running and "
        "listening at that address; base_url is right (OpenAI-compatible servers usually end "
        "in /v1; set base_url or OPENAI_BASE_URL); the network or proxy lets the connection "
        "through; the API key is valid (api_key or OPENAI_API_KEY); the timeout is long "
        "enough for the model."
    )


def fault_message(model_id: str, url: str, attempts: int, kind: str, exc: BaseException) -> str:
    """What failed and what to check, for a `ModelServerError` that is not unreachability."""
    slow = "; raise model.timeout if the model needs longer to answer" if "model.timeout" in kind else ""
    return (
        f"The model server for {model_id} at {url} failed {attempts} attempt(s) in a row: {kind} "
        f"({_one_line(exc)}). Check the server's log (out of memory, a crashed worker, a model still "
        "loading) and any proxy in between; lower model.max_concurrency if it is overloaded; raise "
        f"model.max_retries to wait longer for it{slow}."
    )
