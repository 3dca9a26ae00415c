"""Text environments for language-model agents: PettingZoo-style envs built by id.

``make("babyai/pickup", n_agents=2)`` gives a ``BabyAITextEnv``; ``list_envs()`` names them all.
"""

import os

# pygame (imported by minigrid) prints a banner on import; library users did not ask for it.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

from marlang.envs_text.babyai import (
    ACTIONS,
    AGENT_COLORS,
    AgentState,
    BabyAITextEnv,
)
from marlang.envs_text.babyai_scripted import ScriptedBabyAITeam, make_scripted_team
from marlang.envs_text.babyai_text import LocalView, observe
from marlang.envs_text.registry import (
    BabyAILevelFactory,
    EnvRegistry,
    EnvSpec,
    list_envs,
    make,
    register_env,
)
from marlang.envs_text.spaces import ActionStringSpace, TextObservationSpace

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
    "ScriptedBabyAITeam",
    "TextObservationSpace",
    "list_envs",
    "make",
    "make_scripted_team",
    "observe",
    "register_env",
]
