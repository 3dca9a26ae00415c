"""Environments and their episodes told in words for learners: what the world is, what mattered
to one agent at one step (Reflexion), a whole joint episode within a token budget (a critic).
Each env narrates itself: ``env.narrator()`` returns its ``Narrator`` (``narrator.Narrator``,
subclassed beside the env); any other ParallelEnv gets the generic ``Narrator``. This module
only dispatches to it and fits what it tells into the budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from marlang.envs.core.narrator import After, Narrator, plural
from marlang.types import Step, Trajectory

__all__ = [
    "GENERIC_WORLD",
    "After",
    "Narrator",
    "TokenCounter",
    "agent_trajectory",
    "estimate_tokens",
    "format_trajectory",
    "narrator_for",
    "step_summary",
    "world_description",
]

GENERIC_WORLD = "a shared environment"
"""The world of an env that does not describe itself (no ``world_description``)."""

TokenCounter = Callable[[str], int]


def estimate_tokens(text: str) -> int:
    """The default token count: ``ceil(len(text) / 4)``, about four characters per token for
    English text under BPE tokenizers. Pass a tokenizer's own count where exactness matters."""
    return -(-len(text) // 4)


# ------------------------------------------------------------------------------ public API


def world_description(env: Any) -> str:
    """A noun phrase for "... agents acting together in {world}": ``env.world_description``,
    or ``"a shared environment"`` for an env that does not describe itself."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        world = getattr(candidate, "world_description", None)
        if isinstance(world, str) and world.strip():
            return world.strip()
    return GENERIC_WORLD


def narrator_for(env: Any) -> Narrator:
    """``env.narrator()`` where the env has one, else the generic ``Narrator``."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        make = getattr(candidate, "narrator", None)
        if callable(make):
            return make()
    return Narrator(env)


def step_summary(env: Any, step: Step, agent: str, after: After = None) -> str:
    """One line on what mattered to ``agent`` at ``step``: what it saw, what it did, the
    reward and events. ``after`` (the next observations, when known) adds what changed."""
    return narrator_for(env).step_summary(step, agent, after)


def format_trajectory(
    env: Any,
    trajectory: Trajectory,
    max_tokens: int = 1500,
    count_tokens: TokenCounter | None = None,
) -> str:
    """The whole joint trajectory (every agent) in at most ``max_tokens`` tokens, for a
    centralized critic: a header, one entry per step (or per window of steps, for envs that
    sample over time), per-agent totals, and always last the outcome line.

    ``count_tokens(text) -> int`` measures the budget (default ``estimate_tokens``: ceil of a
    quarter of the characters). Over budget, the middle steps are left out (a line says how
    many) or, for sampling envs, steps are grouped into coarser windows; the header and the
    totals go only when even they do not fit, and the outcome line is cut last.
    """
    count = count_tokens or estimate_tokens
    narrator = narrator_for(env)
    steps = trajectory.steps
    afters = _afters(trajectory)

    def windows(k: int) -> list[tuple[str, int]]:
        return [
            (
                narrator.entry(steps[i : i + k], afters[min(i + k, len(steps)) - 1]),
                len(steps[i : i + k]),
            )
            for i in range(0, len(steps), k)
        ]

    return _fit(
        narrator.header(trajectory) if steps else [],
        windows,
        narrator.summary(trajectory) if steps else [],
        narrator.outcome(trajectory),
        max_tokens,
        count,
        sampling=narrator.sampling,
        noun=narrator.step_noun,
        n_steps=len(steps),
    )


def agent_trajectory(
    env: Any,
    trajectory: Trajectory,
    agent: str,
    max_tokens: int = 800,
    count_tokens: TokenCounter | None = None,
) -> str:
    """``agent``'s own steps (``step_summary`` lines), its totals and the outcome line, in at
    most ``max_tokens`` tokens (middle steps left out when over budget, as in
    ``format_trajectory``), for prompts that must see only that agent's side."""
    count = count_tokens or estimate_tokens
    narrator = narrator_for(env)
    afters = _afters(trajectory)
    own = [
        (narrator.step_summary(step, agent, after), 1)
        for step, after in zip(trajectory.steps, afters)
        if agent in step.observations or agent in step.decisions
    ]
    return _fit(
        [],
        lambda k: own,
        narrator.agent_summary(trajectory, agent) if own else [],
        narrator.outcome(trajectory),
        max_tokens,
        count,
        sampling=False,
        noun=narrator.step_noun,
        n_steps=len(own),
    )


# ------------------------------------------------------------------------------ fitting a budget


def _afters(trajectory: Trajectory) -> list[After]:
    """For each step, the observations that followed it."""
    steps = trajectory.steps
    afters: list[After] = [steps[i + 1].observations for i in range(len(steps) - 1)]
    if steps:
        afters.append(trajectory.final_observations or None)
    return afters


def _fit(
    head: list[str],
    windows: Callable[[int], list[tuple[str, int]]],
    summary: list[str],
    outcome: str,
    budget: int,
    count: TokenCounter,
    *,
    sampling: bool,
    noun: str,
    n_steps: int,
) -> str:
    """Join header, body entries, summary and outcome within ``budget`` tokens.

    ``windows(k)`` gives the body as (text, steps covered) entries for windows of ``k`` steps.
    The fixed parts go first to last priority: outcome, summary, header; the body fills what
    is left, by coarser windows (``sampling``) and then by leaving out its middle.
    """
    if budget < 1:
        raise ValueError(f"max_tokens must be at least 1, got {budget}")
    omitted_probe = _omitted(n_steps, noun)
    for fixed_head, fixed_tail in (
        (head, [*summary, outcome]),
        (head[:1], [*summary, outcome]),
        ([], [*summary, outcome]),
        ([], [outcome]),
    ):
        if count(_join(fixed_head, [omitted_probe], fixed_tail)) > budget:
            continue
        if sampling and n_steps > 1:
            text = _fit_by_windows(fixed_head, windows, fixed_tail, budget, count, n_steps)
            if text is not None:
                return text
            entries = windows(max(1, math.ceil(n_steps / 8)))
        else:
            entries = windows(1)
        return _fit_by_eliding(fixed_head, entries, fixed_tail, budget, count, noun)
    return _cut(outcome, budget, count)


def _fit_by_windows(
    head: list[str],
    windows: Callable[[int], list[tuple[str, int]]],
    tail: list[str],
    budget: int,
    count: TokenCounter,
    n_steps: int,
) -> str | None:
    """The finest windows whose whole body fits (binary search over the window size)."""

    def attempt(k: int) -> str | None:
        text = _join(head, [e for e, _ in windows(k)], tail)
        return text if count(text) <= budget else None

    best = attempt(1)
    if best is not None:
        return best
    low, high = 1, n_steps  # attempt(low) fails
    best = attempt(high)
    if best is None:
        return None
    while high - low > 1:
        mid = (low + high) // 2
        text = attempt(mid)
        if text is None:
            low = mid
        else:
            high, best = mid, text
    return best


def _fit_by_eliding(
    head: list[str],
    entries: list[tuple[str, int]],
    tail: list[str],
    budget: int,
    count: TokenCounter,
    noun: str,
) -> str:
    """All entries if they fit, else the first and last ones with a line in between saying
    how many steps were left out. The caller made sure ``head``, that line and ``tail`` fit."""
    texts = [e for e, _ in entries]
    full = _join(head, texts, tail)
    if count(full) <= budget:
        return full
    total_steps = sum(n for _, n in entries)
    room = budget - count(_join(head, [_omitted(total_steps, noun)], tail))
    costs = [count(e + "\n") for e in texts]
    front = back = 0
    used = 0
    while front + back < len(entries):
        order = (
            (front, len(entries) - 1 - back) if front <= back else (len(entries) - 1 - back, front)
        )
        for index in order:
            if used + costs[index] <= room:
                used += costs[index]
                if index == front:
                    front += 1
                else:
                    back += 1
                break
        else:
            break
    while True:
        kept_back = len(entries) - back
        left_out = sum(n for _, n in entries[front:kept_back])
        text = _join(head, [*texts[:front], _omitted(left_out, noun), *texts[kept_back:]], tail)
        if count(text) <= budget or front + back == 0:
            return text
        # The per-entry costs were an estimate for this counter: drop one more and recount.
        if back >= front:
            back -= 1
        else:
            front -= 1


def _omitted(n: int, noun: str) -> str:
    return f"... ({plural(n, noun)} omitted) ..."


def _join(head: list[str], body: list[str], tail: list[str]) -> str:
    return "\n".join([*head, *body, *tail])


def _cut(text: str, budget: int, count: TokenCounter) -> str:
    """The longest prefix of ``text`` (ending in "...") within ``budget`` tokens."""
    if count(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count(text[:mid] + "...") <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low] + "..." if count(text[:low] + "...") <= budget else ""
