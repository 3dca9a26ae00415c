"""LLM backends: chat models, action scorers, the response cache and call accounting.

Names are re-exported lazily, so importing this package (e.g. to list model specs) does
not load torch or transformers until a local model is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from marlang.lazy import lazy_getattr

_EXPORTS = {
    "marlang.models.factory": (
        "load_chat_model", "load_local_engine", "make_scorer", "list_model_specs", "parse_model_spec",
    ),
    "marlang.models.local_engine": ("LocalLM", "SamplingParams", "GenerationRequest", "GenerationOutput"),
    "marlang.models.local_chat": ("LocalChatModel",),
    "marlang.models.local_weights": ("load_smollm2", "load_hf_model", "SMOLLM2_INSTALL_COMMAND"),
    "marlang.models.remote": ("ResilientChatModel",),
    "marlang.models.scoring": (
        "ActionScorer", "CausalLMScorer", "KVReuseScorer", "PerCandidateScorer", "RepeatedPromptScorer",
        "PackedScorer", "ScoredDecisions", "score_decisions",
    ),
    "marlang.models.cache": ("SQLiteResponseCache", "default_cache_dir"),
    "marlang.models.accounting": ("UsageRecorder", "LLMCallRecord"),
    "marlang.models.errors": (
        "ModelNotAvailableError", "ModelServerError", "ModelUnreachableError", "ScoringNotSupportedError",
    ),
}

__all__ = [
    "SMOLLM2_INSTALL_COMMAND",
    "ActionScorer",
    "CausalLMScorer",
    "GenerationOutput",
    "GenerationRequest",
    "KVReuseScorer",
    "LLMCallRecord",
    "LocalChatModel",
    "LocalLM",
    "ModelNotAvailableError",
    "ModelServerError",
    "ModelUnreachableError",
    "PackedScorer",
    "PerCandidateScorer",
    "RepeatedPromptScorer",
    "ResilientChatModel",
    "SQLiteResponseCache",
    "SamplingParams",
    "ScoredDecisions",
    "ScoringNotSupportedError",
    "UsageRecorder",
    "default_cache_dir",
    "list_model_specs",
    "load_chat_model",
    "load_hf_model",
    "load_local_engine",
    "load_smollm2",
    "make_scorer",
    "parse_model_spec",
    "score_decisions",
]

if TYPE_CHECKING:
    from marlang.models.accounting import LLMCallRecord, UsageRecorder
    from marlang.models.cache import SQLiteResponseCache, default_cache_dir
    from marlang.models.errors import (
        ModelNotAvailableError,
        ModelServerError,
        ModelUnreachableError,
        ScoringNotSupportedError,
    )
    from marlang.models.factory import (
        list_model_specs,
        load_chat_model,
        load_local_engine,
        make_scorer,
        parse_model_spec,
    )
    from marlang.models.local_chat import LocalChatModel
    from marlang.models.local_engine import (
        GenerationOutput,
        GenerationRequest,
        LocalLM,
        SamplingParams,
    )
    from marlang.models.local_weights import SMOLLM2_INSTALL_COMMAND, load_hf_model, load_smollm2
    from marlang.models.remote import ResilientChatModel
    from marlang.models.scoring import (
        ActionScorer,
        CausalLMScorer,
        KVReuseScorer,
        PackedScorer,
        PerCandidateScorer,
        RepeatedPromptScorer,
        ScoredDecisions,
        score_decisions,
    )

__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
