"""The update of a neural MARL learner (MAPPO, IPPO, QMIX, VDN): a BenchMARL ``Experiment`` on
a marlang env, writing into the run's directory: ``iterations.csv`` while training, then a
greedy evaluation into ``metrics.csv`` and ``summary.json``, the learning curve, and
BenchMARL's own outputs (logs, checkpoints) under ``benchmarl/``.

BenchMARL trains in one call that cannot be stepped, so the whole ``learning.frames`` is the
loop's one update. ``--resume`` of a finished run trains nothing; an interrupted one continues
from BenchMARL's latest checkpoint (every ``learning.checkpoint_batches`` batches), or starts
over without one. A checkpoint is restored as tensors and plain values only (`RestoredExperiment`).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from benchmarl.algorithms import IppoConfig, MappoConfig, QmixConfig, VdnConfig
from benchmarl.algorithms.common import AlgorithmConfig
from benchmarl.experiment import Experiment as BenchmarlExperiment
from benchmarl.experiment import ExperimentConfig as BenchmarlConfig
from benchmarl.experiment.callback import Callback
from benchmarl.models.mlp import MlpConfig
from torchrl.envs.utils import ExplorationType, set_exploration_type

from marlang.config import ConfigError, ExperimentConfig
from marlang.learners import learner_entry
from marlang.methods.neural.benchmarl_task import GROUP, MarlangTask, build_numeric_env
from marlang.methods.neural.callbacks import IterationRecorder, RewardHookCallback, StopWhenAsked
from marlang.methods.neural.critics.critic import Critic, build_critic
from marlang.methods.neural.critics.dataset import TimestepWriter
from marlang.methods.neural.options import NeuralOptions, NeuralPPOOptions
from marlang.methods.neural.reward_hook import RewardHook, hook_name, load_reward_hook
from marlang.rundir import RunDirectory, package_versions
from marlang.rundir.tensors import load_tensors
from marlang.seeds import env_seed
from marlang.tables.report import summarize_episodes

logger = logging.getLogger(__name__)

STATE_FILE = "neural_state.json"
"""Where a neural run is: ``training`` -> ``trained`` -> ``finished`` (evaluated)."""
EVALUATION_FILE = "evaluation.json"
BENCHMARL_DIR = "benchmarl"

_ALGORITHMS: dict[str, type[AlgorithmConfig]] = {
    "MappoConfig": MappoConfig, "IppoConfig": IppoConfig, "QmixConfig": QmixConfig, "VdnConfig": VdnConfig,
}
_PPO_KEYS: dict[str, str] = {
    "share_param_critic": "share_param_critic", "clip_epsilon": "clip_coef", "entropy_coef": "ent_coef",
    "critic_coef": "vf_coef", "lmbda": "gae_lambda",
}
"""BenchMARL's name of each PPO algorithm setting -> the ``learning.*`` key (CleanRL's name) that sets it."""


def resolve_device(device: str | None, key: str) -> str:
    """``auto`` -> ``cuda`` when available, else ``cpu``; an unavailable device is a ConfigError."""
    if device is None or device == "cpu":
        return "cpu"
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{key}: {device!r} is not available here (torch.cuda.is_available() is False); "
                          "valid choices on this machine: cpu, auto")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{key}: 'mps' is not available here; valid choices on this machine: cpu, auto")
    return device


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run with ``n`` torch CPU threads: tiny networks lose far more to thread hand-offs
    (worse on a shared machine) than they gain from splitting their matrix products."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """A neural run's output without the libraries' noise: no deprecation warnings from
    torchrl/BenchMARL, torchrl's log lines plain (no ANSI colour codes) and at INFO only
    when marlang logs at INFO (``-v``)."""
    import warnings

    torchrl_logger = logging.getLogger("torchrl")
    saved_level = torchrl_logger.level
    saved_formatters = [(h, h.formatter) for h in torchrl_logger.handlers]
    for handler, _ in saved_formatters:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if not logging.getLogger().isEnabledFor(logging.INFO):
        torchrl_logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        torchrl_logger.setLevel(saved_level)
        for handler, formatter in saved_formatters:
            handler.setFormatter(formatter)


class RestoredExperiment(BenchmarlExperiment):
    """BenchMARL's experiment, restoring ``config.restore_file`` as tensors and plain values only
    (`load_tensors`). BenchMARL's own restore leaves ``weights_only`` to torch's default, which
    ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD`` turns into unpickling whatever the file names, and the
    file is in a run directory, which may be someone else's."""

    def _load_experiment(self) -> RestoredExperiment:
        self.load_state_dict(load_tensors(self.config.restore_file, map_location=self.config.restore_map_location))
        return self


