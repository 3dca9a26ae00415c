"""Runs one experiment config: builds env, model, agents, protocol and learner, drives the
training graph (rollout K episodes, update, commit; ``learning.iterations`` times) and
writes the run directory.

Within an iteration every episode acts with the same policy state, so a run (and a resumed
run) is deterministic and a rerun replays from the response cache without a model call.
The training graph checkpoints into the run directory: ``--resume`` continues at the last
finished node, and finished episodes are never played again.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marlang.agents import CallContext, LLMAgent, ReflexionMemory
from marlang.config import (
    ConfigError,
    ExperimentConfig,
    ModelConfig,
    check_resume_compatible,
    load_config,
)
from marlang.envs_text import make as make_env
from marlang.graphs.episode import (
    build_episode_graph,
    protocol_decider,
    run_episode,
    scripted_decider,
)
from marlang.graphs.protocols import build_protocol
from marlang.learners import (
    Candidate,
    Learner,
    LearnerContext,
    PolicyState,
    RolloutPlan,
    learner_entry,
)
from marlang.prompts import PromptLibrary
from marlang.report import iteration_row, plot_iteration_curves, summarize_episodes
from marlang.rundir import RunDirectory, package_versions
from marlang.types import Trajectory

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    episodes_run: int
    """Episodes played by this invocation (0 when everything was already finished)."""
    paused: bool = False
    """The run waits for ``marlang review`` (``learning.review: true``)."""


def episode_metrics(traj: Trajectory, llm: dict[str, float] | None = None) -> dict[str, Any]:
    """The per-episode row of ``metrics.csv`` (also stored with the episode)."""
    # A decision counts where the agent had a choice: not a lone legal action such as "wait".
    decisions = [
        d for s in traj.steps for a, d in s.decisions.items()
        if a not in s.observations or len(s.observations[a].legal_actions) != 1
    ]
    invalid = sum(1 for d in decisions if not d.valid)
    llm = llm or {}
    return {
        "episode": traj.episode,
        "iteration": traj.iteration,
        "phase": traj.phase,
        "seed": traj.seed,
        "success": bool(traj.success),
        "steps": traj.n_steps,
        "return": round(traj.team_return, 6),
        "decisions": len(decisions),
        "invalid_actions": invalid,
        "invalid_rate": invalid / len(decisions) if decisions else 0.0,
        "reprompts": sum(1 for d in decisions if d.reprompted),
        "fallbacks": sum(1 for d in decisions if d.fallback),
        "messages": sum(len(s.messages) for s in traj.steps),
        "llm_calls": int(llm.get("calls", 0)),
        "cached_calls": int(llm.get("cached", 0)),
        "tokens_in": int(llm.get("input_tokens", 0)),
        "tokens_out": int(llm.get("output_tokens", 0)),
    }


def default_response_cache_path() -> Path:
    from marlang.models import default_cache_dir

    return Path(default_cache_dir()) / "responses.sqlite"


def build_chat_model(m: ModelConfig) -> tuple[Any, Any]:
    """The configured chat model and its response cache (None when caching is off)."""
    import os

    from marlang.models import SQLiteResponseCache, load_chat_model

    cache = SQLiteResponseCache(Path(m.cache_path) if m.cache_path else default_response_cache_path()) if m.cache else None
    params: dict[str, Any] = {
        "temperature": m.temperature, "top_p": m.top_p, "max_tokens": m.max_tokens,
        "timeout": m.timeout, "max_retries": m.max_retries, "cache": cache,
    }
    if m.spec.startswith("openai:"):
        params["token_limit_field"] = m.token_limit_field
    if m.spec.startswith(("openai:", "litellm:")):
        if m.base_url:
            params["base_url"] = m.base_url
        if os.environ.get(m.api_key_env):
            params["api_key"] = os.environ[m.api_key_env]
    return load_chat_model(m.spec, **params), cache


def _versions() -> dict[str, str]:
    return package_versions(("marlang", "torch", "transformers", "langchain-core", "langgraph", "minigrid",
                             "pettingzoo", "overcooked-ai", "pymunk"))


EVAL_EPISODE_BASE = 1_000_000
"""Episode ids of candidate-policy checks (``learning.accept: improved``) start here, so
their env seeds never repeat a training episode's."""

