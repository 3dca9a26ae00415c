"""Prompt templates as files, one per role, loaded by name and versioned by content hash.

The bundled templates live beside this module; a directory given by the user overrides
any of them by file name. Hashes go into the run manifest so a run names its prompts.
"""

from __future__ import annotations

import hashlib
import re
import string
from dataclasses import dataclass
from pathlib import Path

BUNDLED_DIR = Path(__file__).parent


@dataclass(frozen=True)
class PromptTemplate:
    """A named ``str.format`` template; empty fields leave no blank lines behind."""

    name: str
    text: str

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()[:12]

    @property
    def fields(self) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(self.text) if f}

    def render(self, **values: object) -> str:
        missing = self.fields - values.keys()
        if missing:
            raise KeyError(f"prompt {self.name!r} needs values for: {', '.join(sorted(missing))}")
        out = self.text.format(**{k: ("" if v is None else v) for k, v in values.items()})
        # Empty optional sections would leave runs of blank lines: keep at most one.
        return re.sub(r"\n[ \t]*(\n[ \t]*)+\n", "\n\n", out).strip()


class PromptLibrary:
    """Loads templates by name from an optional override directory, then the bundled ones."""

    def __init__(self, override_dir: str | Path | None = None) -> None:
        self.override_dir = Path(override_dir) if override_dir else None
        if self.override_dir is not None and not self.override_dir.is_dir():
            raise FileNotFoundError(f"agents.prompt_dir: directory not found: {self.override_dir}")
        self._loaded: dict[str, PromptTemplate] = {}

    def names(self) -> list[str]:
        names = {p.stem for p in BUNDLED_DIR.glob("*.txt")}
        if self.override_dir is not None:
            names |= {p.stem for p in self.override_dir.glob("*.txt")}
        return sorted(names)

    def get(self, name: str) -> PromptTemplate:
        if name not in self._loaded:
            for folder in (self.override_dir, BUNDLED_DIR):
                if folder is not None and (folder / f"{name}.txt").is_file():
                    self._loaded[name] = PromptTemplate(name, (folder / f"{name}.txt").read_text())
                    break
            else:
                raise KeyError(f"unknown prompt {name!r}; valid: {', '.join(self.names())}")
        return self._loaded[name]

    def hashes(self) -> dict[str, str]:
        """Content hash of every template this library would load (for the run manifest)."""
        return {n: self.get(n).sha for n in self.names()}


def lessons_text(reflections: list[str]) -> str:
    """Reflexion's long-term memory as a prompt shows it ("" when there is none yet)."""
    if not reflections:
        return ""
    return "Lessons from your earlier episodes:\n" + "\n".join(f"- {r}" for r in reflections)
