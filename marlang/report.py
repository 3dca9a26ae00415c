"""Summaries, tables and plots of runs: means with 95% confidence intervals per setting.

Works from the per-episode metrics stored in ``episodes.jsonl``, so ``marlang report``
can rebuild everything from a run directory alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Two-sided 95% Student-t quantiles for 1..30 degrees of freedom; normal beyond.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042]


def mean_ci(values: Sequence[float]) -> dict[str, float]:
    """Mean and the half-width of its 95% t-interval (0 for fewer than two values)."""
    n = len(values)
    if n == 0:
        return {"mean": float("nan"), "ci95": float("nan"), "n": 0}
    m = sum(values) / n
    if n < 2:
        return {"mean": m, "ci95": 0.0, "n": n}
    var = sum((v - m) ** 2 for v in values) / (n - 1)
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    return {"mean": m, "ci95": t * math.sqrt(var / n), "n": n}


def wilson_ci(successes: int, n: int) -> dict[str, float]:
    """Success rate with its 95% Wilson score interval (sound for small n and rates near 0/1)."""
    if n == 0:
        return {"mean": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}
    z = 1.96
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return {"mean": p, "low": max(0.0, centre - half), "high": min(1.0, centre + half), "n": n}


def summarize_episodes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Aggregate per-episode metric rows into the summary of one setting."""
    n = len(rows)
    successes = sum(1 for r in rows if r["success"])
    decisions = sum(r["decisions"] for r in rows)
    invalid = sum(r["invalid_actions"] for r in rows)
    return {
        "episodes": n,
        "success_rate": wilson_ci(successes, n),
        "steps": mean_ci([r["steps"] for r in rows]),
        "steps_when_solved": mean_ci([r["steps"] for r in rows if r["success"]]),
        "return": mean_ci([r["return"] for r in rows]),
        "invalid_action_rate": {
            "mean": invalid / decisions if decisions else 0.0,
            "ci95": mean_ci([r["invalid_rate"] for r in rows])["ci95"],
            "invalid": invalid,
            "decisions": decisions,
        },
        "llm_calls_per_episode": mean_ci([r["llm_calls"] for r in rows]),
        "tokens_per_episode": mean_ci([r["tokens_in"] + r["tokens_out"] for r in rows]),
    }


def _pm(stat: dict[str, float], digits: int = 1) -> str:
    if stat.get("n", 1) == 0 or math.isnan(stat["mean"]):
        return "-"
    return f"{stat['mean']:.{digits}f} ± {stat['ci95']:.{digits}f}"


TABLE_HEADERS = [
    "setting", "episodes", "success rate (95% CI)", "steps", "steps when solved", "return",
    "invalid actions", "LLM calls/ep", "tokens/ep",
]


def table_rows(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    rows = []
    for name, s in summaries.items():
        sr = s["success_rate"]
        rows.append([
            name,
            str(s["episodes"]),
            f"{sr['mean']:.2f} [{sr['low']:.2f}, {sr['high']:.2f}]",
            _pm(s["steps"]),
            _pm(s["steps_when_solved"]),
            _pm(s["return"], 3),
            f"{100 * s['invalid_action_rate']['mean']:.1f}%",
            _pm(s["llm_calls_per_episode"]),
            _pm(s["tokens_per_episode"], 0),
        ])
    return rows


def markdown_table(summaries: dict[str, dict[str, Any]], title: str = "", first_column: str = "setting") -> str:
    from tabulate import tabulate

    headers = [first_column, *TABLE_HEADERS[1:]]
    body = tabulate(table_rows(summaries), headers=headers, tablefmt="github")
    note = (
        "\n\nsteps: mean steps per episode (unsolved episodes count their full length), the "
        "metric of the conversation-protocol paper; return: the team's reward per episode; "
        "± is the 95% t-interval half-width."
    )
    return (f"## {title}\n\n" if title else "") + body + note + "\n"


def plot_learning_curves(curves: dict[str, list[float]], path: str | Path, window: int = 3,
                         ylabel: str = "steps per episode", reference: dict[str, float] | None = None) -> None:
    """One line per setting: the per-episode value and its moving average."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for i, (name, ys) in enumerate(curves.items()):
        color = f"C{i % 10}"
        xs = list(range(1, len(ys) + 1))
        ax.plot(xs, ys, color=color, alpha=0.25, linewidth=1)
        w = max(1, min(window, len(ys)))
        smooth = [sum(ys[max(0, j - w + 1): j + 1]) / len(ys[max(0, j - w + 1): j + 1]) for j in range(len(ys))]
        ax.plot(xs, smooth, color=color, linewidth=2, label=name)
    for name, value in (reference or {}).items():
        ax.axhline(value, color="black", linestyle="--", linewidth=1, label=name)
    ax.set_xlabel("episode")
    ax.set_ylabel(ylabel)
    ax.set_title(f"Learning curves (moving average of {window})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
