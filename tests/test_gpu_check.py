"""The GPU check (benchmarks/gpu.py) runs end to end at tiny sizes on the CPU, so that it still
runs when a GPU window comes: every row gives a finite ratio or says why it has none."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def test_gpu_check_dry_run_gives_every_row(benchmark_script, tmp_path, capsys):
    gpu = benchmark_script("gpu")
    rows = gpu.main(["--dry-run", "--out", str(tmp_path / "gpu.json")])
    printed = capsys.readouterr().out
    # every measuring function gave its rows, none failed or was skipped
    assert len(rows) == 12, printed
    for row in rows:
        if row.value is None and " step / marlang step" in row.name:  # the peers are not in marlang's venv
            assert row.note.startswith("n/a (needs comlrl"), printed
        elif row.value is None:
            assert row.name.startswith("PPO update memory") and row.note.startswith("n/a (no GPU"), printed
        else:
            assert math.isfinite(row.value) and row.value > 0, row
            assert row.target and row.cpu, row
        assert row.name in printed
    assert json.loads((tmp_path / "gpu.json").read_text())["rows"][0]["name"] == rows[0].name


def test_gpu_check_runs_the_rows_asked_for_in_the_dtype_asked_for(benchmark_script, capsys):
    gpu = benchmark_script("gpu")
    rows = gpu.main(["--dry-run", "--rows", "ppo", "--dtype", "bfloat16"])
    assert [r.name for r in rows] == ["PPO minibatch: packed / floor", "PPO minibatch: repeated prompt / packed"]
    assert "torch.bfloat16" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        gpu.main(["--dry-run", "--rows", "ppo,warp"])
    assert "unknown rows ['warp']; known: rollout, ppo, lca, magrpo, parallel, memory, peers" in capsys.readouterr().err


def test_a_machine_image_package_list_reads_names_split_by_commas_or_lines(benchmark_script, tmp_path):
    wheels = benchmark_script("gpu_wheels")
    listing = tmp_path / "image.txt"
    listing.write_text("# the image\nTorch, typing_extensions\npeft  # the adapters\n\nhuggingface.hub\n")
    assert wheels.image_packages(listing) == {"torch", "typing-extensions", "peft", "huggingface-hub"}
    shipped = wheels.image_packages(BENCHMARKS / "gpu_image_packages.txt")
    assert {"torch", "transformers", "peft", "accelerate"} <= shipped and "langgraph" not in shipped
