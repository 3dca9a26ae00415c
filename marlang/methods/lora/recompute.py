"""What a LoRA update keeps of its forward pass for backward: the tensors autograd would hold
that are cheap to recompute from tensors it holds anyway (or that repeat their own values) are
rebuilt in backward instead, with the same operations, so the update's numbers do not change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from peft.tuners.lora import LoraLayer
from transformers.activations import ACT2CLS

NOTE = "_marlang_recompute"
"""The attribute of a tensor that says how to recompute it (a `Recipe`)."""


def _activation_classes() -> tuple[type[torch.nn.Module], ...]:
    """The SiLU and GELU activations of transformers' models (a gated MLP's act_fn). Their own
    backward keeps their input, so recomputing their output from it costs no memory; ReLU, tanh
    and sigmoid keep their output instead, and a recipe would keep one tensor more."""
    classes: list[type[torch.nn.Module]] = [torch.nn.SiLU, torch.nn.GELU]
    for name, entry in ACT2CLS.items():
        cls = entry[0] if isinstance(entry, tuple) else entry  # some names map to (class, kwargs)
        if (name in ("silu", "swish") or "gelu" in name) and isinstance(cls, type) and cls not in classes:
            classes.append(cls)
    return tuple(classes)


ACTIVATIONS = _activation_classes()


class CheckpointedLoraA(torch.nn.Linear):
    """A LoRA layer's ``lora_A`` with the adapter's dropout and the cast to the adapter's dtype
    moved inside it, the three recomputed in backward while gradients are recorded.

    PEFT computes ``lora_A(dropout(x.to(dtype)))``: backward then keeps, per adapted module,
    the dropped float copy of the layer's input (for ``lora_A``'s gradient) and the dropout's
    noise (on CPU a float tensor the size of the input), and on a bf16 base the float copy per
    module. Here only ``x`` is kept, one tensor in the base's dtype that q_proj's and v_proj's
    adapters share, and the dropout redraws the same mask (torch's checkpointing restores the
    random generators' state).
    """

    def __init__(self, lora_a: torch.nn.Linear, dropout: torch.nn.Module) -> None:
        torch.nn.Module.__init__(self)
        self.in_features, self.out_features = lora_a.in_features, lora_a.out_features
        self.weight = lora_a.weight  # the same Parameter: optimizers and saved files see no change
        self.bias = lora_a.bias
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and (self.weight.requires_grad or x.requires_grad):
            out: torch.Tensor = torch.utils.checkpoint.checkpoint(self._dropped_linear, x, use_reentrant=False)
            return out
        return self._dropped_linear(x)

    def _dropped_linear(self, x: torch.Tensor) -> torch.Tensor:
        # PEFT's own operations, in its order: cast, dropout, lora_A.
        return torch.nn.functional.linear(self.dropout(x.to(self.weight.dtype)), self.weight, self.bias)


def checkpoint_lora_inputs(model: torch.nn.Module) -> int:
    """Replace every adapter's ``lora_A`` in ``model``'s LoRA layers by a `CheckpointedLoraA`
    (its dropout moved inside, PEFT's input cast left to it); returns how many were replaced.
    Call after every adapter was added; the LoRA parameters stay the same objects."""
    replaced = 0
    for layer in model.modules():
        if not isinstance(layer, LoraLayer) or not hasattr(layer, "cast_input_dtype_enabled"):
            continue
        for name, lora_a in list(layer.lora_A.items()):
            if isinstance(lora_a, CheckpointedLoraA) or type(lora_a) is not torch.nn.Linear:
                continue
            layer.lora_A[name] = CheckpointedLoraA(lora_a, layer.lora_dropout[name])
            layer.lora_dropout[name] = torch.nn.Identity()
            replaced += 1
        # x reaches lora_A in the base's dtype; CheckpointedLoraA casts it (PEFT's switch for this)
        layer.cast_input_dtype_enabled = False
    return replaced


@dataclass
class Recipe:
    """How to recompute a saved tensor: ``module(source)``, valid while ``source`` is unchanged."""

    module: torch.nn.Module
    source: torch.Tensor
    source_version: int

    def __call__(self) -> torch.Tensor:
        if self.source._version != self.source_version:
            raise RuntimeError("an activation's input was modified in place before backward: cannot recompute it")
        with torch.no_grad():
            out: torch.Tensor = self.module(self.source)
        return out


def _note_output(module: torch.nn.Module, inputs: tuple[Any, ...], output: Any) -> None:
    """Forward hook of an activation: note on its output how to recompute it."""
    if len(inputs) != 1 or not isinstance(output, torch.Tensor) or output is inputs[0]:
        return
    if output.requires_grad and torch.is_grad_enabled():
        source = inputs[0]
        setattr(output, NOTE, (Recipe(module, source, source._version), output._version))


def note_activations(model: torch.nn.Module) -> list[torch.utils.hooks.RemovableHandle]:
    """Hook every parameter-free SiLU or GELU module of ``model`` (a gated MLP's act_fn) so
    that, under `recomputed_activations`, backward recomputes its output from its input (which
    the activation's own backward keeps) instead of keeping both. Returns the hooks' handles."""
    handles = []
    for module in model.modules():
        if (isinstance(module, ACTIVATIONS) and not getattr(module, "inplace", False)
                and not any(True for _ in module.parameters())):
            handles.append(module.register_forward_hook(_note_output))
    return handles


@dataclass
class RepeatedHeads:
    """A saved ``[batch, heads, length, dim]`` tensor whose heads repeat in runs of ``groups``:
    grouped-query attention's keys and values, repeated per query head by transformers where the
    attention kernel takes no grouped heads (any custom mask). One head per run is kept."""

    heads: torch.Tensor  # [batch, heads / groups, length, dim]
    groups: int

    def __call__(self) -> torch.Tensor:
        batch, kv_heads, length, dim = self.heads.shape
        # transformers' repeat_kv: the same values in the same contiguous layout
        expanded = self.heads[:, :, None].expand(batch, kv_heads, self.groups, length, dim)
        return expanded.reshape(batch, kv_heads * self.groups, length, dim)


@dataclass
class SavedTensorPacker:
    """The saved-tensor hooks of `recomputed_activations`, for a model with ``heads`` attention
    heads sharing ``heads / kv_heads`` per key/value head."""

    heads: int = 0
    kv_heads: int = 0

    def pack(self, tensor: torch.Tensor) -> Any:
        note = getattr(tensor, NOTE, None)
        if note is not None and tensor._version == note[1]:
            return note[0]
        if self.kv_heads and self.heads > self.kv_heads and tensor.dim() == 4 and tensor.shape[1] == self.heads \
                and tensor.is_contiguous():
            batch, _, length, dim = tensor.shape
            runs = tensor.view(batch, self.kv_heads, self.heads // self.kv_heads, length, dim)
            first = runs[:, :, :1]
            if torch.equal(runs, first.expand_as(runs)):  # the values prove the repetition
                return RepeatedHeads(first[:, :, 0].clone(), self.heads // self.kv_heads)
        return tensor

    @staticmethod
    def unpack(saved: Any) -> torch.Tensor:
        if isinstance(saved, (Recipe, RepeatedHeads)):
            return saved()
        tensor: torch.Tensor = saved
        return tensor


@contextlib.contextmanager
def recomputed_activations(heads: int = 0, kv_heads: int = 0) -> Iterator[None]:
    """While inside, tensors saved for backward that carry a recipe (the outputs of activations
    hooked by `note_activations`) are kept as their recipe and recomputed in backward, and
    attention keys and values repeated per query head (``heads`` of them, ``kv_heads`` distinct)
    are kept once per key/value head."""
    packer = SavedTensorPacker(heads, kv_heads)
    with torch.autograd.graph.saved_tensors_hooks(packer.pack, packer.unpack):
        yield
