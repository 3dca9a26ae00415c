"""Data-parallel training of adapters under ``accelerate launch`` (or ``torchrun``): each
process plays its own rollouts and trains on its own decisions; the gradients of every step
are summed across processes, so all processes take the same step and keep identical adapters.

marlang grows no distributed machinery of its own: the process group is accelerate's
(``PartialState``: gloo on CPU, NCCL on GPUs); this module only sums tensors through it.
"""

from __future__ import annotations

import os
from typing import Any


def launched_world_size() -> int:
    """How many processes the launcher started (1 when not launched by one)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def launched_rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


class DataParallel:
    """The process group of a launched run, or a single process (every method a no-op)."""

    def __init__(self) -> None:
        self.world_size = launched_world_size()
        self.rank = launched_rank()
        if self.world_size > 1:
            from accelerate import PartialState

            PartialState()  # initializes the process group from the launcher's environment

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def sum_int(self, value: int) -> int:
        return int(self._reduce(float(value), "sum"))

    def sum_float(self, value: float) -> float:
        return self._reduce(float(value), "sum")

    def max_int(self, value: int) -> int:
        return int(self._reduce(float(value), "max"))

    def _reduce(self, value: float, op: str) -> float:
        if not self.active:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self._device())
        dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
        return float(t.item())

    def sum_gradients(self, params: list[Any]) -> None:
        """Sum every parameter's gradient across processes (missing ones count as zero), in
        one flat all-reduce."""
        if not self.active:
            return
        import torch
        import torch.distributed as dist

        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for p in params:
            n = p.grad.numel()
            p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
            offset += n

    def _device(self) -> Any:
        import torch
        import torch.distributed as dist

        if dist.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
