"""Credit-assignment benchmark envs with numeric and text observations (``NumericTextEnv``):
the climbing game, level-based foraging, robotic warehouse, Pistonball and BabyAI, for neural
MARL learners and LLM agents alike. ``register_marl_envs`` adds their ids to an env registry.
"""

from marlang.envs_marl.base import NumericTextEnv, StepOutcome
from marlang.envs_marl.registration import LazyEnvFactory, register_marl_envs

__all__ = ["LazyEnvFactory", "NumericTextEnv", "StepOutcome", "register_marl_envs"]
