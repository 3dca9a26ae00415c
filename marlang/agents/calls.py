"""One chat-model call as every marlang role makes it: tagged for accounting, bounded by
the shared concurrency limiter, seeded when sampling, with the reply as plain text."""

from __future__ import annotations

import hashlib
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from marlang.models.capabilities import continues_prefill


def call_seed(*parts: object) -> int:
    """A 32-bit seed derived from where a call happens (run seed, episode, step, agent, role)."""
    key = "|".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:4], "little")


async def invoke_model(
    model: Any,
    messages: list[BaseMessage],
    ctx: Any,
    *,
    role: str,
    agent: str = "",
    max_tokens: int,
    seed: int | None = None,
    prefill: str = "",
    **call_kwargs: Any,
) -> BaseMessage:
    """Invoke ``model`` once, tagged for accounting and bounded by the shared limiter, and
    return its reply message (what a caller that reads more than the text needs: a scored
    choice, `marlang.types.ScoredChoice`). ``prefill`` as in `call_model`."""
    if not continues_prefill(model):
        prefill = ""
    kwargs: dict[str, Any] = {"max_tokens": max_tokens, **call_kwargs}
    if prefill:
        kwargs["prefill"] = prefill
    if seed is not None:
        kwargs["seed"] = seed
    config = {
        "callbacks": ctx.callbacks,
        "metadata": {
            "marlang_role": role,
            "marlang_agent": agent,
            "marlang_episode": ctx.episode,
            "marlang_step": ctx.step,
            "marlang_iteration": getattr(ctx, "iteration", 0),
        },
        "run_name": f"{agent}.{role}" if agent else role,
    }
    if ctx.limiter is not None:
        async with ctx.limiter:
            return await model.ainvoke(messages, config=config, **kwargs)
    return await model.ainvoke(messages, config=config, **kwargs)


def reply_text(reply: Any, prefill: str = "") -> str:
    """A reply's text: content blocks joined, stripped, after the ``prefill`` it continues."""
    content = reply.content if isinstance(reply, AIMessage) else getattr(reply, "content", reply)
    if isinstance(content, list):  # content blocks from some providers
        content = "".join(b.get("text", "") if isinstance(b, dict) else str(b) for b in content)
    return prefill + str(content).strip()


def prompt_text(reply: Any) -> str | None:
    """The exact prompt text a local model encoded for a generated reply (a weight-space
    learner scores the reply after it again); None from other models."""
    return (getattr(reply, "response_metadata", None) or {}).get("prompt_text")


async def call_model(model: Any, messages: list[BaseMessage], ctx: Any, *, prefill: str = "", **kwargs: Any) -> str:
    """Invoke ``model`` once (`invoke_model`: ``role``, ``agent``, ``max_tokens``, ``seed`` and
    call parameters) and return its reply text (content blocks joined, stripped). ``prefill``
    starts the reply on models that can continue one (``supports_prefill``: local models), and
    the returned text then begins with it; other models get no prefill and their reply is
    returned as it is."""
    if not continues_prefill(model):
        prefill = ""
    return reply_text(await invoke_model(model, messages, ctx, prefill=prefill, **kwargs), prefill)


async def call_model_json(
    model: Any,
    messages: list[BaseMessage],
    ctx: Any,
    *,
    structured: Any,
    schema: dict[str, Any] | None,
    name: str,
    prefill: str = "",
    **kwargs: Any,
) -> str:
    """`call_model` for a reply meant to be ``schema``'s JSON. ``structured`` (a
    `marlang.models.structured.StructuredReplies`, or None for none) says which
    ``response_format`` the call carries, named ``name``; a call that sends one gets no
    ``prefill`` (the schema opens the object itself), and a refusal of it is asked again when
    ``structured.fall_back`` says a retry can help."""
    while True:
        sent = structured.call_kwargs(schema, name) if structured is not None else {}
        try:
            return await call_model(model, messages, ctx, prefill="" if sent else prefill, **kwargs, **sent)
        except Exception as exc:  # fall_back says whether a retry can help
            if structured is None or not structured.fall_back(exc, sent):
                raise
