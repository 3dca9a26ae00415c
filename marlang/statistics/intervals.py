"""95% intervals that never leave their quantity's range: Wilson for a success rate (a pooled
row's too, on the counts of all its seeds' episodes), and the bootstrap percentile interval
(scipy.stats.bootstrap) for means and interquartile means of returns, steps and counts.

Every statistic is a dict ``{"mean", "low", "high", "n", "interval"}``; ``interval`` names the
method, or is ``"n too small"`` (below :data:`MIN_N` values) or ``"no spread"`` (every value
equal), both with ``low``/``high`` None, and undefined statistics are None (written as JSON
null). A percentile interval lies between the smallest and largest value it resamples, so it
stays inside any range the values respect.
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
WILSON = "Wilson"
TOO_FEW = "n too small"
UNDEFINED = "-"
"""How tables, the view and the command line write an undefined value (a statistic of no
values, a column that does not apply to the row); JSON holds null."""
NO_SPREAD = "no spread"
"""Every value equal: a bootstrap would give the interval [x, x], as if the mean were known
exactly from a handful of episodes; no interval is given instead."""
TOTALS_ONLY = "totals only"
"""A mean kept from totals (a neural learner's episodes keep no per-episode cost): no interval."""


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _none(n: int, interval: str) -> dict[str, Any]:
    return {"mean": None, "low": None, "high": None, "n": n, "interval": interval}


def _bootstrap(values: Sequence[float], statistic: str) -> tuple[float | None, float | None]:
    """The percentile interval of ``statistic`` ("mean" or "iqm") of ``values`` (at least
    :data:`MIN_N`, not all equal: callers say "n too small" or "no spread" instead)."""
    import numpy as np
    from scipy import stats

    def of(x: Any, axis: int = -1) -> Any:
        return np.mean(x, axis=axis) if statistic == "mean" else stats.trim_mean(x, 0.25, axis=axis)

    result = stats.bootstrap((np.asarray(values, dtype=float),), of, confidence_level=CONFIDENCE,
                             n_resamples=RESAMPLES, method="percentile", vectorized=True,
                             rng=np.random.default_rng(BOOTSTRAP_SEED))
    low, high = result.confidence_interval
    return _finite(low), _finite(high)


def _no_interval(values: Sequence[float]) -> str | None:
    """Why ``values`` get no bootstrap interval ("n too small", "no spread"), or None."""
    if len(values) < MIN_N:
        return TOO_FEW
    return NO_SPREAD if all(v == values[0] for v in values) else None


def mean_of(values: Sequence[float]) -> float | None:
    """The plain mean, None where it is undefined (no values, or a non-finite one): for a
    verdict that needs the mean alone, without resampling for an interval."""
    values = [float(v) for v in values]
    if not values or not all(math.isfinite(v) for v in values):
        return None
    return sum(values) / len(values)


def mean_interval(values: Sequence[float]) -> dict[str, Any]:
    """The mean of ``values`` with its 95% bootstrap percentile interval ("n too small" below
    :data:`MIN_N` values, "no spread" when every value is equal)."""
    values = [float(v) for v in values]
    n = len(values)
    mean = mean_of(values)
    if mean is None:
        return _none(n, TOO_FEW)
    if (why := _no_interval(values)) is not None:
        return {"mean": mean, "low": None, "high": None, "n": n, "interval": why}
    low, high = _bootstrap(values, "mean")
    return {"mean": mean, "low": low, "high": high, "n": n, "interval": BOOTSTRAP}


def _seed_means(strata: Sequence[Sequence[float]]) -> dict[str, Any]:
    return {"seeds": [sum(s) / len(s) if len(s) else None for s in strata]}


def pooled_interval(strata: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The mean and interquartile mean (IQM: the mean of the middle half) of the values of every
    stratum (a setting's seeds) together, each with the 95% bootstrap percentile interval of all
    those values, as :func:`mean_interval` gives it for one run of the same episodes. A
    bootstrap stratified by seed would be narrower (it drops the spread between seeds) and
    cannot resample a seed of one value. ``seeds`` gives each stratum's mean, whose spread is
    the seeds'. "n too small" below :data:`MIN_N` values in all, "no spread" when all equal."""
    strata = [[float(v) for v in s] for s in strata]
    values = [v for s in strata for v in s]
    n = len(values)
    out = _seed_means(strata)
    if n == 0 or not all(math.isfinite(v) for v in values):
        return {**_none(n, TOO_FEW), **out, "iqm": None, "iqm_low": None, "iqm_high": None}
    import numpy as np
    from scipy import stats

    mean, iqm = sum(values) / n, float(stats.trim_mean(np.asarray(values), 0.25))
    if (why := _no_interval(values)) is not None:
        return {"mean": mean, "low": None, "high": None, "n": n, "interval": why, **out,
                "iqm": iqm, "iqm_low": None, "iqm_high": None}
    low, high = _bootstrap(values, "mean")
    iqm_low, iqm_high = _bootstrap(values, "iqm")
    return {"mean": mean, "low": low, "high": high, "n": n, "interval": BOOTSTRAP, **out,
            "iqm": iqm, "iqm_low": iqm_low, "iqm_high": iqm_high}


def pooled_rate(strata: Sequence[Sequence[float]]) -> dict[str, Any]:
    """The success rate of every stratum's episodes (1.0 solved, 0.0 not) together, with the
    Wilson interval of the pooled counts, as :func:`wilson_interval` gives it for one run of
    the same episodes (6 solved of 6 over two seeds: [0.61, 1.00]). ``seeds``: each stratum's
    rate."""
    strata = [[float(v) for v in s] for s in strata]
    values = [v for s in strata for v in s]
    if not all(v in (0.0, 1.0) for v in values):  # not counts (a hand-edited summary): a mean
        return pooled_interval(strata)
    return {**wilson_interval(int(sum(values)), len(values)), **_seed_means(strata)}


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
    """``mean [low, high]``, ``mean (n too small, n=N)`` (or ``no spread``, ``totals only``), or
    :data:`UNDEFINED`."""
    if not isinstance(stat, dict) or not defined(stat.get("mean")):
        return UNDEFINED
    mean = f"{stat['mean']:.{digits}f}"
    if defined(stat.get("low"), stat.get("high")):
        return f"{mean} [{stat['low']:.{digits}f}, {stat['high']:.{digits}f}]"
    why = stat["interval"] if stat.get("interval") in (NO_SPREAD, TOTALS_ONLY) else TOO_FEW
    return f"{mean} ({why}, n={stat.get('n')})" if stat.get("n") else mean


def defined(*values: Any) -> bool:
    """Every value is a finite number (summaries store undefined ones as None; files written
    before that may hold NaN)."""
    return all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in values)
