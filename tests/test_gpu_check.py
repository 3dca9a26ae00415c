"""The GPU check (benchmarks/gpu.py) runs end to end at tiny sizes on the CPU, so that it still
runs when a GPU window comes: every row gives a finite ratio or says why it has none."""

from __future__ import annotations

import importlib
import json
import math
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_gpu_check_dry_run_gives_every_row(monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setattr(sys, "argv", ["gpu.py"])
    gpu = importlib.import_module("gpu")
    start = time.perf_counter()
    rows = gpu.main(["--dry-run", "--out", str(tmp_path / "gpu.json")])
    seconds = time.perf_counter() - start
    printed = capsys.readouterr().out
    # every measuring function gave its rows, none failed or was skipped
    assert len(rows) == 10, printed
    for row in rows:
        if row.value is None:
            assert row.name.startswith("PPO update memory") and row.note.startswith("n/a (no GPU"), printed
        else:
            assert math.isfinite(row.value) and row.value > 0, row
            assert row.target and row.cpu, row
        assert row.name in printed
    assert json.loads((tmp_path / "gpu.json").read_text())["rows"][0]["name"] == rows[0].name
    assert seconds < 60, f"the dry run took {seconds:.0f} s"
