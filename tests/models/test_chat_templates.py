"""Chat templates: messages as role/content dicts, and a conversation continued by token ids
ending where the template would have rendered the whole conversation."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from marlang.models.chat_templates import (
    continue_conversation,
    render_chat,
    to_chat_dict,
    turn_suffix,
)


def test_messages_become_the_templates_role_and_content():
    assert [to_chat_dict(m) for m in (SystemMessage("s"), HumanMessage("u"), AIMessage("a"))] == [
        {"role": "system", "content": "s"}, {"role": "user", "content": "u"},
        {"role": "assistant", "content": "a"}]
    with pytest.raises(TypeError, match="Cannot render"):
        to_chat_dict(object())  # type: ignore[arg-type]


def test_a_continued_conversation_is_the_rendered_whole_conversation(tiny_engine):
    first = [SystemMessage("Be brief."), HumanMessage("Add 2 and 3.")]
    prompt_ids = tiny_engine.encode(render_chat(tiny_engine, first))
    reply_ids = tiny_engine.encode("5")  # a reply that ran out of tokens: no end-of-turn yet
    following = continue_conversation(tiny_engine, prompt_ids, reply_ids, "And 4?", turn_suffix(tiny_engine))
    whole = tiny_engine.encode(render_chat(tiny_engine, [*first, AIMessage("5"), HumanMessage("And 4?")]))
    assert following == tuple(whole)
