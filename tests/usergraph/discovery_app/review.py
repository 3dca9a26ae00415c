"""The inspector node: marks through marlang.usergraph.marks and a module alias, the
implementer's prompt again with the same default, a model role read from a variable, a
computed default."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage

from marlang import usergraph as ug
from marlang.usergraph.marks import prompt

from .nodes import FALLBACK

ROLE = "inspector"
RUBRIC = "Check the code against the plan."


def review(state: dict[str, Any]) -> dict[str, Any]:
    llm = ug.chat_model(ROLE, FALLBACK)
    system = prompt("inspector", RUBRIC)
    context = prompt("implementer", "Write the code.")
    reply = llm.invoke([SystemMessage(f"{system} ({context})"), HumanMessage(state["code"])])
    return {"verdict": reply.text}
