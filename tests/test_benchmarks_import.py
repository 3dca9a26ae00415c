"""Every benchmark script still imports: they are run by hand (``make bench``), not by the tests,
so a moved or renamed name they use would otherwise be found only when someone runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.mark.parametrize("script", sorted(p.stem for p in BENCHMARKS.glob("*.py")))
def test_benchmark_script_imports(script, benchmark_script):
    module = benchmark_script(script)
    assert callable(getattr(module, "main", None)), f"benchmarks/{script}.py has no main()"
