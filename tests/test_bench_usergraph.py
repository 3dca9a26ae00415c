"""The benchmark of a user's graph (benchmarks/bench_usergraph.py) runs end to end at its smoke
size: both parts, the recording overhead and the concurrent episodes, measure and print their rows."""

from __future__ import annotations

import math


def test_bench_usergraph_smoke_prints_both_parts(benchmark_script, capsys):
    bench = benchmark_script("bench_usergraph")
    figures = bench.main(rounds=2, per_round=1, episodes=8, smoke=True)
    printed = capsys.readouterr().out
    # recording: the bare graph and the two recorded ways, for the instant and the sleeping model
    for model in ("answering at once", "sleeping 5 ms per call"):
        assert f"recording, scripted model {model} (2 rounds of 1 invocations" in printed, printed
    for way in ("bare graph.ainvoke:", "arun_graph:", "GraphPlayer.play:"):
        assert printed.count(way) == 2, printed
    for sleep in (0.0, 0.005):
        for way in ("arun_graph", "GraphPlayer.play"):
            ratio = figures[f"{way}_vs_bare_sleep_{sleep}"]
            assert math.isfinite(ratio) and ratio > 0, figures
    assert figures["bare_ms_sleep_0.005"] >= 10, figures  # two calls of 5 ms each: the sleeping model was played
    # concurrency: run.parallel 1 and 8 both played the 8 episodes of the graph
    assert "graph episodes (8 episodes of examples/math_team.py's solver -> checker graph" in printed, printed
    for parallel in (1, 8):
        assert f"  run.parallel={parallel}: " in printed, printed
        assert figures[f"seconds_parallel_{parallel}"] > 0, figures
    assert math.isfinite(figures["speedup_8_vs_1"]) and figures["speedup_8_vs_1"] > 0, figures
