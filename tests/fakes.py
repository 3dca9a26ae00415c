"""Fakes for orchestration tests: chat models whose replies are a function of the prompt."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr


def _last_user_text(messages: list[BaseMessage]) -> str:
    return str(messages[-1].content) if messages else ""


class FakeRuleChatModel(BaseChatModel):
    """Replies with ``rule(messages)``; records every backend call (cache hits are not calls)."""

    rule: Callable[[list[BaseMessage]], str] = Field(default=lambda msgs: "Action: go forward", exclude=True)
    model_id: str = "fake:rule"
    delay_s: float = 0.0
    supports_choices: bool = False
    """When set, a call with ``choices=[...]`` answers the first choice the rule's reply names."""
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _call_kwargs: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-rule"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_id": self.model_id}

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    @property
    def call_kwargs(self) -> list[dict[str, Any]]:
        return self._call_kwargs

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self._calls.append(list(messages))
        self._call_kwargs.append({"stop": stop, **kwargs})
        text = self.rule(messages)
        if "choices" in kwargs:
            if not self.supports_choices:
                raise TypeError("this fake was built without supports_choices")
            text = next((c for c in kwargs["choices"] if c in text), kwargs["choices"][0])
        n_in = sum(len(str(m.content).split()) for m in messages)
        msg = AIMessage(text, usage_metadata={"input_tokens": n_in, "output_tokens": len(text.split()),
                                               "total_tokens": n_in + len(text.split())})
        return ChatResult(generations=[ChatGeneration(message=msg)])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self._generate(messages, stop, **kwargs)


def babyai_rule(messages: list[BaseMessage]) -> str:
    """A plausible small-model reply: a message when asked to speak, else thought + action."""
    prompt = _last_user_text(messages)
    if "Write a short message" in prompt:
        return "I see a key. I will go forward."
    if "Reply with exactly one of" in prompt:
        return "turn left"
    if "The episode is over" in prompt:
        return "I should look for the key first and avoid blocking my teammate."
    return "The path ahead looks open.\nAction: go forward"


def role_of(messages: list[BaseMessage]) -> str:
    """Which of LangMARL's calls ``messages`` are (``actor`` for any other call), from its prompts."""
    system, prompt = str(messages[0].content), str(messages[-1].content)
    if "You improve the policies" not in system:
        return "actor"
    if "gave no credit" in prompt or "read a whole episode" in prompt:
        return "critic"
    if "Turn this assessment" in prompt:
        return "gradient"
    if "Merge them" in prompt:
        return "aggregator"
    return "optimizer"


def _agent_named(text: str) -> str:
    import re

    m = re.search(r"^Agent: (\S+)", text, re.MULTILINE)
    return m.group(1) if m else "?"


def langmarl_rule(messages: list[BaseMessage]) -> str:
    """Actors play as in `babyai_rule`; the learner's calls answer with tags naming the agent
    they were about, so tests can see whose credit reached whose prompt."""
    import json
    import re

    system = str(messages[0].content) if messages else ""
    prompt = _last_user_text(messages)
    if "You improve the policies" not in system:
        return babyai_rule(messages)
    if "gave no credit for" in prompt:
        missing = re.search(r"keys are exactly ([^;]+);", prompt).group(1).split(", ")
        return json.dumps({a: f"CREDIT[{a}] (asked again)" for a in missing})
    if "read a whole episode" in prompt:
        if "keys are exactly" in prompt:
            keys = re.search(r"keys are exactly ([^;]+);", prompt).group(1).split(", ")
            return "```json\n" + json.dumps({a: f"CREDIT[{a}] helped a little" for a in keys}) + "\n```"
        return "TEAMCRITIQUE: the team wandered."
    agent = _agent_named(prompt)
    if "Turn this assessment" in prompt:
        return f"GRAD[{agent}] go to the object faster."
    if "Merge them" in prompt:
        return f"AGG[{agent}] be faster."
    if "Write the improved policy" in prompt:
        return f"Updated policy: NEWPOLICY[{agent}] walk straight to the target."
    raise AssertionError(f"unexpected learner prompt: {prompt[:200]}")


FLOAT_TOLERANCE = 1e-4
"""Relative tolerance for model floats (log-probs, scores, values) computed in different batch
compositions: a replay batches requests differently, and float32 results of a different batch
are not bit-identical on every CPU."""


def assert_same_record(got: Any, want: Any, path: str = "$", rel: float = FLOAT_TOLERANCE) -> None:
    """Assert two JSON-like records are equal: every string, int, bool and key exactly, every
    float within ``rel`` (relative, with the same absolute floor)."""
    if isinstance(want, float) or isinstance(got, float):
        assert isinstance(got, (int, float)) and isinstance(want, (int, float)), f"{path}: {got!r} != {want!r}"
        assert abs(got - want) <= rel * max(1.0, abs(want)), f"{path}: {got!r} != {want!r} (rel {rel})"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{path}: keys {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_same_record(got[key], want[key], f"{path}.{key}", rel)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{path}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert_same_record(g, w, f"{path}[{i}]", rel)
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"
