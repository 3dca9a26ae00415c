"""Data-parallel training of adapters under ``accelerate launch`` (or ``torchrun``): each
process plays its own rollouts and trains on its own decisions; the gradients of every step
are summed across processes, so all processes take the same step and keep identical adapters.

marlang grows no distributed machinery of its own: the process group is accelerate's
(``PartialState``: gloo on CPU, NCCL on GPUs); this module only sums tensors through it.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

logger = logging.getLogger(__name__)


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

    def guarded_step(self, optimizer: Any, params: list[Any], finite: bool, max_grad_norm: float,
                     max_skip_norm: float, what: str) -> float | None:
        """Sum the gradients of ``params`` across processes, clip them to ``max_grad_norm``
        and step ``optimizer``, unless the loss (in any process: ``finite`` is this one's) or
        the gradient is not finite or its norm exceeds ``max_skip_norm``: then nothing changes
        and the answer is None. Every process reaches the same verdict. The answer of a step
        taken is its gradient norm before clipping; ``what`` names the step in warnings."""
        import torch

        if self.sum_int(1 if finite else 0) < self.world_size:
            # a process had a non-finite loss: every process skips this step
            logger.warning("%s: non-finite loss; minibatch skipped", what)
            optimizer.zero_grad(set_to_none=True)
            return None
        self.sum_gradients(params)
        norm = clip_gradients(params, max_grad_norm)
        if not math.isfinite(norm) or norm > max_skip_norm:
            logger.warning("%s: gradient norm %s; minibatch skipped", what, norm)
            optimizer.zero_grad(set_to_none=True)
            return None
        with torch.no_grad():
            optimizer.step()
        return norm


def clip_gradients(params: list[Any], max_norm: float) -> float:
    """Scale the gradients of ``params`` (a list: a generator would be used up by the norm)
    so their global norm is at most ``max_norm``; returns the norm before clipping."""
    import torch

    grads = [p for p in params if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.nn.utils.clip_grad_norm_(grads, max_norm))
