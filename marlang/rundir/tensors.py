"""Tensor files of a run directory (a trainer's state, BenchMARL's checkpoints) read as data:
tensors and plain containers only, never an arbitrary pickle (the directory may be someone
else's, and unpickling runs whatever the file names)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from marlang.config import ConfigError
from marlang.rundir.untrusted import open_regular


def load_tensors(path: str | Path, map_location: Any = "cpu") -> Any:
    """The tensors and plain values saved in ``path`` (``torch.load`` with ``weights_only``,
    given explicitly so that ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` cannot turn it off); a file
    that holds anything else, or is no regular file, is refused with a one-line `ConfigError` naming it."""
    fh = open_regular(Path(path))  # a FIFO planted there is refused, never waited on
    if fh is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    try:
        with fh:
            return torch.load(fh, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ConfigError(f"refused to load {path}: it holds more than tensors and plain values, and loading it "
                          f"could run code ({first[:200]}); resume only run directories you trust") from None
