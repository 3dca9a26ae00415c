"""Finds the answer in a free-text reply: code (fenced or bare), a math final answer, a short text
answer. Used when an observation has no legal action list, which means "answer in text";
``None`` means the reply held no answer, which the agent counts as invalid.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from marlang.envs.tasks.data.math_answers import extract_final_answer, is_placeholder_answer

ANSWER_FORMATS = ("code", "math", "text")
"""What ``TextObservation.data["answer_format"]`` may ask for (``text`` when absent)."""

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_CODE_START = re.compile(r"^(?:def |async def |class |import |from \S+ import |@)", re.MULTILINE)
_ANSWER_MARKER = re.compile(
    r"(?:final\s+answer|answer)\s*(?:is)?\s*[:：]\s*", re.IGNORECASE
)
_SHORT_ANSWER_WORDS = 12
"""A reply with no ``Answer:`` marker is taken whole as a text answer only up to this many words."""


@dataclass(frozen=True)
class ExtractedAnswer:
    answer: str | None
    how: str
    """``fenced``, ``bare``, ``boxed``, ``marker``, ``phrase`` (math: "the final answer is"), ``whole`` or
    ``none``."""
    thought: str = ""
    """The reasoning before the answer, where it could be told apart."""


def extract_answer(text: str, answer_format: str = "text", entry_point: str | None = None) -> ExtractedAnswer:
    """The answer ``text`` gives in ``answer_format`` (``code``, ``math`` or ``text``)."""
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer_format must be one of {', '.join(ANSWER_FORMATS)}, got {answer_format!r}")
    text = text or ""
    if answer_format == "code":
        return extract_code(text, entry_point)
    if answer_format == "math":
        return extract_math_answer(text)
    return extract_text_answer(text)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def _defines(code: str, name: str | None) -> bool:
    return name is None or re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


def extract_code(text: str, entry_point: str | None = None) -> ExtractedAnswer:
    """A Python program from a reply: the fenced block that defines ``entry_point`` (the last
    such; else the last fenced block that parses, else the last one), or, without fences,
    the code from the first ``def``/``import``/``class`` line, cut back until it parses."""
    blocks = [
        (m.start(), m.group(2).strip("\n"))
        for m in _FENCE.finditer(text)
        if m.group(1).lower() in ("", "python", "py", "python3")
    ]
    blocks = [(start, code) for start, code in blocks if code.strip()]
    if blocks:
        ranked = (
            [b for b in blocks if _defines(b[1], entry_point) and _parses(b[1])]
            or [b for b in blocks if _parses(b[1])]
            or blocks
        )
        start, code = ranked[-1]
        return ExtractedAnswer(code, "fenced", text[:start].strip())
    match = _CODE_START.search(text)
    if match is None:
        return ExtractedAnswer(None, "none", text.strip())
    lines = text[match.start():].rstrip().splitlines()
    # Prose after the code ("This function works by ...") breaks parsing: drop trailing lines.
    for end in range(len(lines), 0, -1):
        code = "\n".join(lines[:end]).rstrip()
        if _parses(code) and _defines(code, entry_point):
            return ExtractedAnswer(code, "bare", text[: match.start()].strip())
    code = "\n".join(lines)
    if entry_point is not None and not _defines(code, entry_point):
        return ExtractedAnswer(None, "none", text.strip())
    # It names the function but never parses: still the agent's answer (the sandbox reports it).
    return ExtractedAnswer(code, "bare", text[: match.start()].strip())


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), nested braces kept."""
    starts = [m.end() for m in re.finditer(r"\\(?:boxed|fbox)\s*\{", text)]
    for start in reversed(starts):
        depth = 1
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i].strip()
    return None


def extract_math_answer(text: str) -> ExtractedAnswer:
    """The last ``\\boxed{}`` answer, else what follows the last ``Final answer:``/``Answer:``,
    else a final-answer phrasing ("The final answer is 5."); a placeholder copied from the
    prompt (``\\boxed{<answer>}``) is no answer."""
    boxed = last_boxed(text)
    if boxed and not is_placeholder_answer(boxed):
        return ExtractedAnswer(boxed, "boxed", text[: max(text.rfind("\\boxed"), 0)].strip())
    found = _after_marker(text, strip_math=True)
    if found is not None and not is_placeholder_answer(found.answer):
        return found
    phrased = extract_final_answer(text)
    if phrased is not None:
        return ExtractedAnswer(phrased, "phrase", text.strip())
    return ExtractedAnswer(None, "none", text.strip())


def extract_text_answer(text: str) -> ExtractedAnswer:
    """What follows the last ``Answer:`` marker (its line), else a short reply taken whole."""
    found = _after_marker(text, strip_math=False)
    if found is not None:
        return found
    whole = text.strip().strip(".").strip()
    if whole and "\n" not in whole and len(whole.split()) <= _SHORT_ANSWER_WORDS:
        return ExtractedAnswer(whole, "whole")
    return ExtractedAnswer(None, "none", text.strip())


def _after_marker(text: str, strip_math: bool) -> ExtractedAnswer | None:
    markers = list(_ANSWER_MARKER.finditer(text))
    if not markers:
        return None
    last = markers[-1]
    rest = text[last.end():].strip()
    answer = rest.splitlines()[0].strip() if rest else ""
    if strip_math:
        answer = answer.strip().rstrip(".").strip("$ ").rstrip(".").strip()
    else:
        answer = answer.strip().strip('"').rstrip(".").strip()
    if not answer:
        return None
    return ExtractedAnswer(answer, "marker", text[: last.start()].strip())
