"""Tensor files of a run directory (a trainer's state, a critic's Bradley-Terry models,
BenchMARL's checkpoints) load as tensors only, and a FIFO planted in their place is refused
at once instead of being waited on."""

from __future__ import annotations

import os

import pytest
import torch

from marlang.config import ConfigError
from marlang.rundir.tensors import load_tensors
from marlang.rundir.untrusted import DamagedRunFile


class _RunsOnLoad:
    """Unpickled, it runs ``command`` (what a planted file would do)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def test_tensors_and_plain_values_load(tmp_path):
    path = tmp_path / "bt_agent_0.pt"
    torch.save({"state_dict": {"w": torch.ones(2)}, "batches": 3}, path)
    saved = load_tensors(path)
    assert saved["batches"] == 3 and torch.equal(saved["state_dict"]["w"], torch.ones(2))


def test_a_pickled_object_is_refused_in_one_line_and_never_run(tmp_path, monkeypatch):
    path, marker = tmp_path / "bt_agent_0.pt", tmp_path / "ran"
    torch.save(_RunsOnLoad(f"touch {marker}"), path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    with pytest.raises(ConfigError, match=rf"refused to load {path}: .*could run code") as err:
        load_tensors(path)
    assert "\n" not in str(err.value) and not marker.exists()


def test_a_fifo_in_place_of_a_tensor_file_is_refused_not_waited_on(tmp_path):
    path = tmp_path / "bt_agent_0.pt"
    os.mkfifo(path)
    with pytest.raises(DamagedRunFile, match="FIFO"):
        load_tensors(path)
