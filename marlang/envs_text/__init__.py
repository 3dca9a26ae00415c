"""Text environments for language-model agents: PettingZoo-style envs built by id.

``make("babyai/pickup", n_agents=2)`` gives a ``BabyAITextEnv``, ``make("overcooked/cramped-room")``
an ``OvercookedTextEnv``, ``make("pistonball/n10", n_agents=10)`` a ``PistonballTextEnv``;
``list_envs()`` names them all.
"""

import os

# pygame (imported by minigrid) prints a banner on import; library users did not ask for it.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

from marlang.envs_text.babyai import AGENT_COLORS, BabyAITextEnv
from marlang.envs_text.babyai_agent import ACTIONS, AgentState
from marlang.envs_text.babyai_levels import BabyAILevelFactory
from marlang.envs_text.babyai_scripted import ScriptedBabyAITeam, make_scripted_team
from marlang.envs_text.babyai_text import LocalView, observe
from marlang.envs_text.registry import (
    EnvRegistry,
    EnvSpec,
    list_envs,
    make,
    register_env,
)
from marlang.envs_text.spaces import ActionStringSpace, TextObservationSpace

# Overcooked and Pistonball load their packages on first use, not on ``import marlang``.
_LAZY = {
    "OvercookedTextEnv": "marlang.envs_text.overcooked",
    "ScriptedOvercookedTeam": "marlang.envs_text.overcooked_scripted",
    "PistonballTextEnv": "marlang.envs_text.pistonball",
    "PistonballRuleTeam": "marlang.envs_text.pistonball",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ACTIONS",
    "AGENT_COLORS",
    "ActionStringSpace",
    "AgentState",
    "BabyAILevelFactory",
    "BabyAITextEnv",
    "EnvRegistry",
    "EnvSpec",
    "LocalView",
    "OvercookedTextEnv",
    "PistonballRuleTeam",
    "PistonballTextEnv",
    "ScriptedBabyAITeam",
    "ScriptedOvercookedTeam",
    "TextObservationSpace",
    "list_envs",
    "make",
    "make_scripted_team",
    "observe",
    "register_env",
]
