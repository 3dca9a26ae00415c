"""Figures of runs and comparisons: learning curves (iterations or frames against return, success
and held-out evaluation, one marker shape per setting), score against cost, cross-play heat maps.
Each function returns a matplotlib figure; `marlang.rundir.files.save_figure` writes it."""

from __future__ import annotations

import itertools
import math
from typing import Any

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
"""One marker shape per setting, so settings whose curves coincide stay distinguishable."""


def iteration_figure(curves: dict[str, list[dict[str, Any]]], reference: dict[str, float] | None = None,
                     final: dict[str, tuple[float, float]] | None = None, success: bool = True) -> Any:
    """Mean return (with its 95% CI band) and success rate, one line and marker shape per
    setting. Rows with ``frames`` (neural learners) are drawn against frames, with their greedy
    evaluations (``eval_return``, and ``final``: a setting's (frames, mean return) of the closing
    evaluation) as hollow markers on a dashed line; LLM rows against iteration. Settings on the
    same points are spread a little sideways. ``reference`` draws horizontal lines (e.g. a
    scripted team under the same step cap). ``success=False`` (an env with no notion of
    success) leaves out the success-rate panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_frames = bool(curves) and all(r.get("frames") is not None for rows in curves.values() for r in rows)
    x_key = "frames" if by_frames else "iteration"
    xs_all = sorted({float(r[x_key]) for rows in curves.values() for r in rows if r.get(x_key) is not None}
                    | {float(v[0]) for v in (final or {}).values()})
    gaps = [b - a for a, b in itertools.pairwise(xs_all)]
    # Coinciding settings are dodged by a small share of the smallest gap between x values.
    unit = min(gaps) if gaps else 1.0
    dodge = 0.12 * unit / max(1, len(curves) - 1) if len(curves) > 1 else 0.0

    if success:
        fig, (ax_r, ax_s) = plt.subplots(1, 2, figsize=(10, 4), dpi=120)
    else:
        fig, ax_r = plt.subplots(1, 1, figsize=(6, 4), dpi=120)
        ax_s = None
    for i, (name, rows) in enumerate(curves.items()):
        color, marker = f"C{i % 10}", MARKERS[i % len(MARKERS)]
        shift = (i - (len(curves) - 1) / 2) * dodge
        xs = [float(r[x_key]) + shift for r in rows]
        means = [r["return_mean"] if r.get("return_mean") is not None else math.nan for r in rows]
        lows = [r["return_low"] if r.get("return_low") is not None else m for r, m in zip(rows, means)]
        highs = [r["return_high"] if r.get("return_high") is not None else m for r, m in zip(rows, means)]
        every = max(1, len(xs) // 12)  # a marker on every point of a 100-batch curve hides the line
        ax_r.plot(xs, means, marker=marker, color=color, label=name, markevery=every, markersize=4)
        # the interval each row carries (none: "n too small"), inside the return's range
        ax_r.fill_between(xs, lows, highs, color=color, alpha=0.15)
        if len(xs) == 1:  # a band needs two points: one point shows its interval as an error bar
            below, above = [m - lo for m, lo in zip(means, lows)], [h - m for m, h in zip(means, highs)]
            ax_r.errorbar(xs, means, yerr=[below, above], fmt="none", ecolor=color, capsize=3, alpha=0.7)
        evals = [(float(r[x_key]) + shift, r["eval_return"]) for r in rows if r.get("eval_return") is not None]
        if final and name in final:
            fx, fy = final[name]
            evals = [e for e in evals if e[0] != float(fx) + shift] + [(float(fx) + shift, fy)]
        if evals:
            ax_r.plot([e[0] for e in evals], [e[1] for e in evals], marker=marker, linestyle="--", color=color,
                      markerfacecolor="white", label=f"{name}: greedy evaluation",
                      markevery=max(1, len(evals) // 12), markersize=4)
        if ax_s is not None:
            rates = [r["success_rate"] if r.get("success_rate") is not None else math.nan for r in rows]
            ax_s.plot(xs, rates, marker=marker, color=color, label=name, markevery=every, markersize=4)
    for j, (name, value) in enumerate((reference or {}).items()):
        ax_r.axhline(value, color="black", linestyle=["--", ":", "-."][j % 3], linewidth=1, label=name)
    ax_r.set_ylabel("team return per episode (mean, 95% CI)")
    if ax_s is not None:
        ax_s.set_ylabel("success rate")
        ax_s.set_ylim(-0.05, 1.05)
    for ax in [a for a in (ax_r, ax_s) if a is not None]:
        ax.set_xlabel(x_key)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if len(xs_all) and xs_all[0] == xs_all[-1]:
            # One x value: an axis around it, ticked at it (not -0.04..0.04 around a lone point).
            ax.set_xlim(xs_all[0] - 0.5 * max(1.0, abs(xs_all[0])), xs_all[0] + 0.5 * max(1.0, abs(xs_all[0])))
            ax.set_xticks([xs_all[0]])
    fig.suptitle("Learning curves by " + ("frames" if by_frames else "iteration"))
    handles, labels = ax_r.get_legend_handles_labels()
    if len(labels) <= 6:
        ax_r.legend(fontsize=7)
        fig.tight_layout()
        return fig
    # Many entries: a legend under the panels, the figure taller by its rows.
    columns = 2 if success else 1
    rows_needed = math.ceil(len(labels) / columns)
    legend_h = 0.18 * rows_needed + 0.1
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + legend_h)
    fig.legend(handles, labels, loc="lower center", ncol=columns, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, legend_h / (height + legend_h), 1, 1))
    return fig


def score_vs_cost_figure(points: dict[str, dict[str, Any]], frontier: list[str], *,
                         score_label: str, cost_label: str, reference: dict[str, float] | None = None,
                         title: str = "") -> Any:
    """Score against cost, one point (marker shape) per setting with its intervals as error bars
    where it has them; the Pareto front (higher score, lower cost) joined by a line and its
    settings named; ``reference``: horizontal lines (a scripted team's return)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 1, figsize=(7, 4.5), dpi=120)
    for i, (name, p) in enumerate(points.items()):
        color, marker = f"C{i % 10}", MARKERS[i % len(MARKERS)]
        x, y = p["cost"], p["score"]

        def err(low: Any, high: Any, mid: float) -> list[list[float]] | None:
            ok = low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
            return [[mid - low], [high - mid]] if ok else None

        on_front = name in frontier
        ax.errorbar([x], [y], xerr=err(p.get("cost_low"), p.get("cost_high"), x),
                    yerr=err(p.get("score_low"), p.get("score_high"), y), fmt=marker, color=color,
                    markersize=8 if on_front else 6, markerfacecolor=color if on_front else "white",
                    capsize=3, elinewidth=1, alpha=0.9, label=name + (" (front)" if on_front else ""))
    if frontier:
        xs, ys = [points[n]["cost"] for n in frontier], [points[n]["score"] for n in frontier]
        ax.step(xs, ys, where="post", color="black", linewidth=1, linestyle="--", label="Pareto front")
        for n, x, y in zip(frontier, xs, ys, strict=True):
            ax.annotate(n, (x, y), textcoords="offset points", xytext=(6, 6), fontsize=7)
    for j, (name, value) in enumerate((reference or {}).items()):
        ax.axhline(value, color="grey", linestyle=[":", "-."][j % 2], linewidth=1, label=name)
    ax.set_xlabel(cost_label + " (mean, 95% CI)")
    ax.set_ylabel(score_label + " (mean, 95% CI)", fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(title or "Score against cost (filled: on the Pareto front)", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def crossplay_figure(grid: list[list[float | None]], names: list[str], title: str,
                     slots: list[str] | None = None) -> Any:
    """A cross-play matrix as a heat map: the player in the first slot by row, its partner by
    column, each cell's mean written in it (blank: not played)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    values = np.array([[math.nan if v is None else float(v) for v in row] for row in grid])
    size = 1.2 + 0.9 * len(names)
    fig, ax = plt.subplots(figsize=(size + 1.5, size))
    image = ax.imshow(values, cmap="viridis")
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_yticks(range(len(names)), names)
    slots = slots or ["slot 0", "slot 1"]
    ax.set_ylabel(f"player in {slots[0]}")
    ax.set_xlabel(f"player in {slots[1]}" if len(slots) == 2 else "partners (every other slot)")
    finite = values[np.isfinite(values)]
    middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if math.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="black" if v > middle else "white")
    fig.colorbar(image, ax=ax)
    ax.set_title(title)
    fig.tight_layout()
    return fig
