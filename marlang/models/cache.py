"""A persistent LangChain response cache in one SQLite file.

Keyed by a hash of LangChain's (prompt, llm_string): the serialized messages and the model's
identity with every sampling parameter and call kwarg (seed included), so re-running a run
replays it exactly and for free.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.load import dumps, loads
from langchain_core.load.serializable import Serializable
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation, GenerationChunk

logger = logging.getLogger(__name__)

CACHE_DIR_ENV = "MARLANG_CACHE_DIR"
CACHED_FLAG = "cached"
"""Key set to True in a hit's ``generation_info`` and its message's ``response_metadata``."""

_STORED_TYPES: list[type[Serializable]] = [
    Generation,
    GenerationChunk,
    ChatGeneration,
    ChatGenerationChunk,
    AIMessage,
    AIMessageChunk,
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    llm_string TEXT NOT NULL,
    prompt TEXT NOT NULL,
    generations TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def default_cache_dir() -> Path:
    """marlang's user cache directory (converted weights, responses): ``$MARLANG_CACHE_DIR``
    if set, else ``marlang`` under ``$XDG_CACHE_HOME`` (the XDG base directory rule: only an
    absolute path counts), else ``~/.cache/marlang``."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "marlang"


class SQLiteResponseCache(BaseCache):
    """LangChain `BaseCache` persisted in SQLite (WAL mode), safe across threads and tasks.

    Pass it as a chat model's ``cache``. A hit is marked: each returned generation has
    ``generation_info["cached"] = True`` (seen by callbacks such as `UsageRecorder`) and an
    AI message also gets ``response_metadata["cached"] = True`` (seen by the caller).
    `hits` and `misses` count lookups since this object was created.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # One connection shared by all threads, serialized by the lock; autocommit mode.
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA busy_timeout=30000")  # other processes may share the file
        self._conn.execute(_SCHEMA)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(prompt: str, llm_string: str) -> str:
        """The row key: SHA-256 of the (prompt, llm_string) pair."""
        return hashlib.sha256(json.dumps([prompt, llm_string]).encode()).hexdigest()

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT generations FROM responses WHERE key = ?", (self.key(prompt, llm_string),)
            ).fetchone()
        generations = None
        if row is not None:
            try:
                generations = _loads_generations(row[0])
            except Exception:  # noqa: BLE001 - a corrupt or incompatible entry is a miss, not a crash
                logger.warning("Unreadable cache entry in %s; treating it as a miss", self.path)
        with self._lock:
            if generations is None:
                self.misses += 1
                return None
            self.hits += 1
        return [_mark_cached(g) for g in generations]

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        payload = dumps([_without_cached_flag(g) for g in return_val])
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)",
                (self.key(prompt, llm_string), llm_string, prompt, payload, time.time()),
            )

    def clear(self, **kwargs: Any) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM responses")

    # SQLite calls take microseconds, so the async variants run them inline rather than
    # paying a thread hop per call (LangChain's default runs them in the loop's executor).
    async def alookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        return self.lookup(prompt, llm_string)

    async def aupdate(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        self.update(prompt, llm_string, return_val)

    async def aclear(self, **kwargs: Any) -> None:
        self.clear(**kwargs)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteResponseCache({str(self.path)!r})"


def _loads_generations(payload: str) -> Sequence[Generation]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # loads() is marked beta
        generations = loads(payload, allowed_objects=_STORED_TYPES)
    if not isinstance(generations, list) or not all(isinstance(g, Generation) for g in generations):
        raise TypeError("cache entry is not a list of generations")
    return generations


def _mark_cached(generation: Generation) -> Generation:
    generation.generation_info = {**(generation.generation_info or {}), CACHED_FLAG: True}
    if isinstance(generation, ChatGeneration):
        generation.message.response_metadata = {
            **generation.message.response_metadata,
            CACHED_FLAG: True,
        }
    return generation


def _without_cached_flag(generation: Generation) -> Generation:
    info = generation.generation_info or {}
    if CACHED_FLAG not in info:
        return generation
    clean = generation.model_copy(
        update={"generation_info": {k: v for k, v in info.items() if k != CACHED_FLAG} or None}
    )
    if isinstance(clean, ChatGeneration):
        metadata = {k: v for k, v in clean.message.response_metadata.items() if k != CACHED_FLAG}
        clean.message = clean.message.model_copy(update={"response_metadata": metadata})
    return clean
