"""The implementer node: its marks imported by name from marlang.usergraph, one model given as
a spec, and a tool prompt whose name is computed (found only when it runs)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

import marlang.usergraph
from marlang.testing import ScriptedChatModel
from marlang.usergraph import chat_model as model_for
from marlang.usergraph import prompt as P

FALLBACK = ScriptedChatModel(reply_fn=lambda messages: f"re: {messages[-1].text}")
TOOL = "search"


def code(state: dict[str, Any]) -> dict[str, Any]:
    llm = model_for("implementer", "local:smollm2")
    system = P("implementer", "Write the code.")
    hint = P(f"tool_{TOOL}", "Use the tool when stuck.")
    reply = llm.invoke([SystemMessage(f"{system} {hint}"), HumanMessage(state["plan"])])
    return {"code": marlang.usergraph.prompt("signature", "# written by the implementer\n") + reply.text}
