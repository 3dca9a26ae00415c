"""Summaries and tables of runs: means with 95% intervals inside each quantity's range per
setting (:mod:`marlang.statistics.intervals`; the plots are drawn by :mod:`marlang.statistics.plots`).

Works from the per-episode metrics stored in ``episodes.jsonl``, so ``marlang report``
can rebuild everything from a run directory alone.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from marlang.statistics.intervals import (
    BOOTSTRAP,
    MIN_N,
    NO_SPREAD,
    TOO_FEW,
    UNDEFINED,
    WILSON,
    defined,
    mean_interval,
    pooled_interval,
    pooled_rate,
    show,
    wilson_interval,
)
from marlang.statistics.plots import MARKERS, iteration_figure
from marlang.tables.cost import MODEL_SECONDS_HEADER, PRICE_HEADER, calls_per_episode, cost_columns, pool_costs
from marlang.token_counts import trusted_tokens

__all__ = ["MARKERS", "iteration_figure"]  # drawn in marlang.statistics.plots; kept here

def summarize_episodes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate per-episode metric rows into the summary of one setting: the success rate
    with its Wilson interval, every other mean with its bootstrap percentile interval."""
    per_episode = {  # each episode's figures, in episode order: a row pooling seeds resamples them by seed
        "success_rate": [float(bool(r["success"])) for r in rows],
        "steps": [r["steps"] for r in rows],
        "steps_when_solved": [r["steps"] for r in rows if r["success"]],
        "return": [r["return"] for r in rows],
        "llm_calls_per_episode": [r["llm_calls"] for r in rows],
        "tokens_per_episode": [r["tokens_in"] + r["tokens_out"] for r in rows],
    }
    decisions = sum(r["decisions"] for r in rows)
    invalid = sum(r["invalid_actions"] for r in rows)
    levels = sorted(_levels(rows))
    return {
        "episodes": len(rows),
        "failed_episodes": sum(1 for r in rows if r.get("failed")),
        "levels": len(levels),
        "level_ids": levels,
        "success_rate": wilson_interval(sum(1 for r in rows if r["success"]), len(rows)),
        **{key: mean_interval(values) for key, values in per_episode.items() if key != "success_rate"},
        "invalid_action_rate": {
            "mean": invalid / decisions if decisions else 0.0,
            "invalid": invalid,
            "decisions": decisions,
        },
        "per_episode": per_episode,
    }


def _levels(rows: list[dict[str, Any]]) -> set[str]:
    """The distinct levels of episode rows: their ``level`` (a task's problem), else their seed."""
    return {str(r.get("level", r.get("seed"))) for r in rows if r.get("level", r.get("seed")) is not None}


def paired_change(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any] | None:
    """After minus before on the episodes both played (matched by ``seed``): the mean change
    in success and in return with their 95% bootstrap intervals over the per-level differences, and
    how many episodes were solved only after (``gained``) or only before (``lost``).

    Pairing removes the spread between seeds (easy and hard starts), so a change that two
    unpaired success intervals leave open is often settled. ``None`` without shared seeds."""
    first = {r["seed"]: r for r in before if r.get("seed") is not None}
    pairs = [(first[r["seed"]], r) for r in after if r.get("seed") in first]
    if not pairs:
        return None
    success = [float(bool(b["success"])) - float(bool(a["success"])) for a, b in pairs]
    returns = [float(b["return"]) - float(a["return"]) for a, b in pairs]
    return {
        "episodes": len(pairs),
        "success": mean_interval(success),
        "return": mean_interval(returns),
        "per_episode": {"success": success, "return": returns},
        "gained": sum(1 for d in success if d > 0),
        "lost": sum(1 for d in success if d < 0),
    }


TABLE_HEADERS = [
    "setting", "episodes", "success rate (95% CI)", "steps", "steps when solved", "return",
    "invalid actions", "LLM calls/ep", "tokens/ep",
]


