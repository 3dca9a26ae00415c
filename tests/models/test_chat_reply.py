import asyncio

from langchain_core.messages import HumanMessage

from marlang.models.chat_reply import ChatReply
from marlang.testing import ScriptedChatModel


def test_a_reply_becomes_one_generation_with_its_usage_finish_reason_and_metadata():
    result = ChatReply("go forward", "m", 7, 2, "stop", {"prompt_text": "p"}).to_result()
    (generation,) = result.generations
    message = generation.message
    assert message.content == "go forward"
    assert message.usage_metadata == {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}
    assert message.response_metadata == {"model_name": "m", "finish_reason": "stop", "prompt_text": "p"}
    assert generation.generation_info == {"finish_reason": "stop"}
    assert result.llm_output == {"model_name": "m"}


def test_a_reply_without_a_finish_reason_says_none():
    (generation,) = ChatReply("hi", "m", 1, 1).to_result().generations
    assert generation.generation_info is None
    assert generation.message.response_metadata == {"model_name": "m"}


def test_a_scripted_model_answers_alike_through_invoke_and_ainvoke():
    model = ScriptedChatModel(replies=["a b", "c"], model_id="script")
    first = model.invoke([HumanMessage("one two three")])
    second = asyncio.run(model.ainvoke([HumanMessage("x")]))
    assert (first.content, second.content, model.calls) == ("a b", "c", 2)
    assert first.usage_metadata == {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}
    assert second.response_metadata["model_name"] == "script"
