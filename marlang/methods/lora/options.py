"""LoRA and value-head options for weight-space trainers, the ``learning.*`` keys every
weight-space learner has (`AdapterOptions`), and the facts of a model they are
checked against (its linear modules and layer count).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import torch
from pydantic import ConfigDict, Field, ValidationInfo, field_validator

from marlang.config import NumbersNotBooleans
from marlang.learners.base import LearnerOptions


class LoraOptions(NumbersNotBooleans):
    """LoRA hyper-parameters of every adapter (GLAM / lamorel: r 16, alpha 32 on q and v)."""

    model_config = ConfigDict(extra="forbid")

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    targets: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"])
    layers: int | None = None
    """LoRA on the last ``layers`` transformer layers only (None: every layer). Nothing below
    the lowest adapted layer needs gradients, so backward stops there: a cheaper update."""

    @field_validator("r", "alpha", "layers")
    @classmethod
    def _check_positive(cls, value: int | None, info: ValidationInfo) -> int | None:
        assert info.field_name is not None  # a field validator's
        rule = {
            "r": "is the LoRA rank and must be >= 1 (e.g. 16)",
            "alpha": "must be >= 1 (scale is alpha / r, e.g. 32)",
            "layers": "must be >= 1 (the last N layers) or null (all)",
        }[info.field_name]
        return at_least_one(value, f"lora.{info.field_name} {rule}")

    @field_validator("dropout")
    @classmethod
    def _check_dropout(cls, value: float) -> float:
        if not 0.0 <= value < 1.0:
            raise ValueError(f"lora.dropout must be in [0, 1) (e.g. 0.05); got {value}")
        return value

    @field_validator("targets")
    @classmethod
    def _check_targets(cls, value: list[str]) -> list[str]:
        if not value or any(not t.strip() for t in value):
            raise ValueError(
                f"lora.targets must name at least one module (e.g. q_proj, v_proj); got {value}"
            )
        if len(set(value)) != len(value):
            raise ValueError(f"lora.targets has duplicates: {value}")
        return value


class ValueHeadOptions(NumbersNotBooleans):
    """Value heads: MLPs (in -> width -> 1, fp32) on the last prompt token's hidden state.

    ``per_agent`` gives each adapter its own head (one head named ``shared`` when sharing);
    ``central`` adds one head named ``central`` whose input is every agent's hidden state
    concatenated (hidden size x number of agents), for a centralised critic.
    """

    model_config = ConfigDict(extra="forbid")

    per_agent: bool = True
    central: bool = False
    width: int | None = None  # None: the model's hidden size
    activation: Literal["tanh", "relu"] = "tanh"

    @field_validator("width")
    @classmethod
    def _check_width(cls, value: int | None) -> int | None:
        return at_least_one(value, "value_head.width must be >= 1 or null (hidden size)")


def at_least_one(value: int | None, rule: str) -> int | None:
    """``value`` when it is None or at least 1, else a ``ValueError``: ``rule``, then the value."""
    if value is not None and value < 1:
        raise ValueError(f"{rule}; got {value}")
    return value


def linear_module_names(model: torch.nn.Module) -> list[str]:
    """The distinct last name parts of the model's Linear modules (LoRA targets), in model order.

    The output projection (``lm_head``) is left out: it is not a LoRA target here.
    """
    names: dict[str, None] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name:
            short = name.rsplit(".", 1)[-1]
            if short != "lm_head":
                names[short] = None
    return list(names)


def check_lora_targets(model: torch.nn.Module, targets: Sequence[str]) -> None:
    """Raise ValueError naming a target no module of ``model`` matches.

    PEFT itself only fails when *no* target matches, so a typo next to a valid target would
    silently train fewer modules. A target matches a module whose name is it or ends in
    ``.<target>``, which is PEFT's rule for a list of names.
    """
    module_names = [name for name, _ in model.named_modules() if name]
    for target in targets:
        if target == "all-linear":  # PEFT's own shorthand, resolved by PEFT
            continue
        if not any(name == target or name.endswith("." + target) for name in module_names):
            raise ValueError(
                f"lora target {target!r} is not a module of {type(model).__name__}; set "
                f"lora.targets to some of its linear modules: "
                f"{', '.join(linear_module_names(model))}"
            )


def model_layer_count(model: Any) -> int:
    """The number of transformer layers of ``model`` (its config's ``num_hidden_layers``)."""
    config = getattr(model, "config", None)
    count = getattr(config, "num_hidden_layers", None) or getattr(config, "n_layer", None)
    if not count:
        raise ValueError(f"{type(model).__name__} does not say how many layers it has; "
                         "set lora.layers to null")
    return int(count)


def build_value_head(in_features: int, width: int, activation: str) -> torch.nn.Sequential:
    act = torch.nn.Tanh() if activation == "tanh" else torch.nn.ReLU()
    output = torch.nn.Linear(width, 1)
    # A zero output layer: every value is 0 before training, so the first update's advantages
    # are the rewards' alone rather than the noise of a random head.
    torch.nn.init.zeros_(output.weight)
    torch.nn.init.zeros_(output.bias)
    return torch.nn.Sequential(torch.nn.Linear(in_features, width), act, output).float()


def lora_shape(options: LoraOptions) -> tuple[int, int, list[str]]:
    # What makes saved LoRA weights compute the same function here (dropout does not).
    return options.r, options.alpha, sorted(options.targets)


class AdapterOptions(LearnerOptions):
    """``learning.*`` keys every weight-space learner has."""

    lr: float = Field(1e-4, gt=0, description="AdamW learning rate (LoRA wants more than full fine-tuning).")
    epochs: int = Field(4, ge=1, description="Passes over an iteration's samples.")
    minibatch_size: int = Field(16, ge=1, description="Samples per gradient step.")
    micro_batch_size: int = Field(
        8, ge=1, description="Samples per forward pass; a minibatch's gradient accumulates over them "
        "(peak memory follows this, not minibatch_size).")
    max_grad_norm: float = Field(0.5, gt=0, description="Gradient norm clip of each step.")
    max_skip_norm: float = Field(
        1e4, gt=0, description="A gradient whose norm exceeds this (or is not finite) skips the step.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of training rollouts.")
    sharing: Literal["per_agent", "shared"] = Field(
        "per_agent", description="per_agent: one adapter per agent; shared: one adapter for all.")
    lora: LoraOptions = Field(default_factory=LoraOptions)
    dtype: Literal["float32", "bfloat16", "float16"] = Field("float32", description="Base model dtype.")
    device: Literal["cpu", "cuda", "auto"] = Field("auto", description="auto: cuda when available.")
    gradient_checkpointing: bool = False
    eval_episodes: int = Field(
        8, ge=0, description="Greedy evaluation episodes before training and after each eval_every updates.")
    eval_every: int = Field(1, ge=1, description="Updates between greedy evaluations.")
    seed: int = Field(0, description="Seeds the adapters' initial weights and the update's random draws; in "
                      "a config, run.seed unless given (so each run seed is its own stream).")