def _round_progress_returns(experiment: BenchmarlExperiment) -> None:
    """BenchMARL's progress bar shows the mean return it is handed at full float precision
    (``-48.150001525878906``): hand it rounded."""
    log_collection = experiment.logger.log_collection

    def rounded(*args: Any, **kwargs: Any) -> Any:
        value = log_collection(*args, **kwargs)
        return round(float(value), 3) if isinstance(value, int | float) else value

    experiment.logger.log_collection = rounded


def model_name(options: NeuralOptions) -> str:
    """The networks in words, for tables: ``mlp-64x64``."""
    return "mlp-" + "x".join(str(h) for h in options.hidden)


def benchmarl_configs(config: ExperimentConfig, save_folder: Path, restore_file: Path | None = None,
                      ) -> tuple[AlgorithmConfig, MlpConfig, BenchmarlConfig]:
    """BenchMARL's algorithm, model and experiment configs for a marlang config."""
    o: Any = config.learning.options
    method = learner_entry(config.learning.method).learner_class
    algorithm = _ALGORITHMS[getattr(method, "algorithm", "")].get_from_yaml()
    if isinstance(o, NeuralPPOOptions):
        for theirs, ours in _PPO_KEYS.items():
            setattr(algorithm, theirs, getattr(o, ours))
    elif hasattr(algorithm, "mixing_embed_dim"):
        algorithm.mixing_embed_dim = o.mixing_embed_dim
    activation = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[o.activation]
    model = MlpConfig(num_cells=list(o.hidden), layer_class=torch.nn.Linear, activation_class=activation)

    e = BenchmarlConfig.get_from_yaml()
    train_device = resolve_device(o.device, "learning.device")
    e.train_device = e.buffer_device = train_device
    e.sampling_device = resolve_device(o.sampling_device, "learning.sampling_device")
    e.share_policy_params = o.share_policy_params
    e.prefer_continuous_actions = False
    e.gamma, e.lr = o.gamma, o.lr
    e.clip_grad_norm, e.clip_grad_val = o.max_grad_norm is not None, o.max_grad_norm
    e.max_n_iters, e.max_n_frames = None, o.batches * o.frames_per_batch
    e.on_policy_collected_frames_per_batch = e.off_policy_collected_frames_per_batch = o.frames_per_batch
    e.on_policy_n_envs_per_worker = e.off_policy_n_envs_per_worker = o.n_envs
    if isinstance(o, NeuralPPOOptions):
        e.on_policy_n_minibatch_iters, e.on_policy_minibatch_size = o.epochs, o.minibatch_size
    else:
        e.off_policy_n_optimizer_steps = o.optimizer_steps
        e.off_policy_train_batch_size = o.batch_size
        e.off_policy_memory_size = min(o.buffer_size, e.max_n_frames)
        e.off_policy_init_random_frames = 0
        e.exploration_eps_init, e.exploration_eps_end = o.eps_init, o.eps_end
        e.exploration_anneal_frames = o.exploration_frames
        e.soft_target_update, e.polyak_tau = True, o.target_tau
    e.evaluation = o.evaluation_interval is not None
    e.evaluation_interval = o.evaluation_interval or o.frames_per_batch
    e.evaluation_episodes = o.evaluation_episodes
    e.evaluation_deterministic_actions = True
    e.render = False
    e.loggers = list(o.loggers)
    e.create_json = e.evaluation
    e.save_folder = str(save_folder)
    e.restore_file = None if restore_file is None else str(restore_file)
    e.checkpoint_interval = o.checkpoint_batches * o.frames_per_batch
    e.checkpoint_at_end = True
    e.keep_checkpoints_num = 2
    return algorithm, model, e


