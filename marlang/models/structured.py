"""Structured replies (``model.structured``): where the backend can constrain its output, a
call that wants JSON sends the reply's JSON schema as the request's ``response_format``.

- ``json_schema``: ``{"type": "json_schema", "json_schema": {"name", "schema"}}``, which OpenAI
  and vLLM accept;
- ``json_object``: ``{"type": "json_object", "schema": ...}``, which llama-cpp-python's server
  honours (it answers 500 to ``json_schema``);
- ``none``: no constraint (the parsers' fallbacks and, on local models, the JSON prefill);
- ``auto`` (default): ``json_schema`` on a remote model, falling back to ``json_object`` for the
  rest of the run once the server refuses it; ``json_schema`` on the local engine too, which
  constrains its decoding to the schema itself (``marlang.models.grammar``, llguidance).

A call that sends a schema starts no reply of its own (no JSON prefill): the schema makes the
reply open the object.
"""

from __future__ import annotations

import logging
from typing import Any

from marlang.models.grammar import grammar_available

logger = logging.getLogger(__name__)

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "none")
_REFUSED_STATUS = frozenset({400, 422, 500})
"""What a server that does not know a ``response_format`` answers (llama-cpp-python: 500)."""


def credit_schema(agents: list[str]) -> dict[str, Any]:
    """The JSON schema of a critic's per-agent credit: ``{agent: {"feedback", "score"}}``."""
    credit = {"type": "object", "properties": {"feedback": {"type": "string"}, "score": {"type": "number"}},
              "required": ["feedback", "score"], "additionalProperties": False}
    return {"type": "object", "properties": dict.fromkeys(agents, credit), "required": list(agents),
            "additionalProperties": False}


def response_format(mode: str, schema: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The ``response_format`` of ``mode`` for ``schema`` (None: ``none``)."""
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    if mode == "none":
        return None
    raise ValueError(f"model.structured must be one of {', '.join(STRUCTURED_MODES)}; got {mode!r}")


class StructuredReplies:
    """Which ``response_format`` one model's JSON calls carry, for one run."""

    def __init__(self, mode: str, model: Any) -> None:
        if mode not in STRUCTURED_MODES:
            raise ValueError(f"model.structured must be one of {', '.join(STRUCTURED_MODES)}; got {mode!r}")
        local = getattr(model, "supports_response_format", False)
        if local and not grammar_available():
            if mode in ("json_schema", "json_object"):
                raise ValueError(f"model.structured {mode!r} on the local engine needs llguidance "
                                 "(pip install llguidance); or use auto or none")
            mode = "none"
        self.auto = mode == "auto" and not local  # the local engine never refuses a schema
        self.mode = "none" if model is None else ("json_schema" if mode == "auto" else mode)

    def call_kwargs(self, schema: dict[str, Any] | None, name: str) -> dict[str, Any]:
        """What a call that wants ``schema``'s JSON adds to its kwargs (nothing for ``none``)."""
        fmt = response_format(self.mode, schema, name) if schema is not None else None
        return {"response_format": fmt} if fmt is not None else {}

    def fall_back(self, exc: BaseException, sent: dict[str, Any]) -> bool:
        """Under ``auto``, whether ``exc`` is the server refusing the ``json_schema`` a call
        ``sent``: then that call is retried, and later calls ask, with ``json_object`` (calls
        already in flight may be refused too; each is retried)."""
        status = getattr(exc, "status_code", None)
        fmt = sent.get("response_format") or {}
        if not (self.auto and fmt.get("type") == "json_schema" and status in _REFUSED_STATUS):
            return False
        if self.mode == "json_schema":
            logger.warning("the server refused response_format json_schema (HTTP %s); asking for json_object "
                           "with the schema from now on (set model.structured to choose)", status)
            self.mode = "json_object"
        return True
