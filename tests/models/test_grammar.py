"""Constrained decoding on the local engine (``response_format`` -> llguidance): a random tiny
model, which left alone writes noise, writes JSON valid under the schema, sampled or greedy,
batched with unconstrained rows that stay unconstrained; ``model.structured`` picks it on
local models; the embedded model's LLM-MCA replies parse."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage

from marlang.models.grammar import GrammarError, JsonConstraint, ll_tokenizer, schema_of
from marlang.models.structured import StructuredReplies
from marlang.testing import tiny_chat_model

# Bounded integers: a grammar fixes the shape of a number, not its length, and a random model
# would write digits until max_tokens.
CREDIT = {"type": "integer", "minimum": -5, "maximum": 5}
SCHEMA = {"type": "object", "properties": {"agent_0": CREDIT, "agent_1": CREDIT,
                                           "why": {"type": "string", "maxLength": 12}},
          "required": ["agent_0", "agent_1"], "additionalProperties": False}
FORMAT = {"type": "json_schema", "json_schema": {"name": "credit", "schema": SCHEMA}}


def _valid(text: str) -> bool:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return False
    return (isinstance(value, dict) and set(value) <= {"agent_0", "agent_1", "why"}
            and all(isinstance(value[a], int) and -5 <= value[a] <= 5 for a in ("agent_0", "agent_1"))
            and len(value.get("why", "")) <= 12)


def test_schema_of_reads_both_response_formats():
    assert schema_of(FORMAT) == SCHEMA
    assert schema_of({"type": "json_object", "schema": SCHEMA}) == SCHEMA
    assert schema_of({"type": "json_object"}) == {"type": "object"}
    assert schema_of({"type": "text"}) is None and schema_of(None) is None


def test_a_random_model_writes_only_valid_json_when_constrained(tiny_engine):
    model = tiny_chat_model(tiny_engine, max_tokens=120, temperature=1.0)

    async def run():
        constrained = [model.ainvoke([HumanMessage(f"credit {i}")], response_format=FORMAT, seed=i) for i in range(6)]
        free = [model.ainvoke([HumanMessage(f"credit {i}")], seed=i) for i in range(2)]
        return await asyncio.gather(*constrained, *free)  # one batch, mixed rows

    replies = [r.content for r in asyncio.run(run())]
    assert all(_valid(r) for r in replies[:6]), replies[:6]
    assert not any(_valid(r) for r in replies[6:])  # the unconstrained rows of the batch stay noise
    greedy = tiny_chat_model(tiny_engine, max_tokens=120).invoke([HumanMessage("x")], response_format=FORMAT)
    assert _valid(greedy.content)


def test_a_schema_that_cannot_compile_is_a_clear_error(tiny_engine):
    with pytest.raises(GrammarError, match="JSON schema"):
        JsonConstraint(ll_tokenizer(tiny_engine.tokenizer), json.dumps({"type": "object", "properties": 3}))


def test_structured_replies_constrain_the_local_engine_under_auto(tiny_engine):
    model = tiny_chat_model(tiny_engine)
    auto = StructuredReplies("auto", model)
    assert auto.mode == "json_schema" and not auto.auto  # no fallback: the local engine never refuses
    assert auto.call_kwargs(SCHEMA, "credit")["response_format"]["json_schema"]["schema"] == SCHEMA
    assert StructuredReplies("none", model).call_kwargs(SCHEMA, "credit") == {}
    assert StructuredReplies("json_object", model).mode == "json_object"


def test_properties_come_in_the_schemas_order(tiny_engine):
    labels = [f"t{k}" for k in range(1, 12)]  # t10 and t11 sort before t2 as strings
    schema = {"type": "object", "properties": {label: {"type": "integer", "minimum": 0, "maximum": 9}
                                               for label in labels},
              "required": labels, "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "steps", "schema": schema}}
    reply = tiny_chat_model(tiny_engine, max_tokens=120).invoke([HumanMessage("x")], response_format=fmt).content
    assert list(json.loads(reply)) == labels
