"""The neural learning methods (``learning.method: mappo | ippo | qmix | vdn``): their learner
classes, built from one table (``NEURAL_ALGORITHMS``; ``marlang.registry`` names the classes
by entry point), and the config check that pairs them with ``agents.kind: neural``
(``check_neural_pairing``, which ``marlang.registry.CONFIG_CHECKS`` names for ``marlang.config``).
Light on purpose: nothing here imports torch or BenchMARL.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from marlang.learners.base import Candidate, Learner, LearnerOptions, PolicyState, learner_entry
from marlang.methods.neural.critics.options import check_credit_config
from marlang.methods.neural.options import NeuralPPOOptions, QMIXOptions, VDNOptions
from marlang.registry import LEARNERS
from marlang.types import RolloutPlan, Trajectory

__all__ = [
    "NEURAL_ALGORITHMS", "NEURAL_LEARNERS", "IPPOLearner", "MAPPOLearner", "NeuralAlgorithm", "NeuralLearner",
    "QMIXLearner", "VDNLearner", "check_neural_pairing", "is_neural_method", "neural_methods", "numeric_env_ids",
]

if TYPE_CHECKING:
    from marlang.config import ExperimentConfig

class NeuralLearner(Learner):
    """A neural MARL method in the learner registry. The run's loop drives it like any
    learner: its one update is a BenchMARL run of ``learning.frames``
    (:mod:`marlang.methods.neural.learner`, loaded on first use), which collects its own
    experience, so the loop plays no LLM episodes for it."""

    agents_kind: ClassVar[str] = "neural"
    """The ``agents.kind`` this method trains (LLM learners have none: ``llm``)."""
    algorithm: ClassVar[str] = ""
    """BenchMARL's algorithm config class name."""
    own_experience: ClassVar[bool] = True

    def __init__(self, options: LearnerOptions, context: Any) -> None:
        super().__init__(options, context)
        self._training: Any = None

    @property
    def training(self) -> Any:
        """The BenchMARL side of the run (a `BenchmarlTraining`)."""
        if self._training is None:
            from marlang.methods.neural.learner import BenchmarlTraining

            if self.context.run_dir is None:  # BenchMARL's run, checkpoints and logs live there
                raise ValueError(f"learning.method {self.name} trains in a run directory; "
                                 "give the learner's context a run_dir")
            self._training = BenchmarlTraining(
                self.context.config, self.context.run_dir, reward_hook=self.context.reward_hook,
                callbacks=self.context.callbacks, stop=self.context.stop)
        return self._training

    @property
    def critic(self) -> Any:
        """The per-agent credit critic (``learning.critic``; None without one)."""
        return self.training.critic

    @classmethod
    def label(cls, options: Any) -> str:
        """``mappo``, or with per-agent credit ``mappo+llm_mca``, ``ippo+lca-synthetic-70-q4`` (LCA:
        the ranker, a synthetic ranker's accuracy, queries when more than one), so a grid over
        critics names its rows."""
        critic = getattr(options, "critic", "none")
        if critic == "none":
            return cls.name
        if critic == "lca":
            critic = f"lca-{options.ranker}"
            if options.ranker == "synthetic":
                critic += f"-{round(100 * options.ranker_accuracy)}"
            if options.queries > 1:
                critic += f"-q{options.queries}"
        return f"{cls.name}+{critic}"

    @classmethod
    def iterations(cls, options: LearnerOptions) -> int | None:
        return 1  # BenchMARL trains all of learning.frames in one call: one update

    def rollout_plan(self, iteration: int, first_episode: int, count: int, seed: int) -> RolloutPlan:
        return RolloutPlan((), (), ())  # BenchMARL's collector gathers the experience

    def start(self) -> dict[str, Any]:
        return self.training.start()

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        await self.context.before_calls()  # the loop's checkpoint is on disk before training
        # On a worker thread: a critic's model calls run event loops of their own.
        frames = await asyncio.to_thread(self.training.train)
        return Candidate(extra={"frames": frames}, counters={"episodes": self.training.evaluated})

    def summary(self, setting: str) -> dict[str, Any] | None:
        return self.training.summary(setting)


@dataclass(frozen=True)
class NeuralAlgorithm:
    """One neural method: the name of its learner class (what ``marlang.registry`` names by entry
    point), BenchMARL's algorithm config class (by name: nothing here imports BenchMARL), its
    options model, and whether its loss reads per-agent rewards (where a credit critic's reach)."""

    class_name: str
    benchmarl_config: str
    options: type[LearnerOptions]
    per_agent_loss: bool


