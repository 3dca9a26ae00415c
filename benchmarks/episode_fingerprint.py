"""Fingerprints of what a run plays: the check that a change of structure changes no episode.

Runs a PPO and a MAGRPO config on the tiny random model (and, with ``--demo``, the demo grid on
the embedded model), then prints one hash per run of its episodes (every step's observations,
messages, thoughts, actions, rewards, log-probabilities) and of its trained adapters' weights,
with wall-clock fields left out, and one hash of what was played (episode, phase, iteration, seed,
first observations) for runs whose replies are sampled unseeded (MAGRPO's rollouts). Run it
before and after a change and compare the lines:

    python benchmarks/episode_fingerprint.py [--demo] [--out DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

VOLATILE = {"time", "timestamp", "started", "finished", "duration", "duration_s", "latency", "latency_s",
            "wall_s", "wall_seconds", "seconds", "created", "elapsed", "elapsed_s", "path", "run_dir",
            "cached_calls"}  # how many replies the response cache already held: not what was played


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in sorted(value.items()) if k not in VOLATILE}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return round(value, 6)
    return value


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(_clean(obj), sort_keys=True).encode()).hexdigest()[:16]


def fingerprint(run_dir: Path) -> dict[str, Any]:
    """One hash of the run's episodes (in episode order) and one of its adapters' weights."""
    lines = (run_dir / "episodes.jsonl").read_text().splitlines()
    episodes = sorted((json.loads(line) for line in lines if line.strip()), key=lambda e: e.get("episode", 0))
    weights = (sorted(p for p in (run_dir / "adapters").rglob("*.safetensors"))
               if (run_dir / "adapters").exists() else [])
    h = hashlib.sha256()
    for p in weights:
        h.update(p.relative_to(run_dir).as_posix().encode())
        h.update(p.read_bytes())
    # what was played, whatever was said: unseeded sampled replies differ from run to run
    plays = [(e.get("episode"), e.get("phase"), e.get("iteration"), e.get("seed"),
              {a: o.get("text") for a, o in (e["steps"][0]["observations"] if e.get("steps") else {}).items()})
             for e in episodes]
    return {"episodes": len(episodes), "episodes_hash": _digest(episodes), "plays_hash": _digest(plays),
            "adapters": len(weights), "adapters_hash": h.hexdigest()[:16] if weights else None}


def _tiny_runs(out: Path) -> dict[str, dict[str, Any]]:
    from marlang.config import build_config
    from marlang.run import Experiment
    from marlang.testing import tiny_chat_model

    ppo = build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 3},
        "agents": {"chain_of_thought": False, "action_selection": "score"},
        "model": {"cache": False},
        "learning": {"method": "ppo", "iterations": 2, "rollouts": 2, "epochs": 2, "minibatch_size": 4,
                     "eval_episodes": 2, "lr": 1e-3, "lora": {"r": 4, "alpha": 8}},
        "run": {"parallel": 2, "progress": False, "seed": 0},
    })
    magrpo = build_config({
        "env": {"id": "code/humaneval", "n_agents": 2, "max_steps": 1,
                "kwargs": {"structure": "joint", "task_ids": ["HumanEval/0", "HumanEval/2"]}},
        "model": {"cache": False, "max_tokens": 6},
        "agents": {"chain_of_thought": False, "history": 0},
        "learning": {"method": "magrpo", "iterations": 2, "rollouts": 2, "num_generations": 2, "max_new_tokens": 6,
                     "epochs": 1, "eval_episodes": 1, "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        # one episode at a time: sampled replies depend on which requests share a batch
        "run": {"parallel": 1, "progress": False, "seed": 0},
    })
    result = {}
    for name, config, model in (("ppo-tiny", ppo, lambda: tiny_chat_model(max_tokens=8)),
                                ("magrpo-tiny", magrpo, lambda: tiny_chat_model(max_tokens=6, temperature=1.0))):
        run = Experiment(config, out / name, chat_model=model()).run()
        result[name] = fingerprint(Path(run.run_dir))
    return result


def _demo(out: Path) -> dict[str, dict[str, Any]]:
    target = out / "demo"
    subprocess.run([sys.executable, "-m", "marlang.cli", "compare", "configs/demo.yaml", "--out", str(target)],
                   check=True, stdout=subprocess.DEVNULL)
    result = {}
    for d in sorted(p for p in target.iterdir() if (p / "summary.json").exists()):
        if (d / "episodes.jsonl").exists():
            result[f"demo/{d.name}"] = fingerprint(d)
        else:  # a neural run: its evaluation episodes and its per-iteration metrics
            rows = [(d / name).read_text() for name in ("evaluation.json", "metrics.csv") if (d / name).exists()]
            result[f"demo/{d.name}"] = {"evaluation_and_metrics_hash": _digest(rows)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true", help="also run configs/demo.yaml (about 4 minutes)")
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        result = _tiny_runs(out)
        if args.demo:
            result.update(_demo(out))
    for name, fp in result.items():
        print(f"{name:40s} {json.dumps(fp, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
