"""The annotated dataset of a neural run with per-agent credit: every timestep of every training
batch, with the team reward, each agent's observation, action, env reward and the credit it
trained on, and what the critic said about it (LLM-MCA's explanation, LCA's rankings).

During the run, ``TimestepWriter`` appends each batch's timesteps to ``credit/timesteps.jsonl``
(right after the critic replaced the rewards). ``export_dataset`` turns that file into a
Hugging Face ``datasets``-loadable folder (``marlang export RUN_DIR``): ``data/train-*.parquet``
or ``data/train.jsonl`` and a README card naming the env, the critic, the model and the frames.
A run resumed from a checkpoint collects again the batches after it: the export keeps the last
collection of each iteration.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from marlang.rundir import appending

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase

TIMESTEPS_FILE = "timesteps.jsonl"
CREDIT_DIR = "credit"
FORMATS = ("parquet", "jsonl")
COLUMNS: dict[str, str] = {
    "iteration": "training iteration (batch) the timestep was collected in",
    "env_index": "which of the run's parallel envs (learning.n_envs) it came from",
    "position": "its place in the batch (env-major: env_index * steps_per_env + step)",
    "episode": "the collector's trajectory id (one per episode)",
    "agents": "the agents' names, in the order of every per-agent list",
    "observations": "each agent's numeric observation before the step",
    "actions": "each agent's action, by name",
    "action_ids": "each agent's action index",
    "rewards": "each agent's reward from the env",
    "team_reward": "the team reward (the mean of the agents' env rewards)",
    "credits": "each agent's training reward after the critic (its credit)",
    "done": "whether the episode ended at this step",
    "explanation": "the critic's words about this timestep (LLM-MCA's why; empty where none)",
    "missed": "agents the critic's reply gave no credit (LLM-MCA; they got the even split)",
    "rankings": "LCA: per agent, the ranker's answers for this step (+1 better, -1 worse, 0 tie); [] if unranked",
    "tasks": "LLM-TACA: per agent, the task the critic assigned at this step; [] where none",
}


class TimestepWriter:
    """Appends every timestep of each training batch to ``credit/timesteps.jsonl``."""

    def __init__(self, run_dir: str | Path, agents: list[str], action_names: Mapping[str, list[str]]) -> None:
        self.path = Path(run_dir) / CREDIT_DIR / TIMESTEPS_FILE
        self.session = time.time_ns()
        """Tells this process's rows from those of a run it resumed (the same iteration collected again)."""
        self.agents = list(agents)
        self.action_names = {a: list(names) for a, names in action_names.items()}

    def write(self, iteration: int, batch: TensorDictBase, env_rewards: torch.Tensor,
              annotations: Mapping[int, Mapping[str, Any]] | None = None) -> int:
        """Write ``batch`` (after the critic; ``env_rewards`` from before it); returns the rows."""
        n = len(self.agents)
        n_envs = int(batch.batch_size[0]) if len(batch.batch_size) > 1 else 1
        done = batch.get(("next", "done")).reshape(-1).tolist()
        # Rounded once for the whole batch (per-number rounding in Python was most of the cost).
        obs = np.round(batch.get(("agents", "observation")).double().reshape(len(done), n, -1).cpu().numpy(),
                       5).tolist()
        actions = batch.get(("agents", "action")).reshape(-1, n).tolist()
        env = env_rewards.double().reshape(-1, n).cpu().numpy()
        rewards, team = np.round(env, 6).tolist(), np.round(env.mean(-1), 6).tolist()
        credits = np.round(batch.get(("next", "agents", "reward")).double().reshape(-1, n).cpu().numpy(), 6).tolist()
        episodes = (batch.get(("collector", "traj_ids")).reshape(-1).tolist()
                    if ("collector", "traj_ids") in batch.keys(True) else [None] * len(done))
        steps = len(done) // n_envs
        annotations = annotations or {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with appending(self.path) as fh:
            for p in range(len(done)):
                note = annotations.get(p, {})
                row = {
                    "session": self.session, "iteration": iteration, "env_index": p // steps, "position": p,
                    "episode": episodes[p],
                    "agents": self.agents, "observations": obs[p],
                    "actions": [self.action_names[a][int(actions[p][i])] for i, a in enumerate(self.agents)],
                    "action_ids": [int(x) for x in actions[p]], "rewards": rewards[p],
                    "team_reward": team[p], "credits": credits[p],
                    "done": bool(done[p]), "explanation": str(note.get("why", "")),
                    "missed": list(note.get("missed", [])),
                    "rankings": [list(note["rankings"].get(a, [])) for a in self.agents] if "rankings" in note else [],
                    "tasks": [list(note["tasks"][a]) for a in self.agents] if "tasks" in note else [],
                }
                fh.write(json.dumps(row) + "\n")
        return len(done)


def read_timesteps(run_dir: str | Path) -> Iterator[dict[str, Any]]:
    """The run's timesteps, the last collection of each iteration only (see the module doc)."""
    path = Path(run_dir) / CREDIT_DIR / TIMESTEPS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: only neural runs with learning.critic record their timesteps")
    blocks: dict[int, list[dict[str, Any]]] = {}
    current: tuple[int, Any] | None = None
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by an interruption
            it = int(row["iteration"])
            if (it, row.get("session")) != current:  # a new block: a recollected iteration replaces
                for stale in [k for k in blocks if k >= it]:  # the old one and the ones after it
                    del blocks[stale]
                blocks[it] = []
                current = (it, row.get("session"))
            row.pop("session", None)
            blocks[it].append(row)
    for it in sorted(blocks):
        yield from blocks[it]


def export_dataset(run_dir: str | Path, out: str | Path | None = None, fmt: str = "parquet") -> tuple[Path, int]:
    """Write the run's annotated dataset into ``out`` (default ``RUN_DIR/dataset``); returns the
    folder and the number of timesteps."""
    if fmt not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"{run_dir} is not a run directory (no manifest.json)")
    manifest = json.loads(manifest_path.read_text())
    config_path = run_dir / "config.yaml"
    if config_path.exists():
        import yaml

        manifest = {**manifest, "config": yaml.safe_load(config_path.read_text()) or {}}
    rows = list(read_timesteps(run_dir))
    if not rows:
        raise ValueError(f"{run_dir} recorded no training timesteps yet")
    out = Path(out) if out is not None else run_dir / "dataset"
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    for old in data.glob("train*"):
        old.unlink()
    if fmt == "jsonl":
        with open(data / "train.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(row) + "\n" for row in rows)
        pattern = "data/train.jsonl"
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), data / "train-00000-of-00001.parquet")
        pattern = "data/train-*.parquet"
    (out / "README.md").write_text(dataset_card(manifest, rows, pattern))
    return out, len(rows)


