"""Shared records that flow between environments, protocols, agents and learners.

Every arrow in a marlang run (env -> protocol -> episode -> learner) carries one of
these plain dataclasses; each has ``to_dict``/``from_dict`` for the JSONL run files.
`StopFlag` is how a run tells its long-running parts to stop (Ctrl-C); `CallContext` says
where a model call happens (episode, step, seed, iteration) for agents, protocols and learners.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypedDict, TypeVar, cast

if TYPE_CHECKING:
    import asyncio


RecordDict = TypeVar("RecordDict", bound=Mapping[str, Any])
"""The plain-data form of a record: ``dict[str, Any]``, or a TypedDict naming its fields."""


class _Record(Generic[RecordDict]):
    """``to_dict`` / ``from_dict`` of a dataclass record; ``from_dict`` keeps only the fields it
    knows, so records written by another version still load."""

    _copies: ClassVar[bool] = False
    """Whether ``from_dict`` deep-copies (state that is changed in place after loading)."""

    def to_dict(self) -> RecordDict:
        # asdict gives exactly the dataclass's fields, which RecordDict names (the mixin
        # itself is no dataclass, hence the ignore)
        return cast(RecordDict, asdict(self))  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}  # type: ignore[attr-defined]
        return cls(**(copy.deepcopy(known) if cls._copies else known))


@dataclass
class TextObservation(_Record[dict[str, Any]]):
    """What one agent perceives at one step, in words and in structured form."""

    text: str
    """The agent's local view in words (one fact per line)."""
    mission: str
    """The team's shared goal."""
    legal_actions: list[str]
    """Action strings the environment accepts from this agent now."""
    data: dict[str, Any] = field(default_factory=dict)
    """Structured facts (positions, carried object, ...) for critics and scripted agents."""


@dataclass
class Message(_Record[dict[str, Any]]):
    """One utterance in a pre-action conversation."""

    sender: str
    content: str
    round: int = 0
    prompt: str | None = None
    """The exact text the message was generated after, where the model gives it (local
    models): what ``learning.train_messages`` scores the message's tokens after."""


@dataclass
class Decision(_Record[dict[str, Any]]):
    """An agent's chosen action with the reasoning and raw model output behind it."""

    action: str
    thought: str = ""
    raw: str = ""
    valid: bool = True
    """Whether the model's own output named a legal action (after lenient matching)."""
    reprompted: bool = False
    """Whether a second prompt was needed to get a legal action."""
    fallback: bool = False
    """Whether the configured fallback action was used because no legal action was found."""
    logprob: float | None = None
    """log pi(action | prompt) under the acting policy, where the policy has one: for a
    scoring agent the softmax over the legal actions' logits (scores plus ``offsets``), at the
    sampling temperature (1 when greedy). PPO's importance ratios start from it."""
    value: float | None = None
    """The policy's value estimate at this decision, where it has a value head."""
    scores: list[float] | None = None
    """A scoring agent's log p(candidate | prompt) of every legal action, in the
    observation's order (summed token log-probs, GLAM): the policy's logits."""
    prompt: str | None = None
    """The exact text the legal actions were scored after (chat template, thought and
    ``Action:`` included): tokenized again, it gives the same token ids."""
    choice_lead: str = ""
    """What stands between ``prompt`` and each legal action in the scored text (a space)."""
    sampled: bool = False
    """Whether the action was sampled from the softmax (training) rather than the argmax."""
    offsets: list[float] | None = None
    """Added to ``scores`` before the softmax (``agents.calibration: content_free``: minus the
    content-free prior): the policy's logits are scores + offsets."""


@dataclass(frozen=True)
class ScoredChoice:
    """A decision by scoring, as a model that scores choices reports it: the choice taken,
    every choice's score (in the choices' order), log pi of the one taken, the value where the
    answering adapter has a value head, the exact scored prompt and the lead before each
    choice, whether it was sampled, and the offsets added to the scores.

    It travels in the reply's ``response_metadata`` (so a cached reply carries it too):
    `to_metadata` writes its keys there and `from_reply` reads them back.
    """

    choice: str
    scores: tuple[float, ...]
    logprob: float | None = None
    value: float | None = None
    prompt: str | None = None
    lead: str = ""
    sampled: bool = False
    offsets: tuple[float, ...] | None = None

    def to_metadata(self, choices: Sequence[str]) -> dict[str, object]:
        return {"choice_logprobs": dict(zip(choices, self.scores, strict=True)),
                "choice_offsets": None if self.offsets is None else list(self.offsets),
                "policy_logprob": self.logprob, "value": self.value, "scored_prompt": self.prompt,
                "choice_lead": self.lead, "sampled": self.sampled}

    @classmethod
    def from_reply(cls, reply: object, choices: Sequence[str]) -> ScoredChoice | None:
        """The scored choice a reply reports for ``choices``; None when the model scored none
        of them (a chat model that claims choices but only generates)."""
        meta = getattr(reply, "response_metadata", None) or {}
        scores = meta.get("choice_logprobs")
        if not scores or any(c not in scores for c in choices):
            return None
        content = getattr(reply, "content", "")
        logprob, value, offsets = meta.get("policy_logprob"), meta.get("value"), meta.get("choice_offsets")
        return cls(str(content).strip(), tuple(float(scores[c]) for c in choices),
                   None if logprob is None else float(logprob), None if value is None else float(value),
                   meta.get("scored_prompt"), meta.get("choice_lead", ""), bool(meta.get("sampled")),
                   None if offsets is None else tuple(float(o) for o in offsets))


