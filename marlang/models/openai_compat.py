"""`ChatOpenAI` for OpenAI-compatible servers: choose the request field that carries the token limit,
and name a reply that is no chat completion (or no text at all) as such.

langchain-openai always sends ``max_completion_tokens``, which OpenAI's API honours but
llama.cpp's server (and some others) ignore, so replies run to the context limit there.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from langchain_core.language_models import LanguageModelInput
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from marlang.models.errors import MalformedReplyError

TokenLimitField = Literal["max_tokens", "max_completion_tokens", "both"]
TOKEN_LIMIT_FIELDS: tuple[str, ...] = get_args(TokenLimitField)
_LIMIT_KEYS = ("max_tokens", "max_completion_tokens")


class TokenLimitChatOpenAI(ChatOpenAI):
    """`ChatOpenAI` that sends the token limit (the model's ``max_tokens`` or a call's
    ``max_tokens=``) as ``token_limit_field``: ``max_tokens`` (llama.cpp, vLLM, SGLang,
    Ollama, OpenAI's non-reasoning models), ``max_completion_tokens`` (OpenAI, required by
    its reasoning models) or ``both``.

    The field is in `_identifying_params`, hence in the response cache key; the limit's value
    is there already (the model's own, or the call's kwargs).
    """

    token_limit_field: TokenLimitField = "max_completion_tokens"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {**super()._identifying_params, "token_limit_field": self.token_limit_field}

    def _create_chat_result(self, response: Any, generation_info: dict | None = None) -> ChatResult:
        """The reply as a `ChatResult`; a 200 whose body is no completion (an HTML page, no
        or null ``choices``, an ``error`` object) raises `MalformedReplyError`, which
        `ResilientChatModel` retries (as it does an empty ``choices``), where langchain-openai
        raises a plain TypeError, ValueError or KeyError."""
        try:
            return super()._create_chat_result(response, generation_info)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MalformedReplyError(f"the reply is no chat completion ({' '.join(str(exc).split())[:200]})") from exc

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return super()._generate(*args, **kwargs)
        except (UnicodeDecodeError, RecursionError) as exc:
            raise _unreadable(exc) from exc

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        try:
            return await super()._agenerate(*args, **kwargs)
        except (UnicodeDecodeError, RecursionError) as exc:
            raise _unreadable(exc) from exc

    def _get_request_payload(
        self,
        input_: LanguageModelInput,
        *,
        stop: list[str] | None = None,
        **kwargs: Any,
    ) -> dict:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API has its own max_output_tokens
            return payload
        # ChatOpenAI has moved max_tokens to max_completion_tokens; a call may name either.
        limits = [payload.pop(k) for k in _LIMIT_KEYS if k in payload]
        limit = next((v for v in limits if v is not None), None)
        if limit is None:
            return payload
        fields = _LIMIT_KEYS if self.token_limit_field == "both" else (self.token_limit_field,)
        for field in fields:
            payload[field] = limit
        return payload


def _unreadable(exc: UnicodeDecodeError | RecursionError) -> MalformedReplyError:
    """A reply body the client could not decode: bytes that are not UTF-8, or JSON nested too
    deep for the parser (which raises RecursionError, not a parse error)."""
    if isinstance(exc, UnicodeDecodeError):
        return MalformedReplyError(f"the reply is not valid UTF-8 (byte {exc.start}: {exc.reason})")
    return MalformedReplyError("the reply's JSON is nested too deep to parse")
