"""marlang's environments by family, built by id: PettingZoo ``ParallelEnv``s for LLM agents
(text observations) and neural learners (numeric views of the same worlds).

``make("babyai/pickup", n_agents=2)`` gives a ``BabyAITextEnv``, ``make("overcooked/cramped-room")``
an ``OvercookedTextEnv``, ``make("pistonball/n10", n_agents=10)`` a ``PistonballTextEnv``,
``make("lbf/8x8-2p-2f-coop")`` a credit-assignment benchmark; ``list_envs()`` names them all.
Families: ``core`` (the base class, spaces, narration), ``babyai``, ``overcooked``,
``pistonball``, ``credit`` (the credit-assignment benchmarks), ``tasks`` (coding and reasoning
envs with their data); ``registry`` holds every builtin id.
"""

import os

# pygame (imported by minigrid) prints a banner on import; library users did not ask for it.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

from marlang.envs.babyai.agent import ACTIONS, AgentState
from marlang.envs.babyai.drawing import AGENT_COLORS
from marlang.envs.babyai.levels import BabyAILevelFactory
from marlang.envs.babyai.scripted import ScriptedBabyAITeam, make_scripted_team
from marlang.envs.babyai.text import BabyAITextEnv
from marlang.envs.babyai.view import LocalView, observe
from marlang.envs.core.base import MultiAgentEnv
from marlang.envs.core.numeric import NumericTextEnv, StepOutcome
from marlang.envs.core.spaces import ActionStringSpace, TextObservationSpace
from marlang.envs.registry import (
    EnvRegistry,
    EnvSpec,
    list_envs,
    make,
    register_env,
    register_marl_envs,
)
from marlang.lazy import lazy_getattr

# Overcooked and Pistonball load their packages on first use, not on ``import marlang``.
_LAZY = {
    "marlang.envs.overcooked.text": ("OvercookedTextEnv",),
    "marlang.envs.overcooked.scripted": ("ScriptedOvercookedTeam",),
    "marlang.envs.pistonball.text": ("PistonballTextEnv", "PistonballRuleTeam"),
}
__getattr__ = lazy_getattr(__name__, _LAZY)


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
    "MultiAgentEnv",
    "NumericTextEnv",
    "OvercookedTextEnv",
    "PistonballRuleTeam",
    "PistonballTextEnv",
    "ScriptedBabyAITeam",
    "ScriptedOvercookedTeam",
    "StepOutcome",
    "TextObservationSpace",
    "list_envs",
    "make",
    "make_scripted_team",
    "observe",
    "register_env",
    "register_marl_envs",
]
