"""The typed handle a weight-space learner holds its weights through.

A run builds one `LocalPolicy` per local base model its LLM slots act on (each model loaded
once): the engine that serves every slot on it, the slots' chat models, and the LoRA adapters
once a learner (or a played-back run) attaches them. The learner receives the handles in its
context (``LearnerContext.local``) and reaches the torch model, the tokenizer and the engine's
compute thread only through them.

The engine serves adapters through `marlang.models.local_engine.ServedAdapters`, a protocol of
this layer: the LoRA team (``marlang.methods.lora.team.TeamAdapters``) implements it, and the models
layer never imports it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from marlang.models.capabilities import engine_of
from marlang.models.chat_templates import continue_conversation, render_chat, turn_suffix

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from transformers import PreTrainedModel

    from marlang.models.local_engine import (
        GenerationOutput,
        GenerationRequest,
        LocalLM,
        ScoreOutput,
        ServedAdapters,
    )
    from marlang.models.scoring import ScoredDecisions


class LocalPolicy:
    """One local base model the run's slots act on: its engine (held here, never handed out),
    the slots on it with their chat models, and the adapters attached to it (none until a
    learner attaches them)."""

    def __init__(self, engine: LocalLM, chat_models: dict[str, Any] | None = None) -> None:
        self._engine = engine
        self.chat_models: dict[str, Any] = dict(chat_models or {})
        """Each slot on this model, with the chat model it acts through (sections that differ
        only in sampling settings share the engine)."""

    @classmethod
    def of(cls, model: object) -> LocalPolicy | None:
        """A handle on the local model a chat model runs on (None: a served or remote model)."""
        engine = engine_of(model)
        return None if engine is None else cls(engine)

    # the model ------------------------------------------------------------------------------
    @property
    def model(self) -> PreTrainedModel:
        """The torch model: the base model, wrapped by the adapters once they are attached."""
        return self._engine.model

    @property
    def base_id(self) -> str:
        """The base weights' identity (adapter files name it)."""
        return self._engine.base_id

    @property
    def pad_id(self) -> int:
        """The padding token's id (scoring pads rows with it)."""
        return self._engine.pad_id

    @property
    def eos_id(self) -> int:
        """The end-of-sequence token's id."""
        return int(self._engine.tokenizer.eos_token_id)

    @property
    def adapters(self) -> ServedAdapters | None:
        """The adapters the engine serves (None: the base model only)."""
        return self._engine.adapters

    def attach(self, adapters: ServedAdapters) -> None:
        """Serve every request on this model with ``adapters`` (a request names its adapter)."""
        self._engine.attach_adapters(adapters)

    # the engine's compute thread ------------------------------------------------------------
    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the engine's compute thread (where every batch runs)."""
        return await self._engine.run(fn, *args)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[Any]:
        """The model held alone: no batch runs on it meanwhile."""
        with self._engine.exclusive() as model:
            yield model

    # prompts ---------------------------------------------------------------------------------
    def render(self, messages: Sequence[BaseMessage]) -> str:
        """The prompt text of ``messages`` as the slots' chat model encodes it."""
        return render_chat(self._engine, messages)

    def encode(self, text: str) -> tuple[int, ...]:
        return self._engine.encode(text)

    def turn_suffix(self) -> str:
        """What the chat template adds after a reply for the next user turn
        (`marlang.models.chat_templates.turn_suffix`)."""
        return turn_suffix(self._engine)

    def continue_conversation(self, prompt_ids: Sequence[int], reply_ids: Sequence[int], user_text: str,
                              suffix: str) -> tuple[int, ...]:
        """The next prompt's token ids after a prompt and its reply
        (`marlang.models.chat_templates.continue_conversation`)."""
        return continue_conversation(self._engine, prompt_ids, reply_ids, user_text, suffix)

    # generating and scoring -----------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationOutput]:
        """One batched generate (call it on the compute thread or through `run`)."""
        return self._engine.generate(requests)

    def score_actions(self, prompt: str, actions: Sequence[str], adapter: str | None) -> ScoreOutput:
        """Every action's score after ``prompt`` under ``adapter``, and the value where its
        agent has a value head (the engine's batched scoring; call it on the compute thread
        or through `run`)."""
        from marlang.models.local_engine import ScoreRequest

        return self._engine.score_requests([ScoreRequest(prompt, tuple(actions), adapter)])[0]

    def score_tokens(self, items: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
                     agents: Sequence[str] | None = None, **kwargs: Any) -> ScoredDecisions:
        """`marlang.models.scoring.score_decisions` on this model in the caller's grad mode:
        with ``agents``, each row under its agent's adapter; without, under the adapter the
        model has active (a trainer's)."""
        from marlang.models.scoring import score_decisions

        served = self._engine.adapters
        if agents is not None:
            assert served is not None, "score_tokens(agents=...) needs adapters attached"
            kwargs["adapter_names"] = served.adapter_names(list(agents))
        # the engine's model: the adapted one once adapters are attached
        return score_decisions(self._engine.model, items, self.pad_id, **kwargs)


def local_policies(chat_models: Mapping[str, Any]) -> dict[str, LocalPolicy]:
    """Per slot whose chat model runs on a local engine, that engine's handle: one
    `LocalPolicy` per engine, shared by every slot on it (slots on other models have none)."""
    handles: dict[int, LocalPolicy] = {}
    out: dict[str, LocalPolicy] = {}
    for name, chat in chat_models.items():
        engine = engine_of(chat)
        if engine is None:
            continue
        handle = handles.setdefault(id(engine), LocalPolicy(engine))
        handle.chat_models[name] = chat
        out[name] = handle
    return out
