"""BenchMARL callbacks of a marlang neural run: the reward hook, and the recorder that turns each
training iteration into one row of ``iterations.csv`` (returns with 95% CIs, success, losses).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from benchmarl.experiment.callback import Callback
from tensordict import TensorDictBase

from marlang.methods.neural.benchmarl_task import GROUP
from marlang.methods.neural.critics.dataset import TimestepWriter
from marlang.methods.neural.reward_hook import REWARD_KEY, RewardHook, apply_reward_hook, hook_name
from marlang.rundir import RunDirectory
from marlang.statistics.intervals import mean_interval, wilson_interval


class StopWhenAsked(Callback):
    """Ends training at the next batch boundary once the run's stop flag is set (the first
    Ctrl-C): BenchMARL trains on a worker thread, where no KeyboardInterrupt arrives."""

    def __init__(self, stop: Any) -> None:
        super().__init__()
        self.stop = stop

    def _check(self) -> None:
        if self.stop is not None and self.stop.is_set():
            raise KeyboardInterrupt

    def on_batch_collected(self, batch: TensorDictBase) -> None:
        self._check()

    def on_train_end(self, training_td: TensorDictBase, group: str) -> None:
        self._check()

    def __getstate__(self) -> dict[str, Any]:
        return {"stop": None, "experiment": None}


class RewardHookCallback(Callback):
    """Replaces each collected batch's per-agent rewards by ``hook(batch)`` before BenchMARL
    computes advantages or targets or fills its replay buffer (see ``reward_hook``)."""

    def __init__(self, hook: RewardHook, writer: TimestepWriter | None = None) -> None:
        super().__init__()
        self.hook: RewardHook | None = hook
        self.name = hook_name(hook)
        self.last: dict[str, float] = {}
        self.writer = writer
        """Records every timestep with its env and training rewards (a critic's annotated dataset)."""
        self.seconds = 0.0
        """Time the last batch spent here: the hook (a critic's calls and training included) and
        the timestep writer."""

    def on_batch_collected(self, batch: TensorDictBase) -> None:
        if self.hook is None:
            return
        started = time.perf_counter()
        before = batch.get(REWARD_KEY).clone() if self.writer is not None else None
        self.last = apply_reward_hook(self.hook, batch)
        if self.writer is not None and before is not None:
            annotations = getattr(self.hook, "annotations", None)
            self.writer.write(self.experiment.n_iters_performed, batch, before,
                              annotations() if callable(annotations) else None)
        self.seconds = time.perf_counter() - started

    def __getstate__(self) -> dict[str, Any]:
        # BenchMARL pickles callbacks into its config.pkl; hooks may be closures. marlang never
        # restores callbacks from there (a resumed run builds them afresh).
        return {"hook": None, "name": self.name, "last": {}, "writer": None, "experiment": None, "seconds": 0.0}


def episode_stats(batch: TensorDictBase) -> tuple[list[float], list[bool]]:
    """Team returns (per step: the mean over agents, summed over the episode) and success of the
    episodes that ended in a collected batch or in one evaluation rollout."""
    done = batch.get(("next", "done")).squeeze(-1)
    if not bool(done.any()):
        return [], []
    returns = batch.get(("next", GROUP, "episode_reward"), None)
    if returns is None:  # an evaluation rollout has no running sum: add the rewards up
        rewards = batch.get(("next", GROUP, "reward")).mean(dim=(-2, -1))
        first_done = int(done.nonzero()[0, 0])
        success_key = ("next", GROUP, "info", "success")
        success = bool(batch.get(success_key)[first_done].any()) if success_key in batch.keys(True) else False
        return [float(rewards[: first_done + 1].sum())], [success]
    team = returns[done].mean(dim=(-2, -1))
    success_key = ("next", GROUP, "info", "success")
    if success_key in batch.keys(True):
        flags = batch.get(success_key)[done].reshape(team.shape[0], -1).bool().any(-1)
    else:
        flags = torch.zeros(team.shape[0], dtype=torch.bool)
    return [float(x) for x in team], [bool(x) for x in flags]


class IterationRecorder(Callback):
    """Writes one ``iterations.csv`` row per training iteration, as soon as its update is done
    (and again with ``eval_return`` when BenchMARL evaluates after it). Where the time went:
    ``hook_seconds`` (the reward hooks: a critic's calls, its training and its credit) and
    ``update_seconds`` (from the batch's collection to the end of its update, hooks excluded)."""

    def __init__(self, run_dir: RunDirectory, extra: Callable[[], dict[str, Any]] | None = None,
                 hooks: Sequence[RewardHookCallback] = ()) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.extra = extra
        """Further columns of each row (a critic's, read after its update)."""
        self.hooks = list(hooks)
        self._collected_at = time.perf_counter()
        self._batch: TensorDictBase | None = None
        self._row: dict[str, Any] = {}
        self._losses: dict[str, list[float]] = {}
        self._started = time.perf_counter()
        self._elapsed_before = 0.0

    def on_setup(self) -> None:
        rows = self.run_dir.read_iterations()
        # A run restored from a checkpoint goes on counting its training time.
        self._elapsed_before = float(rows[-1].get("train_seconds") or 0.0) if rows else 0.0
        self._started = time.perf_counter()

    def on_batch_collected(self, batch: TensorDictBase) -> None:
        exp = self.experiment
        returns, success = episode_stats(batch)
        ret = mean_interval(returns)
        rate = wilson_interval(sum(success), len(success))
        self._batch = batch  # the hook (next in line) rewrites its rewards in place
        self._losses = {}
        self._collected_at = time.perf_counter()
        self._row = {
            "iteration": exp.n_iters_performed,
            "frames": exp.total_frames,
            "episodes": len(returns),
            "return_mean": ret["mean"],
            "return_low": ret["low"],
            "return_high": ret["high"],
            "success_rate": rate["mean"],
            "success_low": rate["low"],
            "success_high": rate["high"],
            "eval_return": None,
            "eval_return_low": None,
            "eval_return_high": None,
            "env_reward_mean": float(batch.get(("next", GROUP, "reward")).mean()),
        }

    def on_train_end(self, training_td: TensorDictBase, group: str) -> None:
        for key, value in training_td.items():
            if key.startswith("loss"):  # loss_objective, loss_critic (PPO); loss (QMIX, VDN)
                self._losses.setdefault(key, []).append(float(value.float().mean()))
        row = self._row
        if self._batch is not None:
            row["train_reward_mean"] = float(self._batch.get(("next", GROUP, "reward")).mean())
        row.update({k: sum(v) / len(v) for k, v in self._losses.items()})
        if self.extra is not None:
            row.update(self.extra())
        hook_seconds = sum(h.seconds for h in self.hooks)
        if self.hooks:
            row["hook_seconds"] = round(hook_seconds, 4)
        row["update_seconds"] = round(time.perf_counter() - self._collected_at - hook_seconds, 4)
        row["train_seconds"] = round(self._elapsed_before + time.perf_counter() - self._started, 3)
        self.run_dir.append_iteration_csv(dict(row))

    def on_evaluation_end(self, rollouts: list[TensorDictBase]) -> None:
        returns = [r for rollout in rollouts for r in episode_stats(rollout)[0]]
        ret = mean_interval(returns)
        self._row.update({"eval_return": ret["mean"], "eval_return_low": ret["low"], "eval_return_high": ret["high"]})
        self.run_dir.append_iteration_csv(dict(self._row))

    def __getstate__(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "extra": None, "experiment": None, "_batch": None,
                "_row": {}, "_losses": {}, "_started": 0.0, "_elapsed_before": 0.0, "hooks": [],
                "_collected_at": 0.0}
