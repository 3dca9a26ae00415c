"""marlang: multi-agent reinforcement learning with language-model agents.

The public API is re-exported here lazily, so ``import marlang`` (and the CLI's config
checks) stay fast until a model or environment is actually needed.
"""

from __future__ import annotations

from marlang.lazy import home_of_each, lazy_getattr

__version__ = "0.1.0"

_EXPORTS = {
    "marlang.config": ("ExperimentConfig", "load_config", "ConfigError"),
    "marlang.types": ("TextObservation", "Message", "Decision", "Step", "Trajectory"),
    "marlang.agents": ("LLMAgent", "ReflexionMemory", "parse_action"),
    "marlang.graphs": (
        "register_protocol", "build_protocol", "list_protocols", "build_episode_graph", "run_episode",
    ),
    "marlang.envs:make": ("make_env",),
    "marlang.envs": ("register_env", "list_envs"),
    "marlang.models": ("load_chat_model",),
    "marlang.usergraph.marks": ("prompt", "chat_model"),
    "marlang.run.experiment": ("Experiment", "run_experiment"),
    "marlang.evaluation.compare": ("run_comparison",),
}

__all__ = list(home_of_each(_EXPORTS))

__getattr__ = lazy_getattr(__name__, _EXPORTS)
