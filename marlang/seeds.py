"""Env seeds as independent streams: each ``run.seed`` derives its own seeds per phase, so two
run seeds never play each other's levels, while every setting of one seed plays the same ones.

A stream is ``(key, phase)``: the run seed (``run.eval_seed`` for the held-out set) and what the
episodes are for. Its episodes play ``base + index``, where ``base`` is a 52-bit hash of the
stream. Consecutive indices keep a finite problem set (tasks pose problem ``seed % n``) covered
once per ``n`` episodes, from a start each stream draws; two streams overlap only if their bases
fall within the episodes played of each other (below 1e-9 for a million episodes per stream).
Seeds stay below 2**53, so they survive JSON readers that hold numbers as doubles.
"""

from __future__ import annotations

import hashlib

PHASES = ("train", "eval", "test")
"""``train``: the learner's rollouts (a neural learner's collection envs too); ``eval``: a
candidate's check (the current policies and the candidate on the same seeds); ``test``: the
held-out evaluation (keyed by ``run.eval_seed``: one set for every training seed)."""

BASE_BITS = 52
"""A stream's first seed is below ``2**52``; a stream holds ``2**52`` episodes before a seed
reaches ``2**53``."""


def stream_base(key: int, phase: str) -> int:
    """The first env seed of stream ``(key, phase)``: a hash, the same on every machine."""
    if phase not in PHASES:
        raise ValueError(f"seed phase {phase!r} is not one of {', '.join(PHASES)}")
    digest = hashlib.blake2b(f"marlang-env-seed/{int(key)}/{phase}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> (64 - BASE_BITS)


def env_seed(key: int, phase: str, index: int) -> int:
    """The env seed of episode ``index`` (0, 1, ...) of stream ``(key, phase)``."""
    if index < 0:
        raise ValueError(f"episode index {index} is negative")
    return stream_base(key, phase) + int(index)


def env_seeds(key: int, phase: str, indices: range | tuple[int, ...] | list[int]) -> tuple[int, ...]:
    """:func:`env_seed` of each index."""
    base = stream_base(key, phase)
    return tuple(base + int(i) for i in indices)
