"""Every benchmark of `make bench` (benchmarks/run_all.py) runs to the end at its smoke size, so a
change that breaks one fails the tests instead of the next `make bench`. The smoke sizes run on a
tiny random model: their figures prove the benchmark ran, not how fast anything is.
The GPU check, the peers and the user-graph benchmark have tests of their own (tests/test_gpu_check*,
tests/test_bench_peers.py, tests/test_bench_usergraph.py); the user-graph one is left out here."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
OWN_TEST = {"a user's LangGraph graph: recording overhead, 8 episodes at once"}


def _titles() -> list[str]:
    source = (BENCHMARKS / "run_all.py").read_text()
    start = source.index("BENCHMARKS: list[")
    return [line.split('("', 1)[1].split('",', 1)[0] for line in source[start:].splitlines()
            if line.startswith('    ("')]


def _numbers(figures) -> list[float]:
    if isinstance(figures, dict):
        return [x for v in figures.values() for x in _numbers(v)]
    if isinstance(figures, (int, float)) and not isinstance(figures, bool):
        return [float(figures)]
    return []


def test_every_benchmark_has_a_smoke_size(benchmark_script):
    run_all = benchmark_script("run_all")
    assert [title for title, *_ in run_all.BENCHMARKS] == _titles()
    for title, _main, _quick, smoke in run_all.BENCHMARKS:
        assert isinstance(smoke(), dict), title


@pytest.mark.parametrize("title", [t for t in _titles() if t not in OWN_TEST])
def test_a_benchmark_runs_to_the_end_at_its_smoke_size(title, benchmark_script, capfd, request):
    run_all = benchmark_script("run_all")
    (main, smoke), = [(m, s) for t, m, _q, s in run_all.BENCHMARKS if t == title]
    # a benchmark that starts a Ray instance takes its turn with the Ray tests of other workers
    with request.getfixturevalue("ray_lock") if "Ray" in title else contextlib.nullcontext():
        figures = main(**smoke())
    printed = capfd.readouterr().out  # capfd: the sandbox benchmark prints from its own process
    assert printed.strip(), f"{title}: printed nothing"
    if figures is not None:  # the sandbox benchmark runs in a process of its own and returns nothing here
        numbers = _numbers(figures)
        assert numbers, f"{title}: no figures returned"
        assert all(not math.isnan(x) for x in numbers), figures
