"""Turns free-form model output into one legal action string, leniently and countably.

Order of attempts: the text after the last ``Action:`` marker (or the whole output) matched
exactly, then ignoring case/spacing/punctuation, then the legal action mentioned last in the
text, then the nearest legal action by string similarity. ``None`` means nothing matched.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_MARKER = re.compile(r"action\s*[:：\-]\s*", re.IGNORECASE)
_NON_WORD = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class ParsedAction:
    action: str | None
    how: str
    """``exact``, ``normalized``, ``mentioned``, ``nearest`` or ``none``."""
    thought: str = ""


def _norm(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower()).strip()


def parse_action(text: str, legal_actions: list[str], min_similarity: float = 0.75) -> ParsedAction:
    """Find the legal action a model output names; see the module docstring for the order."""
    if not legal_actions:
        raise ValueError("parse_action needs at least one legal action")
    text = text or ""
    markers = list(_MARKER.finditer(text))
    if markers:
        last = markers[-1]
        thought = text[: last.start()].strip()
        answer = text[last.end():].strip().splitlines()[0] if text[last.end():].strip() else ""
    else:
        thought, answer = "", text.strip()

    if answer in legal_actions:
        return ParsedAction(answer, "exact", thought)
    normalized = {_norm(a): a for a in legal_actions}
    key = _norm(answer)
    if key in normalized:
        return ParsedAction(normalized[key], "normalized", thought)

    # The legal action mentioned last, first in the answer line, then in the whole output.
    for haystack in (key, _norm(text)):
        best: tuple[int, str] | None = None
        for norm_action, action in normalized.items():
            for m in re.finditer(rf"\b{re.escape(norm_action)}\b", haystack):
                if best is None or m.start() > best[0]:
                    best = (m.start(), action)
        if best is not None:
            return ParsedAction(best[1], "mentioned", thought)

    if key:
        candidates = difflib.get_close_matches(key, list(normalized), n=1, cutoff=min_similarity)
        if candidates:
            return ParsedAction(normalized[candidates[0]], "nearest", thought)
    return ParsedAction(None, "none", thought)
