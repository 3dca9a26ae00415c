"""The ``learning.*`` options of LoRA PPO (GLAM's values unless said otherwise), the checks of
a config PPO cannot train, and the reward hook the options may name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field, field_validator

from marlang.methods.lora.distributed import launched_world_size
from marlang.methods.lora.options import AdapterOptions


class PPOOptions(AdapterOptions):
    """``learning.*`` keys of PPO (GLAM's values unless said otherwise)."""

    value_lr: float = Field(
        1e-4, gt=0, description="AdamW learning rate of the value heads. A head is trained from "
        "scratch on a wide hidden state, where Adam's per-weight steps move its output far more than "
        "a LoRA step moves a score: it keeps its own rate, whatever lr is.")
    epochs: int = Field(4, ge=1, description="Passes over an iteration's decisions.")
    minibatch_size: int = Field(16, ge=1, description="Decisions per gradient step.")
    clip_coef: float = Field(0.2, gt=0, description="PPO ratio clip (and value clip).")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    gae_lambda: float = Field(0.99, ge=0, le=1, description="GAE lambda.")
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus coefficient.")
    vf_coef: float = Field(0.5, ge=0, description="Value loss coefficient.")
    steps: int | None = Field(
        None, ge=1,
        description="Environment steps per update across the iteration's K rollouts: each "
        "episode is cut off (and bootstrapped) after steps / K steps; None: whole episodes.")
    temperature: float = Field(1.0, gt=0, description="Sampling temperature of the softmax policy.")
    value: Literal["agent", "central"] = Field(
        "agent", description="agent: a value head per agent; central: one head reads every agent's state.")
    train_messages: Literal[False, "reinforce"] = Field(
        False, description="reinforce: also train the message tokens with the step's advantage.")
    reward_hook: str | None = Field(
        None, description="'package.module:function' (trajectory, agent) -> per-step rewards of that "
        "agent, replacing the env's (shaped per-agent rewards); a hook that takes gamma= gets the "
        "learner's. Built in: 'marlang.envs.babyai.shaping:goal_progress' (BabyAI go-to).")
    seed: int = Field(0, description="Seeds the adapters' initial weights and the minibatch order; in a "
                      "config, run.seed unless given (so each run seed is its own stream).")

    @field_validator("reward_hook")
    @classmethod
    def _importable_hook(cls, v: str | None) -> str | None:
        if v is not None:
            load_hook(v, 1.0)  # a one-line ValueError when it cannot be imported
        return v


def check_config(config: Any) -> None:
    """One-line errors for settings PPO cannot train, before anything is created."""
    spec = config.model.spec
    if not spec.startswith(("local:", "hf:")):
        raise ValueError(
            f"learning.method 'ppo' trains local weights, and model.spec {spec!r} has none here; "
            "use local:smollm2 or hf:PATH")
    if config.agents.action_selection == "generate":
        raise ValueError(
            "learning.method 'ppo' needs agents.action_selection 'score' (or 'auto'): its policy is "
            "the softmax over the legal actions' scores")
    if launched_world_size() > 1 and config.learning.options.value == "central":
        raise ValueError("learning.value 'central' trains in one process; use learning.value 'agent' "
                         "under accelerate launch")
    if config.env.id.startswith(("code/", "math/", "qa/")):
        raise ValueError(
            f"learning.method 'ppo' needs legal-action lists, and env.id {config.env.id!r} answers in "
            "free text; use learning.method magrpo or grpo there")


def load_hook(spec: str, gamma: float) -> Any:
    """The hook named by ``spec``; one that takes ``gamma`` gets the learner's (potential-based
    shaping is policy-invariant only with the discount the advantages use)."""
    import functools
    import inspect

    from marlang.methods.neural.reward_hook import load_reward_hook

    hook: Callable[..., Any] = load_reward_hook(spec)
    try:
        takes_gamma = "gamma" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        takes_gamma = False
    return functools.partial(hook, gamma=gamma) if takes_gamma else hook