NEURAL_ALGORITHMS: dict[str, NeuralAlgorithm] = {
    "mappo": NeuralAlgorithm("MAPPOLearner", "MappoConfig", NeuralPPOOptions, per_agent_loss=True),
    "ippo": NeuralAlgorithm("IPPOLearner", "IppoConfig", NeuralPPOOptions, per_agent_loss=True),
    "qmix": NeuralAlgorithm("QMIXLearner", "QmixConfig", QMIXOptions, per_agent_loss=False),
    "vdn": NeuralAlgorithm("VDNLearner", "VdnConfig", VDNOptions, per_agent_loss=False),
}
"""The neural methods by ``learning.method``; each one's learner class is built from its row."""


def _learner_class(method: str, algorithm: NeuralAlgorithm) -> type[NeuralLearner]:
    return type(algorithm.class_name, (NeuralLearner,), {
        "__module__": __name__,
        "__qualname__": algorithm.class_name,
        "__doc__": f"``learning.method: {method}``: BenchMARL's {algorithm.benchmarl_config}.",
        "name": method,
        "options_model": algorithm.options,
        "algorithm": algorithm.benchmarl_config,
    })


NEURAL_LEARNERS: dict[str, type[NeuralLearner]] = {
    method: _learner_class(method, algorithm) for method, algorithm in NEURAL_ALGORITHMS.items()
}
"""The neural learner classes; ``marlang.registry`` declares them as ``learning.method`` by entry
point (``"marlang.methods.neural.algorithms:MAPPOLearner"``, metadata ``agents_kind="neural"``)."""
MAPPOLearner, IPPOLearner, QMIXLearner, VDNLearner = (NEURAL_LEARNERS[m] for m in ("mappo", "ippo", "qmix", "vdn"))


def is_neural_method(method: str) -> bool:
    """Whether ``learning.method`` trains neural agents (``agents.kind: neural``): its
    registry metadata ``agents_kind`` says so without importing it; a method registered by
    entry point without that metadata is imported to read its class's ``agents_kind``."""
    kind = LEARNERS.entry(method).metadata.get("agents_kind")
    if kind is None:
        kind = (learner_entry(method).learner_class or Learner).agents_kind
    return kind == "neural"


def neural_methods() -> list[str]:
    """The registered methods that train neural agents."""
    return [m for m in LEARNERS if is_neural_method(m)]


def numeric_env_ids() -> list[str]:
    """Registered env ids whose factory names an ``observation_mode`` parameter."""
    from marlang.envs.registry import DEFAULT_REGISTRY

    return [env_id for env_id in DEFAULT_REGISTRY.list() if _takes_observation_mode(env_id) is True]


def _takes_observation_mode(env_id: str) -> bool | None:
    """True or False from the env's spec; None when it cannot tell (``**kwargs`` or not
    introspectable: the env then reports a bad argument itself when the run starts)."""
    from marlang.envs.registry import DEFAULT_REGISTRY

    return DEFAULT_REGISTRY.spec(env_id).takes("observation_mode")


def check_neural_pairing(config: ExperimentConfig) -> None:
    """Raise a one-line ``ValueError`` when agents and learning method do not fit together:
    neural agents need a neural method on an env with numeric observations, and a neural
    method needs neural agents (scripted agents ignore the method, as for every learner)."""
    kind, method = config.agents.kind, config.learning.method
    neural = is_neural_method(method)
    if kind == "neural" and not neural:
        raise ValueError(
            f"agents.kind 'neural' needs a neural learning.method, got {method!r}; "
            f"valid choices: {', '.join(neural_methods())}"
        )
    if kind == "llm" and neural:
        raise ValueError(
            f"learning.method {method!r} trains neural agents: set agents.kind: neural, or pick a "
            f"method for LLM agents: {', '.join(m for m in _all_methods() if not is_neural_method(m))}"
        )
    if kind != "neural":
        return
    if _takes_observation_mode(config.env.id) is False:
        raise ValueError(
            f"env.id {config.env.id!r} has no numeric observations for neural agents; "
            f"valid choices: {', '.join(numeric_env_ids())}"
        )
    for key in ("iterations", "rollouts"):
        if getattr(config.learning, key) is not None:
            raise ValueError(
                f"learning.{key} does not apply to learning.method {method!r}: its budget is "
                "learning.frames (and learning.frames_per_batch per iteration)"
            )
    algorithm = NEURAL_ALGORITHMS.get(method)
    check_credit_config(config, per_agent_loss=algorithm is not None and algorithm.per_agent_loss)


def _all_methods() -> list[str]:
    return LEARNERS.names()

