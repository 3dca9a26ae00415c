"""`ChatReply`: what a chat model that writes its own answers (the local engine's, the scripted
test model) answers, and `ReplyChatModel`, the LangChain chat model that hands each reply to
LangChain as a `ChatResult` with its token usage, so that conversion is written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult


@dataclass(frozen=True)
class ChatReply:
    """One answer: its text, the tokens read and written, why it ended (None: not said) and
    more ``response_metadata`` (after ``model_name`` and ``finish_reason``)."""

    text: str
    model_name: str
    input_tokens: int
    output_tokens: int
    finish_reason: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_result(self) -> ChatResult:
        """LangChain's form: an `AIMessage` with usage metadata, in a one-generation result."""
        finish = {} if self.finish_reason is None else {"finish_reason": self.finish_reason}
        message = AIMessage(
            content=self.text,
            usage_metadata=UsageMetadata(
                input_tokens=self.input_tokens,
                output_tokens=self.output_tokens,
                total_tokens=self.input_tokens + self.output_tokens,
            ),
            response_metadata={"model_name": self.model_name, **finish, **self.metadata},
        )
        generation = ChatGeneration(message=message, generation_info=finish or None)
        return ChatResult(generations=[generation], llm_output={"model_name": self.model_name})


class ReplyChatModel(BaseChatModel):
    """A chat model whose subclass answers with a `ChatReply`: it writes `_reply` (and `_areply`
    where its async answers differ from running `_reply`); LangChain's hooks are here."""

    def _reply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> ChatReply:
        raise NotImplementedError

    async def _areply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> ChatReply:
        return self._reply(messages, stop, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._reply(messages, stop, **kwargs).to_result()

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return (await self._areply(messages, stop, **kwargs)).to_result()
