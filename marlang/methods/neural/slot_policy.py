"""A trained neural policy playing team slots (``team.<slot>: {kind: neural, checkpoint: RUN}``):
the greedy policy of a neural run (MAPPO, IPPO, QMIX, VDN) acts for its slots beside LLM
agents, reading each agent's numeric observation from the text env the run plays.

The run's BenchMARL experiment is rebuilt from its ``config.yaml`` in a scratch directory and
restored from the checkpoint (the trained run is only read), on the CPU, with the process's
random generators left as they were. At each step the policy reads every agent's numeric
observation (and action mask) at once, as it did in training, and the slots it plays take
their own actions, by name.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from marlang.config import ConfigError, ExperimentConfig, load_saved_config
from marlang.methods.neural.learner import (
    BENCHMARL_DIR,
    RestoredExperiment,
    benchmarl_configs,
    quiet_libraries,
    task_for,
)


def resolve_checkpoint(spec: str, key: str) -> tuple[Path, Path]:
    """``(run_dir, checkpoint)`` of a ``checkpoint`` value: a neural run's directory (its latest
    checkpoint) or one of its ``benchmarl/<experiment>/checkpoints/checkpoint_<frames>.pt``."""
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".pt":
        run_dir = path.parents[3] if len(path.parents) > 3 else path.parent
        if not (run_dir / "config.yaml").is_file():
            raise ConfigError(f"{key}: {spec!r} is not inside a neural run directory (no config.yaml at "
                              f"{run_dir}); give the run directory")
        return run_dir, path
    if not path.is_dir():
        raise ConfigError(f"{key}: {spec!r} is neither a neural run directory nor a checkpoint file")
    found = list((path / BENCHMARL_DIR).glob("*/checkpoints/checkpoint_*.pt"))
    if not found or not (path / "config.yaml").is_file():
        raise ConfigError(f"{key}: {spec!r} holds no trained neural policy (no {BENCHMARL_DIR}/*/checkpoints/"
                          "checkpoint_*.pt); point it at a run trained with agents.kind: neural")
    return path, max(found, key=lambda p: int(p.stem.rpartition("_")[2]))


@contextlib.contextmanager
def kept_random_state() -> Iterator[None]:
    """Python's, NumPy's and torch's random generators (CPU and CUDA) as they were, whatever
    runs inside (BenchMARL seeds all of them when it builds an experiment)."""
    states = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=range(torch.cuda.device_count()) if torch.cuda.is_available() else []):
            yield
    finally:
        random.setstate(states[0])
        np.random.set_state(states[1])


class NeuralPolicy:
    """The greedy policy of a neural run, for the slots of a text run on the same env."""

    def __init__(self, policy: Any, keys: list[tuple[str, str]], agents: list[str], task_size: int,
                 source: Path) -> None:
        self.policy = policy
        self.keys = keys
        self.agents = agents
        self.task_size = task_size
        self.source = source
        """The checkpoint the policy was restored from."""

    @classmethod
    def load(cls, spec: str, config: ExperimentConfig, key: str) -> NeuralPolicy:
        """The policy ``spec`` names (see `resolve_checkpoint`), checked against ``config``'s
        env: the same env id and number of agents as the run that trained it."""
        run_dir, checkpoint = resolve_checkpoint(spec, key)
        trained = load_saved_config(run_dir / "config.yaml")
        if trained.agents.kind != "neural":
            raise ConfigError(f"{key}: {run_dir} is not a neural run (its agents.kind is {trained.agents.kind!r})")
        ours, theirs = (config.env.id, config.env.n_agents), (trained.env.id, trained.env.n_agents)
        if ours != theirs:
            raise ConfigError(f"{key}: {run_dir} trained on env {theirs[0]!r} with {theirs[1]} agents, and this run "
                              f"plays {ours[0]!r} with {ours[1]}; use a policy trained on this env")
        for field in ("max_steps", "kwargs"):  # an observation may hold the step or the level's make-up
            mine, its = getattr(config.env, field), getattr(trained.env, field)
            if mine != its:
                raise ConfigError(f"{key}: {run_dir} trained with env.{field} {its!r}, and this run has {mine!r}; "
                                  f"its policy reads observations of that env (set env.{field} to {its!r})")
        scratch = Path(tempfile.mkdtemp(prefix="marlang-neural-slot-"))
        try:
            algorithm, model, experiment_config = benchmarl_configs(trained, scratch, checkpoint)
            experiment_config.loggers = []
            experiment_config.evaluation = False
            experiment_config.train_device = experiment_config.buffer_device = "cpu"
            experiment_config.sampling_device = "cpu"
            experiment_config.restore_map_location = "cpu"
            task = task_for(trained)
            with kept_random_state(), quiet_libraries():
                experiment = RestoredExperiment(task=task, algorithm_config=algorithm, model_config=model,
                                                 seed=trained.run.seed, config=experiment_config, callbacks=[])
        except (RuntimeError, ValueError, KeyError) as err:
            raise ConfigError(f"{key}: could not restore {checkpoint}: {str(err).splitlines()[0][:200]}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        policy = experiment.policy
        keys = [k for k in policy.in_keys if isinstance(k, tuple)]
        unknown = [k for k in keys if k[1] not in ("observation", "action_mask")]
        if unknown:
            raise ConfigError(f"{key}: the policy of {run_dir} reads {unknown[0]}, which a slot cannot give it")
        agents = [f"agent_{i}" for i in range(trained.env.n_agents)]
        return cls(policy, keys, agents, int(task.config.get("task_size") or 0), checkpoint)

    def actions(self, env: Any) -> dict[str, str]:
        """Every agent's greedy action (its name) in ``env``'s current state."""
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        inner = getattr(env, "unwrapped", env)
        rows: dict[str, list[Any]] = {}
        for agent in self.agents:
            observation = np.asarray(inner.numeric_observation(agent), dtype=np.float32).reshape(-1)
            if self.task_size:  # LLM-TACA's task inputs: zero outside training, as in its evaluation
                observation = np.concatenate([observation, np.zeros(self.task_size, np.float32)])
            rows.setdefault("observation", []).append(torch.as_tensor(observation))
            mask = inner.action_mask(agent)
            n = inner.action_space(agent).n
            rows.setdefault("action_mask", []).append(
                torch.ones(n, dtype=torch.bool) if mask is None else torch.as_tensor(np.asarray(mask, bool)))
        group = self.keys[0][0]
        fields = {name: torch.stack(rows[name]) for _g, name in self.keys}
        td = TensorDict({group: TensorDict(fields, batch_size=[len(self.agents)])}, batch_size=[])
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            chosen = self.policy(td)[group, "action"].tolist()
        return {a: inner.action_names(a)[int(i)] for a, i in zip(self.agents, chosen, strict=True)}
