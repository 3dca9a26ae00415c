"""Playing a trained team back: ``model.adapters=RUN_DIR`` (the run's latest accepted adapters)
or ``RUN_DIR/adapters/<iteration>`` loads each agent's saved LoRA adapter onto the local model,
so the agents act with their trained policies; agents without a saved adapter act with the
base model. Refusals are one line saying what to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marlang.lora.team import LoraOptions, TeamAdapters, ValueHeadOptions, files_sha256

ADAPTER_META = "marlang_adapter.json"


def resolve_adapters_dir(spec: str, key: str = "model.adapters") -> Path:
    """The ``adapters/<iteration>`` directory a ``model.adapters`` value (config key ``key``)
    names: a run directory (its committed adapters, from ``learner_state.json``) or one
    iteration's."""
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise ValueError(f"{key}: {spec!r} is not a directory; give a run directory or "
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
    raise ValueError(f"{key}: {spec!r} holds no adapters (no adapters/<iteration>/<agent>/ with "
                     f"{ADAPTER_META}); point it at a run trained with learning.method ppo, magrpo or grpo")


def _agent_dirs(directory: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(directory.iterdir()) if (p / ADAPTER_META).is_file()} \
        if directory.is_dir() else {}


def attach_trained_adapters(engine: Any, spec: str, agents: list[str], team: list[str] | None = None,
                            key: str = "model.adapters") -> dict[str, str]:
    """Load the adapters ``spec`` names onto ``engine`` (a `LocalLM`) for those of ``agents``
    (the slots on this engine; ``team``: every slot, default ``agents``) that have one;
    returns each such agent's adapter hash (for the manifest). A run that trained slots on
    several base models saved them side by side: each engine takes its own slots'.
    ``ValueError`` (one line) when the directory holds none for these slots, they were
    trained on another base model, or it names agents the team does not have (``key``: the
    config key that gave ``spec``, named in the errors)."""
    team = list(team or agents)
    directory = resolve_adapters_dir(spec, key)
    spec_key = key.removesuffix("adapters") + ("model.spec" if key.startswith("team.") else "spec")
    saved = _agent_dirs(directory)
    metas = {name: json.loads((p / ADAPTER_META).read_text()) for name, p in saved.items()}
    shared = [name for name, m in metas.items() if m.get("sharing") == "shared"]
    trained = list(metas[shared[0]].get("agents") or agents) if shared else [a for a in metas if a != "central"]
    unknown = [a for a in trained if a not in team]
    if unknown:
        raise ValueError(f"{key}: {directory} has adapters for {', '.join(unknown)}, which this team "
                         f"does not have (agents: {', '.join(team)}); set env.n_agents to match")
    if not trained:
        raise ValueError(f"{key}: {directory} holds no agent adapters")
    here = [a for a in trained if a in agents]
    if not here:
        raise ValueError(f"{key}: {directory} has adapters for {', '.join(trained)}, none for "
                         f"{', '.join(agents)}; give these slots the run that trained them")
    base_id = f"{engine.model_id}@{engine.weights_id}"
    for agent in here:
        meta = metas[shared[0]] if shared else metas[agent]
        if meta.get("base_id") != base_id:
            raise ValueError(f"{key}: {directory} was trained on base model {meta.get('base_id')!r} "
                             f"for {agent}, not {base_id!r}; set {spec_key} to the model it was trained on")
    lora = LoraOptions(**{k: v for k, v in (meta.get("lora") or {}).items() if k in LoraOptions.model_fields})
    heads = meta.get("value_head")
    adapters = TeamAdapters(engine.model, here if not shared else trained, base_id=base_id,
                            sharing="shared" if shared else "per_agent", lora=lora,
                            value_head=ValueHeadOptions(**heads) if heads else None)
    adapters.load(directory, agents=None if here == trained else here)  # all: with a central head
    engine.attach_adapters(adapters)
    # The hash the training run recorded for each agent (over the saved files), so a
    # play-back's manifest names the same adapters as the run's learner_state.json.
    hashes = adapters._per_agent({unit: files_sha256(path) for unit, path in saved.items()})
    return {a: h for a, h in hashes.items() if a in here or a == "central"}
