"""Reflexion memory: a short-term buffer per episode and bounded long-term reflections.

Short-term entries (what the agent saw and did this episode) feed its prompts during the
episode; after the episode a reflection is written into long-term memory, which persists
across episodes (and across resumed runs, rebuilt from the run's saved reflections).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

from marlang.prompts import lessons_text


class ReflexionMemory:
    """Per-agent memory. ``capacity`` bounds the long-term reflections kept (oldest dropped)."""

    def __init__(self, capacity: int = 3) -> None:
        if capacity < 1:
            raise ValueError(f"learning.memory_size must be >= 1, got {capacity}")
        self.capacity = capacity
        self._reflections: deque[str] = deque(maxlen=capacity)
        self._short_term: dict[int, list[str]] = {}

    # long-term ---------------------------------------------------------------------------
    @property
    def reflections(self) -> list[str]:
        return list(self._reflections)

    def add_reflection(self, text: str) -> None:
        text = text.strip()
        if text:
            self._reflections.append(text)

    def render_reflections(self) -> str:
        return lessons_text(list(self._reflections))

    # short-term (one buffer per episode, so parallel episodes do not mix) ---------------
    def record(self, episode: int, entry: str) -> None:
        self._short_term.setdefault(episode, []).append(entry)

    def recent(self, episode: int, k: int) -> list[str]:
        if k <= 0:
            return []
        return self._short_term.get(episode, [])[-k:]

    def episode_entries(self, episode: int) -> list[str]:
        return list(self._short_term.get(episode, []))

    def end_episode(self, episode: int) -> list[str]:
        """Forget this episode's short-term buffer and return it."""
        return self._short_term.pop(episode, [])

    # persistence -------------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        return {"capacity": self.capacity, "reflections": list(self._reflections)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._reflections = deque((str(r) for r in state.get("reflections", [])), maxlen=self.capacity)
