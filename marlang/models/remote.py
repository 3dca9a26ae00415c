"""Retries with exponential backoff for remote chat models (OpenAI-compatible, LiteLLM).

`ResilientChatModel` wraps any LangChain chat model: transient failures (connection errors,
timeouts, rate limits, 5xx) are retried with backoff, and a server still unreachable after
the retries raises `ModelUnreachableError` naming the URL and what to check.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import time
from collections.abc import Sequence
from typing import Any

from langchain_core import exceptions as lc_exceptions
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from pydantic import ConfigDict, Field

from marlang.models.errors import ModelUnreachableError

logger = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


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

    Attempt ``k`` (0-based) that fails transiently waits
    ``min(max_backoff_s, initial_backoff_s * backoff_multiplier**k)`` seconds (plus up to
    10% jitter) before the next; after ``max_retries`` retries an unreachable server raises
    `ModelUnreachableError`, other transient errors are re-raised as they are. Errors that
    retrying cannot fix (bad request, authentication) are raised at once. Put the inner
    model's own retries to 0 so the two do not multiply.
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
        attempt = 0
        while True:
            try:
                return self.inner._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
            except Exception as exc:  # noqa: BLE001 - _delay_or_raise re-raises what retrying cannot fix
                if (cut := self._cut_reply(exc)) is not None:
                    return cut
                time.sleep(self._delay_or_raise(exc, attempt, kwargs))
            attempt += 1

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        attempt = 0
        while True:
            try:
                return await self.inner._agenerate(
                    messages, stop=stop, run_manager=run_manager, **kwargs
                )
            except Exception as exc:  # noqa: BLE001 - _delay_or_raise re-raises what retrying cannot fix
                if (cut := self._cut_reply(exc)) is not None:
                    return cut
                await asyncio.sleep(self._delay_or_raise(exc, attempt, kwargs))
            attempt += 1

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

    def _delay_or_raise(self, exc: BaseException, attempt: int, kwargs: dict[str, Any] | None = None) -> float:
        """Seconds to wait before retrying after failed ``attempt``, or raise if it was the last
        or the error is not transient. A 500 to a request that asked for a ``json_schema``
        reply is how llama-cpp-python's server refuses that format: raised at once, so the
        caller can ask again in a form the server takes (`StructuredReplies.fall_back`)."""
        unreachable, transient = _provider_exception_types()
        is_unreachable = isinstance(exc, unreachable) and not isinstance(exc, ModelUnreachableError)
        is_transient = (isinstance(exc, transient) or _retryable_status(exc)) and not _refused_schema(exc, kwargs)
        if not (is_unreachable or is_transient):
            raise exc
        if attempt >= self.max_retries:
            if is_unreachable:
                raise ModelUnreachableError(
                    unreachable_message(self.model_id, self.endpoint, attempt + 1, exc),
                    url=self.endpoint,
                    attempts=attempt + 1,
                ) from exc
            raise exc
        delay = self.backoff_s(attempt) * (1.0 + 0.1 * random.random())
        logger.warning(
            "%s at %s failed (%s: %s); retry %d/%d in %.2f s",
            self.model_id,
            self.endpoint,
            type(exc).__name__,
            exc,
            attempt + 1,
            self.max_retries,
            delay,
        )
        return delay


def _refused_schema(exc: BaseException, kwargs: dict[str, Any] | None) -> bool:
    response_format = (kwargs or {}).get("response_format")
    return (getattr(exc, "status_code", None) == 500 and isinstance(response_format, dict)
            and response_format.get("type") == "json_schema")


def _retryable_status(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status in _RETRYABLE_STATUS


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
