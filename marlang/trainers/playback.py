"""Playing a trained team back: ``model.adapters=RUN_DIR`` (the run's latest accepted adapters)
or ``RUN_DIR/adapters/<iteration>`` loads each agent's saved LoRA adapter onto the local model,
so the agents act with their trained policies; agents without a saved adapter act with the
base model. Refusals are one line saying what to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marlang.trainers.adapters import LoraOptions, TeamAdapters, ValueHeadOptions, files_sha256

ADAPTER_META = "marlang_adapter.json"


def resolve_adapters_dir(spec: str) -> Path:
    """The ``adapters/<iteration>`` directory a ``model.adapters`` value names: a run
    directory (its committed adapters, from ``learner_state.json``) or one iteration's."""
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ValueError(f"model.adapters: {spec!r} is not a directory; give a run directory or "
                         "RUN_DIR/adapters/<iteration>")
    if _agent_dirs(path):
        return path
    state_file = path / "learner_state.json"
    if state_file.is_file():
        refs = json.loads(state_file.read_text()).get("adapters") or {}
        parents = {Path(r["path"]).parent for r in refs.values() if r.get("path")}
        if len(parents) == 1:
            # Committed adapters live in RUN/adapters/<iteration>: found under this run
            # directory, wherever it has moved (older runs recorded paths relative to the
            # directory they were started from).
            found = next(iter(parents))
            if _agent_dirs(path / "adapters" / found.name):
                return path / "adapters" / found.name
            if found.is_absolute():
                return found
    iterations = sorted((int(p.name), p) for p in (path / "adapters").glob("*") if p.name.isdigit()) \
        if (path / "adapters").is_dir() else []
    if iterations:
        return iterations[-1][1]
    raise ValueError(f"model.adapters: {spec!r} holds no adapters (no adapters/<iteration>/<agent>/ with "
                     f"{ADAPTER_META}); point it at a run trained with learning.method ppo, magrpo or grpo")


def _agent_dirs(directory: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(directory.iterdir()) if (p / ADAPTER_META).is_file()} \
        if directory.is_dir() else {}


def attach_trained_adapters(engine: Any, spec: str, agents: list[str]) -> dict[str, str]:
    """Load the adapters ``spec`` names onto ``engine`` (a `LocalLM`) for the agents that have
    one; returns each such agent's adapter hash (for the manifest). ``ValueError`` (one line)
    when the directory holds none, they were trained on another base model, or they name
    agents this team does not have."""
    directory = resolve_adapters_dir(spec)
    saved = _agent_dirs(directory)
    metas = {name: json.loads((p / ADAPTER_META).read_text()) for name, p in saved.items()}
    shared = [name for name, m in metas.items() if m.get("sharing") == "shared"]
    trained = list(metas[shared[0]].get("agents") or agents) if shared else [a for a in metas if a != "central"]
    unknown = [a for a in trained if a not in agents]
    if unknown:
        raise ValueError(f"model.adapters: {directory} has adapters for {', '.join(unknown)}, which this team "
                         f"does not have (agents: {', '.join(agents)}); set env.n_agents to match")
    if not trained:
        raise ValueError(f"model.adapters: {directory} holds no agent adapters")
    meta = metas[shared[0]] if shared else metas[trained[0]]
    base_id = f"{engine.model_id}@{engine.weights_id}"
    if meta.get("base_id") != base_id:
        raise ValueError(f"model.adapters: {directory} was trained on base model {meta.get('base_id')!r}, not "
                         f"{base_id!r}; set model.spec to the model it was trained on")
    lora = LoraOptions(**{k: v for k, v in (meta.get("lora") or {}).items() if k in LoraOptions.model_fields})
    heads = meta.get("value_head")
    team = TeamAdapters(engine.model, trained, base_id=base_id, sharing="shared" if shared else "per_agent",
                        lora=lora, value_head=ValueHeadOptions(**heads) if heads else None)
    team.load(directory, agents=None)
    engine.attach_adapters(team)
    # The hash the training run recorded for each agent (over the saved files), so a
    # play-back's manifest names the same adapters as the run's learner_state.json.
    return team._per_agent({unit: files_sha256(path) for unit, path in saved.items()})
