"""`NodeCallRecorder`'s token counts: what the model reports where it can be a count, None where
it reports none or one that cannot be (negative, fractional, absurd)."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, StateGraph

from marlang.usergraph import NodeCall, NodeCallRecorder


class FakeUsageChatModel(BaseChatModel):
    """Answers "ok" and reports ``usage`` as the message's usage metadata (``in_message``) or
    as the provider's ``token_usage``; None reports none."""

    usage: dict[str, Any] | None = None
    in_message: bool = True

    @property
    def _llm_type(self) -> str:
        return "fake-usage"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        if self.in_message and self.usage is not None:
            message = AIMessage("ok", usage_metadata=self.usage)
            return ChatResult(generations=[ChatGeneration(message=message)])
        output = {} if self.usage is None else {"token_usage": self.usage}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))], llm_output=output)


class Asked(TypedDict, total=False):
    question: str
    answer: str


def recorded_call(model: BaseChatModel) -> NodeCall:
    def ask(state: Asked) -> Asked:
        return {"answer": model.invoke([HumanMessage("two words")]).text}

    graph = StateGraph(Asked).add_node("ask", ask).add_edge(START, "ask").compile()
    recorder = NodeCallRecorder()
    graph.invoke({"question": "q"}, {"callbacks": [recorder]})
    (call,) = recorder.calls
    assert (call.node, call.reply) == ("ask", "ok")
    return call


@pytest.mark.parametrize(("in_message", "usage"), [
    (True, {"input_tokens": -5, "output_tokens": 10**12, "total_tokens": 10**12 - 5}),
    (False, {"prompt_tokens": 2.5, "completion_tokens": "many"}),
    (False, {"prompt_tokens": 10**12, "completion_tokens": -1}),
])
def test_a_count_that_cannot_be_one_is_recorded_as_none(in_message: bool, usage: dict[str, Any]) -> None:
    call = recorded_call(FakeUsageChatModel(usage=usage, in_message=in_message))
    assert (call.input_tokens, call.output_tokens) == (None, None)


@pytest.mark.parametrize("in_message", [True, False])
def test_counts_that_can_be_ones_are_recorded(in_message: bool) -> None:
    usage = ({"input_tokens": 2, "output_tokens": 1, "total_tokens": 3} if in_message
             else {"prompt_tokens": 2, "completion_tokens": 1})
    call = recorded_call(FakeUsageChatModel(usage=usage, in_message=in_message))
    assert (call.input_tokens, call.output_tokens) == (2, 1)


def test_a_model_that_reports_no_usage_has_no_counts() -> None:
    call = recorded_call(FakeUsageChatModel(usage=None))
    assert (call.input_tokens, call.output_tokens) == (None, None)
