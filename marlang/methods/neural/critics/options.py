"""The ``learning.*`` keys of per-agent credit for the neural learners (``learning.critic`` and
the LCA ranker's settings), and the config checks that need no env. Light on purpose: pydantic
only, so config validation never loads torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, ValidationInfo, field_validator

from marlang.learners.base import LearnerOptions

if TYPE_CHECKING:
    from marlang.config import ExperimentConfig

CRITICS: tuple[str, ...] = ("none", "llm_mca", "llm_taca", "lca", "difference")
"""The ``learning.critic`` values marlang implements (the Literal below lists the same)."""


def critic_name(name: str) -> str:
    """A critic's one spelling (``llm_mca``, as configs write it) from either one: the command
    line's ``llm-mca`` is the same critic."""
    return name.strip().replace("-", "_")


class CreditOptions(LearnerOptions):
    """Per-agent credit for MAPPO/IPPO: an LLM critic's credit, an LCA reward model or env
    difference rewards."""

    critic: Literal["none", "llm_mca", "llm_taca", "lca", "difference"] = Field(
        "none",
        description="Per-agent credit for the training rewards: none; llm_mca (a centralised LLM "
        "critic reads the batch's timesteps and splits each team reward between the agents); llm_taca "
        "(llm_mca, and the critic also assigns each agent a task, task_size integers appended to its "
        "observation in training, zeros when acting); lca "
        "(Bradley-Terry potentials trained on agent-specific rankings of consecutive states, added "
        "to the team reward); difference (counterfactual difference rewards computed from the env).",
    )
    critic_model: str | None = Field(
        None, description="Model of the LLM critic or ranker (any model spec); None: model.spec."
    )
    critic_every: int = Field(
        1, ge=1,
        description="Training batches between critic calls (llm_mca: the batches in between train on "
        "the team reward split evenly; lca: rank new pairs and retrain, the models keep crediting in between).",
    )
    critic_context: int = Field(
        4096, ge=512,
        description="llm_mca: the critic model's context in tokens; each call's prompt and reply fit "
        "in it, so a batch is read in as many calls (chunks of consecutive timesteps) as it needs.",
    )
    critic_max_tokens: int = Field(
        768, ge=64, description="llm_mca: reply tokens per critic call (also bounds the timesteps per call)."
    )
    critic_normalize: Literal["sum", "none"] = Field(
        "sum",
        description="llm_mca: sum (each timestep's credits rescaled to add up to its team reward) or "
        "none (the critic's numbers as they are).",
    )
    task_size: int = Field(
        2, ge=1, le=8, description="llm_taca: integers in each agent's task input (what they mean: the "
        "env family's mca_tasks prompt file).",
    )
    task_anneal: bool = Field(
        True,
        description="llm_taca: keep a share of the critic's task inputs that falls linearly from 1 at "
        "the first batch to 0 at the end of training (the rest are zeros, as when acting); false: keep all.",
    )
    record_timesteps: bool = Field(
        True,
        description="With a critic: write every trained timestep to credit/timesteps.jsonl (what marlang "
        "export reads; about 0.4 kB per timestep for two agents with small observations).",
    )
    critic_steps: int | None = Field(
        None, ge=1,
        description="llm_mca: timesteps of an annotated batch the critic reads (whole chunks drawn at "
        "random); the others train on the team reward split evenly. None: every timestep.",
    )
    ranker: Literal["llm", "heuristic", "synthetic"] = Field(
        "heuristic",
        description="LCA: who ranks the state pairs: llm (critic_model), heuristic (the env's "
        "rank_states), synthetic (the heuristic, flipped with probability 1 - ranker_accuracy).",
    )
    ranker_accuracy: float = Field(
        0.8, description="LCA synthetic ranker: probability that a query agrees with the heuristic, in (0.5, 1]."
    )
    queries: int = Field(1, ge=1, description="LCA: rankings per state pair and agent (confidence = share).")
    ranker_pairs: int = Field(
        256, ge=1, description="LCA: consecutive-state pairs sampled per critic call (each ranked for every agent)."
    )
    ranker_groups: list[list[str]] | None = Field(
        None,
        description="LCA: agents sharing one scoring model, e.g. [[agent_0, agent_1]]; None: agents "
        "with the same actions and observation size share.",
    )
    ranker_dependence: Literal["auto", "behaviour", "task"] = Field(
        "auto",
        description="LCA llm ranker prompt: behaviour (assume teammates act optimally), task "
        "(what each teammate needs first); auto: task when agents have different actions.",
    )
    bt_hidden: list[int] = Field(
        default_factory=lambda: [64, 64], description="LCA: hidden sizes of each Bradley-Terry scoring MLP."
    )
    bt_epochs: int = Field(
        20, ge=1,
        description="LCA: training per critic call, in passes over that call's new rankings (minibatches "
        "drawn from all rankings so far).",
    )
    bt_lr: float = Field(1e-3, gt=0, description="LCA: Adam learning rate of the scoring models.")
    credit_scale: float = Field(
        1.0, gt=0, description="LCA: factor on sigma(o') - sigma(o) before it is added to the team reward."
    )
    zero_credit_when_still: bool = Field(
        False,
        description="LCA: no credit for an agent whose action is the env's no-op (the paper's "
        "exception; potential rewards then no longer telescope).",
    )

    @field_validator("ranker_accuracy")
    @classmethod
    def _better_than_chance(cls, v: float) -> float:
        if not 0.5 < v <= 1.0:
            raise ValueError(f"ranker_accuracy must lie in (0.5, 1], got {v}")
        return v

    @field_validator("critic", mode="before")
    @classmethod
    def _one_spelling(cls, v: object) -> object:
        return critic_name(v) if isinstance(v, str) else v

    @field_validator("critic_model")
    @classmethod
    def _model_spec(cls, v: str | None) -> str | None:
        if v is not None:
            from marlang.models.factory import parse_model_spec

            parse_model_spec(v)  # a one-line ValueError naming the valid prefixes
        return v

    @field_validator("bt_hidden", "hidden", check_fields=False)
    @classmethod
    def _positive_sizes(cls, v: list[int], info: ValidationInfo) -> list[int]:
        # also the neural learners' ``hidden`` (their options extend these)
        if not v or any(size < 1 for size in v):
            raise ValueError(f"{info.field_name} must list one or more positive layer sizes, got {v}")
        return v


