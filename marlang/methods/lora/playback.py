"""Playing a trained team back: ``model.adapters=RUN_DIR`` (the run's latest accepted adapters)
or ``RUN_DIR/adapters/<iteration>`` loads each agent's saved LoRA adapter onto the local model,
so the agents act with their trained policies; agents without a saved adapter act with the
base model. Refusals are one line saying what to change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from marlang.methods.lora.team import LoraOptions, TeamAdapters, ValueHeadOptions, files_sha256

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


def attach_trained_adapters(engine: Any, sources: Mapping[str, tuple[str, str]], team: list[str]) -> dict[str, str]:
    """Load trained adapters onto ``engine`` (a `LocalLM`) for the slots in ``sources`` (slot ->
    (the adapters it names: a run directory or RUN_DIR/adapters/<iteration>; the config key that
    named it)), and return each slot's adapter hash (for the manifest). A slot plays the adapter
    its run trained for that slot (or the run's shared one); slots may name different runs, as
    cross-play does, when every run trained one adapter per agent with the same LoRA shape.
    ``team``: every slot of the run. ``ValueError`` (one line, naming the key) when a directory
    holds none for its slots, was trained on another base model, or names agents the team does
    not have."""
    by_dir: dict[Path, list[str]] = {}
    keys: dict[Path, str] = {}
    for agent, (spec, key) in sources.items():
        directory = resolve_adapters_dir(spec, key).resolve()
        by_dir.setdefault(directory, []).append(agent)
        keys.setdefault(directory, key)
    base_id = engine.base_id
    plans: list[tuple[Path, list[str], dict[str, Path], dict[str, Any], bool]] = []
    for directory, slots in by_dir.items():
        key = keys[directory]
        spec_key = key.removesuffix("adapters") + ("model.spec" if key.startswith("team.") else "spec")
        saved = _agent_dirs(directory)
        metas = {name: json.loads((p / ADAPTER_META).read_text()) for name, p in saved.items()}
        shared = [name for name, m in metas.items() if m.get("sharing") == "shared"]
        trained = list(metas[shared[0]].get("agents") or slots) if shared else [a for a in metas if a != "central"]
        unknown = [a for a in trained if a not in team]
        if unknown:
            raise ValueError(f"{key}: {directory} has adapters for {', '.join(unknown)}, which this team "
                             f"does not have (agents: {', '.join(team)}); set env.n_agents to match")
        if not trained:
            raise ValueError(f"{key}: {directory} holds no agent adapters")
        here = [a for a in trained if a in slots]
        if not here:
            raise ValueError(f"{key}: {directory} has adapters for {', '.join(trained)}, none for "
                             f"{', '.join(slots)}; give these slots the run that trained them")
        for agent in here:
            meta = metas[shared[0]] if shared else metas[agent]
            if meta.get("base_id") != base_id:
                raise ValueError(f"{key}: {directory} was trained on base model {meta.get('base_id')!r} "
                                 f"for {agent}, not {base_id!r}; set {spec_key} to the model it was trained on")
        plans.append((directory, here, saved, metas[shared[0]] if shared else metas[here[0]], bool(shared)))
    if len(plans) > 1 and any(shared for *_, shared in plans):
        directory = next(d for d, *_, shared in plans if shared)
        raise ValueError(f"{keys[directory]}: {directory} holds one adapter shared by its team; slots on one "
                         "local model play adapters of several runs only where each run trained one per agent "
                         "(give the slots one run, or put them on separate models)")
    first = plans[0][3]
    lora = LoraOptions(**{k: v for k, v in (first.get("lora") or {}).items() if k in LoraOptions.model_fields})
    heads = first.get("value_head")
    if len(plans) == 1 and plans[0][4]:
        directory, here, saved, meta, _ = plans[0]
        adapters = TeamAdapters(engine.model, list(meta.get("agents") or here), base_id=base_id, sharing="shared",
                                lora=lora, value_head=ValueHeadOptions(**heads) if heads else None)
        adapters.load(directory)
    else:
        adapters = TeamAdapters(engine.model, [a for _, here, *_ in plans for a in here], base_id=base_id,
                                sharing="per_agent", lora=lora, value_head=ValueHeadOptions(**heads) if heads else None)
        for directory, here, saved, _, _ in plans:
            every = len(plans) == 1 and set(here) == {u for u in saved if u != "central"}
            try:  # one run's whole team: its central value head too
                adapters.load(directory, agents=None if every else here)
            except ValueError as err:  # another run's LoRA shape: name the slot's key
                raise ValueError(f"{keys[directory]}: {err}") from None
    engine.attach_adapters(adapters)
    # The hash the training run recorded for each agent (over the saved files), so a
    # play-back's manifest names the same adapters as the run's learner_state.json.
    hashes: dict[str, str] = {}
    for _directory, here, saved, _, _shared in plans:
        found = adapters._per_agent({unit: files_sha256(path) for unit, path in saved.items()})
        hashes.update({a: h for a, h in found.items() if a in here or (a == "central" and len(plans) == 1)})
    return hashes
