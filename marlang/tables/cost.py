"""What a run cost, from its own files: LLM calls, tokens in and out and model seconds (by
model and by role, cached calls apart), a learner's tree sampling, a neural learner's frames
and seconds, GPU seconds where a GPU ran, and a price where the config gives one per model.

Also the score-against-cost points of a comparison and their Pareto front.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from marlang.rundir import RunDirectory
from marlang.statistics.intervals import TOTALS_ONLY, UNDEFINED, defined, mean_interval, pooled_interval
from marlang.token_counts import trusted_tokens

PER_TOKENS = 1_000_000
"""``model.price`` is in USD per this many tokens."""

PER_EPISODE = ("llm_calls", "tokens", "model_seconds", "usd")
"""Cost per training episode kept episode by episode (``cost.per_episode``), for intervals."""


# prices ---------------------------------------------------------------------------------------
def prices_of(config: Mapping[str, Any]) -> dict[str, dict[str, float] | None]:
    """Model spec -> its ``price`` ({input, output} USD per million tokens) or None, for the
    top-level ``model`` and every ``team`` slot's own model. A slot on another model takes no
    price from the top-level one: it is priced only by its own ``team.SLOT.model.price``."""
    model = config.get("model") or {}
    top = str(model.get("spec") or "local:smollm2")
    prices: dict[str, dict[str, float] | None] = {top: model.get("price")}
    for slot in (config.get("team") or {}).values():
        own = (slot or {}).get("model") or {} if isinstance(slot, Mapping) else {}
        if not own or (slot.get("kind") in ("scripted", "neural")):
            continue
        spec = str(own.get("spec") or top)
        price = own["price"] if "price" in own else (model.get("price") if spec == top else None)
        if prices.get(spec) is None:
            prices[spec] = price
    return prices


def price_usd(tokens_in: float, tokens_out: float, price: Mapping[str, float]) -> float:
    """What ``tokens_in`` prompt and ``tokens_out`` completion tokens cost at ``price``."""
    return (tokens_in * float(price["input"]) + tokens_out * float(price["output"])) / PER_TOKENS


def _price_for(model: str, prices: Mapping[str, Any]) -> Mapping[str, float] | None:
    """A call's model (``llm_calls.csv`` names it by its spec, or a server by its bare name)."""
    if model in prices:
        return prices[model]
    bare = {spec.partition(":")[2]: p for spec, p in prices.items()}
    return bare.get(model)


# a run's cost ----------------------------------------------------------------------------------
def _all_defined(values: list[Any]) -> list[float] | None:
    """``values`` where every one is a finite number (:func:`defined`), else None."""
    return values if all(defined(v) for v in values) else None


def _number(value: Any) -> float:
    try:
        found = float(value)
    except (TypeError, ValueError):
        return 0.0
    return found if math.isfinite(found) else 0.0


