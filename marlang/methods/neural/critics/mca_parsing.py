"""Reading an LLM-MCA critic's reply: per-timestep, per-agent credit (JSON first, then the
paper's regular-expression reading of the text), and the normalisation of a timestep's
credits against its team reward.

The critic labels the timesteps of one call ``t1``, ``t2``, ...; its answer is meant to be
``{"t1": {"agent_0": 1.5, "agent_1": -0.5, "why": "..."}, ...}``. Whatever the JSON misses
(a reply cut off by its token limit, prose around numbers, a model that never learned JSON) is
looked for as ``t<k> ... agent_<i>: <number>`` in the text. A number that is not finite is no
credit. Nothing here raises on a malformed reply: what cannot be read is simply missing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from marlang.methods.langmarl.parsing import json_objects, match_agent

_LABEL = re.compile(r"\b(?:t|step|timestep)\s*[=#:]?\s*(\d+)\b", re.IGNORECASE)
_CREDIT = re.compile(r"(agent[\s_\-]*\d+)\"?\s*[:=]\s*\"?\s*([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)",
                     re.IGNORECASE)
_TASK = re.compile(r"(agent[\s_\-]*\d+)\"?\s*[:=]\s*\[\s*([-+]?\d+(?:\s*,\s*[-+]?\d+)*)\s*\]", re.IGNORECASE)
_WHY = re.compile(r"\"(?:why|explanation|reason)\"\s*:\s*\"((?:[^\"\\]|\\.)*)", re.IGNORECASE)
WHY_KEYS = ("why", "explanation", "reason")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    elif isinstance(value, Mapping):  # {"credit": 1.0, "why": ...} per agent
        for key in ("credit", "score", "value", "reward"):
            if key in value:
                return _number(value[key])
        return None
    else:
        return None
    return number if math.isfinite(number) else None


def task_vector(value: Any) -> list[int] | None:
    """A task: a list of integers (numbers are rounded), or None when it is not one."""
    if isinstance(value, (list, tuple)) and value:
        numbers = [_number(v) for v in value]
        if all(n is not None for n in numbers):
            return [round(n) for n in numbers if n is not None]
    return None


def _tasks(value: Any, agents: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    if isinstance(value, Mapping):
        for key, vector in value.items():
            agent = match_agent(str(key), agents)
            task = task_vector(vector)
            if agent is not None and task is not None:
                out.setdefault(agent, task)
    return out


def _label_of(key: Any, labels: Sequence[str]) -> str | None:
    key = str(key).strip()
    if key in labels:
        return key
    found = _LABEL.fullmatch(key) or _LABEL.match(key)
    if found and f"t{int(found.group(1))}" in labels:
        return f"t{int(found.group(1))}"
    if key.isdigit() and f"t{int(key)}" in labels:
        return f"t{int(key)}"
    return None


def _from_entry(entry: Mapping[str, Any], agents: list[str]) -> tuple[dict[str, float], str, dict[str, list[int]]]:
    credits: dict[str, float] = {}
    why = ""
    tasks = _tasks(entry.get("tasks") or entry.get("task"), agents)
    for key, value in entry.items():
        if str(key).lower() in WHY_KEYS and isinstance(value, str):
            why = value.strip()
            continue
        agent = match_agent(str(key), agents)
        if agent is not None and isinstance(value, Mapping) and agent not in tasks:
            task = task_vector(value.get("task"))
            if task is not None:
                tasks[agent] = task
        number = _number(value)
        if agent is not None and number is not None and agent not in credits:
            credits[agent] = number
            if isinstance(value, Mapping) and not why:
                why = next((str(value[k]).strip() for k in WHY_KEYS if isinstance(value.get(k), str)), "")
    return credits, why, tasks


def _json_credits(reply: str, labels: Sequence[str], agents: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for obj in json_objects(reply):
        entries: list[tuple[Any, Any]] = list(obj.items())
        for key in ("credits", "timesteps", "steps"):  # {"credits": [{"t": 1, ...}, ...]}
            if isinstance(obj.get(key), list):
                entries += [(item.get("t", item.get("step")), item) for item in obj[key] if isinstance(item, Mapping)]
        if "t" in obj or "step" in obj:  # one timestep's object on its own
            entries.append((obj.get("t", obj.get("step")), obj))
        for key, value in entries:
            label = _label_of(key, labels)
            if label is None or label in out or not isinstance(value, Mapping):
                continue
            credits, why, tasks = _from_entry({k: v for k, v in value.items() if k not in ("t", "step")}, agents)
            if credits:
                out[label] = {"credits": credits, "why": why, "tasks": tasks}
    return out


def _text_credits(reply: str, labels: Sequence[str], agents: list[str]) -> dict[str, dict[str, Any]]:
    """The regular-expression reading: the text from one timestep label to the next holds
    that timestep's ``agent: number`` pairs (the first number per agent counts)."""
    out: dict[str, dict[str, Any]] = {}
    marks = [m for m in _LABEL.finditer(reply) if f"t{int(m.group(1))}" in labels]
    for k, mark in enumerate(marks):
        label = f"t{int(mark.group(1))}"
        segment = reply[mark.end(): marks[k + 1].start() if k + 1 < len(marks) else len(reply)]
        credits: dict[str, float] = {}
        for found in _CREDIT.finditer(segment):
            if mark.end() + found.end() == len(reply):
                continue  # the reply ends inside this number: it may be cut short
            agent = match_agent(found.group(1), agents)
            number = _number(found.group(2))
            if agent is not None and number is not None:
                credits.setdefault(agent, number)
        if credits and label not in out:
            why = _WHY.search(segment)
            tasks: dict[str, list[int]] = {}
            for found in _TASK.finditer(segment):
                agent = match_agent(found.group(1), agents)
                if agent is not None:
                    tasks.setdefault(agent, [int(x) for x in re.split(r"\s*,\s*", found.group(2).strip())])
            out[label] = {"credits": credits, "why": why.group(1).strip() if why else "", "tasks": tasks}
    return out