def dataset_card(manifest: Mapping[str, Any], rows: list[dict[str, Any]], pattern: str) -> str:
    """The README card: the ``configs`` header ``datasets`` reads, then what the data is
    (``manifest`` is the run's manifest with its ``config.yaml`` under ``config``)."""
    config = manifest.get("config", {})
    learning = config.get("learning", {})
    critic = manifest.get("critic") or {"critic": learning.get("critic", "none")}
    critic_model = learning.get("critic_model") or config.get("model", {}).get("spec")
    env = config.get("env", {}).get("id", "?")
    iterations = len({r["iteration"] for r in rows})
    lines = [
        "---", "configs:", "- config_name: default", "  data_files:", "  - split: train", f"    path: {pattern}",
        "tags:", "- multi-agent-reinforcement-learning", "- credit-assignment", "---", "",
        f"# Credit-annotated timesteps: {env}, critic {critic.get('critic')}", "",
        ("Every timestep of the training batches of one marlang run, with the team reward and each agent's "
         "credit (the reward it trained on)."), "",
        f"- env: `{env}` ({len(rows[0]['agents'])} agents: {', '.join(rows[0]['agents'])})",
        f"- learning method: `{learning.get('method', '?')}`, seed {config.get('run', {}).get('seed', '?')}",
        f"- critic: `{critic.get('critic')}`" + (f", model `{critic_model}`" if critic.get("critic") in
                                                 ("llm_mca", "lca") else ""),
        f"- frames: {len(rows)} timesteps in {iterations} batches",
        f"- marlang {manifest.get('versions', {}).get('marlang', '?')}", "",
        "Load it with `datasets.load_dataset(\"<this folder>\", split=\"train\")`.", "",
        "| column | meaning |", "|---|---|",
        *[f"| `{name}` | {meaning} |" for name, meaning in COLUMNS.items()], "",
        "The critic's settings, as the run's manifest records them:", "", "```json",
        json.dumps(critic, indent=2, default=str), "```", "",
    ]
    return "\n".join(lines)
