"""Retries with exponential backoff for remote chat models (OpenAI-compatible, LiteLLM).

`ResilientChatModel` wraps any LangChain chat model: faults retrying may mend (connection
errors, timeouts, rate limits, 5xx, a cut or malformed body, no choices, a connection closed
mid-reply) are retried with backoff (tenacity), and a server still failing after the retries
raises `ModelServerError` (`ModelUnreachableError` if it could not be reached) naming the URL,
the fault and what to check.
"""

from __future__ import annotations

import functools
import json
import logging
import random
from collections.abc import Callable, Sequence
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

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
UNREACHABLE = "unreachable"
CLOSED_MID_REPLY = "the connection closed mid-reply"
MALFORMED = "a malformed reply"


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
    max_retries: int = Field(3, ge=0)
    initial_backoff_s: float = Field(0.5, ge=0.0)
    max_backoff_s: float = Field(8.0, ge=0.0)
    backoff_multiplier: float = Field(2.0, ge=1.0)

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
        def attempt() -> ChatResult:
            try:
                return _checked(self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs))
            except Exception as exc:
                if (cut := self._cut_reply(exc)) is not None:
                    return cut
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
        async def attempt() -> ChatResult:
            try:
                return _checked(await self.inner._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs))
            except Exception as exc:
                if (cut := self._cut_reply(exc)) is not None:
                    return cut
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
    waiting ``backoff_s(k)`` seconds plus up to 10% jitter; anything else is raised at once."""
    return {
        "retry": retry_if_exception(retryable),
        "stop": stop_after_attempt(max_retries + 1),
        "wait": lambda state: backoff_s(state.attempt_number - 1) * (1.0 + 0.1 * random.random()),
    }


def _checked(result: ChatResult) -> ChatResult:
    """``result``, unless the server's reply held no completion (``"choices": []``)."""
    if not result.generations:
        raise MalformedReplyError("the reply has no choices")
    return result


def _one_line(exc: BaseException | None) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300] if exc is not None else ""


def fault_kind(exc: BaseException, kwargs: dict[str, Any] | None = None) -> str | None:
    """What went wrong, when retrying may mend it (as it may a timeout): ``unreachable``,
    ``the connection closed mid-reply``, ``HTTP <status>``, ``a malformed reply``; None for
    errors that retrying cannot fix (a bad request, a refused key). A 500 to a request that
    asked for a ``json_schema`` reply is how llama-cpp-python's server refuses that format:
    None, so the caller can ask again in a form the server takes (`StructuredReplies.fall_back`)."""
    if isinstance(exc, ModelServerError):
        return None
    unreachable, transient = _provider_exception_types()
    if _closed_mid_reply(exc):
        return CLOSED_MID_REPLY
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status in _RETRYABLE_STATUS or isinstance(exc, transient)):
        return None if _refused_schema(exc, kwargs) else f"HTTP {status}"
    if isinstance(exc, unreachable):
        return UNREACHABLE
    if isinstance(exc, transient):
        return "a server error"
    if isinstance(exc, (MalformedReplyError, json.JSONDecodeError)):
        return MALFORMED
    return None


def _closed_mid_reply(exc: BaseException) -> bool:
    """The server (or a proxy) closed the connection after it began to answer: httpx's
    ``RemoteProtocolError``, which the openai client wraps in ``APIConnectionError``."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return False
        if type(seen).__name__ == "RemoteProtocolError":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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
    return (
        f"The model server for {model_id} at {url} failed {attempts} attempt(s) in a row: {kind} "
        f"({_one_line(exc)}). Check the server's log (out of memory, a crashed worker, a model still "
        "loading) and any proxy in between; lower model.max_concurrency if it is overloaded; raise "
        "model.max_retries to wait longer for it."
    )