def parse_step_credits(reply: str, labels: Sequence[str], agents: list[str]) -> dict[str, dict[str, Any]]:
    """``{label: {"credits": {agent: number}, "why": str, "tasks": {agent: [int, ...]}}}`` for
    the timesteps of ``labels`` the reply credits (each with the agents it names; an agent it
    leaves out is absent; ``tasks`` holds LLM-TACA's task assignments, where given)."""
    found = _json_credits(reply, labels, agents)
    for label, entry in _text_credits(reply, labels, agents).items():
        if label not in found:
            found[label] = entry
        else:  # JSON that named some agents; the text may hold the others
            for agent, number in entry["credits"].items():
                found[label]["credits"].setdefault(agent, number)
            for agent, task in entry["tasks"].items():
                found[label]["tasks"].setdefault(agent, task)
    return found


def normalize(credits: Mapping[str, float], team_reward: float, mode: str) -> dict[str, float]:
    """One timestep's credits under ``learning.critic_normalize``. ``none``: as they are.
    ``sum``: made to add up to the team reward; proportionally where every credit is a share
    of it (all of the reward's sign, not all zero), otherwise by adding the same amount to each
    (which keeps the differences the critic drew, e.g. +1/-1 on a step worth 0)."""
    if mode == "none":
        return dict(credits)
    if mode != "sum":
        raise ValueError(f"learning.critic_normalize must be one of sum, none; got {mode!r}")
    total = sum(credits.values())
    if team_reward != 0 and total != 0 and all(c * team_reward >= 0 for c in credits.values()):
        return {a: c * team_reward / total for a, c in credits.items()}
    shift = (team_reward - total) / max(len(credits), 1)
    return {a: c + shift for a, c in credits.items()}
