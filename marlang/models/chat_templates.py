"""Chat templates of local models: LangChain messages as the template's role/content dicts, a
prompt rendered from them, and a conversation continued by token ids (a reply's KV cache
kept across turns) with what the template puts between a reply and the next user turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

USER_MARK = "\x00USER\x00"
"""Stands for the next user turn's text in `turn_suffix`'s result."""


def to_chat_dict(message: BaseMessage) -> dict[str, str]:
    """``{"role", "content"}`` of one message, as chat templates read it."""
    if isinstance(message, SystemMessage):
        role = "system"
    elif isinstance(message, HumanMessage):
        role = "user"
    elif isinstance(message, AIMessage):
        role = "assistant"
    elif isinstance(message, ToolMessage):
        role = "tool"
    elif isinstance(message, ChatMessage):
        role = message.role
    else:
        raise TypeError(f"Cannot render a {type(message).__name__} for a local chat model")
    return {"role": role, "content": message.text}


def render_chat(engine: Any, messages: Sequence[BaseMessage]) -> str:
    """The prompt text of ``messages`` under ``engine``'s chat template, the assistant's turn
    opened (what the local chat model encodes for a call)."""
    return engine.format_chat([to_chat_dict(m) for m in messages])


def turn_suffix(engine: Any) -> str:
    """The text the chat template puts after an assistant reply's end-of-turn token and
    before the next reply: what a new user turn adds to a conversation (``USER_MARK`` stands
    for its content). A template that does not end a reply with the EOS token is refused."""
    eos_text = engine.tokenizer.eos_token or ""
    base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"},
            {"role": "assistant", "content": "A"}]
    closed = engine.tokenizer.apply_chat_template(base, tokenize=False)
    more = engine.tokenizer.apply_chat_template(base + [{"role": "user", "content": USER_MARK}],
                                                tokenize=False, add_generation_prompt=True)
    end = closed.rfind("A" + eos_text)
    if not eos_text or end < 0 or not more.startswith(closed):
        raise ValueError("learning.memory 'memoryful' needs a chat template that ends a reply with the EOS "
                         "token and extends a conversation by appending; this model's does not")
    return closed[end + 1 + len(eos_text):] + more[len(closed):]


def continue_conversation(engine: Any, prompt_ids: Sequence[int], reply_ids: Sequence[int],
                          user_text: str, suffix: str) -> tuple[int, ...]:
    """The next prompt of a conversation as token ids: the last prompt and reply, the reply
    closed with the end-of-turn token if it ran out of tokens, then a new user turn holding
    ``user_text`` and the assistant's opening (``suffix``: `turn_suffix`'s)."""
    eos = engine.tokenizer.eos_token_id
    closed = tuple(reply_ids) if reply_ids and reply_ids[-1] == eos else (*reply_ids, eos)
    return tuple(prompt_ids) + closed + engine.encode(suffix.replace(USER_MARK, user_text))