def _episodes(summary: dict[str, Any]) -> str:
    """``N (L levels)``, with ``, F failed`` where episodes ended in an error."""
    levels, failed = summary.get("levels"), summary.get("failed_episodes")
    notes = [f"{levels} levels"] if isinstance(levels, int) else []
    if isinstance(failed, int) and failed:
        notes.append(f"{failed} failed")
    return f"{summary['episodes']} ({', '.join(notes)})" if notes else str(summary["episodes"])


def _return(stat: dict[str, Any]) -> str:
    shown = show(stat, 3)
    if isinstance(stat, dict) and defined(stat.get("iqm")):
        iqm = {"mean": stat["iqm"], "low": stat.get("iqm_low"), "high": stat.get("iqm_high"), "n": stat.get("n"),
               "interval": stat.get("interval")}
        shown += f"; IQM {show(iqm, 3)}"
    return shown


def table_rows(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    rows = []
    for name, s in summaries.items():
        rows.append([
            name,
            _episodes(s),
            show(s["success_rate"], 2),
            show(s["steps"]),
            show(s["steps_when_solved"]),
            _return(s["return"]),
            f"{100 * s['invalid_action_rate']['mean']:.1f}%",
            show(calls_per_episode(s, "llm_calls")),
            show(calls_per_episode(s, "tokens"), 0),
        ])
    return rows


EVAL_HEADER = "eval return (before -> after)"
EVAL_SUCCESS_HEADER = "eval success (before -> after)"


def _held_out(summary: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A learner's greedy evaluation in ``summary`` (``evaluation``: after the last update;
    ``evaluation_initial``: before the first); None when the run has none (a neural run's
    ``evaluation`` names its kind and is already its own row)."""
    found = summary.get(key)
    return found if isinstance(found, dict) and isinstance(found.get("return"), dict) else None


def _evaluation(summary: dict[str, Any], display: Callable[[dict[str, Any]], str] | None = None) -> str:
    """``display`` (default: the return) of the greedy evaluation before the first update and
    after the last, or after only; ``-`` when the run has none."""
    display = display or (lambda evaluation: show(evaluation["return"], 3))
    last, first = _held_out(summary, "evaluation"), _held_out(summary, "evaluation_initial")
    if last is None:
        return UNDEFINED
    after = display(last)
    if first is None or first.get("iteration") == last.get("iteration"):
        return after
    return f"{display(first)} -> {after}"


def _eval_success(evaluation: dict[str, Any]) -> str:
    rate = evaluation.get("success_rate")
    episodes = evaluation.get("episodes")
    if not isinstance(rate, dict) or not defined(rate.get("mean")) or not episodes:
        return UNDEFINED
    return f"{round(rate['mean'] * episodes)}/{episodes} ({rate['mean']:.2f})"


def _eval_success_change(summary: dict[str, Any]) -> str:
    """Solved held-out episodes before -> after, and the paired change with its interval."""
    shown = _evaluation(summary, _eval_success)
    change = summary.get("evaluation_change")
    if isinstance(change, dict) and isinstance(change.get("success"), dict) and defined(
            change["success"].get("mean")):
        stat = change["success"]
        shown += f"; paired {stat['mean']:+.2f}" + (
            f" [{stat['low']:+.2f}, {stat['high']:+.2f}]" if defined(stat.get("low"), stat.get("high"))
            else f" ({stat.get('interval') or 'no interval'})")
    return shown


def _llm_team(summary: dict[str, Any]) -> bool:
    """Whether a summary is of language-model agents (not a neural or scripted team)."""
    return summary.get("agents") != "neural" and summary.get("model") != "scripted"


def markdown_table(summaries: dict[str, dict[str, Any]], title: str = "", first_column: str = "setting") -> str:
    """The table of settings: without the LLM columns (calls, tokens) when no row is a team of
    language-model agents, and without the success columns when no row's env knows success."""
    from tabulate import tabulate

    headers = [first_column, *TABLE_HEADERS[1:]]
    rows = table_rows(summaries)
    drop = set()
    if summaries and not any(_llm_team(s) for s in summaries.values()):
        drop |= {"LLM calls/ep", "tokens/ep"}
    if summaries and not any(s.get("success_defined", True) for s in summaries.values()):
        drop |= {"success rate (95% CI)", "steps when solved"}
    keep = [i for i, h in enumerate(headers) if h not in drop]
    headers, rows = [headers[i] for i in keep], [[r[i] for i in keep] for r in rows]
    evaluated = any(_held_out(s, "evaluation") for s in summaries.values())
    if evaluated:
        # learners that evaluate greedily on held-out episodes: before training and after it
        headers.append(EVAL_HEADER)
        rows = [[*r, _evaluation(s)] for r, s in zip(rows, summaries.values(), strict=True)]
        if "success rate (95% CI)" in headers and any(
                (e := _held_out(s, "evaluation")) and _eval_success(e) != UNDEFINED for s in summaries.values()):
            headers.append(EVAL_SUCCESS_HEADER)
            rows = [[*r, _eval_success_change(s)] for r, s in zip(rows, summaries.values(), strict=True)]
    cost_headers, cost_cells, cost_note = cost_columns(
        summaries, counted=[h for h in ("LLM calls/ep", "tokens/ep") if h in headers])
    headers, rows = [*headers, *cost_headers], [[*r, *c] for r, c in zip(rows, cost_cells, strict=True)]
    body = tabulate(rows, headers=headers, tablefmt="github")
    pooled = any("seeds" in s for s in summaries.values())
    # the columns whose intervals are bootstrapped, named as the header names them
    bootstrapped = [h + (" (and its IQM)" if h == "return" and pooled else "") for h in headers if h in (
        "steps", "steps when solved", "return", "LLM calls/ep", "tokens/ep", MODEL_SECONDS_HEADER, PRICE_HEADER)]
    note = (
        "\n\nsteps: mean steps per episode (unsolved episodes count their full length), the "
        "metric of the conversation-protocol paper; return: the team's reward per episode. "
        "Intervals are 95% and stay inside each quantity's range: "
        + (f"success rate: {WILSON} on the counts{' (a pooled row: of all its seeds)' if pooled else ''}; "
           if "success rate (95% CI)" in headers else "")
        + ", ".join(bootstrapped) + f": {BOOTSTRAP} over the episodes; fewer than {MIN_N} values say "
        f"'{TOO_FEW}', and values all equal '{NO_SPREAD}', instead of an interval. levels: distinct env "
        "seeds among the episodes."
    )
    if any(str(s.get("env_id", "")).startswith("graph:") for s in summaries.values()):
        note += (" A user's graph's row (graph:<build>): steps are its chat-model calls, levels the distinct "
                 "inputs of its task, and no call chooses among legal actions (invalid actions 0%).")
    if evaluated:
        note += (" The other columns are over a run's own episodes (a learner's: its training "
                 f"rollouts, sampled); {EVAL_HEADER}: the greedy held-out evaluation's return before "
                 "the first update and after the last")
        if EVAL_SUCCESS_HEADER in headers:
            note += (f"; {EVAL_SUCCESS_HEADER}: its solved episodes (success rate), and the change in "
                     "success over the same held-out seeds with its 95% interval (paired)")
        note += " (compare learners by these)."
    if pooled:
        note += (" A row named (N seeds) pools its setting's runs: each figure is over all its seeds' "
                 "episodes together, with the interval one run of those episodes would get, and the "
                 "return column adds the interquartile mean (IQM); episodes and levels: of all its "
                 "seeds. These intervals are over episodes, not seeds: each seed's own mean is in "
                 "summary.json (seeds).")
    note += cost_note
    held = {h for s in summaries.values() if (h := s.get("held_out"))}
    if evaluated and held:
        note += " Held-out set: " + "; ".join(sorted(held)) + "."
    return (f"## {title}\n\n" if title else "") + body + note + "\n"


# Per-iteration metrics and learning curves ------------------------------------------------------

LLM_ROLES = ("actor", "speaker", "reflector", "critic", "gradient", "aggregator", "optimizer")
"""Roles counted per iteration in ``iterations.csv`` (other roles are added when they occur)."""


def iteration_row(
    iteration: int,
    trajectories: Sequence[Any],
    llm_calls: Sequence[dict[str, Any]],
    counters: dict[str, int] | None = None,
    evaluation: Mapping[str, Any] | None = None,
    accepted: Sequence[bool] = (),
) -> dict[str, Any]:
    """One row of ``iterations.csv``: the iteration's rollouts (mean return with its 95% bootstrap interval,
    success rate with its Wilson interval), the update's outcome, and LLM calls and tokens
    per role (rollouts, update and checks of this iteration, read from ``llm_calls.csv``)."""
    returns = [t.team_return for t in trajectories]
    ret = mean_interval(returns)
    sr = wilson_interval(sum(1 for t in trajectories if t.success), len(trajectories))
    row: dict[str, Any] = {
        "iteration": iteration,
        "episodes": len(trajectories),
        "return_mean": ret["mean"],
        "return_low": ret["low"],
        "return_high": ret["high"],
        "success_rate": sr["mean"],
        "success_low": sr["low"],
        "success_high": sr["high"],
        "invalid_rate": _invalid_rate(trajectories),
        "eval_return": (evaluation or {}).get("candidate_return"),
        "policies_accepted": sum(1 for a in accepted if a) if accepted else None,
        "policies_proposed": len(accepted) if accepted else None,
    }
    for key, value in (counters or {}).items():
        row[key] = value
    roles = list(LLM_ROLES)
    mine = [r for r in llm_calls if str(r.get("iteration")) == str(iteration) and not r.get("error")]
    roles += sorted({r["role"] for r in mine} - set(roles))
    for role in roles:
        of_role = [r for r in mine if r.get("role") == role]
        row[f"{role}_calls"] = len(of_role)
        row[f"{role}_tokens"] = sum((trusted_tokens(r.get("input_tokens")) or 0)
                                    + (trusted_tokens(r.get("output_tokens")) or 0) for r in of_role)
    return row


def _invalid_rate(trajectories: Sequence[Any]) -> float | None:
    """Invalid actions per decision over the episodes' ``metrics.csv`` rows (None without any)."""
    metrics = [getattr(t, "metrics", None) or {} for t in trajectories]
    decisions = sum(int(m.get("decisions") or 0) for m in metrics)
    return sum(int(m.get("invalid_actions") or 0) for m in metrics) / decisions if decisions else None


SEED_PART = re.compile(r"(^|,\s*)run\.seed=[^,]*")
"""The seed part of a grid setting's name (``ippo+lca-heuristic, run.seed=2``)."""


def seed_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """Names that differ only in their seed part, under their pooled name ``NAME (N seeds)``
    (a name without others of its setting stays as it is)."""
    groups: dict[str, list[str]] = {}
    for name in names:
        groups.setdefault(SEED_PART.sub("", name).strip(" ,"), []).append(name)
    return {(f"{base or 'all'} ({len(found)} seeds)" if len(found) > 1 else found[0]): found
            for base, found in groups.items()}


def seed_of(name: str) -> str:
    """The seed in a setting's name (``ippo, run.seed=2`` -> ``2``), else the name itself."""
    found = SEED_PART.search(name)
    return found.group(0).strip(" ,").partition("=")[2].strip() if found else name


POOLED_STATS = ("success_rate", "steps", "steps_when_solved", "return", "llm_calls_per_episode",
                "tokens_per_episode")
"""Statistics a pooled row gives over all its seeds' episodes together."""

SETTING_KEYS = ("env_id", "model", "learner", "max_steps", "agents", "success_defined", "frames",
                "critic", "reward_hook", "held_out")
"""Keys that say what a setting is (the same for each of its seeds): a pooled row keeps them."""


def _over_seeds(runs: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """:func:`pooled_rate` (the success rate) or :func:`pooled_interval` (any other mean) of
    every seed's episodes' ``key`` (a summary's ``per_episode``); summaries without them
    (written before they were kept) give the mean of the seeds' means with no interval."""
    strata = [v for r in runs if isinstance(v := (r.get("per_episode") or {}).get(key), list)]
    if len(strata) == len(runs):
        return pooled_rate(strata) if key == "success_rate" else pooled_interval(strata)
    means = [float(r[key]["mean"]) for r in runs if isinstance(r.get(key), dict) and defined(r[key].get("mean"))]
    return {"mean": sum(means) / len(means) if means else None, "low": None, "high": None, "n": len(means),
            "interval": "no episodes kept"}


def _pooled_evaluation(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"iteration": max(int(r.get("iteration") or 0) for r in runs),
            "episodes": sum(int(r.get("episodes") or 0) for r in runs),
            "return": _over_seeds(runs, "return"),
            "success_rate": _over_seeds(runs, "success_rate")}


def pool_summaries(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One row per setting over its seeds, named as :func:`pool_seeds` names its curve: settings
    whose names differ only in ``run.seed`` become ``NAME (N seeds)``, whose statistics (return,
    success rate, steps, LLM calls, tokens, the held-out evaluation and its paired change) are
    over all its seeds' episodes together, with the intervals of :func:`_over_seeds` (Wilson
    for the success rate; the mean and IQM of the others with their bootstrap intervals);
    ``episodes`` counts every seed's, ``levels``
    their distinct env seeds. ``seeds`` keeps each seed's own summary, by seed. Settings with
    one seed are kept as they are."""
    pooled: dict[str, dict[str, Any]] = {}
    for label, names in seed_groups(summaries).items():
        runs = [summaries[n] for n in names]
        if len(names) == 1:
            pooled[label] = runs[0]
            continue
        row: dict[str, Any] = {"setting": label, "episodes": sum(int(r.get("episodes") or 0) for r in runs),
                               "failed_episodes": sum(int(r.get("failed_episodes") or 0) for r in runs)}
        if all(isinstance(r.get("level_ids"), list) for r in runs):
            # distinct over the seeds: run seeds share no env seed, a task's problems they may
            row["level_ids"] = sorted({str(level) for r in runs for level in r["level_ids"]})
            row["levels"] = len(row["level_ids"])
        row.update({k: runs[0][k] for k in SETTING_KEYS if k in runs[0]})
        for key in POOLED_STATS:
            row[key] = _over_seeds(runs, key)
        invalid = [r.get("invalid_action_rate") or {} for r in runs]
        count, decisions = sum(int(i.get("invalid") or 0) for i in invalid), sum(int(i.get("decisions") or 0)
                                                                                 for i in invalid)
        row["invalid_action_rate"] = {"mean": count / decisions if decisions else 0.0, "invalid": count,
                                      "decisions": decisions}
        for key in ("evaluation", "evaluation_initial"):
            found = [h for r in runs if (h := _held_out(r, key))]
            if len(found) == len(runs):
                row[key] = _pooled_evaluation(found)
            elif isinstance(runs[0].get(key), str):  # a neural run's names its kind
                row[key] = runs[0][key]
        changes = [c for r in runs if isinstance(c := r.get("evaluation_change"), dict)]
        if len(changes) == len(runs):
            row["evaluation_change"] = {
                "episodes": sum(int(c.get("episodes") or 0) for c in changes),
                "success": _over_seeds(changes, "success"),
                "return": _over_seeds(changes, "return"),
                "gained": sum(int(c.get("gained") or 0) for c in changes),
                "lost": sum(int(c.get("lost") or 0) for c in changes)}
        if (cost := pool_costs([r.get("cost") for r in runs])) is not None:
            row["cost"] = cost
        row["seeds"] = {seed_of(n): r for n, r in zip(names, runs, strict=True)}
        pooled[label] = row
    return pooled


def pool_seeds(curves: dict[str, list[dict[str, Any]]],
               final: dict[str, tuple[float, float]] | None = None
               ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, tuple[float, float]] | None]:
    """One curve per setting over its seeds: settings whose names differ only in
    ``run.seed`` become ``NAME (N seeds)``, and at each x (frames, else iteration) the mean
    over the seeds that reached it of the return (``return_low``/``return_high``: the bootstrap
    interval over those seeds' returns; none below five seeds), success rate and greedy
    evaluation return; ``final`` (closing greedy evaluations) is averaged too. Curves with one
    seed are kept as they are."""
    pooled: dict[str, list[dict[str, Any]]] = {}
    pooled_final: dict[str, tuple[float, float]] = {}
    for label, names in seed_groups(curves).items():
        if len(names) == 1:
            pooled[names[0]] = curves[names[0]]
            if final and names[0] in final:
                pooled_final[names[0]] = final[names[0]]
            continue
        x_key = "frames" if all(r.get("frames") is not None for n in names for r in curves[n]) else "iteration"
        at: dict[float, list[dict[str, Any]]] = {}
        for n in names:
            for r in curves[n]:
                if r.get(x_key) is not None:
                    at.setdefault(float(r[x_key]), []).append(r)
        rows = []
        for x in sorted(at):
            def values(key: str, group: list[dict[str, Any]] = at[x]) -> list[float]:
                return [float(r[key]) for r in group if r.get(key) is not None and math.isfinite(float(r[key]))]

            ret, evals, rates = mean_interval(values("return_mean")), values("eval_return"), values("success_rate")
            rows.append({x_key: x, "return_mean": ret["mean"], "return_low": ret["low"], "return_high": ret["high"],
                         "success_rate": sum(rates) / len(rates) if rates else None,
                         "eval_return": sum(evals) / len(evals) if evals else None})
        pooled[label] = rows
        finals = [final[n] for n in names if final and n in final]
        if finals:
            pooled_final[label] = (max(f[0] for f in finals), sum(f[1] for f in finals) / len(finals))
    return pooled, (pooled_final if final is not None else None)


def policies_text(policies: dict[str, dict[str, Any]],
                  heading: str = "## Policies before and after learning") -> str:
    """Each agent's policy before and after learning, for reports and the CLI."""
    lines = [heading, ""]
    for agent, p in policies.items():
        lines += [f"**{agent}**", "", f"- before: {p['initial']}", f"- after: {p['final']}"]
        for r in p.get("rejected") or []:
            why = f" by {r['decided_by']}" if r.get("decided_by") else ""
            if r.get("baseline_return") is not None and r.get("candidate_return") is not None:
                why += f": return {r['candidate_return']:.3f} against {r['baseline_return']:.3f}"
            lines.append(f"- rejected at iteration {r['iteration']}{why}: {r['text']}")
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------ a finished run's summary

SUMMARY_INPUTS = ("config.yaml", "manifest.json", "episodes.jsonl", "iterations.csv", "updates.jsonl",
                  "policies.jsonl", "learner_state.json")
"""The files a run's summary.json is computed from (the run's finalize)."""


def current_summary(path: Path) -> dict[str, Any] | None:
    """The run's summary.json if it is newer than every file it is computed from (a finished
    run; not a neural one, whose summary comes from other files), else None. Reading it spares
    report validating the config and loading the run machinery (envs, torch, langchain)."""
    import json

    import yaml

    summary, curve = path / "summary.json", path / "learning_curve.png"
    if not summary.is_file():
        return None
    try:
        agents = (yaml.safe_load((path / "config.yaml").read_text()) or {}).get("agents") or {}
    except (OSError, ValueError, yaml.YAMLError, AttributeError, RecursionError):
        return None
    if not isinstance(agents, dict) or agents.get("kind") == "neural":
        return None
    written = summary.stat().st_mtime_ns
    inputs = [path / name for name in SUMMARY_INPUTS if (path / name).is_file()]
    if any(f.stat().st_mtime_ns > written for f in inputs):
        return None
    if (path / "iterations.csv").is_file() and not curve.is_file():
        return None  # the plot is part of what report rebuilds
    try:
        found = json.loads(summary.read_text())
    except (OSError, ValueError, RecursionError):  # a damaged summary is rebuilt
        return None
    ok = isinstance(found, dict) and "setting" in found and bool(found.get("episodes"))
    return found if ok else None
