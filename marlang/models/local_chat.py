"""`LocalChatModel`: a LangChain chat model over a shared, batching `LocalLM` engine.

Messages are rendered with the tokenizer's chat template; concurrent ``ainvoke`` calls, and sync
calls from a batching loop's worker threads (a graph's sync nodes), are decoded together in one
batch. A call with ``choices=[...]`` picks the most likely choice instead of generating (the GLAM
way of acting: every answer is a legal one). Copies with other sampling params share the engine:
``model.model_copy(update={"temperature": 0.7})``.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.language_models import LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field

from marlang.models.chat_reply import ChatReply, ReplyChatModel
from marlang.models.chat_templates import render_chat
from marlang.models.grammar import schema_of
from marlang.models.local_engine import (
    EngineCounters,
    GenerationOutput,
    GenerationRequest,
    LocalLM,
    SamplingParams,
    ScoreOutput,
    ScoreRequest,
)
from marlang.models.policy import ActionPolicy
from marlang.types import ScoredChoice

CALL_PARAMS = ("temperature", "top_p", "top_k", "max_tokens", "seed")
"""Sampling params that may also be given per call, e.g. ``model.ainvoke(msgs, seed=7)``."""
ADAPTER_PARAM = "adapter"
"""Per-call: the LoRA adapter (an agent's trained policy) that answers; absent: the base model."""

# LangChain passes this to every chat model from with_structured_output(); it is tracing
# metadata, not a generation parameter.
_IGNORED_CALL_KWARGS = frozenset({"ls_structured_output_format"})


@dataclass(frozen=True)
class _Choice:
    """How one ``choices`` call picks: among which strings, after which lead, how randomly."""

    choices: list[str]
    lead: str
    temperature: float
    seed: int | None
    offsets: list[float] | None = None
    """Added to the scores before the choice (contextual calibration: minus a prior)."""


class LocalChatModel(ReplyChatModel):
    """A chat model running on a local `LocalLM` engine, with request batching.

    ``temperature == 0`` decodes greedily; otherwise tokens are sampled with nucleus
    ``top_p`` from a per-request generator seeded by ``seed``, so a seeded request gives the
    same answer whatever else shares its batch. Every sampling param and the model id are
    in `_identifying_params`, hence in LangChain's cache key, with a content hash of the
    weights (`weights_id`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    engine: LocalLM = Field(exclude=True, repr=False)
    temperature: float = Field(0.0, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    """Sample among the top_k most likely tokens only; 0: no limit."""
    max_tokens: int = Field(256, ge=1)
    seed: int | None = None
    stop: list[str] | None = None
    """Default stop strings; a call's own ``stop`` replaces them."""

    @property
    def model_id(self) -> str:
        return self.engine.model_id

    @property
    def weights_id(self) -> str:
        """Content hash of the engine's weights (see `LocalLM.weights_id`), for the manifest."""
        return self.engine.weights_id

    @property
    def supports_prefill(self) -> bool:
        """Calls may pass ``prefill``: the model continues that start of its reply."""
        return True

    @property
    def supports_response_format(self) -> bool:
        """Calls may pass ``response_format`` (``json_schema`` or ``json_object`` with a
        ``schema``): decoding is constrained to the schema (`marlang.models.grammar`)."""
        return True

    @property
    def supports_choices(self) -> bool:
        """Calls may pass ``choices``: the answer is the choice the model finds most likely."""
        return True

    def count_tokens(self, text: str) -> int:
        """How many tokens ``text`` is for this model (its own tokenizer)."""
        return len(self.engine.encode(text))

    @property
    def counters(self) -> EngineCounters:
        """The shared engine's work so far (all copies together; cache hits never reach it)."""
        return self.engine.counters

    @property
    def _llm_type(self) -> str:
        return "marlang-local"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            # The spec alone would replay a retrained hf:PATH model's stale answers.
            "weights_id": self.weights_id,
            **self._call_defaults(),
            "stop": self.stop,
        }

    def _call_defaults(self) -> dict[str, Any]:
        """This model's own value of each ``CALL_PARAMS`` entry (what a call may override)."""
        return {name: getattr(self, name) for name in CALL_PARAMS}

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="marlang",
            ls_model_name=self.model_id,
            ls_model_type="chat",
            ls_temperature=kwargs.get("temperature", self.temperature),
            ls_max_tokens=kwargs.get("max_tokens", self.max_tokens),
        )
        if stop or self.stop:
            params["ls_stop"] = stop or self.stop
        return params

    def _get_invocation_params(self, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        # LangChain's cache key: the weights as they are now (they change in training) and
        # the content hash of the adapter that answers this call.
        params = super()._get_invocation_params(stop=stop, **kwargs)
        params["weights_id"] = self.weights_id
        params["adapter_hash"] = self.engine.adapter_hash(kwargs.get(ADAPTER_PARAM))
        return params

    def build_request(
        self, messages: Sequence[BaseMessage], stop: list[str] | None = None, **kwargs: Any
    ) -> GenerationRequest:
        """The engine request for these messages, with per-call params over the defaults."""
        return self._request(messages, stop, **kwargs)[0]

    def _request(
        self, messages: Sequence[BaseMessage], stop: list[str] | None = None, **kwargs: Any
    ) -> tuple[GenerationRequest, str]:
        """`build_request`, and the prompt text it encodes (chat template and prefill)."""
        prefill = kwargs.pop("prefill", None) or ""
        adapter = kwargs.pop(ADAPTER_PARAM, None)
        grammar = None
        if "response_format" in kwargs:  # model.structured: constrain decoding to the schema
            schema = schema_of(kwargs.pop("response_format"))
            if schema is not None:
                grammar = json.dumps(schema)  # key order kept: the reply's properties come in this order
        unknown = set(kwargs) - set(CALL_PARAMS) - _IGNORED_CALL_KWARGS
        if unknown:
            raise ValueError(
                f"Unsupported call parameter(s) {sorted(unknown)} for {self.model_id}; "
                f"supported: {', '.join(CALL_PARAMS)}, stop, prefill, adapter, response_format"
            )
        params = self._call_defaults()
        # An explicit None keeps the default, except for seed where None means "unseeded".
        params.update(
            {k: v for k, v in kwargs.items() if k in CALL_PARAMS and (v is not None or k == "seed")}
        )
        stop_strings = stop if stop is not None else self.stop
        sampling = SamplingParams(stop=tuple(stop_strings or ()), grammar=grammar, **params)
        # prefill: the start of the assistant's reply, which the model continues (the reply
        # returned is only the continuation).
        prompt = render_chat(self.engine, messages) + prefill
        return GenerationRequest(self.engine.encode(prompt), sampling, adapter), prompt

    def batch(
        self,
        inputs: list[LanguageModelInput],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[AIMessage]:
        """Like `Runnable.batch`, but the inputs are decoded together in batches.

        Runs `abatch` on a private event loop; inside a running loop (where that is not
        possible) it falls back to LangChain's thread-pool batch, one request at a time.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(
                self.abatch(inputs, config, return_exceptions=return_exceptions, **kwargs)
            )
        return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)

    def _reply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> ChatReply:
        if "choices" in kwargs:
            return self._choose(messages, **kwargs)
        request, prompt = self._request(messages, stop, **kwargs)
        return self._to_reply(self.engine.generate_one(request), prompt)

    async def _areply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> ChatReply:
        if "choices" in kwargs:
            scoring, choice = self._choice_request(messages, **kwargs)
            return self._chosen(scoring, choice, await self.engine.ascore_request(scoring))
        request, prompt = self._request(messages, stop, **kwargs)
        return self._to_reply(await self.engine.agenerate(request), prompt)

    def _choose(self, messages: Sequence[BaseMessage], **kwargs: Any) -> ChatReply:
        """Answer with one of ``choices``, scored by log p(choice_prefix + c | messages) (GLAM).

        The scores are summed token log-probs. A space ending the prefix is moved onto the
        choices, so " go forward" is scored as the model would write it after "Action:".
        With ``temperature`` 0 (the default) the best choice is taken; above 0 one is sampled
        from softmax(scores / temperature) with the call's ``seed`` (the policy of a
        weight-space learner). The metadata carries every choice's score, the chosen one's
        log pi (normalised over the choices, at the sampling temperature, 1 when greedy),
        the adapter's value estimate where a value head is attached, and the exact scored
        prompt. ``choice_offsets`` (one number per choice) are added to the scores before
        choosing: the policy is softmax((scores + offsets) / temperature) (agents.calibration).
        Concurrent async calls are scored together in one batch, and so are sync ones made in
        worker threads of a loop that batches them (`batching_sync_calls`).
        """
        request, choice = self._choice_request(messages, **kwargs)
        return self._chosen(request, choice, self.engine.score_one(request))

    def _choice_request(
        self,
        messages: Sequence[BaseMessage],
        choices: Sequence[str],
        choice_prefix: str = "",
        choice_offsets: Sequence[float] | None = None,
        **params: Any,
    ) -> tuple[ScoreRequest, _Choice]:
        choices = list(choices)
        if not choices or not all(isinstance(c, str) and c for c in choices):
            raise ValueError(f"choices must be a non-empty list of non-empty strings, got {choices!r}")
        offsets = None if choice_offsets is None else [float(o) for o in choice_offsets]
        if offsets is not None and (len(offsets) != len(choices) or not all(math.isfinite(o) for o in offsets)):
            raise ValueError(f"choice_offsets must be one finite number per choice ({len(choices)}), "
                             f"got {choice_offsets!r}")
        adapter = params.pop(ADAPTER_PARAM, None)
        unknown = set(params) - set(CALL_PARAMS) - _IGNORED_CALL_KWARGS
        if unknown:
            raise ValueError(
                f"Unsupported call parameter(s) {sorted(unknown)} for {self.model_id} with "
                f"choices; supported: choices, choice_prefix, choice_offsets, adapter, {', '.join(CALL_PARAMS)}"
            )
        prompt = render_chat(self.engine, messages)
        choice_prefix, lead = ActionPolicy.split_prefix(choice_prefix)
        # Choosing is greedy unless the call asks for a temperature (not the model's default:
        # acting by scoring stays deterministic for every learner that does not sample).
        temperature = float(params.get("temperature") or 0.0)
        choice = _Choice(choices, lead, temperature, params.get("seed"), offsets)
        return ScoreRequest(prompt + choice_prefix, ActionPolicy.candidates(choices, lead), adapter), choice

    def _chosen(self, request: ScoreRequest, choice: _Choice, scored: ScoreOutput) -> ChatReply:
        choices, scores = choice.choices, scored.scores
        best, policy_logprob = ActionPolicy(choice.temperature).choose(scores, choice.offsets, choice.seed)
        input_tokens = len(self.engine.encode(request.prompt))
        output_tokens = len(self.engine.encode(choice.lead + choices[best]))
        scored_choice = ScoredChoice(choices[best], tuple(scores), policy_logprob, scored.value, request.prompt,
                                     choice.lead, choice.temperature > 0,
                                     None if choice.offsets is None else tuple(choice.offsets))
        return ChatReply(choices[best], self.model_id, input_tokens, output_tokens, "choice",
                         scored_choice.to_metadata(choices))

    def _to_reply(self, output: GenerationOutput, prompt: str) -> ChatReply:
        # The exact prompt text: a weight-space learner scores the reply after it again.
        return ChatReply(output.text, self.model_id, output.input_tokens, output.output_tokens,
                         output.finish_reason, {"prompt_text": prompt})

