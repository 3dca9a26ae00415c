"""The torch thread rule of ``run.threads`` (``marlang.models.threads``)."""

import pytest

from marlang.config import ConfigError, build_config
from marlang.models.threads import MAX_AUTO_THREADS, apply_torch_threads, torch_threads


@pytest.mark.parametrize(("cpus", "expected"), [(1, 1), (2, 1), (3, 1), (4, 2), (16, 8), (64, 8)])
def test_auto_takes_half_the_cores_at_least_one_at_most_the_cap(cpus, expected):
    assert torch_threads("auto", cpus=cpus, environ={}) == expected
    assert expected <= MAX_AUTO_THREADS


def test_an_explicit_omp_num_threads_is_honoured_by_auto():
    assert torch_threads("auto", cpus=2, environ={"OMP_NUM_THREADS": "3"}) == 3
    # not a positive int: the environment says nothing, the core count decides
    assert torch_threads("auto", cpus=8, environ={"OMP_NUM_THREADS": "0"}) == 4
    assert torch_threads("auto", cpus=8, environ={"OMP_NUM_THREADS": "many"}) == 4


def test_a_number_in_the_config_wins_over_everything():
    assert torch_threads(6, cpus=2, environ={"OMP_NUM_THREADS": "1"}) == 6


def test_the_config_key_takes_an_int_or_auto():
    assert build_config({}).run.threads == "auto"
    assert build_config({"run": {"threads": 2}}).run.threads == 2
    for bad in (0, "some"):
        with pytest.raises(ConfigError, match="run.threads"):
            build_config({"run": {"threads": bad}})


def test_applied_to_torch_for_local_models_only(monkeypatch):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    try:
        assert apply_torch_threads("auto", "openai:gpt-4o") is None
        assert torch.get_num_threads() == before
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert apply_torch_threads("auto", "local:smollm2") == 1
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
