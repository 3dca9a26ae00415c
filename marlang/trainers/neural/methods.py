"""The neural learning methods (``learning.method: mappo | ippo | qmix | vdn``): their options
models, their learner classes (``marlang.registry`` names them by entry point), and the config
check that pairs them with ``agents.kind: neural`` (``check_neural_pairing``, which
``marlang.registry.CONFIG_CHECKS`` names for ``marlang.config``). Light on purpose: nothing
here imports torch or BenchMARL.
"""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator

from marlang.credit.options import CreditOptions, check_credit_config
from marlang.learners.base import Candidate, Learner, LearnerOptions, PolicyState, learner_entry
from marlang.registry import LEARNERS
from marlang.types import Trajectory

if TYPE_CHECKING:
    from marlang.config import ExperimentConfig

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


class NeuralOptions(CreditOptions):
    """``learning.*`` keys every neural method shares (BenchMARL's experiment settings; the
    per-agent credit keys, ``learning.critic`` and the rest, come from ``CreditOptions``)."""

    frames: int = Field(
        100_000, ge=1,
        description="Training budget in environment steps (frames); rounded up to whole batches.",
    )
    n_envs: int = Field(10, ge=1, description="Environments stepped side by side during collection.")
    frames_per_batch: int = Field(
        6000, ge=1, description="Frames collected per training iteration (a multiple of n_envs)."
    )
    lr: float = Field(5e-4, gt=0, description="Adam learning rate.")
    gamma: float = Field(0.99, gt=0, le=1, description="Discount factor.")
    hidden: list[int] = Field(
        default_factory=lambda: [64, 64], description="Hidden layer sizes of every network (MLP)."
    )
    activation: Literal["tanh", "relu"] = "tanh"
    share_policy_params: bool = Field(True, description="One policy network for all agents.")
    max_grad_norm: float | None = Field(5.0, gt=0, description="Gradient norm clip; None: off.")
    evaluation_episodes: int = Field(
        20, ge=1, description="Greedy episodes of the final evaluation (summary.json)."
    )
    evaluation_interval: int | None = Field(
        None, ge=1,
        description="Also evaluate every N frames during training (BenchMARL's evaluation; a "
        "multiple of frames_per_batch); None: only the final evaluation.",
    )
    device: str = Field(
        "cpu", description="Where networks train: cpu | cuda | cuda:N | mps | auto (cuda if available)."
    )
    sampling_device: str | None = Field(
        None, description="Where collection runs (policy forward passes); None: cpu."
    )
    threads: int = Field(
        1, ge=1, description="torch CPU threads while training (small networks are fastest on one)."
    )
    reward_hook: str | None = Field(
        None,
        description="'package.module:function' mapping each collected batch to per-agent rewards "
        "(see marlang.trainers.neural.reward_hook).",
    )
    checkpoint_batches: int = Field(
        10, ge=0, description="Batches between BenchMARL checkpoints (0: only at the end)."
    )
    loggers: list[Literal["csv", "tensorboard", "wandb", "mlflow"]] = Field(
        default_factory=lambda: ["csv"], description="BenchMARL loggers writing under benchmarl/."
    )

    renamed: ClassVar[dict[str, str]] = {"clip_grad_norm": "max_grad_norm"}

    @property
    def clip_grad_norm(self) -> float | None:
        """BenchMARL's name for ``max_grad_norm`` (what its experiment config reads)."""
        return self.max_grad_norm

    @field_validator("frames_per_batch")
    @classmethod
    def _whole_env_steps(cls, v: int, info: ValidationInfo) -> int:
        n_envs = info.data.get("n_envs")
        if n_envs and v % n_envs:
            raise ValueError(f"frames_per_batch ({v}) must be a multiple of learning.n_envs ({n_envs})")
        return v

    @field_validator("hidden")
    @classmethod
    def _positive_sizes(cls, v: list[int]) -> list[int]:
        if not v or any(size < 1 for size in v):
            raise ValueError(f"hidden must list one or more positive layer sizes, got {v}")
        return v

    @field_validator("evaluation_interval")
    @classmethod
    def _whole_batches(cls, v: int | None, info: ValidationInfo) -> int | None:
        batch = info.data.get("frames_per_batch")
        if v is not None and batch and v % batch:
            raise ValueError(f"evaluation_interval ({v}) must be a multiple of learning.frames_per_batch ({batch})")
        return v

    @field_validator("device", "sampling_device")
    @classmethod
    def _known_device(cls, v: str | None) -> str | None:
        if v is not None and not _DEVICE.match(v):
            raise ValueError(f"unknown device {v!r}; valid choices: auto, cpu, cuda, cuda:N, mps")
        return v

    @field_validator("reward_hook")
    @classmethod
    def _importable_hook(cls, v: str | None) -> str | None:
        if v is not None:
            from marlang.trainers.neural.reward_hook import load_reward_hook

            load_reward_hook(v)  # a one-line ValueError when it cannot be imported
        return v

    @property
    def batches(self) -> int:
        """Training iterations: ``frames`` in whole batches, rounded up."""
        return -(-self.frames // self.frames_per_batch)


class NeuralPPOOptions(NeuralOptions):
    """MAPPO and IPPO: clipped PPO with GAE (a centralized or an independent critic). The keys
    have CleanRL's names; BenchMARL's (``clip_epsilon``, ``lmbda``, ...) read them as properties."""

    epochs: int = Field(10, ge=1, description="Passes over each batch (BenchMARL's n_minibatch_iters).")
    minibatch_size: int = Field(400, ge=1, description="Frames per gradient step (at most frames_per_batch).")
    clip_coef: float = Field(0.2, gt=0, description="PPO ratio clip.")
    ent_coef: float = Field(0.01, ge=0, description="Entropy bonus coefficient.")
    vf_coef: float = Field(1.0, ge=0, description="Critic (value) loss coefficient.")
    gae_lambda: float = Field(0.9, ge=0, le=1, description="GAE lambda.")
    share_param_critic: bool = Field(True, description="One critic network for all agents.")

    renamed: ClassVar[dict[str, str]] = {
        **NeuralOptions.renamed, "clip_epsilon": "clip_coef", "entropy_coef": "ent_coef",
        "critic_coef": "vf_coef", "lmbda": "gae_lambda"}

    @property
    def clip_epsilon(self) -> float:
        """BenchMARL's name for ``clip_coef``."""
        return self.clip_coef

    @property
    def entropy_coef(self) -> float:
        """BenchMARL's name for ``ent_coef``."""
        return self.ent_coef

    @property
    def critic_coef(self) -> float:
        """BenchMARL's name for ``vf_coef``."""
        return self.vf_coef

    @property
    def lmbda(self) -> float:
        """BenchMARL's name for ``gae_lambda``."""
        return self.gae_lambda

    @field_validator("minibatch_size")
    @classmethod
    def _fits_batch(cls, v: int, info: ValidationInfo) -> int:
        batch = info.data.get("frames_per_batch")
        if batch and v > batch:
            raise ValueError(f"minibatch_size ({v}) must not exceed learning.frames_per_batch ({batch})")
        return v


PPOOptions = NeuralPPOOptions
"""The former name of `NeuralPPOOptions` (``marlang.trainers.ppo.PPOOptions`` is LoRA PPO's)."""


class ValueDecompositionOptions(NeuralOptions):
    """VDN and QMIX: off-policy Q-learning of per-agent utilities mixed into a team value."""

    frames_per_batch: int = Field(
        1000, ge=1, description="Frames collected per training iteration (a multiple of n_envs)."
    )
    buffer_size: int = Field(100_000, ge=1, description="Replay buffer capacity in frames.")
    batch_size: int = Field(128, ge=1, description="Frames per gradient step sampled from the buffer.")
    optimizer_steps: int = Field(100, ge=1, description="Gradient steps per collected batch.")
    eps_init: float = Field(0.8, ge=0, le=1, description="Initial epsilon of epsilon-greedy exploration.")
    eps_end: float = Field(0.01, ge=0, le=1, description="Final epsilon.")
    exploration_frames: int | None = Field(
        None, ge=1, description="Frames over which epsilon anneals; None: a third of learning.frames."
    )
    target_tau: float = Field(0.005, gt=0, le=1, description="Polyak rate of the target networks.")


class QMIXOptions(ValueDecompositionOptions):
    mixing_embed_dim: int = Field(32, ge=1, description="Hidden size of QMIX's monotonic mixing network.")


class VDNOptions(ValueDecompositionOptions):
    pass


class NeuralLearner(Learner):
    """A neural MARL method in the learner registry. Its runs train through BenchMARL
    (:mod:`marlang.trainers.neural.learner`), not through the LLM training graph."""

    agents_kind: ClassVar[str] = "neural"
    """The ``agents.kind`` this method trains (LLM learners have none: ``llm``)."""
    algorithm: ClassVar[str] = ""
    """BenchMARL's algorithm config class name."""

    @classmethod
    def label(cls, options: CreditOptions) -> str:
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

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        raise RuntimeError(
            f"learning.method {self.name!r} trains neural agents through BenchMARL "
            "(marlang.trainers.neural.train), not through the LLM training loop"
        )


class MAPPOLearner(NeuralLearner):
    name: ClassVar[str] = "mappo"
    options_model: ClassVar[type[LearnerOptions]] = NeuralPPOOptions
    algorithm: ClassVar[str] = "MappoConfig"


class IPPOLearner(NeuralLearner):
    name: ClassVar[str] = "ippo"
    options_model: ClassVar[type[LearnerOptions]] = NeuralPPOOptions
    algorithm: ClassVar[str] = "IppoConfig"


class QMIXLearner(NeuralLearner):
    name: ClassVar[str] = "qmix"
    options_model: ClassVar[type[LearnerOptions]] = QMIXOptions
    algorithm: ClassVar[str] = "QmixConfig"


class VDNLearner(NeuralLearner):
    name: ClassVar[str] = "vdn"
    options_model: ClassVar[type[LearnerOptions]] = VDNOptions
    algorithm: ClassVar[str] = "VdnConfig"


NEURAL_LEARNERS: dict[str, type[NeuralLearner]] = {
    "mappo": MAPPOLearner,
    "ippo": IPPOLearner,
    "qmix": QMIXLearner,
    "vdn": VDNLearner,
}
"""The neural methods; ``marlang.registry`` declares them as ``learning.method`` by entry point
(``"marlang.trainers.neural.methods:MAPPOLearner"``, metadata ``agents_kind="neural"``)."""


def is_neural_method(method: str) -> bool:
    """Whether ``learning.method`` trains neural agents (``agents.kind: neural``): its
    registry metadata ``agents_kind`` says so without importing it; a method registered by
    entry point without that metadata is imported to read its class's ``agents_kind``."""
    kind = LEARNERS.entry(method).metadata.get("agents_kind")
    if kind is None:
        kind = getattr(learner_entry(method).learner_class, "agents_kind", "llm")
    return kind == "neural"


def neural_methods() -> list[str]:
    """The registered methods that train neural agents."""
    return [m for m in LEARNERS if is_neural_method(m)]


def numeric_env_ids() -> list[str]:
    """Registered env ids whose factory names an ``observation_mode`` parameter."""
    from marlang.envs.registry import DEFAULT_REGISTRY

    return [env_id for env_id in DEFAULT_REGISTRY.list() if _takes_observation_mode(env_id) is True]


def _takes_observation_mode(env_id: str) -> bool | None:
    """True or False from the factory's signature; None when it cannot tell (``**kwargs`` or
    not introspectable: the factory then reports a bad argument itself when the run starts)."""
    from marlang.envs.registry import DEFAULT_REGISTRY

    try:
        parameters = inspect.signature(DEFAULT_REGISTRY.spec(env_id).factory).parameters
    except (TypeError, ValueError):
        return None
    if "observation_mode" in parameters:
        return True
    return None if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()) else False


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
    # Credit reaches only losses that use per-agent rewards (MAPPO, IPPO).
    check_credit_config(config, per_agent_loss=NEURAL_LEARNERS.get(method) in (MAPPOLearner, IPPOLearner))


def _all_methods() -> list[str]:
    return LEARNERS.names()

