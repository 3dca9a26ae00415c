"""The ``learning.*`` keys of the neural methods (BenchMARL's experiment settings, and the
per-agent credit keys from ``CreditOptions``): one options model per family. Light on
purpose: nothing here imports torch or BenchMARL.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from marlang.methods.neural.critics.options import CreditOptions

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
BenchmarlLogger = Literal["csv", "tensorboard", "wandb", "mlflow"]
"""A logger BenchMARL can write (``learning.loggers``)."""


class NeuralOptions(CreditOptions):
    """``learning.*`` keys every neural method shares (BenchMARL's experiment settings; the
    per-agent credit keys, ``learning.critic`` and the rest, come from ``CreditOptions``)."""

    frames: int = Field(
        100_000, ge=1,
        description="Training budget in environment steps (frames); rounded up to whole batches.",
    )
    n_envs: int = Field(10, ge=1, description="Environments stepped side by side during collection.")
    frames_per_batch: int = Field(
        6000, ge=1, description="Frames collected per training iteration (a multiple of n_envs)."
    )
    lr: float = Field(5e-4, gt=0, description="Adam learning rate.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    hidden: list[int] = Field(
        default_factory=lambda: [64, 64], description="Hidden layer sizes of every network (MLP)."
    )
    activation: Literal["tanh", "relu"] = "tanh"
    share_policy_params: bool = Field(True, description="One policy network for all agents.")
    max_grad_norm: float | None = Field(5.0, gt=0, description="Gradient norm clip; None: off.")
    evaluation_episodes: int = Field(
        20, ge=1, description="Greedy episodes of the final evaluation (summary.json)."
    )
    evaluation_interval: int | None = Field(
        None, ge=1,
        description="Also evaluate every N frames during training (BenchMARL's evaluation; a "
        "multiple of frames_per_batch); None: only the final evaluation.",
    )
    device: str = Field(
        "cpu", description="Where networks train: cpu | cuda | cuda:N | mps | auto (cuda if available)."
    )
    sampling_device: str | None = Field(
        None, description="Where collection runs (policy forward passes); None: cpu."
    )
    threads: int = Field(
        1, ge=1, description="torch CPU threads while training (small networks are fastest on one)."
    )
    reward_hook: str | None = Field(
        None,
        description="'package.module:function' mapping each collected batch to per-agent rewards "
        "(see marlang.methods.neural.reward_hook).",
    )
    checkpoint_batches: int = Field(
        10, ge=0, description="Batches between BenchMARL checkpoints (0: only at the end)."
    )
    loggers: list[BenchmarlLogger] = Field(
        default_factory=lambda: list[BenchmarlLogger](["csv"]),
        description="BenchMARL loggers writing under benchmarl/.",
    )

    @field_validator("frames_per_batch")
    @classmethod
    def _whole_env_steps(cls, v: int, info: ValidationInfo) -> int:
        n_envs = info.data.get("n_envs")
        if n_envs and v % n_envs:
            raise ValueError(f"frames_per_batch ({v}) must be a multiple of learning.n_envs ({n_envs})")
        return v

    @field_validator("evaluation_interval")
    @classmethod
    def _whole_batches(cls, v: int | None, info: ValidationInfo) -> int | None:
        batch = info.data.get("frames_per_batch")
        if v is not None and batch and v % batch:
            raise ValueError(f"evaluation_interval ({v}) must be a multiple of learning.frames_per_batch ({batch})")
        return v

    @field_validator("device", "sampling_device")
    @classmethod
    def _known_device(cls, v: str | None) -> str | None:
        if v is not None and not _DEVICE.match(v):
            raise ValueError(f"unknown device {v!r}; valid choices: auto, cpu, cuda, cuda:N, mps")
        return v

    @field_validator("reward_hook")
    @classmethod
    def _importable_hook(cls, v: str | None) -> str | None:
        if v is not None:
            from marlang.methods.neural.reward_hook import load_reward_hook

            load_reward_hook(v)  # a one-line ValueError when it cannot be imported
        return v

    @property
    def batches(self) -> int:
        """Training iterations: ``frames`` in whole batches, rounded up."""
        return -(-self.frames // self.frames_per_batch)


class NeuralPPOOptions(NeuralOptions):
    """MAPPO and IPPO: clipped PPO with GAE (a centralized or an independent critic). The keys
    have CleanRL's names; ``marlang.methods.neural.learner`` hands them to BenchMARL under its own
    (``clip_epsilon``, ``lmbda``, ...)."""

    epochs: int = Field(10, ge=1, description="Passes over each batch (BenchMARL's n_minibatch_iters).")
    minibatch_size: int = Field(400, ge=1, description="Frames per gradient step (at most frames_per_batch).")
    clip_coef: float = Field(0.2, gt=0, description="PPO ratio clip.")
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus coefficient.")
    vf_coef: float = Field(1.0, ge=0, description="Critic (value) loss coefficient.")
    gae_lambda: float = Field(0.9, ge=0, le=1, description="GAE lambda.")
    share_param_critic: bool = Field(True, description="One critic network for all agents.")

    @field_validator("minibatch_size")
    @classmethod
    def _fits_batch(cls, v: int, info: ValidationInfo) -> int:
        batch = info.data.get("frames_per_batch")
        if batch and v > batch:
            raise ValueError(f"minibatch_size ({v}) must not exceed learning.frames_per_batch ({batch})")
        return v


class ValueDecompositionOptions(NeuralOptions):
    """VDN and QMIX: off-policy Q-learning of per-agent utilities mixed into a team value."""

    frames_per_batch: int = Field(
        1000, ge=1, description="Frames collected per training iteration (a multiple of n_envs)."
    )
    buffer_size: int = Field(100_000, ge=1, description="Replay buffer capacity in frames.")
    batch_size: int = Field(128, ge=1, description="Frames per gradient step sampled from the buffer.")
    optimizer_steps: int = Field(100, ge=1, description="Gradient steps per collected batch.")
    eps_init: float = Field(0.8, ge=0, le=1, description="Initial epsilon of epsilon-greedy exploration.")
    eps_end: float = Field(0.01, ge=0, le=1, description="Final epsilon.")
    exploration_frames: int | None = Field(
        None, ge=1, description="Frames over which epsilon anneals; None: a third of learning.frames."
    )
    target_tau: float = Field(0.005, gt=0, le=1, description="Polyak rate of the target networks.")


class QMIXOptions(ValueDecompositionOptions):
    mixing_embed_dim: int = Field(32, ge=1, description="Hidden size of QMIX's monotonic mixing network.")


class VDNOptions(ValueDecompositionOptions):
    pass
