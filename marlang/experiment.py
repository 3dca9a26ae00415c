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
import contextlib
import logging
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler

from marlang.agents import CallContext, LLMAgent, ReflexionMemory
from marlang.config import (
    ConfigError,
    ExperimentConfig,
    ModelConfig,
    check_resume_compatible,
    load_config,
    redact_secrets,
)
from marlang.envs import make as make_env
from marlang.graphs.episode import build_episode_graph, protocol_decider
from marlang.graphs.protocols import build_protocol
from marlang.learners import Learner, LearnerContext, learner_entry
from marlang.models.threads import apply_torch_threads
from marlang.prompts import PromptLibrary
from marlang.rundir import RunDirectory, RunResult, package_versions
from marlang.runtime import RunRuntime, episode_metrics
from marlang.types import StopFlag, Trajectory

__all__ = ["Experiment", "RunResult", "build_chat_model", "episode_metrics", "run_experiment"]

logger = logging.getLogger(__name__)


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
    try:
        return load_chat_model(m.spec, **params), cache
    except ValueError as err:  # a spec that names no model there is (local:nope): the config's fault
        raise ConfigError(f"invalid value for 'model.spec': {err}") from None


def chat_model_name(model: Any) -> str:
    """A chat model's own name (``model_id``, ``model_name`` or ``model``; else its class)."""
    for attr in ("model_id", "model_name", "model"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def _versions() -> dict[str, str]:
    return package_versions(("marlang", "torch", "transformers", "langchain-core", "langgraph", "minigrid",
                             "pettingzoo", "overcooked-ai", "pymunk"))


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
        notify: Callable[[str], None] | None = None,
        model_id: str | None = None,
    ) -> None:
        self.config = config
        self._label = label
        self._model_id = model_id
        """The model as manifests and tables name it (default: ``chat_model``'s own name, else
        ``model.spec``)."""
        self.notify = notify or logger.warning
        """Says what the run does when it is interrupted (the CLI prints it)."""
        from marlang.trainers.distributed import launched_rank, launched_world_size

        if launched_world_size() > 1 and launched_rank() > 0:
            # Data-parallel training (accelerate launch): process r keeps its own rollouts and
            # adapters in RUN/rank<r>/; process 0 writes the run directory itself.
            out_dir = Path(out_dir) / f"rank{launched_rank()}"
        self.run_dir = RunDirectory(out_dir, loggers=config.run.loggers)
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
        self.runtime: RunRuntime | None = None
        self._stop = StopFlag()
        """Set by the first Ctrl-C; the engines, the learner and the executors check it."""
        self._watching = contextlib.ExitStack()
        self._cancel: Callable[[], Any] | None = None
        self._in_flight: InFlightCalls | None = None
        self._checkpoints: Any = None

    # building --------------------------------------------------------------------------------
    def _build_model(self) -> Any:
        apply_torch_threads(self.config.run.threads, self.config.model.spec)
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
                calibration=c.agents.calibration,
            )
            for name in c.agent_names()
        }

    def _action_selection(self) -> str:
        mode = self.config.agents.action_selection
        if mode == "auto":
            mode = "score" if getattr(self.model, "supports_choices", False) else "generate"
        elif mode == "score" and not getattr(self.model, "supports_choices", False):
            raise ConfigError(
                f"agents.action_selection: 'score' needs a local model (local:... or hf:...); "
                f"{self.config.model.spec!r} can only 'generate'"
            )
        if mode == "generate" and self.config.agents.calibration != "none":
            raise ConfigError(
                f"agents.calibration {self.config.agents.calibration!r} calibrates scored actions and "
                "agents.action_selection is 'generate'; use action_selection 'score' (a local model) "
                "or calibration 'none'")
        return mode

    @property
    def scripted(self) -> bool:
        return self.config.agents.kind == "scripted"

    @property
    def model_id(self) -> str:
        """The model the agents act with, as the manifest, summary and tables name it: the
        ``chat_model`` given (its own name) or ``model.spec``."""
        if self.scripted:
            return "scripted"
        if self._model_id:
            return self._model_id
        if self._chat_model is not None:
            return chat_model_name(self._chat_model)
        return self.config.model.spec

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
        kwargs.update(self._sandbox_options())
        try:
            return make_env(c.id, n_agents=c.n_agents, **kwargs)
        except (TypeError, ValueError) as err:
            raise ConfigError(f"env: {err}") from None

    def _sandbox_options(self) -> dict[str, Any]:
        """The config's `sandbox:` section as the env's parameters, where the env runs
        generated code; set for an env that runs none, it is an error naming the section."""
        options = self.config.sandbox.model_dump(exclude_defaults=True)
        if options and not self.config.env.id.startswith("code/"):
            raise ConfigError(f"sandbox: {', '.join(options)} applies to the envs that run "
                              f"generated code (code/...), not {self.config.env.id!r}")
        return options

    def _build_learner(self, narrator_env: Any, ctx_base: dict[str, Any], runtime: RunRuntime) -> Learner:
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
            trajectory=runtime.trajectory,
            run_dir=self.run_dir.path,
            instructions={a: _instructions(a, c.env.n_agents, world) for a in c.agent_names()},
            structured=getattr(getattr(options, "model", None), "structured", None) or c.model.structured,
            stop=self._stop,
        )
        return entry.factory(options, context)

    def manifest(self, model_id: str, env: Any = None) -> dict[str, Any]:
        c = self.config
        manifest = {
            "name": c.run.name,
            "setting": self.setting,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": [redact_secrets(arg) for arg in sys.argv],
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
        """Run (or resume) the experiment, holding the run directory's lock throughout: a
        second process on the same directory is refused, naming the first."""
        with self.run_dir.lock():
            if self.run_dir.exists():
                self.run_dir.remove_unfinished_writes()
            if self.config.agents.kind == "neural":  # trained by BenchMARL, not the LLM training graph
                from marlang.trainers.neural.learner import NeuralTrainer

                return NeuralTrainer(self.config, self.run_dir.path, resume=self.resume, label=self._label).run()
            return self._drive(self.arun)

    def review(self, decisions: dict[str, Any]) -> RunResult:
        """Apply a reviewer's decisions to the paused update and continue the run."""
        with self.run_dir.lock():
            return self._drive(lambda: self.arun(review=decisions))

    def _drive(self, main: Callable[[], Any]) -> RunResult:
        """Run ``main()`` on a fresh event loop with Ctrl-C handled by the run: the first sets
        the run's `StopFlag` (the engine stops at its next decoding step, MAGRPO at its next
        tree step) and cancels the run, which keeps what is finished and raises
        KeyboardInterrupt; a second raises KeyboardInterrupt at once. However the loop ends,
        the checkpoint database's thread is ended, the engine's stopped work is waited for,
        and the SIGINT handler is again the one found at the start."""
        stop = self._stop = StopFlag()
        self._cancel = self._in_flight = self._checkpoints = None
        restore_handler = self._handle_ctrl_c(stop)
        try:
            with self._watching:
                try:
                    return asyncio.run(main())
                except asyncio.CancelledError:
                    if stop.is_set():
                        raise KeyboardInterrupt from None
                    raise
                finally:
                    self._cancel = None  # the loop is gone: a Ctrl-C from here on stops at once
                    if self._checkpoints is not None:
                        self._checkpoints.stop()
                    if stop.is_set():  # the engine ends its stopped batch before the run lets go
                        for engine in self._engines():
                            engine.wait_idle(timeout=30.0)
        finally:
            restore_handler()

    def _handle_ctrl_c(self, stop: StopFlag) -> Callable[[], None]:
        """Install the run's SIGINT handler where Ctrl-C means KeyboardInterrupt (Python's own
        handler, on the main thread; an ignored SIGINT stays ignored). Returns the function
        that puts the previous handler back."""
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = signal.getsignal(signal.SIGINT)
        if previous is not signal.default_int_handler:
            return lambda: None

        def handler(signum: int, frame: Any) -> None:
            if stop.is_set() or self._cancel is None:
                self.notify("stopping now")
                raise KeyboardInterrupt
            stop.set()
            calls = self._in_flight.count if self._in_flight is not None else 0
            self.notify(f"interrupted: saving what is finished and stopping the {calls} model call(s) in flight "
                        "(the local engine at its next token); Ctrl-C again to stop now")
            try:
                self._cancel()
            except RuntimeError:  # the loop has just closed: nothing is left to cancel
                raise KeyboardInterrupt from None

        signal.signal(signal.SIGINT, handler)
        return lambda: signal.signal(signal.SIGINT, previous)

    def _engines(self) -> list[Any]:
        """The local engines of the run's models (each honours the run's `StopFlag`)."""
        learner_model = getattr(getattr(self.learner, "context", None), "model", None)
        engines: list[Any] = []
        for model in (self.model, self._learner_model, learner_model):
            engine = getattr(model, "engine", None)
            if hasattr(engine, "watching") and all(engine is not e for e in engines):
                engines.append(engine)
        return engines

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

        from marlang.graphs.training import build_training_graph
        from marlang.models import UsageRecorder

        c = self.config
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        self._cancel = lambda: loop.call_soon_threadsafe(task.cancel)  # what the first Ctrl-C does
        if not self.scripted:
            try:  # settings the learner cannot train fail here, before anything is created
                learner_entry(c.learning.method).check_config(c)
            except ValueError as err:
                raise ConfigError(str(err)) from None
        narrator_env = self._make_env()
        _start_sandbox(narrator_env)
        try:  # a team the level cannot hold (too many agents for its room) fails here, creating nothing
            narrator_env.reset(seed=c.run.seed)
        except ValueError as err:
            raise ConfigError(f"env: {err}") from None
        self._check_directory()
        self.agents = {}
        decide: Any = None
        adapters: dict[str, str] = {}
        if not self.scripted:
            self.model = self._build_model()
            self.agents = self._build_agents(self.model, _world(narrator_env))
            adapters = self._play_back_adapters()
            try:  # a model the learner cannot train fails here, before anything is created
                learner_entry(c.learning.method).check_model(self.model, c.learning.options)
            except ValueError as err:
                raise ConfigError(f"learning: {err}") from None
            protocol_graph = build_protocol(c.protocol.name, self.agents, c.protocol)
            decide = protocol_decider(protocol_graph)
        self._create_directory(narrator_env, adapters)
        self.recorder = UsageRecorder()
        in_flight = InFlightCalls()
        limiter = asyncio.Semaphore(c.model.max_concurrency)
        ctx_base = {"seed": c.run.seed, "callbacks": [self.recorder, in_flight], "limiter": limiter}
        runtime = self.runtime = RunRuntime(
            config=c, run_dir=self.run_dir, setting=self.setting, make_env=self._make_env,
            initial_policies=self._initial_policies(), agents=self.agents, recorder=self.recorder,
            decide=decide, episode_graph=build_episode_graph(self.agents), ctx_base=ctx_base,
            cache=self.cache, on_episode=self.on_episode,
        )
        self.learner = runtime.learner = self._build_learner(narrator_env, ctx_base, runtime)
        options = c.learning.options if not self.scripted else None
        accept = getattr(options, "accept", "always")
        reviewing = bool(getattr(options, "review", False))

        if c.run.progress:
            from tqdm.auto import tqdm

            done = len([d for d in self.run_dir.load_episode_dicts() if d.get("phase", "train") == "train"])
            runtime.progress = tqdm(total=max(c.run.episodes, done), initial=done,
                                    desc=f"{c.run.name} [{self.setting}]", unit="ep", leave=True)
        paused = finished = completed = False
        self._in_flight = in_flight
        for engine in self._engines():
            self._watching.enter_context(engine.watching(self._stop))
        try:
            async with self._checkpointer() as saver:
                self.learner.context.before_calls = saver.flushed
                graph = build_training_graph(runtime, self.learner, accept=accept, review=reviewing,
                                             checkpointer=saver)
                snapshot = await graph.aget_state(THREAD)
                runtime.rollouts = int((snapshot.values or {}).get("rollouts") or c.rollouts_per_iteration)
                cfg = {**THREAD, "recursion_limit": 50 + 40 * runtime.iterations_left(snapshot.values)}
                waiting = any(t.interrupts for t in snapshot.tasks)
                graph_input: Any = None
                replayed = 0
                if snapshot.values:
                    self.run_dir.rebuild_llm_calls({d["episode"] for d in self.run_dir.load_episode_dicts()},
                                                   self.learner.roles)
                    replayed = await self._replay_lost_episodes(graph, runtime, snapshot)
                if review is not None:
                    if not waiting:
                        raise ConfigError(f"{self.run_dir.path}: no update is waiting for review")
                    graph_input = Command(resume=review)
                elif waiting:
                    graph_input = "paused"
                elif not snapshot.values:
                    initial = self.learner.initial_state(self._initial_policies())
                    graph_input = {"policy": initial.to_dict(), "rollouts": c.rollouts_per_iteration,
                                   "next_episode": 0}
                elif not snapshot.next:
                    if not runtime.finished(snapshot.values):
                        # A finished run given more episodes or iterations: go on from its last commit.
                        await graph.aupdate_state(cfg, {}, as_node="commit")
                    else:
                        graph_input = "finished"
                if graph_input not in ("paused", "finished"):
                    await graph.ainvoke(graph_input, cfg)
                    snapshot = await graph.aget_state(THREAD)
                paused = any(t.interrupts for t in snapshot.tasks)
                finished = graph_input == "finished" and not replayed
            completed = True
        finally:
            if runtime.progress is not None:
                if completed and not paused and runtime.progress.n < runtime.progress.total:
                    runtime.progress.total = runtime.progress.n  # fewer episodes than planned: end at 100%
                runtime.progress.close()
            self.recorder.append_csv(self.run_dir.llm_calls_file)
            runtime.close()
        return RunResult(self.run_dir.path, runtime.finalize(), runtime.played, paused, already_finished=finished)

    async def _replay_lost_episodes(self, graph: Any, runtime: RunRuntime, snapshot: Any) -> int:
        """Play again, exactly, the episodes whose records were lost (a torn or damaged line)
        from work the training graph has done: each with the policy state it was played with,
        as the checkpoints keep it. Says in one line which were replayed; returns how many."""
        from marlang.types import Candidate, PolicyState, RolloutPlan

        c = self.config
        on_disk = {(d.get("phase", "train"), d.get("iteration", 0), d["episode"])
                   for d in self.run_dir.load_episode_dicts()}
        plays: list[tuple[RolloutPlan, PolicyState, str]] = []

        def check(plan: RolloutPlan | None, policy: PolicyState, phase: str) -> None:
            if plan is not None and any((phase, policy.iteration, e) not in on_disk for e in plan.episodes):
                plays.append((plan, policy, phase))

        seen: set[tuple[str, int]] = set()
        async for past in graph.aget_state_history(THREAD):
            state = past.values or {}
            if past.next not in (("update",), ("evaluate",)) or "policy" not in state:
                continue
            policy = PolicyState.from_dict(state["policy"])
            if (past.next[0], policy.iteration) in seen:
                continue
            seen.add((past.next[0], policy.iteration))
            episodes = list(state.get("episodes") or [])
            if past.next == ("update",) and episodes:  # the iteration's rollouts had finished
                check(self.learner.rollout_plan(policy.iteration, min(episodes), len(episodes), c.run.seed),
                      policy, "train")
                if not self.scripted:
                    check(self.learner.evaluation_plan(policy.iteration, c.run.seed), policy, "test")
            elif past.next == ("evaluate",) and state.get("candidate"):
                for plan, played_by in runtime.evaluation_plans(policy, Candidate.from_dict(state["candidate"])):
                    check(plan, played_by, "eval")
        if not snapshot.next and runtime.finished(snapshot.values) and not self.scripted:
            final = PolicyState.from_dict(snapshot.values["policy"])
            check(self.learner.evaluation_plan(final.iteration, c.run.seed, final=True), final, "test")
        before = runtime.played
        for plan, policy, phase in sorted(plays, key=lambda p: p[1].iteration):
            await runtime.play(plan, policy, phase)
        lost = sorted({e for plan, policy, phase in plays for e in plan.episodes
                       if (phase, policy.iteration, e) not in on_disk})
        if lost:
            self.notify(f"replayed episode(s) {', '.join(map(str, lost))}: their records in "
                        f"{self.run_dir.episodes_file} were lost or damaged")
        return runtime.played - before


    @contextlib.asynccontextmanager
    async def _checkpointer(self) -> AsyncIterator[Any]:
        """The training graph's checkpointer on the run's checkpoint file (`_drive` ends its
        database thread however the run ends)."""
        from marlang.graphs.checkpoints import CheckpointDatabase

        database = self._checkpoints = CheckpointDatabase(self.run_dir.path / CHECKPOINT_FILE)
        saver = await database.open()
        try:
            yield saver
        finally:
            await database.aclose()

    def finalize(self) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the run's files."""
        if self.config.agents.kind == "neural":
            from marlang.trainers.neural.learner import NeuralTrainer

            return NeuralTrainer(self.config, self.run_dir.path, resume=True, label=self._label).finalize()
        runtime = self.runtime or RunRuntime(
            config=self.config, run_dir=self.run_dir, setting=self.setting, make_env=self._make_env,
            initial_policies=self._initial_policies(), cache=self.cache)
        return runtime.finalize()

    def _check_directory(self) -> None:
        """Refuse a run directory that holds a run (unless resuming), or a resume that would
        measure something else; writes nothing but the repair of a torn episodes file."""
        rd = self.run_dir
        if rd.exists() and not rd.holds_episode_records() and rd.read_json("review.json") is None:
            # Nothing was measured (e.g. the model failed at its first call): start afresh,
            # with or without --resume, and with whatever config is given now.
            logger.info("%s holds no finished episode: starting it afresh", rd.path)
            rd.discard_run_files()
            return
        if rd.exists() and not self.resume:
            raise ConfigError(f"run directory {rd.path} already holds a run; pass --resume {rd.path} to continue it "
                              "or --out to choose another directory")
        if self.resume and rd.exists():
            check_resume_compatible(load_config(rd.config_file), self.config)
            rd.repair_episodes()
            dicts = rd.load_episode_dicts()
            rd.rewrite_metrics([d["metrics"] for d in dicts])
            logger.info("resuming %s: %d episodes already finished", rd.path, len(dicts))

    def _create_directory(self, env: Any, adapters: dict[str, str]) -> None:
        """Write config and manifest (once the model is built, so the manifest names its
        weights). A resume keeps the original start and command and appends its own."""
        rd = self.run_dir
        manifest = self.manifest(self.model_id, env)
        if adapters:
            manifest["adapters"] = adapters
        previous = rd.read_json("manifest.json") if rd.exists() else None
        if previous:
            saved = previous.get("adapters") or {}
            if saved != adapters:
                changed = sorted(set(saved) | set(adapters), key=str)
                first = next(a for a in changed if saved.get(a) != adapters.get(a))
                raise ConfigError(f"cannot resume: the adapter of {first} is {saved.get(first) or '(none)'} in the saved "
                                  f"run but {adapters.get(first) or '(none)'} now; start a new run directory instead")
        rd.create(redact_secrets(self.config.to_yaml()), rd.resumed_manifest(manifest))

    def _play_back_adapters(self) -> dict[str, str]:
        """``model.adapters``: the agents act with trained adapters (those that have one)."""
        spec = getattr(self.config.model, "adapters", None)
        if not spec:
            return {}
        from marlang.trainers.playback import attach_trained_adapters

        engine = getattr(self.model, "engine", None)
        if engine is None:
            raise ConfigError(f"model.adapters needs a local model (local:... or hf:...), not {self.config.model.spec!r}")
        try:
            hashes = attach_trained_adapters(engine, spec, list(self.agents))
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for name, agent in self.agents.items():
            agent.adapter = name if name in hashes else None
        return {a: h for a, h in hashes.items() if a in self.agents}

    def _initial_policies(self) -> dict[str, str]:
        c = self.config
        return {a: c.agents.policies.get(a, c.agents.policy) for a in c.agent_names()}

class InFlightCalls(BaseCallbackHandler):
    """Counts the model calls started and not yet answered (what a Ctrl-C waits for)."""

    run_inline = True

    def __init__(self) -> None:
        self._open: set[Any] = set()

    @property
    def count(self) -> int:
        return len(self._open)

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._open.add(run_id)

    def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._open.add(run_id)

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        self._open.discard(run_id)

    def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        self._open.discard(run_id)


def _start_sandbox(env: Any) -> None:
    """An env that runs generated code starts its sandbox now, so that a machine that cannot
    confine the code is refused in one line before anything is created."""
    if isinstance(getattr(type(env), "sandbox", None), property):
        from marlang.sandbox import IsolationUnavailableError

        try:
            env.sandbox  # noqa: B018 - the property starts the pool
        except IsolationUnavailableError as err:
            raise ConfigError(str(err)) from None


def _world(env: Any) -> str:
    from marlang.envs.core.narration import world_description

    return world_description(env)


def _instructions(agent: str, n_agents: int, world: str) -> str:
    """The fixed part of an actor's prompt, as learners see it (never rewritten)."""
    return (f"{agent} is one of {n_agents} agents acting together in {world}; at every step it reads its "
            "own observation, the team mission and the legal actions, thinks briefly, and answers one legal action.")


def run_experiment(config: ExperimentConfig, out_dir: str | Path, resume: bool = False, **kwargs: Any) -> RunResult:
    """Sync entry point: run (or resume) one config into ``out_dir``."""
    return Experiment(config, out_dir, resume=resume, **kwargs).run()
