"""Parsing LangMARL's LLM replies: the critic's per-agent credit (lenient JSON, then lines
naming agents) and the optimizer's rewritten policy text."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

TEAM = "team"
"""The key of the one team critique under ``learning.credit: global``."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_AGENT_INDEX = re.compile(r"agent[\s_\-]*(\d+)\b", re.IGNORECASE)


def json_objects(text: str) -> list[Any]:
    """Candidate JSON objects in a reply: fenced blocks first, then every balanced ``{...}``."""
    found: list[Any] = []
    chunks = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in chunks:
        depth, start, in_str, esc = 0, -1, False, False
        for i, ch in enumerate(chunk):
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch == "{":
                if depth == 0:
                    start = i
                depth += 1
            elif ch == "}" and depth > 0:
                depth -= 1
                if depth == 0:
                    obj = _loads_lenient(chunk[start: i + 1])
                    if isinstance(obj, dict):
                        found.append(obj)
        if found:
            break
    return found


def _loads_lenient(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    relaxed = re.sub(r",\s*([}\]])", r"\1", text)  # trailing commas
    try:
        return json.loads(relaxed)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(relaxed)  # single-quoted Python-style dicts
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def match_agent(key: str, agents: list[str]) -> str | None:
    """The agent a critic's key names (``agent_0``, ``Agent 0``, ``Credit for agent_0``)."""
    if key in agents:
        return key
    norm = re.sub(r"[^a-z0-9]", "", key.lower())
    for a in agents:
        if norm == re.sub(r"[^a-z0-9]", "", a.lower()):
            return a
    hits = {f"agent_{m}" for m in _AGENT_INDEX.findall(key)}
    hits &= set(agents)
    return hits.pop() if len(hits) == 1 else None


def _credit_text(value: Any) -> tuple[str, float | None]:
    if isinstance(value, str):
        return value.strip(), None
    if isinstance(value, dict):
        score = value.get("score")
        score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        for k in ("credit", "feedback", "critique", "assessment", "text", "contribution"):
            if isinstance(value.get(k), str) and value[k].strip():
                return value[k].strip(), score
        rest = {k: v for k, v in value.items() if k != "score"}
        return (json.dumps(rest) if rest else ""), score
    if isinstance(value, list):
        return " ".join(str(v) for v in value).strip(), None
    if value is None:
        return "", None
    return str(value).strip(), None


def parse_credits(reply: str, agents: list[str]) -> dict[str, dict[str, Any]]:
    """Per-agent credit from a critic's reply: ``{agent: {"feedback", "score"}}`` for the
    agents it covers. Lenient: a fenced or bare JSON object (the first that parses), keys
    naming agents loosely; with no JSON, lines that start with an agent's name. An agent
    never receives text the critic addressed to another agent, nor the whole reply."""
    out: dict[str, dict[str, Any]] = {}
    for obj in json_objects(reply):
        for key, value in obj.items():
            agent = match_agent(str(key), agents)
            if agent is None or agent in out:
                continue
            text, score = _credit_text(value)
            if text:
                out[agent] = {"feedback": text, "score": score}
        if out:
            return out
    # No usable JSON: "agent_0: ..." paragraphs, each up to the next agent's line.
    current: str | None = None
    pieces: dict[str, list[str]] = {}
    for line in reply.splitlines():
        head, sep, rest = line.partition(":")
        agent = match_agent(head.strip(" -*#[]"), agents) if sep and len(head) < 60 else None
        if agent is not None:
            current = agent
            pieces.setdefault(agent, []).append(rest.strip())
        elif current is not None and line.strip():
            pieces[current].append(line.strip())
    for agent, parts in pieces.items():
        text = " ".join(p for p in parts if p).strip()
        if text:
            out[agent] = {"feedback": text, "score": None}
    return out


def clean_policy(reply: str) -> str:
    """The policy text of an optimizer reply, without labels, fences or quotes."""
    text = reply.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    text = re.sub(r"^\W*(updated|improved|new)?\s*policy( for [\w ]+)?\s*[:\-]\s*", "", text, flags=re.IGNORECASE)
    return text.strip().strip('"').strip()


_OUTCOME = re.compile(r"team return\s*[:=]?\s*[-+]?\d"
                      r"|\b(accomplished|completed|solved)\b[^.;\n]{0,40}\bafter \d+ steps",
                      re.IGNORECASE)
"""What the critic's and optimizer's prompts say about an episode's outcome (``outcome_text``)."""


def malformed_policy(text: str) -> str | None:
    """Why an optimizer reply is no policy (None when it is one): empty, a restatement of an
    episode's outcome ("... not completed after 5 steps; team return 0.1"), which small models
    echo from their prompt instead of writing instructions, or a few lines repeated over and over
    (a small model's loop: at least four lines, at most half of them distinct)."""
    if not text.strip():
        return "empty"
    if _OUTCOME.search(text):
        return "restates an episode's outcome"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) >= 4 and len(set(lines)) * 2 <= len(lines):
        return "repeats itself"
    return None