@dataclass
class Step:
    """One joint environment step: what each agent saw, said, thought and did."""

    t: int
    observations: dict[str, TextObservation]
    messages: list[Message]
    decisions: dict[str, Decision]
    rewards: dict[str, float]
    terminated: bool = False
    """Whether any agent's episode ended by reaching a terminal state at this step."""
    truncated: bool = False
    """Whether the episode was cut off (time limit) at this step."""
    info: dict[str, Any] = field(default_factory=dict)
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The environment's per-agent infos after this step (shaped rewards, illegal-action and
    blocked flags, events): what critics and reward models read."""
    terminations: dict[str, bool] = field(default_factory=dict)
    truncations: dict[str, bool] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "observations": {k: v.to_dict() for k, v in self.observations.items()},
            "messages": [m.to_dict() for m in self.messages],
            "decisions": {k: v.to_dict() for k, v in self.decisions.items()},
            "rewards": dict(self.rewards),
            "terminated": self.terminated,
            "truncated": self.truncated,
            "info": self.info,
            "infos": self.infos,
            "terminations": dict(self.terminations),
            "truncations": dict(self.truncations),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        return cls(
            t=d["t"],
            observations={k: TextObservation.from_dict(v) for k, v in d["observations"].items()},
            messages=[Message.from_dict(m) for m in d["messages"]],
            decisions={k: Decision.from_dict(v) for k, v in d["decisions"].items()},
            rewards=d["rewards"],
            terminated=d.get("terminated", False),
            truncated=d.get("truncated", False),
            info=d.get("info", {}),
            infos=d.get("infos", {}),
            terminations=d.get("terminations", {}),
            truncations=d.get("truncations", {}),
        )


@dataclass
class Trajectory:
    """A finished episode: every step, the outcome, and which policies played it."""

    episode: int
    seed: int
    env_id: str
    protocol: str
    agents: list[str]
    steps: list[Step] = field(default_factory=list)
    success: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    final_observations: dict[str, TextObservation] = field(default_factory=dict)
    """What each agent saw after the last step (the state the episode ended in)."""
    iteration: int = 0
    """The learner iteration whose rollouts this episode belongs to."""
    policy_versions: dict[str, int] = field(default_factory=dict)
    """The policy version each agent acted with (0: the initial policy)."""
    phase: str = "train"
    """``train`` (a rollout the learner updates from) or ``eval`` (a candidate policy's check)."""
    group: int | None = None
    """Episodes sharing a group start from the same state (the same env seed): sampled branches."""

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    @property
    def team_return(self) -> float:
        """Sum over steps of the mean reward across agents (shared reward: the team reward)."""
        total = 0.0
        for s in self.steps:
            if s.rewards:
                total += sum(s.rewards.values()) / len(s.rewards)
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode": self.episode,
            "seed": self.seed,
            "env_id": self.env_id,
            "protocol": self.protocol,
            "agents": list(self.agents),
            "success": self.success,
            "n_steps": self.n_steps,
            "return": self.team_return,
            "metrics": self.metrics,
            "iteration": self.iteration,
            "policy_versions": dict(self.policy_versions),
            "phase": self.phase,
            "group": self.group,
            "steps": [s.to_dict() for s in self.steps],
            "final_observations": {k: v.to_dict() for k, v in self.final_observations.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        return cls(
            episode=d["episode"],
            seed=d["seed"],
            env_id=d["env_id"],
            protocol=d["protocol"],
            agents=list(d["agents"]),
            steps=[Step.from_dict(s) for s in d.get("steps", [])],
            success=d.get("success", False),
            metrics=d.get("metrics", {}),
            final_observations={
                k: TextObservation.from_dict(v) for k, v in d.get("final_observations", {}).items()
            },
            iteration=d.get("iteration", 0),
            policy_versions=d.get("policy_versions", {}),
            phase=d.get("phase", "train"),
            group=d.get("group"),
        )


@dataclass
class AdapterRef:
    """A trained weight-space policy of one agent: where its adapter lies and its content hash."""

    path: str
    """The adapter's directory (PEFT format), e.g. ``RUN/adapters/3/agent_0``."""
    hash: str
    """SHA-256 of the adapter's files: part of the response cache key and of the manifest."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AdapterRef:
        return cls(path=str(d["path"]), hash=str(d["hash"]))


class PolicyStateRecord(TypedDict):
    """`PolicyState` as plain data (``to_dict``): how the training loop's checkpoints and
    ``learner_state.json`` hold it."""

    iteration: int
    policies: dict[str, str]
    versions: dict[str, int]
    memories: dict[str, list[str]]
    adapters: dict[str, dict[str, str]]
    extra: dict[str, Any]


@dataclass
class PolicyState(_Record[PolicyStateRecord]):
    """What learning changes, per agent, with versions: policy texts (LangMARL), memories
    (Reflexion), LoRA adapters (weight-space learners), and a learner's own ``extra``
    (optimizer state paths, ...). Plain JSON, so it lives in checkpoints and in
    ``learner_state.json``."""

    iteration: int = 0
    """Updates committed so far (the next rollouts belong to this iteration)."""
    policies: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    """Per agent: how many accepted updates changed its policy (0: the initial one)."""
    memories: dict[str, list[str]] = field(default_factory=dict)
    """Per agent: Reflexion's long-term reflections, oldest first."""
    adapters: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per agent: the committed adapter (`AdapterRef` as a dict); absent: the base model."""
    extra: dict[str, Any] = field(default_factory=dict)

    def adapter(self, agent: str) -> AdapterRef | None:
        ref = self.adapters.get(agent)
        return AdapterRef.from_dict(ref) if ref else None

    _copies: ClassVar[bool] = True


class CandidateRecord(TypedDict):
    """`Candidate` as plain data (``to_dict``): how an update hands it to the training loop."""

    policies: dict[str, str]
    memories: dict[str, list[str]]
    adapters: dict[str, dict[str, str]]
    extra: dict[str, Any]
    records: list[dict[str, Any]]
    counters: dict[str, int | float]


@dataclass
class Candidate(_Record[CandidateRecord]):
    """An update a learner proposes; the training loop accepts, edits or rejects it per agent."""

    policies: dict[str, str] = field(default_factory=dict)
    """New policy text per agent (agents absent here keep theirs)."""
    memories: dict[str, list[str]] = field(default_factory=dict)
    adapters: dict[str, dict[str, str]] = field(default_factory=dict)
    """New adapter per agent (`AdapterRef` as a dict), written before the candidate is proposed."""
    extra: dict[str, Any] = field(default_factory=dict)
    """The learner's own state to carry into `PolicyState.extra` when committed."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """One row per agent for ``updates.jsonl`` (credits, gradients, reflections, losses)."""
    counters: dict[str, int | float] = field(default_factory=dict)
    """Run-level numbers for ``iterations.csv`` (e.g. ``credit_failures``, ``skipped_minibatches``)."""

    _copies: ClassVar[bool] = True


@dataclass(frozen=True)
class RolloutPlan:
    """Which episodes one iteration plays: ids, env seeds and the branch group of each.

    ``branches`` > 1 plays each start state (env seed) that many times with different
    sampling seeds: the G branches of group-relative methods. ``max_steps`` caps each
    episode (fixed-length rollouts for PPO-style learners): an episode reaching it is
    truncated (``truncated=True``, its final observation kept for bootstrapping); None keeps
    the env's limit.
    """

    episodes: tuple[int, ...]
    seeds: tuple[int, ...]
    groups: tuple[int | None, ...]
    max_steps: int | None = None


class Stopped(Exception):
    """Work that found its run's `StopFlag` set gave up there (Ctrl-C); what it had finished
    is kept by whoever finished it (episodes, checkpoints), the rest is done again on resume."""


class StopFlag:
    """Set once when a run is asked to stop (the first Ctrl-C). Long work checks it at each
    point it can stop after and raises `Stopped`: the local engine at every decoding step and
    before each job on its thread, MAGRPO at every tree step and training step, executors
    before each job they have not started. Thread-safe (a `threading.Event`)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def check(self, where: str = "") -> None:
        """Raise `Stopped` if the flag is set; ``where`` says what stopped (for the log)."""
        if self._event.is_set():
            raise Stopped(f"stopped{' ' + where if where else ''}: the run was interrupted")


@dataclass(frozen=True)
class Acting:
    """How one agent acts in an episode, given to the episode by the run for a phase (a
    weight-space learner's sampled training rollouts, its greedy evaluation): the agent's own
    settings stand wherever a field is None. See ``Learner.prepare_rollout``."""

    model: Any = None
    """The chat model the agent's calls go to (a sampling, uncached copy of its own; a rollout
    server's)."""
    adapter: str | None = None
    """The LoRA adapter that answers the agent's calls."""
    action_selection: str | None = None
    """``score`` or ``generate``."""
    action_temperature: float | None = None
    """Acting by scoring: 0 takes the best action, above 0 samples from the softmax."""


@dataclass
class CallContext:
    """Where a model call happens (for accounting and per-call seeds) and the shared call
    limits: what protocols, learners and the run hand an agent or a learner's own calls."""

    episode: int = 0
    step: int = 0
    seed: int = 0
    callbacks: list[Any] = field(default_factory=list)
    limiter: asyncio.Semaphore | None = None
    """Bounds the calls in flight at once (``model.max_concurrency``)."""
    iteration: int = 0
    """The learner iteration (for accounting per iteration)."""
    salt: int = 0
    """Distinguishes sampled branches that share an episode's start (group-relative methods)."""
    acting: Mapping[str, Acting] = field(default_factory=dict)
    """Per agent, how it acts in this episode (the phase's settings); absent: as configured."""

    def for_step(self, step: int) -> CallContext:
        return dataclasses.replace(self, step=step)
