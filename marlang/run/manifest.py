"""The run's manifest (``manifest.json``): what ran, with which versions, seed, prompt hashes
and players, slot by slot."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import Any

from marlang.config import ExperimentConfig, redact_secrets, slot_player
from marlang.prompts import PromptLibrary
from marlang.run.build import learning_method
from marlang.rundir import package_versions


def versions() -> dict[str, str]:
    return package_versions(("marlang", "torch", "transformers", "langchain-core", "langgraph", "minigrid",
                             "pettingzoo", "overcooked-ai", "pymunk"))


def team_players(config: ExperimentConfig, model_id: str,
                 played: Mapping[str, str] | None = None) -> dict[str, str]:
    """What plays each slot (the manifest's ``team``): ``scripted``, its model (``model_id``
    on the top-level model section), ``+ adapters DIR`` and ``(frozen)`` where they apply.
    ``played``: the slots that act with trained adapters (see ``play_back_adapters``); a slot
    whose adapters directory holds none for it plays its base model and is named so."""
    top = config.model.model_copy(update={"adapters": None})
    learns = learning_method(config) != "none"
    out = {}
    for name, slot in config.slots().items():
        bare = slot.model.model_copy(update={"adapters": None})
        if played is not None and slot.model.adapters and name not in played:
            slot = slot.model_copy(update={"model": bare})
        frozen = slot.kind == "llm" and learns and not slot.learn
        out[name] = slot_player(slot, model_id if bare == top else None) + (" (frozen)" if frozen else "")
    return out


def manifest(config: ExperimentConfig, *, setting: str, model_id: str, prompts: PromptLibrary,
             model: Any = None, env: Any = None, adapters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The run's ``manifest.json``: what ran, with which versions, seed and prompt hashes.
    ``adapters``: the trained adapters played back, agent -> hash; ``team`` then names them
    slot by slot, as it does for a ``team:`` section."""
    c = config
    out = {
        "name": c.run.name,
        "setting": setting,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": [redact_secrets(arg) for arg in sys.argv],
        "seed": c.run.seed,
        "env_id": c.env.id,
        "model_id": model_id,
        "learner": learning_method(c),
        "iterations": c.total_iterations,
        "rollouts_per_iteration": c.rollouts_per_iteration,
        "prompt_hashes": prompts.hashes(),
        "versions": versions(),
    }
    if c.plays_back:
        out["played_back"] = c.learning.method
    if c.team or adapters:
        out["team"] = team_players(c, model_id, adapters if adapters else None)
    if adapters:
        out["adapters"] = dict(adapters)
    weights = getattr(model, "weights_id", None)
    if weights:
        out["weights_id"] = weights
    sandbox = getattr(env, "sandbox", None)
    if sandbox is not None:
        # Which isolation ran the generated code: it differs between machines.
        out["sandbox"] = sandbox.isolation.to_dict()
    return out