CHECKPOINT_FILE = "checkpoints.sqlite"
THREAD = {"configurable": {"thread_id": "training"}}


class Experiment:
    """One configured run. ``chat_model`` overrides the configured model (tests, notebooks);
    ``learner_model`` the model of the learner's own calls (default: ``learning.model``,
    else the actors' model)."""

    def __init__(
        self,
        config: ExperimentConfig,
        out_dir: str | Path,
        *,
        resume: bool = False,
        chat_model: Any = None,
        cache: Any = None,
        learner_model: Any = None,
        on_episode: Callable[[Trajectory], None] | None = None,
        label: str | None = None,
    ) -> None:
        self.config = config
        self._label = label
        self.run_dir = RunDirectory(out_dir)
        self.resume = resume
        self._chat_model = chat_model
        self._learner_model = learner_model
        self.on_episode = on_episode
        self.prompts = PromptLibrary(config.agents.prompt_dir)
        self.recorder: Any = None
        self.cache: Any = cache
        self.model: Any = None
        self.learner: Learner | None = None
        self.agents: dict[str, LLMAgent] = {}
        self._played = 0
        self._trajectories: dict[int, Trajectory] = {}

    # building --------------------------------------------------------------------------------
    def _build_model(self) -> Any:
        if self._chat_model is not None:
            return self._chat_model
        self.model, self.cache = build_chat_model(self.config.model)
        return self.model

    def _build_agents(self, model: Any, world: str) -> dict[str, LLMAgent]:
        c = self.config
        memory_size = getattr(c.learning.options, "memory_size", 3)
        return {
            name: LLMAgent(
                name,
                model,
                policy=c.agents.policies.get(name, c.agents.policy),
                memory=ReflexionMemory(memory_size),
                prompts=self.prompts,
                n_agents=c.env.n_agents,
                chain_of_thought=c.agents.chain_of_thought,
                reprompt=c.agents.reprompt,
                fallback_action=c.agents.fallback_action,
                history=c.agents.history,
                max_tokens=c.model.max_tokens,
                message_max_tokens=c.model.message_max_tokens,
                reflection_max_tokens=c.model.reflection_max_tokens,
                sample_seeds=c.model.temperature > 0,
                action_selection=self._action_selection(),
                world=world,
            )
            for name in c.agent_names()
        }

    def _action_selection(self) -> str:
        mode = self.config.agents.action_selection
        if mode == "auto":
            return "score" if getattr(self.model, "supports_choices", False) else "generate"
        if mode == "score" and not getattr(self.model, "supports_choices", False):
            raise ConfigError(
                f"agents.action_selection: 'score' needs a local model (local:... or hf:...); "
                f"{self.config.model.spec!r} can only 'generate'"
            )
        return mode

    @property
    def scripted(self) -> bool:
        return self.config.agents.kind == "scripted"

    @property
    def setting(self) -> str:
        """The row label of this run in reports: protocol and learner, or the scripted team
        (a comparison passes its own label, naming what its grid varies)."""
        c = self.config
        if self._label:
            return self._label
        if c.agents.kind == "neural":
            return c.learning.label
        if not self.scripted:
            return f"{c.protocol.label}, {c.learning.label}"
        return "scripted" if c.env.max_steps is None else f"scripted, {c.env.max_steps} steps"

    def _make_env(self) -> Any:
        c = self.config.env
        kwargs = dict(c.kwargs)
        if c.max_steps is not None:
            kwargs["max_steps"] = c.max_steps
        try:
            return make_env(c.id, n_agents=c.n_agents, **kwargs)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"env: {err}") from None

    def _build_learner(self, narrator_env: Any, ctx_base: dict[str, Any]) -> Learner:
        c = self.config
        method = "none" if self.scripted else c.learning.method
        entry = learner_entry(method)
        options = c.learning.options if method == c.learning.method else entry.options_model()
        model = self._learner_model
        if model is None and not self.scripted:
            learning_model = getattr(options, "model", None)
            model = build_chat_model(learning_model)[0] if learning_model is not None else self.model
        world = _world(narrator_env)
        context = LearnerContext(
            agents=c.agent_names(),
            model=model,
            prompts=self.prompts,
            call=CallContext(**ctx_base),
            env=narrator_env,
            actors=self.agents,
            trajectory=self.trajectory,
            instructions={a: _instructions(a, c.env.n_agents, world) for a in c.agent_names()},
        )
        return entry.factory(options, context)

    def manifest(self, model_id: str, env: Any = None) -> dict[str, Any]:
        c = self.config
        manifest = {
            "name": c.run.name,
            "setting": self.setting,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": sys.argv,
            "seed": c.run.seed,
            "env_id": c.env.id,
            "model_id": model_id,
            "learner": "none" if self.scripted else c.learning.method,
            "iterations": c.total_iterations,
            "rollouts_per_iteration": c.rollouts_per_iteration,
            "prompt_hashes": self.prompts.hashes(),
            "versions": _versions(),
        }
        weights = getattr(self.model, "weights_id", None)
        if weights:
            manifest["weights_id"] = weights
        sandbox = getattr(env, "sandbox", None)
        if sandbox is not None:
            # Which isolation ran the generated code: it differs between machines.
            manifest["sandbox"] = sandbox.isolation.to_dict()
        return manifest

    # running ---------------------------------------------------------------------------------
    def run(self) -> RunResult:
        if self.config.agents.kind == "neural":  # trained by BenchMARL, not the LLM training graph
            from marlang.trainers.neural.learner import NeuralTrainer

            return NeuralTrainer(self.config, self.run_dir.path, resume=self.resume, label=self._label).run()
        return asyncio.run(self.arun())

    def review(self, decisions: dict[str, Any]) -> RunResult:
        """Apply a reviewer's decisions to the paused update and continue the run."""
        return asyncio.run(self.arun(review=decisions))

    def pending_review(self) -> dict[str, Any] | None:
        """What a paused run waits on (the update to review), or None."""
        path = self.run_dir.path / "review.json"
        if not path.is_file():
            return None
        import json

        payload = json.loads(path.read_text())
        return None if payload.get("decided") else payload

    async def arun(self, review: dict[str, Any] | None = None) -> RunResult:
        from langgraph.types import Command

        from marlang.graphs.checkpoints import FlushingSqliteSaver
        from marlang.graphs.training import build_training_graph
        from marlang.models import UsageRecorder

        c = self.config
        narrator_env = self._make_env()
        self._prepare_directory(narrator_env)
        self._played = 0
        self._envs: list[Any] = []
        self._free_envs: asyncio.Queue[Any] = asyncio.Queue()
        self.agents = {}
        self._decide: Any = None
        if not self.scripted:
            self.model = self._build_model()
            self.agents = self._build_agents(self.model, _world(narrator_env))
            protocol_graph = build_protocol(c.protocol.name, self.agents, c.protocol)
            self._decide = protocol_decider(protocol_graph)
        self.recorder = UsageRecorder()
        self._episode_graph = build_episode_graph(self.agents)
        limiter = asyncio.Semaphore(c.model.max_concurrency)
        ctx_base = {"seed": c.run.seed, "callbacks": [self.recorder], "limiter": limiter}
        self._ctx_base = ctx_base
        self.learner = self._build_learner(narrator_env, ctx_base)
        options = c.learning.options if not self.scripted else None
        accept = getattr(options, "accept", "always")
        reviewing = bool(getattr(options, "review", False))

        self._progress = None
        if c.run.progress:
            from tqdm.auto import tqdm

            done = len([d for d in self.run_dir.load_episode_dicts() if d.get("phase", "train") == "train"])
            self._progress = tqdm(total=c.run.episodes, initial=min(done, c.run.episodes),
                                  desc=f"{c.run.name} [{self.setting}]", unit="ep", leave=False)
        paused = False
        try:
            async with FlushingSqliteSaver.from_conn_string(str(self.run_dir.path / CHECKPOINT_FILE)) as saver:
                self.learner.context.before_calls = saver.flushed
                graph = build_training_graph(self, self.learner, accept=accept, review=reviewing,
                                             checkpointer=saver)
                cfg = {**THREAD, "recursion_limit": 50 + 40 * c.total_iterations}
                snapshot = await graph.aget_state(cfg)
                waiting = any(t.interrupts for t in snapshot.tasks)
                graph_input: Any = None
                if review is not None:
                    if not waiting:
                        raise ConfigError(f"{self.run_dir.path}: no update is waiting for review")
                    graph_input = Command(resume=review)
                elif waiting:
                    graph_input = "paused"
                elif not snapshot.values:
                    initial = self.learner.initial_state(self._initial_policies())
                    graph_input = {"policy": initial.to_dict()}
                elif not snapshot.next:
                    if snapshot.values["policy"]["iteration"] < c.total_iterations:
                        # A finished run given more iterations: go on from its last commit.
                        await graph.aupdate_state(cfg, {}, as_node="commit")
                    else:
                        graph_input = "finished"
                if graph_input not in ("paused", "finished"):
                    await graph.ainvoke(graph_input, cfg)
                    snapshot = await graph.aget_state(cfg)
                paused = any(t.interrupts for t in snapshot.tasks)
        finally:
            if self._progress is not None:
                self._progress.close()
            self.recorder.append_csv(self.run_dir.llm_calls_file)
            for env in self._envs:
                env.close()
        return RunResult(self.run_dir.path, self.finalize(), self._played, paused)

    def _prepare_directory(self, env: Any = None) -> None:
        """Create the run directory, or check that a resumed run measures the same thing."""
        rd = self.run_dir
        if rd.exists() and not self.resume:
            raise ConfigError(f"run directory {rd.path} already holds a run; pass --resume {rd.path} to continue it "
                              "or --out to choose another directory")
        if self.resume and rd.exists():
            check_resume_compatible(load_config(rd.config_file), self.config)
            dicts = rd.load_episode_dicts(repair=True)
            rd.rewrite_metrics([d["metrics"] for d in dicts])
            logger.info("resuming %s: %d episodes already finished", rd.path, len(dicts))
        model_id = self.config.model.spec if not self.scripted else "scripted"
        rd.create(self.config.to_yaml(), self.manifest(model_id, env))

    def _initial_policies(self) -> dict[str, str]:
        c = self.config
        return {a: c.agents.policies.get(a, c.agents.policy) for a in c.agent_names()}

    # the training runtime (called by the training graph's nodes) ------------------------------
    def total_iterations(self) -> int:
        return self.config.total_iterations

    def trajectory(self, episode: int) -> Trajectory:
        if episode not in self._trajectories:
            for d in self.run_dir.load_episode_dicts():
                self._trajectories.setdefault(d["episode"], Trajectory.from_dict(d))
        return self._trajectories[episode]

    def trajectories(self, episodes: list[int]) -> list[Trajectory]:
        return [self.trajectory(e) for e in episodes]

    async def rollout(self, policy: PolicyState) -> list[int]:
        c = self.config
        k = c.rollouts_per_iteration
        first = policy.iteration * k
        count = max(1, min(k, c.run.episodes - first))
        plan = self.learner.rollout_plan(policy.iteration, first, count, c.run.seed)
        await self._play(plan, policy, phase="train")
        return list(plan.episodes)

    async def evaluate(self, policy: PolicyState, candidate: Candidate, episodes: list[int]) -> dict[str, Any]:
        """Play ``learning.eval_rollouts`` fresh episodes with the candidate policies and keep
        them only if their mean return is not below this iteration's rollouts'."""
        from marlang.report import mean_ci

        baseline = mean_ci([t.team_return for t in self.trajectories(episodes)])["mean"]
        changed = {a: t for a, t in candidate.policies.items() if t != policy.policies.get(a)}
        if not changed:
            return {"baseline_return": baseline, "candidate_return": None, "accepted": True, "episodes": []}
        n = int(getattr(self.config.learning.options, "eval_rollouts", 3))
        ids = tuple(EVAL_EPISODE_BASE + policy.iteration * n + j for j in range(n))
        plan = RolloutPlan(ids, tuple(self.config.run.seed + e for e in ids), tuple(None for _ in ids))
        trial = PolicyState.from_dict(policy.to_dict())
        for a, text in changed.items():
            trial.policies[a] = text
            trial.versions[a] = policy.versions.get(a, 0) + 1
        await self._play(plan, trial, phase="eval")
        value = mean_ci([t.team_return for t in self.trajectories(list(ids))])["mean"]
        accepted = value is not None and (baseline is None or value >= baseline)
        return {"baseline_return": baseline, "candidate_return": value, "accepted": accepted, "episodes": list(ids)}

    def review_payload(self, state: dict[str, Any]) -> dict[str, Any]:
        """What the reviewer sees (also written to ``review.json`` for ``marlang review``)."""
        payload = self._review(state)
        self.run_dir.write_json("review.json", payload)
        return payload

    def _review(self, state: dict[str, Any]) -> dict[str, Any]:
        policy = PolicyState.from_dict(state["policy"])
        candidate = Candidate.from_dict(state.get("candidate") or {})
        return {
            "iteration": policy.iteration,
            "evaluation": state.get("evaluation"),
            "agents": {
                r["agent"]: {
                    "old_policy": r.get("old_policy", policy.policies.get(r["agent"], "")),
                    "new_policy": candidate.policies.get(r["agent"], policy.policies.get(r["agent"], "")),
                    "credits": [t.get("credit") for t in r.get("trajectories", [])],
                    "aggregated_gradient": r.get("aggregated_gradient"),
                }
                for r in candidate.records
            },
            "decided": False,
        }

    async def commit(self, state: dict[str, Any]) -> PolicyState:
        """Apply the accepted parts of the candidate and write the iteration's files."""
        policy = PolicyState.from_dict(state["policy"])
        candidate = Candidate.from_dict(state.get("candidate") or {})
        evaluation = state.get("evaluation") or {}
        decisions = state.get("review") or {}
        i = policy.iteration
        new = PolicyState.from_dict(policy.to_dict())
        policy_rows = []
        accepted_by_eval = evaluation.get("accepted", True)
        for agent, text in candidate.policies.items():
            decision = decisions.get(agent) or {}
            action = decision.get("action") or ("accept" if accepted_by_eval else "reject")
            final = decision.get("text") if action == "edit" and decision.get("text") else text
            accepted = action in ("accept", "edit")
            old = policy.policies.get(agent, "")
            if accepted and final != old:
                new.policies[agent] = final
                new.versions[agent] = policy.versions.get(agent, 0) + 1
            policy_rows.append({
                "iteration": i, "agent": agent, "text": final, "accepted": accepted, "previous": old,
                "version": new.versions.get(agent, 0), "decided_by": "review" if decision else (
                    "evaluation" if evaluation.get("candidate_return") is not None else "always"),
            })
        for agent, memory in candidate.memories.items():
            new.memories[agent] = list(memory)
        new.iteration = i + 1
        rd = self.run_dir
        self.recorder.append_csv(rd.llm_calls_file)
        if self.learner is not None and self.learner.uses_policies:
            rd.append_iteration_rows("policies.jsonl", i, policy_rows)
        verdicts = {r["agent"]: r["accepted"] for r in policy_rows}
        rd.append_iteration_rows("updates.jsonl", i, [
            {"iteration": i, **r, "accepted": verdicts.get(r["agent"]), "evaluation": evaluation or None}
            for r in candidate.records
        ])
        if decisions:
            rd.write_json("review.json", {**self._review(state), "decided": True, "decisions": decisions})
        episodes = self.trajectories(state.get("episodes") or [])
        row = iteration_row(i, episodes, rd.read_llm_calls(), candidate.counters, evaluation,
                            accepted=[r["accepted"] for r in policy_rows])
        rd.append_iteration_csv(row)
        rd.write_json("learner_state.json", new.to_dict())
        logger.info("iteration %d committed: mean return %.3f", i, row["return_mean"])
        return new

    async def _play(self, plan: RolloutPlan, policy: PolicyState, phase: str) -> None:
        """Play the plan's episodes not yet on disk, at most ``run.parallel`` at once."""
        c = self.config
        flushed = self.learner.context.before_calls if self.learner is not None else None
        if flushed is not None:
            await flushed()  # the checkpoint before this node is on disk first
        done = {d["episode"] for d in self.run_dir.load_episode_dicts() if d.get("phase", "train") == phase}
        todo = [(e, s, g) for e, s, g in zip(plan.episodes, plan.seeds, plan.groups) if e not in done]
        if not todo:
            return
        for name, agent in self.agents.items():
            agent.policy = policy.policies.get(name, agent.policy)
            agent.memory.load_state_dict({"reflections": policy.memories.get(name, [])})
        while len(self._envs) < min(c.run.parallel, len(todo)):
            env = self._make_env()
            self._envs.append(env)
            self._free_envs.put_nowait(env)
        max_steps = plan.max_steps or c.env.max_steps or 100_000
        versions = {a: policy.versions.get(a, 0) for a in c.agent_names()}

        async def play(episode: int, seed: int, group: int | None) -> None:
            env = await self._free_envs.get()
            try:
                team = env.scripted_team() if self.scripted else None
                ctx = CallContext(episode=episode, iteration=policy.iteration,
                                  salt=0 if group is None else episode, **self._ctx_base)
                traj = await run_episode(
                    self._episode_graph, env=env, episode=episode, seed=seed,
                    decide=scripted_decider(team) if self.scripted else self._decide,
                    # Turn-based envs (one agent acts per step) count env.max_steps in turns.
                    ctx=ctx, max_steps=max(max_steps, getattr(env, "max_env_steps", 0) or 0) + 1,
                    env_id=c.env.id, protocol=self.setting, team=team,
                )
            finally:
                self._free_envs.put_nowait(env)
            traj.iteration, traj.policy_versions, traj.phase, traj.group = policy.iteration, versions, phase, group
            llm = self.recorder.totals_by_episode().get(episode, {})
            self.run_dir.append_episode(traj, episode_metrics(traj, llm))
            self.recorder.append_csv(self.run_dir.llm_calls_file)
            self._trajectories[episode] = traj
            self._played += 1
            if self._progress is not None and phase == "train":
                self._progress.update(1)
            if self.on_episode is not None:
                self.on_episode(traj)

        # Each episode runs in a fresh context: the episode and protocol graphs must not
        # inherit the training graph's checkpointer (they would checkpoint every step).
        await asyncio.gather(*(asyncio.create_task(play(e, s, g), context=contextvars.Context())
                               for e, s, g in todo))

    def finalize(self) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the episodes and iterations on disk."""
        if self.config.agents.kind == "neural":
            from marlang.trainers.neural.learner import NeuralTrainer

            return NeuralTrainer(self.config, self.run_dir.path, resume=True, label=self._label).finalize()
        dicts = sorted(self.run_dir.load_episode_dicts(), key=lambda d: d["episode"])
        rows = [d["metrics"] for d in dicts if d.get("phase", "train") == "train"]
        summary = summarize_episodes(rows) if rows else {"episodes": 0}
        summary["setting"] = self.setting
        summary["env_id"] = self.config.env.id
        summary["model"] = self.config.model.spec if not self.scripted else "scripted"
        summary["learner"] = "none" if self.scripted else self.config.learning.method
        summary["max_steps"] = self.config.env.max_steps
        iterations = self.run_dir.read_iterations()
        if iterations:
            summary["iterations"] = iterations
            summary["credit_failures"] = sum(int(r.get("credit_failures") or 0) for r in iterations)
        if (self.run_dir.path / "policies.jsonl").exists():  # a learner that rewrites policies
            final = (self.run_dir.read_json("learner_state.json") or {}).get("policies", {})
            summary["policies"] = {a: {"initial": text, "final": final.get(a, text)}
                                   for a, text in self._initial_policies().items()}
        if self.cache is not None:
            summary["response_cache"] = {"hits": self.cache.hits, "misses": self.cache.misses}
        self.run_dir.write_json("summary.json", summary)
        if iterations:
            plot_iteration_curves({summary["setting"]: iterations}, self.run_dir.path / "learning_curve.png")
        return summary


def _world(env: Any) -> str:
    from marlang.envs_text.narration import world_description

    return world_description(env)


def _instructions(agent: str, n_agents: int, world: str) -> str:
    """The fixed part of an actor's prompt, as learners see it (never rewritten)."""
    return (f"{agent} is one of {n_agents} agents acting together in {world}; at every step it reads its "
            "own observation, the team mission and the legal actions, thinks briefly, and answers one legal action.")


def run_experiment(config: ExperimentConfig, out_dir: str | Path, resume: bool = False, **kwargs: Any) -> RunResult:
    """Sync entry point: run (or resume) one config into ``out_dir``."""
    return Experiment(config, out_dir, resume=resume, **kwargs).run()