def check_credit_config(config: ExperimentConfig, *, per_agent_loss: bool) -> None:
    """One-line ``ValueError`` for credit settings that cannot work, whatever the env:
    a critic with a method whose loss only sees the team reward (``per_agent_loss`` False:
    BenchMARL's QMIX/VDN average the per-agent rewards, so credit that keeps the sum is
    lost), a critic together with ``reward_hook``, and ranker groups that do not partition
    the agents."""
    o = config.learning.options
    critic = getattr(o, "critic", "none")
    if critic == "none":
        return
    method = config.learning.method
    if not per_agent_loss:
        raise ValueError(
            f"learning.critic {critic!r} cannot reach learning.method {method!r}: its loss sees only the "
            "team reward (the mean of the per-agent rewards); use mappo or ippo"
        )
    if o.reward_hook:
        raise ValueError("learning.critic and learning.reward_hook both replace the training rewards; set one")
    if critic == "lca" and o.ranker_groups is not None:
        names = [f"agent_{i}" for i in range(config.env.n_agents)]
        listed = [a for group in o.ranker_groups for a in group]
        unknown = [a for a in listed if a not in names]
        if unknown:
            raise ValueError(f"learning.ranker_groups: unknown agent {unknown[0]!r}; valid choices: {', '.join(names)}")
        if sorted(listed) != sorted(names) or any(not g for g in o.ranker_groups):
            raise ValueError(
                f"learning.ranker_groups must list every agent exactly once in non-empty groups "
                f"({', '.join(names)}), got {o.ranker_groups}"
            )
