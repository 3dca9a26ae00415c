"""The per-agent reward hook: a function from a collected batch to the per-agent rewards the
neural learner trains on, applied before advantages, value targets or replay storage.

A hook is any ``RewardHook = Callable[[TensorDictBase], torch.Tensor]``. It receives the batch
BenchMARL collected (shape ``[n_envs, steps]``) with, among others, ``("agents", "observation")``,
``("agents", "action")`` (indices), ``"state"``, ``("next", "agents", "reward")`` (the env's
rewards), ``("next", "agents", "info", "success")``, the done flags and
``("collector", "traj_ids")``; it returns a tensor shaped like ``("next", "agents", "reward")``
(``[n_envs, steps, n_agents, 1]``; ``[n_envs, steps, n_agents]`` is accepted too).

Where it runs: BenchMARL calls ``Callback.on_batch_collected`` right after collection and
before its per-group loop, which calls ``process_batch`` (MAPPO/IPPO: GAE advantages and value
targets from ``("next", "agents", "reward")``; QMIX/VDN: the team reward, the mean of the
per-agent rewards) and then inserts the batch into the replay buffer, from which QMIX/VDN
compute their TD targets. Replacing the reward in place there reaches all four methods, but
QMIX/VDN only through the mean over agents: per-agent credit that keeps the team's sum changes
nothing for them (``learning.critic`` is refused with them). Episode returns (``episode_reward``,
BenchMARL's logged returns and marlang's ``iterations.csv``) are summed by the env transform
during collection, so they stay the env's.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from marlang.registry import ImportRefused, check_import_allowed, describe_object, plugin_function_problem

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase

logger = logging.getLogger(__name__)

RewardHook = Callable[["TensorDictBase"], "torch.Tensor"]
"""Maps a collected batch to per-agent rewards shaped like its ``("next", "agents", "reward")``."""

REWARD_KEY = ("next", "agents", "reward")


def load_reward_hook(spec: str) -> RewardHook:
    """The function named by ``"package.module:function"``; ``ValueError`` (one line) otherwise."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"reward_hook {spec!r} must look like 'package.module:function'")
    try:
        check_import_allowed(spec)  # not from a config read from a directory, unless trusted
    except ImportRefused as err:
        raise ValueError(f"reward_hook {err}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"reward_hook {spec!r}: cannot import module {module_name!r} ({err})") from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise ValueError(f"reward_hook {spec!r}: module {module_name!r} has no attribute {attr!r}")
    # A function written as a hook, never a library callable handed the batch.
    problem = plugin_function_problem(target, spec, positional=1)
    if problem is not None:
        raise ValueError(f"reward_hook {spec!r} is {describe_object(target)}: {problem}, not a reward hook")
    return target


def hook_name(hook: RewardHook | None) -> str | None:
    """A readable name of a hook for the manifest (``module:qualname``)."""
    if hook is None:
        return None
    module = getattr(hook, "__module__", None) or "?"
    name = getattr(hook, "__qualname__", None) or type(hook).__name__
    return f"{module}:{name}"


def apply_reward_hook(hook: RewardHook, batch: TensorDictBase) -> dict[str, float]:
    """Replace the batch's per-agent rewards by ``hook(batch)`` in place; returns the mean
    per-agent step reward before (``env_reward_mean``) and after (``train_reward_mean``)."""
    import torch

    reward = batch.get(REWARD_KEY)
    shaped = hook(batch)
    if not isinstance(shaped, torch.Tensor):
        raise TypeError(f"reward hook {hook_name(hook)} returned {type(shaped).__name__}, not a torch.Tensor")
    if shaped.shape == reward.shape[:-1]:
        shaped = shaped.unsqueeze(-1)
    if shaped.shape != reward.shape:
        raise ValueError(
            f"reward hook {hook_name(hook)} returned shape {tuple(shaped.shape)}; expected "
            f"{tuple(reward.shape)} (like the batch's {REWARD_KEY})"
        )
    shaped = shaped.detach().to(device=reward.device, dtype=reward.dtype)
    if not torch.isfinite(shaped).all():
        raise ValueError(f"reward hook {hook_name(hook)} returned non-finite rewards")
    before = float(reward.mean())
    batch.set(REWARD_KEY, shaped)
    return {"env_reward_mean": before, "train_reward_mean": float(shaped.mean())}

