"""The training loop of every learner as one LangGraph state machine, and its node bodies:

    rollout -> update (the learner's own subgraph) -> [evaluate] -> [review] -> commit -> rollout | end

``rollout`` plays the iteration's K episodes with the current policy state; the learner's
update subgraph proposes a candidate; ``evaluate`` (``learning.accept: improved``) plays
fresh episodes with it; ``review`` (``learning.review: true``) pauses for a person;
``commit`` applies what was accepted and writes the run files. With a checkpointer, a run
that dies resumes at the last finished node (inside the update subgraph too). The state is
plain JSON; trajectories stay in the run directory.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from marlang.agents import CallContext, LLMAgent
from marlang.config import ExperimentConfig
from marlang.envs.core.base import MultiAgentEnv
from marlang.graphs.episode import DecideFn, EpisodeGraph, SlotTeam, mixed_decider, run_episode, scripted_decider
from marlang.learners import Learner
from marlang.models.accounting import UsageRecorder
from marlang.run.commit import decide_commit, review_payload
from marlang.run.record import RunRecord, episode_metrics
from marlang.run.state import EvaluationRecord, TrainingState
from marlang.rundir import EVAL_EPISODE_BASE, RunDirectory
from marlang.seeds import env_seeds
from marlang.types import Acting, Candidate, PolicyState, RolloutPlan, Trajectory

if TYPE_CHECKING:
    from marlang.methods.neural.slot_policy import NeuralPolicy
    from marlang.usergraph import GraphPlayer

logger = logging.getLogger(__name__)

EVAL_BASELINE_OFFSET = 500_000
"""A check's episodes with the current policies: the candidate's episode ids plus this."""


@dataclass(frozen=True)
class LoopOptions:
    """The loop's own settings, read once from the config: ``learning.accept``,
    ``learning.review`` and ``learning.eval_rollouts`` (``config.learning.loop``, taken by a
    method that rewrites policy texts; any other, and a run that does not learn, gets the
    defaults)."""

    accept: str = "always"
    """``always`` commits every candidate; ``improved`` only one that plays no worse."""
    review: bool = False
    """Pause for a person before each commit."""
    eval_rollouts: int = 3
    """Episodes a candidate's check plays (and as many with the current policies)."""
    iterations: int | None = None
    """Iterations the learner fixes (a neural learner: 1); None: ``learning.iterations``, or
    ``run.episodes`` / K."""

    @classmethod
    def from_config(cls, config: ExperimentConfig, learner: type[Learner] | None = None) -> LoopOptions:
        """The options of a run of ``config`` driving ``learner`` (its class; None: a run
        that does not learn, with the defaults)."""
        if learner is None:
            return cls()
        loop = config.learning.loop
        return cls(accept=loop.accept, review=loop.review, eval_rollouts=loop.eval_rollouts,
                   iterations=learner.iterations(config.learning.options))


def build_training_graph(loop: RunLoop, learner: Learner, options: LoopOptions = LoopOptions(),
                         checkpointer: Any = None) -> Any:
    """Compile the loop for ``learner``; ``loop`` plays episodes and writes the run.

    The graph's input is ``{"policy": ..., "rollouts": K, "next_episode": 0}``."""

    async def rollout(state: TrainingState) -> TrainingState:
        policy = PolicyState.from_dict(state["policy"])
        k = int(state["rollouts"])
        first = int(state.get("next_episode", policy.iteration * k))
        episodes = await loop.rollout(policy, first, k)
        return {"episodes": episodes, "next_episode": max(episodes, default=first - 1) + 1,
                "candidate": None, "evaluation": None, "review": None}

    async def evaluate(state: TrainingState) -> TrainingState:
        policy = PolicyState.from_dict(state["policy"])
        candidate = Candidate.from_dict(state["candidate"] or {})
        return {"evaluation": await loop.evaluate(policy, candidate, state["episodes"])}

    async def review_node(state: TrainingState) -> TrainingState:
        decision = interrupt(loop.review_payload(state))
        return {"review": decision}

    async def commit(state: TrainingState) -> TrainingState:
        policy = await loop.commit(state)
        return {"policy": policy.to_dict(), "candidate": None, "evaluation": None, "review": None}

    def next_iteration(state: TrainingState) -> str:
        return END if loop.finished(state) else "rollout"

    builder = StateGraph(TrainingState)
    builder.add_node("rollout", rollout)
    builder.add_edge(START, "rollout")
    builder.add_node("update", learner.update_graph())
    builder.add_edge("rollout", "update")
    improved = options.accept == "improved"
    builder.add_edge("update", "evaluate" if improved else ("review" if options.review else "commit"))
    if improved:
        builder.add_node("evaluate", evaluate)
        builder.add_edge("evaluate", "review" if options.review else "commit")
    if options.review:
        builder.add_node("review", review_node)
        builder.add_edge("review", "commit")
    builder.add_node("commit", commit)
    builder.add_conditional_edges("commit", next_iteration, ["rollout", END])
    return builder.compile(checkpointer=checkpointer, name=f"training:{learner.name}")


