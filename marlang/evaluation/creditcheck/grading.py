"""Grading a critic's credits against the oracle's: per graded unit (a step, or an episode for a
per-episode critic), the Spearman rank correlation between the critic's and the oracle's credits
across agents, and whether the critic's top agent is the oracle's; each a mean over units with a
bootstrap interval (``marlang.statistics.intervals``) and its chance level.

Ties: a unit where the oracle credits every agent alike is left out of both metrics (counted as
``oracle_ties``); where several agents share the top credit, the agreement of a unit is the
chance that a pick among the critic's top agents is one of the oracle's, |top_c & top_o| / |top_c|,
and its chance level |top_o| / n (1/n where the oracle's top agent is unique). The correlation of
a unit where the critic credits every agent alike is undefined: left out, counted as
``critic_ties`` (its top-agent agreement still counts, at the chance level). A unit is graded
over its own agents, those both credit (n above; a graph's episode credits the prompts it read),
and one with fewer than two counts as an oracle tie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marlang.statistics.intervals import mean_interval

TIE_TOLERANCE = 1e-9


def _ranks(values: Sequence[float]) -> list[float]:
    """Average ranks (ties share the mean of their positions), 1-based."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and abs(values[order[j + 1]] - values[order[i]]) <= TIE_TOLERANCE:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def all_tied(values: Sequence[float]) -> bool:
    return max(values) - min(values) <= TIE_TOLERANCE


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson's of the average ranks); None where either side is
    all ties (undefined)."""
    if len(a) < 2 or all_tied(a) or all_tied(b):
        return None
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    va = sum((x - ma) ** 2 for x in ra) ** 0.5
    vb = sum((y - mb) ** 2 for y in rb) ** 0.5
    return max(-1.0, min(1.0, cov / (va * vb)))


def top_agents(credit: Mapping[str, float]) -> set[str]:
    best = max(credit.values())
    return {a for a, c in credit.items() if best - c <= TIE_TOLERANCE}


def grade(oracle: Mapping[Any, Mapping[str, float]], critic: Mapping[Any, Mapping[str, float]],
          agents: Sequence[str]) -> dict[str, Any]:
    """The critic's agreement with the oracle over the units both credited (see the module
    docstring): ``spearman`` and ``top_agent`` statistics with intervals, their chance levels and
    the counts of units graded and left out."""
    rho: list[float] = []
    top: list[float] = []
    chance: list[float] = []
    oracle_ties = critic_ties = 0
    units = [u for u in oracle if u in critic]
    for unit in units:
        # the agents of this unit (a graph's episode credits only the prompts its nodes read)
        names = [a for a in agents if a in oracle[unit] and a in critic[unit]]
        o = [float(oracle[unit][a]) for a in names]
        c = [float(critic[unit][a]) for a in names]
        if len(names) < 2 or all_tied(o):
            oracle_ties += 1
            continue
        r = spearman(o, c)
        if r is None:
            critic_ties += 1
        else:
            rho.append(r)
        best_o = top_agents({a: oracle[unit][a] for a in names})
        best_c = top_agents({a: critic[unit][a] for a in names})
        top.append(len(best_o & best_c) / len(best_c))
        chance.append(len(best_o & set(names)) / len(names))
    return {
        "units": len(units),
        "graded": len(top),
        "spearman": mean_interval(rho),
        "spearman_chance": 0.0,
        "top_agent": mean_interval(top),
        "top_agent_chance": sum(chance) / len(chance) if chance else None,
        "oracle_ties": oracle_ties,
        "critic_ties": critic_ties,
    }
