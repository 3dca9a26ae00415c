"""Neural MARL learners (MAPPO, IPPO, QMIX, VDN) through BenchMARL on marlang's envs, with a
per-agent reward hook for LLM critics. ``learning.method`` selects one; a run of it is an
ordinary run (``marlang.run_experiment(config, out, reward_hook=..., callbacks=...)``).

Only the options models load with the package; torch, torchrl and BenchMARL load on first use.
"""

from __future__ import annotations

from marlang.lazy import lazy_getattr
from marlang.methods.neural.algorithms import NEURAL_LEARNERS, check_neural_pairing, is_neural_method
from marlang.methods.neural.options import NeuralOptions, NeuralPPOOptions, QMIXOptions, VDNOptions
from marlang.methods.neural.reward_hook import RewardHook, load_reward_hook

_LAZY = {
    "marlang.methods.neural.learner": ("BenchmarlTraining", "benchmarl_configs"),
    "marlang.methods.neural.benchmarl_task": ("MarlangTask", "NumericParallelEnv"),
    "marlang.methods.neural.callbacks": ("RewardHookCallback", "IterationRecorder"),
}
__getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "NEURAL_LEARNERS",
    "BenchmarlTraining",
    "IterationRecorder",
    "MarlangTask",
    "NeuralOptions",
    "NeuralPPOOptions",
    "NumericParallelEnv",
    "QMIXOptions",
    "RewardHook",
    "RewardHookCallback",
    "VDNOptions",
    "benchmarl_configs",
    "check_neural_pairing",
    "is_neural_method",
    "load_reward_hook",
]
