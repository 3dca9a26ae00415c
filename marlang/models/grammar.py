"""Constrained decoding for the local engine: a request whose ``SamplingParams.grammar`` holds a
JSON schema only ever samples tokens that keep the reply a prefix of a JSON value valid under it
(``model.structured`` on local models), through llguidance.

llguidance, because it is one small wheel with no dependencies beyond the Python standard
library (xgrammar pulls triton onto every CPU machine; lm-format-enforcer walks a character
trie in Python at every step), it compiles a schema in about a millisecond, computes each
step's token mask in Rust, and it is the engine vLLM and SGLang use for the same
``response_format``: a schema means the same on a served model and on the local one.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only annotations here: validating a config imports this module, not torch
    import torch

logger = logging.getLogger(__name__)


class GrammarError(ValueError):
    """A schema llguidance cannot compile."""


def ll_tokenizer(tokenizer: Any) -> Any:
    """llguidance's view of a Hugging Face (fast) tokenizer; build it once per engine."""
    import llguidance.hf

    return llguidance.hf.from_tokenizer(tokenizer)


@lru_cache(maxsize=64)
def _compiled(schema: str) -> Any:
    import llguidance

    return llguidance.LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": False})


class JsonConstraint:
    """One row's matcher: masks the logits of each step to the tokens the schema allows next,
    then consumes the chosen token. A matcher that errors (a token the grammar cannot take,
    which should not happen) stops constraining that row rather than its whole batch."""

    def __init__(self, tokenizer: Any, schema: str) -> None:
        """``tokenizer``: from `ll_tokenizer`; ``schema``: the JSON schema as JSON text."""
        import llguidance
        import llguidance.torch as lt

        self._lt = lt
        self.tokenizer = tokenizer
        self.matcher = llguidance.LLMatcher(self.tokenizer, _compiled(schema))
        if self.matcher.is_error():
            raise GrammarError(f"the reply's JSON schema cannot be compiled: {self.matcher.get_error()}")
        self.bitmask = lt.allocate_token_bitmask(1, self.tokenizer.vocab_size)
        self.active = True

    def mask(self, logits: torch.Tensor) -> None:
        """Set the logits of the tokens the grammar forbids now to -inf, in place (``[vocab]``)."""
        if not self.active:
            return
        self._lt.fill_next_token_bitmask(self.matcher, self.bitmask, 0)
        vocab = self.tokenizer.vocab_size
        row = logits[:vocab].unsqueeze(0)
        masked = row.float()
        self._lt.apply_token_bitmask_inplace(masked, self.bitmask)
        logits[:vocab] = masked[0].to(logits.dtype)
        if logits.numel() > vocab:  # padding rows of the embedding: never a token
            logits[vocab:] = float("-inf")

    def consume(self, token: int) -> None:
        if not self.active:
            return
        if not self.matcher.consume_token(token) or self.matcher.is_error():
            logger.warning("constrained decoding stopped for one reply: %s", self.matcher.get_error())
            self.active = False


def schema_of(response_format: Any) -> dict[str, Any] | None:
    """The JSON schema a ``response_format`` asks for (``json_schema``'s schema, or
    ``json_object``'s ``schema``; any JSON object for a bare ``json_object``); None for none."""
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}
    if kind == "json_object":
        schema = response_format.get("schema")
        return schema if isinstance(schema, dict) else {"type": "object"}
    return None


def grammar_available() -> bool:
    """Whether llguidance is installed (it is a marlang dependency; a stripped install may lack it)."""
    try:
        import llguidance  # noqa: F401
    except ImportError:
        return False
    return True