def task_for(config: ExperimentConfig) -> MarlangTask:
    """The BenchMARL task of a config's env section."""
    o = config.learning.options
    task_size = o.task_size if getattr(o, "critic", "none") == "llm_taca" else 0
    return MarlangTask(config.env.id, config.env.n_agents, config.env.max_steps, config.env.kwargs, task_size)


class BenchmarlTraining:
    """The BenchMARL side of a neural learner's run (``agents.kind: neural``) in ``run_dir``:
    `start` picks up where the run is, `train` is the learner's one update (BenchMARL for
    ``learning.frames``, then the greedy evaluation), `manifest` and `summary` are the
    learner's parts of the run's files.

    ``reward_hook`` (Python) replaces the per-agent rewards the learner trains on; without it
    ``learning.reward_hook`` (an import path) is used, if set. ``callbacks`` are extra BenchMARL
    callbacks (called after marlang's own).
    """

    def __init__(self, config: ExperimentConfig, run_dir: str | Path, *,
                 reward_hook: RewardHook | None = None, callbacks: Sequence[Callback] = (),
                 stop: Any = None) -> None:
        self.config = config
        self.stop = stop
        """The run's stop flag: set, training ends at the next batch boundary."""
        self.callbacks = list(callbacks)
        self.run_dir = RunDirectory(run_dir, loggers=config.run.loggers)
        self.options: Any = config.learning.options
        self.reward_hook = reward_hook
        if reward_hook is None and self.options.reward_hook:
            self.reward_hook = load_reward_hook(self.options.reward_hook)
        self.critic: Critic | None = None
        self.experiment: BenchmarlExperiment | None = None
        self.status: str | None = None
        self.checkpoint: Path | None = None
        self.evaluated = 0
        """Greedy evaluation episodes `train` played (0 for a finished run)."""

    # running -----------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Where the run is (``neural_state.json`` and BenchMARL's checkpoints): a run without
        a checkpoint starts its training over; builds the critic. Returns the manifest entries."""
        rd = self.run_dir
        self.status = (rd.read_json(STATE_FILE) or {}).get("status") if rd.exists() else None
        if self.status == "finished" and rd.read_json(EVALUATION_FILE) is not None:
            return self.manifest(critic=(rd.read_json("manifest.json") or {}).get("critic"))
        self.checkpoint = self.latest_checkpoint() if self.status in ("training", "trained") else None
        if self.checkpoint is None:
            self.status = None
            shutil.rmtree(rd.path / BENCHMARL_DIR, ignore_errors=True)
            rd.discard_iterations()  # iterations.csv and its TensorBoard scalars
        self.check_env()  # a bad env fails before the run directory is made
        if self.checkpoint is None:
            shutil.rmtree(rd.path / "credit", ignore_errors=True)
        try:  # learning.critic: a setting the env cannot serve fails here too
            self.critic = build_critic(self.config, rd.path, resume=self.checkpoint is not None)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        return self.manifest(critic=self.critic.manifest() if self.critic is not None else None)

    def train(self) -> int:
        """Train for ``learning.frames`` (from the latest checkpoint, if any), evaluate the
        greedy policy into ``metrics.csv``; returns the frames trained. A finished run trains
        nothing."""
        rd = self.run_dir
        if self.status == "finished":
            logger.info("%s: training and evaluation already finished; nothing to train", rd.path)
            return int((rd.read_json(EVALUATION_FILE) or {}).get("frames") or 0)
        with torch_threads(self.options.threads), quiet_libraries():
            experiment = self.build_experiment(self.checkpoint)
            if self.status != "trained":
                rd.write_json(STATE_FILE, {"status": "training"})
                logger.info("%s: training %s for %d frames", rd.path, self.config.learning.method,
                            experiment.config.max_n_frames)
                experiment.run()
                rd.write_json(STATE_FILE, {"status": "trained"})
            else:
                experiment.close()
            torch.set_num_threads(self.options.threads)  # closing torchrl's batched envs resets it
            rows = self.evaluate(experiment)
        self.evaluated = len(rows)
        rd.write_json(EVALUATION_FILE, {"episodes": rows, "frames": experiment.total_frames})
        rd.rewrite_metrics(rows)
        rd.write_json(STATE_FILE, {"status": "finished"})
        self.status = "finished"
        return int(experiment.total_frames)

    def check_env(self) -> None:
        """Build the env once in numeric mode; a ConfigError naming the problem if it cannot be."""
        try:
            task_for(self.config).make_parallel_env().close()
        except ValueError as err:
            raise ConfigError(f"env: {err}") from None

    def build_experiment(self, restore_file: Path | None = None) -> BenchmarlExperiment:
        """The BenchMARL experiment of this run (restored from ``restore_file`` if given)."""
        save_folder = self.run_dir.path / BENCHMARL_DIR
        save_folder.mkdir(parents=True, exist_ok=True)
        algorithm, model, exp_config = benchmarl_configs(self.config, save_folder.resolve(), restore_file)
        callbacks: list[Any] = []
        task = task_for(self.config)
        if self.reward_hook is not None:
            callbacks.append(RewardHookCallback(self.reward_hook))
        if self.critic is not None:  # a critic is a reward hook fed by what its env observers record
            task.observers = self.critic.observers
            writer = None
            if self.options.record_timesteps:
                env = build_numeric_env(self.config.env.id, self.config.env.n_agents, self.config.env.max_steps,
                                        self.config.env.kwargs)
                writer = TimestepWriter(self.run_dir.path, env.possible_agents,
                                        {a: list(env.action_names(a)) for a in env.possible_agents})
            callbacks.append(RewardHookCallback(self.critic, writer=writer))
        # The recorder comes first: it reads the env's rewards before the hook replaces them.
        hooks = [c for c in callbacks if isinstance(c, RewardHookCallback)]
        callbacks.insert(0, IterationRecorder(self.run_dir, extra=self.critic.metrics if self.critic else None,
                                              hooks=hooks))
        callbacks.extend(self.callbacks)
        callbacks.append(StopWhenAsked(self.stop))
        try:
            self.experiment = RestoredExperiment(
                task=task, algorithm_config=algorithm, model_config=model,
                seed=self.config.run.seed, config=exp_config, callbacks=callbacks,
            )
        except ConfigError:  # a refused checkpoint says so itself
            raise
        except ValueError as err:
            raise ConfigError(f"env: {err}") from None
        _round_progress_returns(self.experiment)
        return self.experiment

    def latest_checkpoint(self) -> Path | None:
        """BenchMARL's newest checkpoint of this run, if any."""
        found = list((self.run_dir.path / BENCHMARL_DIR).glob("*/checkpoints/checkpoint_*.pt"))
        return max(found, key=lambda p: int(p.stem.rpartition("_")[2]), default=None)

    @torch.no_grad()
    def evaluate(self, experiment: BenchmarlExperiment) -> list[dict[str, Any]]:
        """Play ``learning.evaluation_episodes`` greedy episodes (most likely action; no
        exploration) on the held-out env seeds (``run.eval_seed``'s ``test`` stream, the ones an
        LLM learner's held-out evaluation plays); one ``metrics.csv`` row each."""
        task = experiment.task
        env = task.get_env_fun(1, False, None, experiment.config.sampling_device)()
        max_steps = task.max_steps(env)
        iteration = max(experiment.n_iters_performed - 1, 0)
        rows = []
        try:
            with set_exploration_type(ExplorationType.DETERMINISTIC):
                for i in range(self.options.evaluation_episodes):
                    seed = env_seed(self.config.run.eval_seed, "test", i)
                    start = env.reset(seed=seed)
                    td = env.rollout(max_steps, policy=experiment.policy, auto_reset=False, tensordict=start,
                                     auto_cast_to_device=True, break_when_any_done=True)
                    rows.append(episode_row(i, iteration, seed, td))
        finally:
            env.close()
        return rows

    # the run directory -------------------------------------------------------------------------
    def manifest(self, critic: dict[str, Any] | None = None) -> dict[str, Any]:
        """What a neural run's manifest records beyond every run's entries."""
        o = self.options
        return {
            "model_id": model_name(o),
            "agents": "neural",
            "frames": o.batches * o.frames_per_batch,
            "iterations": o.batches,
            "device": resolve_device(o.device, "learning.device"),
            "sampling_device": resolve_device(o.sampling_device, "learning.sampling_device"),
            "threads": o.threads,
            "reward_hook": hook_name(self.reward_hook),
            "critic": critic,
            "versions": versions(),
        }

    def summary(self, setting: str) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the files of the run (the row is
        named ``setting``)."""
        rd = self.run_dir
        evaluation = rd.read_json(EVALUATION_FILE) or {}
        rows = evaluation.get("episodes") or []
        summary: dict[str, Any] = summarize_episodes(rows) if rows else {"episodes": 0}
        c, o = self.config, self.options
        summary.update({
            "setting": setting,
            "env_id": c.env.id,
            "model": model_name(o),
            "learner": c.learning.method,
            "max_steps": c.env.max_steps,
            "seed": c.run.seed,
            "frames": evaluation.get("frames"),
            "evaluation": f"greedy policy, the held-out env seeds of run.eval_seed {c.run.eval_seed}",
            "agents": "neural",
            "success_defined": success_defined(c.env.id),
        })
        iterations = rd.read_iterations()
        if iterations:
            summary["iterations"] = iterations
            seconds = iterations[-1].get("train_seconds")
            if seconds and iterations[-1].get("frames"):
                summary["train_seconds"] = seconds
                summary["frames_per_second"] = round(iterations[-1]["frames"] / seconds, 1)
        manifest = rd.read_json("manifest.json") or {}
        if manifest.get("reward_hook"):
            summary["reward_hook"] = manifest["reward_hook"]
        rd.write_json("summary.json", summary)
        if iterations:
            ret = summary.get("return") or {}
            final = ({setting: (evaluation["frames"], ret["mean"])}
                     if evaluation.get("frames") is not None and ret.get("mean") is not None else None)
            rd.write_learning_curve(setting, iterations, final=final,
                                    success=bool(summary.get("success_defined", True)))
        return summary


def success_defined(env_id: str) -> bool:
    """Whether the env has a notion of success (its registry entry's ``success`` metadata;
    True unless it says otherwise): where it has none, tables leave the success columns out."""
    from marlang.registry import ENVS

    try:
        return bool(ENVS.entry(env_id).metadata.get("success", True))
    except Exception:  # noqa: BLE001 - an unregistered id: assume success is defined
        return True


def episode_row(episode: int, iteration: int, seed: int, td: Any) -> dict[str, Any]:
    """The ``metrics.csv`` row of one evaluation rollout (a TensorDict of shape ``[steps]``)."""
    rewards = td.get(("next", GROUP, "reward"))
    steps, n_agents = rewards.shape[0], rewards.shape[1]
    success = td.get(("next", GROUP, "info", "success"), None)
    invalid = 0
    mask = td.get((GROUP, "action_mask"), None)
    if mask is not None:
        chosen = mask.gather(-1, td.get((GROUP, "action")).long().unsqueeze(-1))
        invalid = int((~chosen.bool()).sum())
    decisions = steps * n_agents
    return {
        "episode": episode, "iteration": iteration, "phase": "eval", "seed": seed,
        "success": bool(success[-1].any()) if success is not None else False,
        "steps": steps, "return": round(float(rewards.mean(dim=(-2, -1)).sum()), 6),
        "decisions": decisions, "invalid_actions": invalid, "invalid_rate": invalid / decisions,
        "reprompts": 0, "fallbacks": 0, "messages": 0, "llm_calls": 0, "cached_calls": 0,
        "tokens_in": 0, "tokens_out": 0,
    }


def versions() -> dict[str, str]:
    """Versions of what a neural run depends on (for the manifest)."""
    return package_versions(("marlang", "torch", "benchmarl", "torchrl", "tensordict", "pettingzoo",
                             "gymnasium", "numpy", "lbforaging", "rware"))