class Progress(Protocol):
    """A progress bar of training episodes (tqdm's)."""

    n: float | int
    total: float | int | None

    def update(self, n: float | None = 1) -> Any: ...

    def close(self) -> None: ...


@dataclass
class RunLoop:
    """The node bodies of one run's training graph: rollouts, checks, commits. Every part is
    given at construction (`marlang.run.build.build_run` makes them, the driver adds the
    record and the progress bar); ``played`` and ``rollouts`` are the invocation's state."""

    config: ExperimentConfig
    record: RunRecord
    setting: str
    make_env: Callable[[], MultiAgentEnv]
    learner: Learner
    episode_graph: EpisodeGraph
    recorder: UsageRecorder
    call: CallContext
    """The run's call context (seed, call callbacks, concurrency limit); each episode's adds
    its episode and iteration."""
    options: LoopOptions = field(default_factory=LoopOptions)
    agents: dict[str, LLMAgent] = field(default_factory=dict)
    decide: DecideFn | None = None
    """The protocol's decider (None: no LLM slot)."""
    neural: Mapping[str, NeuralPolicy] = field(default_factory=dict)
    """The slots trained neural policies play: slot -> policy."""
    on_episode: Callable[[Trajectory], None] | None = None
    player: GraphPlayer | None = None
    """Plays the episodes of a run of a user's graph (``graph:``), in place of env and protocol."""
    progress: Progress | None = None
    played: int = 0
    """Episodes this invocation played (and wrote)."""
    rollouts: int | None = None
    """K as stored in the training checkpoint (None: not started yet, the config's K)."""
    _envs: list[MultiAgentEnv] = field(default_factory=list)
    _free_envs: asyncio.Queue[MultiAgentEnv] | None = None
    scripted_slots: list[str] = field(init=False)
    """The slots the env's scripted agent plays (all of them in a scripted team)."""
    scripted: bool = field(init=False)
    """Whether every slot is the env's scripted agent."""

    def __post_init__(self) -> None:
        self.scripted_slots = [a for a, s in self.config.slots().items() if s.kind == "scripted"]
        self.scripted = self.config.all_scripted

    @property
    def run_dir(self) -> RunDirectory:
        return self.record.run_dir

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []

    # how long the run is -------------------------------------------------------------------
    def total_iterations(self) -> int:
        """``learning.iterations``, or ``run.episodes`` / K rounded up, with the K the run
        started with (``rollouts``), not today's ``run.parallel``."""
        c = self.config
        if self.options.iterations is not None:
            return self.options.iterations
        if c.iterations_set or self.rollouts is None:
            return c.total_iterations
        return -(-c.run.episodes // self.rollouts)

    def finished(self, state: TrainingState) -> bool:
        """Whether the training state after a commit has nothing left to play: its
        ``learning.iterations`` done, or (a run measured in episodes) ``run.episodes`` training
        episodes played, a partly filled last iteration counting only its own episodes."""
        iteration = int(state["policy"]["iteration"])
        if self.options.iterations is not None or self.config.iterations_set or self.rollouts is None:
            return iteration >= self.total_iterations()
        return int(state.get("next_episode", iteration * self.rollouts)) >= self.config.run.episodes

    def iterations_left(self, state: TrainingState | None) -> int:
        """At most how many iterations a run in ``state`` (None: not started) still plays."""
        fixed = self.options.iterations is not None or self.config.iterations_set
        if not state or fixed or self.rollouts is None:
            return self.total_iterations()
        left = self.config.run.episodes - int(state.get("next_episode", 0))
        return 1 + max(0, -(-left // self.rollouts))

    # the nodes ---------------------------------------------------------------------------------
    def trajectory(self, episode: int) -> Trajectory:
        return self.record.episodes.trajectory(episode)

    def trajectories(self, episodes: list[int]) -> list[Trajectory]:
        return self.record.trajectories(episodes)

    async def rollout(self, policy: PolicyState, first_episode: int, rollouts: int) -> list[int]:
        """Play one iteration's training episodes: ids from ``first_episode`` on, K =
        ``rollouts`` of them (both kept in the training checkpoint, so a resume with another
        ``run.parallel`` plays the same episodes and never trains on another iteration's)."""
        c = self.config
        await self.evaluate_policy(policy)
        count = max(1, min(rollouts, c.run.episodes - first_episode))
        plan = self.learner.rollout_plan(policy.iteration, first_episode, count, c.run.seed)
        if c.run.levels == "held_out":  # the learners' held-out set: episode i plays its level i
            plan = replace(plan, seeds=env_seeds(c.run.eval_seed, "test", plan.episodes))
        if not self.learner.records_rollouts or self.scripted:  # else the update plays them itself
            await self.play(plan, policy, phase="train")
        return list(plan.episodes)

    async def evaluate_policy(self, policy: PolicyState, final: bool = False) -> list[int]:
        """Play the learner's held-out evaluation episodes of ``policy`` (phase ``test``)."""
        if self.scripted:
            return []
        plan = self.learner.evaluation_plan(policy.iteration, self.config.run.eval_seed, final=final)
        if plan is None:
            return []
        await self.play(plan, policy, phase="test")
        return list(plan.episodes)

    async def evaluate(self, policy: PolicyState, candidate: Candidate, episodes: list[int]) -> EvaluationRecord:
        """Play ``learning.eval_rollouts`` fresh episodes with the candidate policies and the same
        episodes (same seeds) with the current ones, and keep the candidate only if its mean
        return is not below theirs. Comparing on the same seeds keeps luck out of the verdict:
        against the iteration's own rollouts, a candidate drawn easier levels would win."""
        from marlang.statistics.intervals import mean_of

        plans = self.evaluation_plans(policy, candidate)
        if not plans:
            baseline = mean_of([t.team_return for t in self.trajectories(episodes)])
            return {"baseline_return": baseline, "candidate_return": None, "accepted": True, "episodes": []}
        for plan, played_by in plans:
            await self.play(plan, played_by, phase="eval")
        (base, _), (trial, _) = plans
        base_ids, ids = base.episodes, trial.episodes
        baseline = mean_of([t.team_return for t in self.trajectories(list(base_ids))])
        value = mean_of([t.team_return for t in self.trajectories(list(ids))])
        accepted = value is not None and (baseline is None or value >= baseline)
        return {"baseline_return": baseline, "candidate_return": value, "accepted": accepted,
                "episodes": list(ids), "baseline_episodes": list(base_ids)}

    def evaluation_plans(self, policy: PolicyState, candidate: Candidate) -> list[tuple[RolloutPlan, PolicyState]]:
        """A candidate check's episodes: the current policies' and, on the same seeds, the
        candidate's (none when the candidate changes no policy)."""
        changed = {a: t for a, t in candidate.policies.items() if t != policy.policies.get(a)}
        if not changed:
            return []
        n = self.options.eval_rollouts
        first = policy.iteration * n  # the candidate checks' own episode count, in the eval stream
        ids = tuple(EVAL_EPISODE_BASE + first + j for j in range(n))
        seeds = env_seeds(self.config.run.seed, "eval", range(first, first + n))
        base_ids = tuple(EVAL_BASELINE_OFFSET + e for e in ids)
        trial = PolicyState.from_dict(policy.to_dict())
        for a, text in changed.items():
            trial.policies[a] = text
            trial.versions[a] = policy.versions.get(a, 0) + 1
        return [(RolloutPlan(base_ids, seeds, tuple(None for _ in ids)), policy),
                (RolloutPlan(ids, seeds, tuple(None for _ in ids)), trial)]

    def review_payload(self, state: TrainingState) -> dict[str, Any]:
        """What the reviewer sees (also written to ``review.json`` for ``marlang review``)."""
        payload = review_payload(state)
        self.run_dir.write_json("review.json", payload)
        return payload

    async def commit(self, state: TrainingState) -> PolicyState:
        """Apply the accepted parts of the candidate (`decide_commit`) and write the
        iteration's files; returns the policy state the next iteration acts with."""
        commit = decide_commit(state)
        if self.finished({**state, "policy": commit.policy.to_dict()}):
            await self.evaluate_policy(commit.policy, final=True)  # the trained policy's held-out evaluation
        self.record.write_calls(self.recorder)
        own = self.learner.own_experience
        # A learner with experience of its own writes its iterations.csv rows as its trainer
        # trains; the episodes its trainer played (a greedy evaluation) count as this invocation's.
        episodes = None if own else self.trajectories(state.get("episodes") or [])
        self.record.write_commit(commit, policies=self.learner.uses_policies, episodes=episodes)
        if own:
            self.played += int(commit.counters.get("episodes", 0))
        return commit.policy

    def write_episode(self, traj: Trajectory, policy: PolicyState, phase: str = "train") -> None:
        """Write one finished episode played with ``policy``: its LLM calls, its record and
        metrics; count it. A learner's update that plays its own training episodes writes
        them here too (``LearnerContext.record_episode``); one already on disk is skipped."""
        if (phase, policy.iteration, traj.episode) in self.record.episodes.entries:
            return
        versions = {a: policy.versions.get(a, 0) for a in traj.agents or self.config.agent_names()}
        traj.iteration, traj.policy_versions, traj.phase = policy.iteration, versions, phase
        traj.env_id, traj.protocol = self.config.played, self.setting
        self.record.calls.sync(self.recorder)
        llm = self.record.calls.by_episode.get(traj.episode, {})
        # The episode's calls first: a finished episode never lacks its rows (a resume
        # drops the rows of an episode whose record is missing).
        self.record.write_calls(self.recorder)
        self.record.append_episode(traj, episode_metrics(traj, llm))
        self.played += 1
        if self.progress is not None and phase == "train":
            self.progress.update(1)
        if self.on_episode is not None:
            self.on_episode(traj)

    async def play(self, plan: RolloutPlan, policy: PolicyState, phase: str) -> None:
        """Play the plan's episodes not yet on disk, at most ``run.parallel`` at once."""
        c = self.config
        await self.learner.context.before_calls()  # the checkpoint before this node is on disk first
        # An episode on disk counts as played only for this phase and iteration: another
        # iteration's episode is never this iteration's training data.
        done = self.record.episodes.done(phase, policy.iteration)
        todo = [(e, s, g) for e, s, g in zip(plan.episodes, plan.seeds, plan.groups) if e not in done]
        if not todo:
            return
        for name, agent in self.agents.items():
            agent.policy = policy.policies.get(name, agent.policy)
            agent.memory.load_state_dict({"reflections": policy.memories.get(name, [])})
        acting = {} if self.scripted else dict(await self.learner.prepare_rollout(policy, phase) or {})
        if self.player is not None:
            await self._play_graph(self.player, todo, policy, phase, acting)
            return
        if self._free_envs is None:
            self._free_envs = asyncio.Queue()
        free = self._free_envs
        while len(self._envs) < min(c.run.parallel, len(todo)):
            env = self.make_env()
            self._envs.append(env)
            free.put_nowait(env)

        scripted, protocol = self.scripted_slots, self.decide

        async def play(episode: int, seed: int, group: int | None) -> None:
            env = await free.get()
            try:
                team: Any = None  # the env's scripted team, or a SlotTeam
                if self.scripted:
                    team = env.scripted_team()
                    decide = scripted_decider(team)
                elif protocol is None:  # build_run gives a decider to every team with an LLM slot
                    raise RuntimeError("a team with LLM slots plays through its protocol's decider")
                elif scripted or self.neural:
                    team = SlotTeam(env, scripted, self.neural)
                    decide = mixed_decider(protocol, team)
                else:
                    decide = protocol
                ctx = self._episode_call(episode, group, policy, acting)
                traj = await run_episode(
                    self.episode_graph, env=env, episode=episode, seed=seed, decide=decide,
                    # Turn-based envs (one agent acts per step) count env.max_steps in turns.
                    ctx=ctx, max_steps=plan.max_steps,
                    env_id=c.env.id, protocol=self.setting, team=team,
                )
            finally:
                free.put_nowait(env)
            traj.group = group
            self.write_episode(traj, policy, phase)

        # Each episode runs in a fresh context: the episode and protocol graphs must not
        # inherit the training graph's checkpointer (they would checkpoint every step).
        await asyncio.gather(*(asyncio.create_task(play(e, s, g), context=contextvars.Context())
                               for e, s, g in todo))

    def _episode_call(self, episode: int, group: int | None, policy: PolicyState,
                      acting: Mapping[str, Acting]) -> CallContext:
        """The call context of one episode: the run's, with the episode, its iteration, the
        group's salt (sampled branches sharing a start) and how each agent acts in the phase."""
        return replace(self.call, episode=episode, iteration=policy.iteration,
                       salt=0 if group is None else episode, acting=acting)

    async def _play_graph(self, player: GraphPlayer, todo: list[tuple[int, int, int | None]], policy: PolicyState,
                          phase: str, acting: dict[str, Any]) -> None:
        """`play` for a run of a user's graph: at most ``run.parallel`` invocations at once."""
        gate = asyncio.Semaphore(self.config.run.parallel)

        async def play(episode: int, seed: int, group: int | None) -> None:
            async with gate:
                traj = await player.play(episode, seed, policy, self._episode_call(episode, group, policy, acting))
            traj.group = group
            self.write_episode(traj, policy, phase)

        # a fresh context each, as for an env's episodes: the user's graph must not inherit the
        # training graph's checkpointer, and each invocation binds its own prompts
        await asyncio.gather(*(asyncio.create_task(play(e, s, g), context=contextvars.Context())
                               for e, s, g in todo))