def _true(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1")


def _wall_shares(spans: Sequence[tuple[float, float] | None], latencies: Sequence[float]) -> list[float]:
    """Each call's share of the wall time the model was busy: every stretch of time is split
    evenly among the calls running in it, so concurrent calls count once together and the
    shares add up to the busy time. A call without a start time keeps its latency."""
    shares = [0.0 if span else latency for span, latency in zip(spans, latencies, strict=True)]
    events = sorted((t, kind, i) for i, span in enumerate(spans) if span
                    for t, kind in ((span[0], 1), (span[1], 0)))
    active: set[int] = set()
    last = None
    for t, kind, i in events:
        if active and last is not None and t > last:
            for j in active:
                shares[j] += (t - last) / len(active)
        last = t
        (active.add if kind else active.discard)(i)
    return shares


def _start(row: Mapping[str, Any]) -> float | None:
    try:
        return datetime.fromisoformat(str(row.get("time"))).timestamp()
    except (TypeError, ValueError):
        return None


def _empty() -> dict[str, float]:
    return {"llm_calls": 0, "cached_calls": 0, "errors": 0, "tokens_in": 0, "tokens_out": 0,
            "model_seconds": 0.0, "call_seconds": 0.0}


def _rounded(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in values.items()}


def cost_of(calls: Iterable[Mapping[str, Any]], episodes: Sequence[Mapping[str, Any]],
            iterations: Sequence[Mapping[str, Any]] = (), *, prices: Mapping[str, Any] | None = None,
            sampling_model: str | None = None, device: str | None = None,
            neural: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The cost of a run's row: every call of ``calls`` (``llm_calls.csv`` rows: acting,
    speaking, learner roles, candidate checks, held-out evaluation), the tree sampling in
    ``iterations`` (``completions_sampled``, ``tokens_prompt``, ``tokens_sampled``; charged
    to ``sampling_model``; not timed), over the training ``episodes`` (metrics rows).

    Totals, ``by_model`` and ``by_role``. ``model_seconds``: wall seconds a model was busy
    answering (concurrent calls share their time, so they count once together; cache hits
    apart, under ``cached``); ``call_seconds``: the calls' latencies summed. ``gpu_seconds``:
    the model seconds (plus a neural learner's training seconds) where ``device`` is a GPU,
    else None. ``price_usd``: every model priced (``prices``: spec -> price or None), else None
    with ``priced`` ``part`` or ``none`` and ``unpriced`` naming the models. ``per_episode``:
    each training episode's own calls plus an even share of the calls that belong to no
    training episode (its iteration's, else the run's)."""
    prices = prices or {}
    rows = list(calls)
    hits = [_true(r.get("cached")) for r in rows]
    latency = [_number(r.get("latency_s")) for r in rows]
    spans = [None if hit or (t := _start(r)) is None else (t, t + lat)
             for r, hit, lat in zip(rows, hits, latency, strict=True)]
    wall = _wall_shares(spans, [0.0 if hit else lat for hit, lat in zip(hits, latency, strict=True)])
    totals, cached = _empty(), {"llm_calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0}
    by_model: dict[str, dict[str, Any]] = {}
    by_role: dict[str, dict[str, Any]] = {}
    share = _Shares(episodes)
    for row, hit, lat, seconds in zip(rows, hits, latency, wall, strict=True):
        error = bool(str(row.get("error") or "").strip())
        # a count no call can have (negative, absurd: a broken server's) counts as 0
        tin = 0 if error else trusted_tokens(row.get("input_tokens")) or 0
        tout = 0 if error else trusted_tokens(row.get("output_tokens")) or 0
        model = str(row.get("model") or "unknown")
        for group in (totals, by_model.setdefault(model, _empty()),
                      by_role.setdefault(str(row.get("role") or "unknown"), _empty())):
            group["llm_calls"] += 1
            group["cached_calls"] += int(hit)
            group["errors"] += int(error)
            group["tokens_in"] += tin
            group["tokens_out"] += tout
            group["model_seconds"] += seconds
            group["call_seconds"] += 0.0 if hit else lat
        if hit:
            cached["llm_calls"] += 1
            cached["tokens_in"] += tin
            cached["tokens_out"] += tout
            cached["seconds"] += lat
        price = _price_for(model, prices)
        share.add(row.get("episode"), row.get("iteration"), {
            "llm_calls": 1, "tokens": tin + tout, "model_seconds": seconds,
            "usd": price_usd(tin, tout, price) if price else 0.0})
    sampled = _sampling(iterations)
    if sampled["completions"]:
        model = sampling_model or "unknown"
        price = _price_for(model, prices)
        for r in iterations:
            if r.get("completions_sampled") in (None, ""):
                continue
            prompt, completion = _number(r.get("tokens_prompt")), _number(r.get("tokens_sampled"))
            share.add(None, r.get("iteration"), {"llm_calls": _number(r["completions_sampled"]),
                                                 "tokens": prompt + completion,
                                                 "usd": price_usd(prompt, completion, price) if price else 0.0})
        for group in (totals, by_model.setdefault(model, _empty())):
            group["tokens_in"] += sampled["tokens_in"]
            group["tokens_out"] += sampled["tokens_out"]
    for model, entry in by_model.items():
        price = _price_for(model, prices)
        entry.update(_rounded(entry))
        entry["price_usd"] = (round(price_usd(entry["tokens_in"], entry["tokens_out"], price), 8)
                              if price else None)
    for entry in by_role.values():
        entry.update(_rounded(entry))
    used = [m for m, e in by_model.items() if e["tokens_in"] or e["tokens_out"]]
    unpriced = sorted(m for m in used if by_model[m]["price_usd"] is None)
    all_priced = bool(prices) and all(prices.values())
    priced = ("all" if all_priced else "none") if not used else (
        "none" if len(unpriced) == len(used) else ("part" if unpriced else "all"))
    out: dict[str, Any] = {
        "episodes": len(episodes),
        **_rounded(totals),
        "cached": _rounded(cached),
        "by_model": by_model,
        "by_role": by_role,
        "device": device,
        "gpu_seconds": None,
        "price_usd": (round(sum(by_model[m]["price_usd"] for m in used), 8) if used and priced == "all"
                      else (0.0 if priced == "all" else None)),
        "priced": priced,
        "unpriced": unpriced,
    }
    if sampled["completions"]:
        out["sampled"] = sampled
    if neural:
        out["frames"] = neural.get("frames")
        out["train_seconds"] = neural.get("train_seconds")
    if device and str(device).startswith("cuda"):
        out["gpu_seconds"] = round(totals["model_seconds"] + _number((neural or {}).get("train_seconds")), 3)
    out["per_episode"] = share.lists(priced_all=out["price_usd"] is not None)
    return out


def _sampling(iterations: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    rows = [r for r in iterations if r.get("completions_sampled") not in (None, "")]
    return {"completions": int(sum(_number(r["completions_sampled"]) for r in rows)),
            "tokens_in": int(sum(_number(r.get("tokens_prompt")) for r in rows)),
            "tokens_out": int(sum(_number(r.get("tokens_sampled")) for r in rows))}


class _Shares:
    """Per training episode: its own calls, and an even share of the others (its iteration's
    where the iteration has training episodes, else every training episode's)."""

    def __init__(self, episodes: Sequence[Mapping[str, Any]]) -> None:
        self.order = [str(e.get("episode")) for e in episodes]
        self.cost = {e: dict.fromkeys(PER_EPISODE, 0.0) for e in self.order}
        self.of_iteration: dict[str, list[str]] = {}
        for e in episodes:
            self.of_iteration.setdefault(str(e.get("iteration")), []).append(str(e.get("episode")))

    def add(self, episode: Any, iteration: Any, amounts: Mapping[str, float]) -> None:
        if not self.order:
            return
        own = str(episode) if episode not in (None, "") else None
        shared = [own] if own in self.cost else self.of_iteration.get(str(iteration)) or self.order
        for e in shared:
            for key, value in amounts.items():
                self.cost[e][key] += value / len(shared)

    def lists(self, priced_all: bool) -> dict[str, list[float]]:
        keys = [k for k in PER_EPISODE if k != "usd" or priced_all]
        return {k: [round(self.cost[e][k], 9) for e in self.order] for k in keys}


def run_cost(path: str | Path, episodes: Sequence[Mapping[str, Any]] | None = None,
             iterations: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """:func:`cost_of` a run directory: its ``llm_calls.csv``, ``iterations.csv``, training
    episodes (``episodes``, else ``metrics.csv``'s train rows), the device its manifest names
    and the prices its ``config.yaml`` gives."""
    import yaml

    rd = RunDirectory(path)
    manifest = rd.read_json("manifest.json") or {}
    try:
        config = yaml.safe_load((rd.path / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        config = {}
    config = config if isinstance(config, dict) else {}
    if iterations is None:
        iterations = rd.read_iterations()
    if episodes is None:
        from marlang.rundir.untrusted import read_csv_rows

        episodes = [r for r in read_csv_rows(rd.path / "metrics.csv") if (r.get("phase") or "train") == "train"]
    neural = None
    if manifest.get("agents") == "neural":  # its metrics rows are the closing evaluation's
        seconds = next((r.get("train_seconds") for r in reversed(iterations) if r.get("train_seconds")), None)
        neural = {"frames": (iterations[-1].get("frames") if iterations else None) or manifest.get("frames"),
                  "train_seconds": seconds}
        episodes = []
    model = str((config.get("model") or {}).get("spec") or manifest.get("model_id") or "unknown")
    cost = cost_of(rd.read_llm_calls(), list(episodes), iterations, prices=prices_of(config),
                   sampling_model=model, device=manifest.get("device"), neural=neural)
    if neural:  # costs per training episode: the episodes its batches finished
        cost["episodes"] = int(sum(_number(r.get("episodes")) for r in iterations))
    return cost


# a row's cost for tables and plots --------------------------------------------------------------
def per_episode(cost: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """The mean per training episode of ``key`` (``llm_calls``, ``tokens``, ``model_seconds``,
    ``usd``, ``gpu_seconds``) with its 95% interval where the episodes are kept; None where the
    row has none of it (``usd`` of a row not fully priced, ``gpu_seconds`` off a GPU)."""
    if not isinstance(cost, Mapping) or not cost.get("episodes"):
        return None
    if key == "gpu_seconds":
        gpu = cost.get("gpu_seconds")
        return {"mean": gpu / cost["episodes"], "low": None, "high": None} if defined(gpu) else None
    if key == "usd" and cost.get("price_usd") is None:
        return None
    found = cost.get("pooled", {}).get(key) if isinstance(cost.get("pooled"), Mapping) else None
    if found is not None:
        return found
    values = (cost.get("per_episode") or {}).get(key)
    if isinstance(values, list) and values:
        return mean_interval(values)
    # kept as totals only (a neural learner's episodes): the mean, without an interval
    total = {"llm_calls": cost.get("llm_calls"), "model_seconds": cost.get("model_seconds"),
             "usd": cost.get("price_usd"),
             "tokens": _number(cost.get("tokens_in")) + _number(cost.get("tokens_out"))}.get(key)
    return {"mean": total / cost["episodes"], "low": None, "high": None, "n": cost["episodes"],
            "interval": TOTALS_ONLY} if defined(total) else None


def called_a_model(cost: Any) -> bool:
    """Whether a row's cost has any model call or sampled completion (a neural learner without
    an LLM critic, a scripted team: none)."""
    return isinstance(cost, Mapping) and bool(cost.get("llm_calls") or cost.get("sampled"))


def pool_costs(found: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One setting's cost over its seeds: totals summed, ``by_model``/``by_role`` summed,
    ``pooled``: each per-episode mean with its interval over all the seeds' episodes together.
    None unless every seed has a cost."""
    costs = [c for c in found if isinstance(c, Mapping)]
    if not costs or len(costs) != len(found):
        return None
    out: dict[str, Any] = {"episodes": sum(int(c.get("episodes") or 0) for c in costs)}
    for key in ("llm_calls", "cached_calls", "errors", "tokens_in", "tokens_out"):
        out[key] = int(sum(_number(c.get(key)) for c in costs))
    for key in ("model_seconds", "call_seconds"):
        out[key] = round(sum(_number(c.get(key)) for c in costs), 6)
    out["cached"] = {k: int(sum(_number((c.get("cached") or {}).get(k)) for c in costs))
                     for k in ("llm_calls", "tokens_in", "tokens_out")}
    out["cached"]["seconds"] = round(sum(_number((c.get("cached") or {}).get("seconds")) for c in costs), 6)
    for part in ("by_model", "by_role"):
        merged: dict[str, dict[str, Any]] = {}
        for c in costs:
            for name, entry in (c.get(part) or {}).items():
                into = merged.setdefault(name, {})
                for k, v in entry.items():
                    into[k] = None if (v is None or (k in into and into[k] is None)) else into.get(k, 0) + v
        out[part] = merged
    out["device"] = ", ".join(sorted({str(c.get("device")) for c in costs if c.get("device")})) or None
    gpu = _all_defined([c.get("gpu_seconds") for c in costs])
    out["gpu_seconds"] = round(sum(gpu), 3) if gpu is not None else None
    usd = [u for c in costs if (u := c.get("price_usd")) is not None]
    out["price_usd"] = round(sum(usd), 8) if len(usd) == len(costs) else None
    out["priced"] = ("all" if out["price_usd"] is not None else
                     "none" if all(c.get("priced") == "none" for c in costs) else "part")
    out["unpriced"] = sorted({m for c in costs for m in c.get("unpriced") or []})
    for key in ("frames", "train_seconds"):
        values = _all_defined([c.get(key) for c in costs])
        if values is not None:
            out[key] = sum(values)
    strata = [c.get("per_episode") or {} for c in costs]
    out["pooled"] = {k: pooled_interval([s[k] for s in strata]) for k in PER_EPISODE
                     if all(isinstance(s.get(k), list) and s[k] for s in strata)}
    return out


EVERY_CALL = ("every model call that made the row (acting, speaking, learner roles such as reflector, critic "
              "and optimizer, candidate checks, the held-out evaluation, and a tree learner's sampled completions) "
              "per training episode, each episode's own calls plus an even share of the others")
"""What the per-episode costs count, in the table (LLM calls/ep, tokens/ep, model s/ep, USD/ep)
and on the score-against-cost plot alike."""


def calls_per_episode(summary: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """A row's ``llm_calls`` or ``tokens`` per training episode as :data:`EVERY_CALL` counts
    them (its cost's, what the score-against-cost plot draws); a summary without a cost (one
    written before runs kept it) gives its episodes' own calls."""
    cost = summary.get("cost")
    found = per_episode(cost, key) if isinstance(cost, Mapping) else None
    if found is not None:
        return found
    return summary.get({"llm_calls": "llm_calls_per_episode", "tokens": "tokens_per_episode"}[key])


def all_cached(cost: Any) -> bool:
    """Whether every model call of a row's cost was a cache hit: its model seconds were not
    measured (a cache hit takes no model time), so they read as such, not as 0."""
    return isinstance(cost, Mapping) and bool(cost.get("llm_calls")) and not cost.get("sampled") \
        and _number(cost.get("cached_calls")) >= _number(cost.get("llm_calls"))


CACHED = "cached, not measured"
"""Model seconds of a row whose every call was a cache hit."""


# score against cost -----------------------------------------------------------------------------
COST_AXES = (("usd", "price, USD per episode"), ("tokens", "tokens per episode (every model call)"),
             ("model_seconds", "model seconds per episode (every model call)"))
"""The cost axis: the first every plotted row has (price only where every row is priced)."""


def pareto_front(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """The names whose (score, cost) no other point beats: none has a score at least as high
    at a cost at most as low, better in one. Equal points are all on the front. Sorted by cost."""
    front = [name for name, (s, c) in points.items()
             if not any((s2 >= s and c2 <= c) and (s2 > s or c2 < c) for s2, c2 in points.values())]
    return sorted(front, key=lambda n: (points[n][1], -points[n][0], n))


def score_and_cost(rows: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The points of a table's rows (one per setting; scripted teams are left out: they are
    the reference line): score = the held-out evaluation after training where every row has
    one (a neural row's summary is its greedy held-out evaluation), else the mean return; cost
    = the first of :data:`COST_AXES` every row has. With the Pareto front. None without rows."""
    rows = {n: s for n, s in rows.items() if s.get("model") != "scripted" and isinstance(s.get("cost"), Mapping)}
    # a learner that calls no model (a neural one without an LLM critic) costs frames and seconds,
    # not what this axis measures: named beside the figure instead of drawn at zero
    left_out = {n: "no model calls" + (f"; a neural learner: {_neural_cell(s, s['cost']).replace(' (', ' frames (')}"
                                       if s.get("agents") == "neural" else "")
                for n, s in rows.items() if not called_a_model(s["cost"])}
    rows = {n: s for n, s in rows.items() if n not in left_out}
    if not rows:
        return None

    def held_out(s: Mapping[str, Any]) -> Any:
        if s.get("agents") == "neural":
            return s.get("return")
        found = s.get("evaluation")
        return found.get("return") if isinstance(found, Mapping) else None

    evaluated = all(isinstance(held_out(s), Mapping) for s in rows.values())
    score_label = ("held-out evaluation return after training" if evaluated
                   else "mean return per episode (training rollouts)")
    scores = {n: (held_out(s) if evaluated else s.get("return")) or {} for n, s in rows.items()}
    for key, label in COST_AXES:
        costs = {n: c for n, s in rows.items() if (c := per_episode(s["cost"], key)) is not None
                 and defined(c.get("mean"))}
        if len(costs) == len(rows):
            break
    else:
        return {"score": score_label, "cost": None, "points": {}, "frontier": [], "left_out": left_out,
                "skipped": "no cost every row has (price, tokens or model seconds per episode)"}
    points = {n: {"score": scores[n].get("mean"), "score_low": scores[n].get("low"),
                  "score_high": scores[n].get("high"), "cost": costs[n]["mean"],
                  "cost_low": costs[n].get("low"), "cost_high": costs[n].get("high")}
              for n in rows if defined(scores[n].get("mean"))}
    front = pareto_front({n: (p["score"], p["cost"]) for n, p in points.items()})
    return {"score": score_label, "cost": label, "cost_key": key, "points": points, "frontier": front,
            **({"left_out": left_out} if left_out else {})}


# table columns ---------------------------------------------------------------------------------
MODEL_SECONDS_HEADER = "model s/ep"
GPU_HEADER = "GPU s/ep"
PRICE_HEADER = "USD/ep"
NEURAL_HEADER = "frames (train s)"


def _significant(stat: Mapping[str, Any] | None, digits: int = 3) -> str:
    """A mean and its interval to ``digits`` significant digits (prices are small numbers)."""
    if not stat or not defined(stat.get("mean")):
        return UNDEFINED
    shown = f"{stat['mean']:.{digits}g}"
    if defined(stat.get("low"), stat.get("high")):
        return shown + f" [{stat['low']:.{digits}g}, {stat['high']:.{digits}g}]"
    return shown + (f" ({stat['interval']})" if stat.get("interval") else "")


def _price_cell(cost: Mapping[str, Any]) -> str:
    if cost.get("priced") == "part":
        return "partly priced (no model.price for " + ", ".join(cost.get("unpriced") or ["?"]) + ")"
    return _significant(per_episode(cost, "usd"))


def _neural_cell(summary: Mapping[str, Any], cost: Mapping[str, Any]) -> str:
    frames, seconds = cost.get("frames") or summary.get("frames"), cost.get("train_seconds") or summary.get(
        "train_seconds")
    if frames is None:
        return UNDEFINED
    return f"{int(frames)}" + (f" ({seconds:.0f} s)" if defined(seconds) else "")


def cost_columns(summaries: Mapping[str, Mapping[str, Any]], counted: Sequence[str] = ()
                 ) -> tuple[list[str], list[list[str]], str]:
    """The cost columns of a table (headers, one row of cells per summary, the footnote): model
    seconds per episode where any row called a model, GPU seconds where any ran on a GPU, the
    price where any is priced, frames and training seconds where any row is a neural learner.
    ``counted``: the table's other columns that count calls as :data:`EVERY_CALL` does (LLM
    calls/ep, tokens/ep: :func:`calls_per_episode`), which the footnote names with them."""
    costs: list[Mapping[str, Any]] = [c if isinstance(c := s.get("cost"), Mapping) else {}
                                      for s in summaries.values()]
    columns: list[tuple[str, Any]] = []
    if any(c.get("llm_calls") for c in costs):
        columns.append((MODEL_SECONDS_HEADER, lambda s, c: (CACHED if all_cached(c) else _significant(
            per_episode(c, "model_seconds"))) if called_a_model(c) else UNDEFINED))
    if any(defined(c.get("gpu_seconds")) for c in costs):
        columns.append((GPU_HEADER, lambda s, c: _significant(per_episode(c, "gpu_seconds"))))
    if any(c.get("price_usd") is not None or c.get("priced") == "part" for c in costs if c.get("llm_calls")):
        columns.append((PRICE_HEADER, lambda s, c: _price_cell(c) if called_a_model(c) else UNDEFINED))
    if any(s.get("agents") == "neural" for s in summaries.values()):
        columns.append((NEURAL_HEADER, _neural_cell))
    rows = [[cell(s, c) if c or header == NEURAL_HEADER else UNDEFINED for header, cell in columns]
            for s, c in zip(summaries.values(), costs, strict=True)]
    headers = [h for h, _ in columns]
    note = ""
    if counted or any(h in headers for h in (MODEL_SECONDS_HEADER, GPU_HEADER, PRICE_HEADER)):
        note = " Cost: " + ", ".join([*counted, *(h for h in headers if h != NEURAL_HEADER)]) + f" count {EVERY_CALL}"
        note += "; the score-against-cost plot's tokens per episode too; "
    if MODEL_SECONDS_HEADER in headers:
        note += ("model s: wall seconds a model was busy answering (concurrent calls share their time; cache "
                 f"hits apart, and '{CACHED}' where every call was one; a tree learner's sampling is not timed); ")
    if GPU_HEADER in headers:
        note += "GPU s: those model seconds where the model ran on a GPU, and a neural learner's training "
        note += f"seconds there ('{UNDEFINED}' where no GPU ran); "
    if PRICE_HEADER in headers:
        note += ("USD: tokens in and out at each model's model.price (per million tokens), "
                 f"'{UNDEFINED}' where none is given; ")
    if note:
        note += "summary.json's cost has the totals by model and role, tokens in and out, and cached calls."
    if NEURAL_HEADER in headers:
        note += f" {NEURAL_HEADER}: a neural learner's training frames and seconds."
    return headers, rows, note
