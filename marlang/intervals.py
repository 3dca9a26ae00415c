"""95% intervals that never leave their quantity's range: Wilson for a success rate, the
bootstrap percentile interval (scipy.stats.bootstrap) for means of returns, steps and counts,
and a stratified bootstrap (strata: seeds) for the mean and interquartile mean of pooled rows.

Every statistic is a dict ``{"mean", "low", "high", "n", "interval"}``; ``interval`` names the
method, or is ``"n too small"`` (with ``low``/``high`` None) below :data:`MIN_N` values, and
undefined statistics are None (written as JSON null). A percentile interval lies between the
smallest and largest value it resamples, so it stays inside any range the values respect.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

CONFIDENCE = 0.95
MIN_N = 5
"""Fewer values than this get no bootstrap interval: "n too small" (a percentile interval of
two or three values is far narrower than the data allow)."""

RESAMPLES = 2000
BOOTSTRAP_SEED = 0
"""The bootstrap's resampling is seeded: the same data give the same interval in every report."""

BOOTSTRAP = "bootstrap percentile"
STRATIFIED = "stratified bootstrap over seeds"
WILSON = "Wilson"
TOO_FEW = "n too small"


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _none(n: int, interval: str) -> dict[str, Any]:
    return {"mean": None, "low": None, "high": None, "n": n, "interval": interval}


def _bootstrap(strata: Sequence[Sequence[float]], statistic: str) -> tuple[float | None, float | None]:
    """The percentile interval of ``statistic`` ("mean" or "iqm") of the pooled values, each
    stratum resampled on its own (one stratum: the plain bootstrap)."""
    import numpy as np
    from scipy import stats

    arrays = tuple(np.asarray(s, dtype=float) for s in strata if len(s))
    pooled = np.concatenate(arrays)
    if np.all(pooled == pooled[0]):  # no spread: the bootstrap has nothing to resample
        return float(pooled[0]), float(pooled[0])

    def of(*samples: Any, axis: int = -1) -> Any:
        x = np.concatenate(samples, axis=axis)
        return np.mean(x, axis=axis) if statistic == "mean" else stats.trim_mean(x, 0.25, axis=axis)

    result = stats.bootstrap(arrays, of, confidence_level=CONFIDENCE, n_resamples=RESAMPLES, method="percentile",
                             vectorized=True, rng=np.random.default_rng(BOOTSTRAP_SEED))
    low, high = result.confidence_interval
    return _finite(low), _finite(high)


def mean_of(values: Sequence[float]) -> float | None:
    """The plain mean, None where it is undefined (no values, or a non-finite one): for a
    verdict that needs the mean alone, without resampling for an interval."""
    values = [float(v) for v in values]
    if not values or not all(math.isfinite(v) for v in values):
        return None
    return sum(values) / len(values)


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    """The mean of ``values`` with its 95% bootstrap percentile interval ("n too small" below
    :data:`MIN_N` values)."""
    values = [float(v) for v in values]
    n = len(values)
    mean = mean_of(values)
    if mean is None:
        return _none(n, TOO_FEW)
    if n < MIN_N:
        return {"mean": mean, "low": None, "high": None, "n": n, "interval": TOO_FEW}
    low, high = _bootstrap([values], "mean")
    return {"mean": mean, "low": low, "high": high, "n": n, "interval": BOOTSTRAP}


def pooled_interval(strata: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The mean and interquartile mean (IQM: the mean of the middle half) of the values of every
    stratum (a setting's seeds) together, each with its 95% stratified bootstrap interval: the
    values are resampled within each stratum, so every seed keeps its weight, as rliable's
    stratified bootstrap keeps each task's. The interval shows the spread of the episodes
    given the seeds' trained policies; ``seeds`` gives each stratum's mean, whose spread is the
    seeds'. "n too small" below :data:`MIN_N` values in all."""
    strata = [[float(v) for v in s] for s in strata]
    values = [v for s in strata for v in s]
    n = len(values)
    out: dict[str, Any] = {"seeds": [sum(s) / len(s) if s else None for s in strata]}
    if n == 0 or not all(math.isfinite(v) for v in values):
        return {**_none(n, TOO_FEW), **out, "iqm": None, "iqm_low": None, "iqm_high": None}
    import numpy as np
    from scipy import stats

    mean, iqm = sum(values) / n, float(stats.trim_mean(np.asarray(values), 0.25))
    if n < MIN_N:
        return {"mean": mean, "low": None, "high": None, "n": n, "interval": TOO_FEW, **out,
                "iqm": iqm, "iqm_low": None, "iqm_high": None}
    low, high = _bootstrap(strata, "mean")
    iqm_low, iqm_high = _bootstrap(strata, "iqm")
    return {"mean": mean, "low": low, "high": high, "n": n, "interval": STRATIFIED, **out,
            "iqm": iqm, "iqm_low": iqm_low, "iqm_high": iqm_high}


def wilson_interval(successes: int, n: int) -> dict[str, Any]:
    """Success rate with its 95% Wilson score interval (sound for small n and rates near 0/1;
    any n of one or more)."""
    if n == 0:
        return _none(0, WILSON)
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + CONFIDENCE / 2))
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At p = 0 or 1 the bound is exactly 0 or 1; rounding would leave 0.9999999999999999.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return {"mean": p, "low": low, "high": high, "n": n, "interval": WILSON}


def show(stat: dict[str, Any] | None, digits: int = 1) -> str:
    """``mean [low, high]``, ``mean (n too small)``, or ``-`` when undefined."""
    if not isinstance(stat, dict) or not defined(stat.get("mean")):
        return "-"
    mean = f"{stat['mean']:.{digits}f}"
    if defined(stat.get("low"), stat.get("high")):
        return f"{mean} [{stat['low']:.{digits}f}, {stat['high']:.{digits}f}]"
    return f"{mean} ({TOO_FEW}, n={stat.get('n')})" if stat.get("n") else mean


def defined(*values: Any) -> bool:
    """Every value is a finite number (summaries store undefined ones as None; files written
    before that may hold NaN)."""
    return all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)
