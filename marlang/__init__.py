"""marlang: multi-agent reinforcement learning with language-model agents.

The public API is re-exported here lazily, so ``import marlang`` (and the CLI's config
checks) stay fast until a model or environment is actually needed.
"""

from __future__ import annotations

from marlang.lazy import lazy_getattr

__version__ = "0.1.0"

_EXPORTS = {
    "ExperimentConfig": "marlang.config",
    "load_config": "marlang.config",
    "ConfigError": "marlang.config",
    "TextObservation": "marlang.types",
    "Message": "marlang.types",
    "Decision": "marlang.types",
    "Step": "marlang.types",
    "Trajectory": "marlang.types",
    "LLMAgent": "marlang.agents",
    "ReflexionMemory": "marlang.agents",
    "parse_action": "marlang.agents",
    "register_protocol": "marlang.graphs",
    "build_protocol": "marlang.graphs",
    "list_protocols": "marlang.graphs",
    "build_episode_graph": "marlang.graphs",
    "run_episode": "marlang.graphs",
    "make_env": "marlang.envs:make",
    "register_env": "marlang.envs",
    "list_envs": "marlang.envs",
    "load_chat_model": "marlang.models",
    "Experiment": "marlang.run.experiment",
    "run_experiment": "marlang.run.experiment",
    "run_comparison": "marlang.evaluation.compare",
}

__all__ = list(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
