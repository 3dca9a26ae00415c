"""Drives one experiment config: `marlang.run.build.build_run` makes its parts, and this
module runs them: the training graph (`marlang.run.loop`) on a fresh event loop, the run
directory's lock, the checkpointer, the progress bar and Ctrl-C. Read top to bottom: Ctrl-C,
what the run is, ``run`` (lock, event loop), ``_start`` (build, check the directory, write
config and manifest), ``arun`` (the training graph), ``finalize`` (summary).

Within an iteration every episode acts with the same policy state, so a run (and a resumed
run) is deterministic and a rerun replays from the response cache without a model call.
The training graph checkpoints into the run directory: ``--resume`` continues at the last
finished node (`marlang.run.resume`), and finished episodes are never played again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler

from marlang.agents import CallContext
from marlang.config import ExperimentConfig, redact_secrets
from marlang.learners import CheckpointBarrier, EpisodeSink, Learner, learner_entry
from marlang.models.capabilities import engine_of
from marlang.models.threads import apply_torch_threads
from marlang.prompts import PromptLibrary
from marlang.run import build
from marlang.run.build import RunParts
from marlang.run.graph_build import build_graph_run
from marlang.run.loop import Progress, RunLoop, build_training_graph
from marlang.run.record import RunRecord
from marlang.run.resume import (
    THREAD,
    Resume,
    check_adapters,
    check_directory,
    check_not_a_comparison,
    decide,
    replay_lost_episodes,
)
from marlang.rundir import RunDirectory, RunResult
from marlang.types import StopFlag, Trajectory

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from marlang.envs.core.base import MultiAgentEnv
    from marlang.graphs.checkpoints import CheckpointDatabase
    from marlang.models import SQLiteResponseCache
    from marlang.models.local_engine import LocalLM

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "checkpoints.sqlite"


# Ctrl-C ------------------------------------------------------------------------------------
# The first sets the run's `StopFlag` and cancels the run (what is finished is kept), a second
# stops at once; the first says how many model calls in flight it waits for.
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


def handle_ctrl_c(stop: StopFlag, notify: Callable[[str], None], cancel: Callable[[], Any],
                  in_flight: Callable[[], InFlightCalls | None]) -> Callable[[], None]:
    """Install the run's SIGINT handler where Ctrl-C means KeyboardInterrupt (Python's own
    handler, on the main thread; an ignored SIGINT stays ignored). ``cancel()`` gives the
    function that cancels the run (None: nothing to cancel, stop at once). Returns the
    function that puts the previous handler back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        return lambda: None

    def handler(signum: int, frame: Any) -> None:
        cancelling = cancel()
        if stop.is_set() or cancelling is None:
            notify("stopping now")
            raise KeyboardInterrupt
        stop.set()
        calls = in_flight()
        notify(f"interrupted: saving what is finished and stopping the {calls.count if calls else 0} model "
               "call(s) in flight (the local engine at its next token); Ctrl-C again to stop now")
        try:
            cancelling()
        except RuntimeError:  # the loop has just closed: nothing is left to cancel
            raise KeyboardInterrupt from None

    signal.signal(signal.SIGINT, handler)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore



class Experiment:
    """One configured run: `build_run` makes its parts, this class drives them (the event
    loop, Ctrl-C, the directory's lock, the checkpointer, the progress bar). ``chat_model``
    overrides the configured model (tests, notebooks); ``learner_model`` the model of the
    learner's own calls (default: ``learning.model``, else the actors' model)."""

    def __init__(
        self,
        config: ExperimentConfig,
        out_dir: str | Path,
        *,
        resume: bool = False,
        chat_model: BaseChatModel | None = None,
        cache: SQLiteResponseCache | None = None,
        learner_model: BaseChatModel | None = None,
        on_episode: Callable[[Trajectory], None] | None = None,
        label: str | None = None,
        notify: Callable[[str], None] | None = None,
        model_id: str | None = None,
        callbacks: Sequence[Any] = (),
        reward_hook: Callable[..., Any] | None = None,
    ) -> None:
        self.config = config
        self._label = label
        self._model_id = model_id
        """The model as manifests and tables name it (default: ``chat_model``'s own name, else
        ``model.spec``)."""
        self.notify = notify or logger.warning
        """Says what the run does when it is interrupted (the CLI prints it)."""
        from marlang.methods.lora.distributed import launched_rank, launched_world_size

        if launched_world_size() > 1 and launched_rank() > 0:
            # Data-parallel training (accelerate launch): process r keeps its own rollouts and
            # adapters in RUN/rank<r>/; process 0 writes the run directory itself.
            out_dir = Path(out_dir) / f"rank{launched_rank()}"
        self.run_dir = RunDirectory(out_dir, loggers=config.run.loggers)
        self.record = RunRecord(self.run_dir)
        self.resume = resume
        self._chat_model = chat_model
        self._cache = cache
        self._learner_model = learner_model
        self.on_episode = on_episode
        self.callbacks = list(callbacks)
        """Callbacks of the learner's own trainer (BenchMARL callbacks for a neural learner)."""
        self.reward_hook = reward_hook
        """A neural learner's per-agent reward hook, given in Python (see `marlang.methods.neural`)."""
        self.prompts = PromptLibrary(config.agents.prompt_dir)
        self.parts: RunParts | None = None
        """The run's parts, once built (`build_run`)."""
        self._learner: Learner | None = None
        """The learner of a run finalized without being driven (a neural learner's summary)."""
        self._stop = StopFlag()
        """Set by the first Ctrl-C; the engines, the learner and the executors check it."""
        self._watching = contextlib.ExitStack()
        self._cancel: Callable[[], Any] | None = None
        self._in_flight: InFlightCalls | None = None
        self._checkpoints: CheckpointDatabase | None = None

    # what the run is -------------------------------------------------------------------------
    @property
    def scripted(self) -> bool:
        """Whether every slot is the env's scripted agent (no model is loaded)."""
        return self.config.all_scripted

    @property
    def learner(self) -> Learner | None:
        return self.parts.learner if self.parts is not None else self._learner

    @property
    def model(self) -> BaseChatModel | None:
        return self.parts.model if self.parts is not None else None

    @property
    def slot_models(self) -> dict[str, BaseChatModel]:
        """Each LLM slot's chat model (``model`` for slots on the top-level section)."""
        return self.parts.slot_models if self.parts is not None else {}

    @property
    def cache(self) -> SQLiteResponseCache | None:
        return self.parts.cache if self.parts is not None else self._cache

    @property
    def model_id(self) -> str:
        """The model the agents act with, as the manifest, summary and tables name it: the
        ``chat_model`` given (its own name) or ``model.spec``."""
        if self.scripted:
            return "scripted"
        if self._model_id:
            return self._model_id
        if self._chat_model is not None:
            return build.chat_model_name(self._chat_model)
        return self.config.model.spec

    @property
    def setting(self) -> str:
        """The row label of this run in reports: protocol and learner, or the scripted team
        (a comparison passes its own label, naming what its grid varies)."""
        c = self.config
        if self._label:
            return self._label
        if c.agents.kind == "neural":  # a resumed run keeps the name it was trained under
            saved = (self.run_dir.read_json("manifest.json") or {}).get("setting") if self.resume else None
            return saved or c.learning.label
        if c.plays_graph:
            return f"graph, {c.learning_label}"
        if not self.scripted:
            return f"{c.protocol.label}, {c.learning_label}" + (f"; {c.team_label}" if c.team_label else "")
        return c.scripted_label

    def _make_env(self) -> MultiAgentEnv:
        return build.build_env(self.config)

    def _initial_policies(self) -> dict[str, str]:
        if self.parts is not None and self.parts.player is not None:  # a graph's: its prompts' defaults
            return dict(self.parts.player.prompts)
        return build.initial_policies(self.config)

    # running ---------------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run (or resume) the experiment, holding the run directory's lock throughout: a
        second process on the same directory is refused, naming the first."""
        check_not_a_comparison(self.run_dir)
        with self.run_dir.lock():
            if self.run_dir.exists():
                self.run_dir.remove_unfinished_writes()
            return self._drive(self.arun)

    def review(self, decisions: dict[str, Any]) -> RunResult:
        """Apply a reviewer's decisions to the paused update and continue the run."""
        with self.run_dir.lock():
            return self._drive(lambda: self.arun(review=decisions))

    def pending_review(self) -> dict[str, Any] | None:
        """What a paused run waits on (the update to review), or None."""
        payload = self.run_dir.read_json("review.json")
        return None if payload is None or payload.get("decided") else payload

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
        return handle_ctrl_c(stop, self.notify, lambda: self._cancel, lambda: self._in_flight)

    def _engines(self) -> list[LocalLM]:
        """The local engines of the run's models (each honours the run's `StopFlag`)."""
        learner_model = self.learner.context.model if self.learner is not None else None
        engines: list[LocalLM] = []
        for model in (self.model, self._learner_model, learner_model, *self.slot_models.values()):
            engine = engine_of(model)
            if engine is not None and all(engine is not e for e in engines):
                engines.append(engine)
        return engines

    def _own_experience(self) -> bool:
        """Whether the learner collects its own experience (a neural learner: BenchMARL)."""
        entry = learner_entry(build.learning_method(self.config))
        return (entry.learner_class or Learner).own_experience

    def _start(self, in_flight: InFlightCalls, checkpoint: CheckpointBarrier) -> RunLoop:
        """Build the run's parts (every refusal before the directory is touched), check the
        directory, start the learner, write config and manifest, and index what is on disk:
        the loop that drives the parts. The learner's episodes go to the loop's writer;
        ``checkpoint`` is the learner's barrier, which `arun` binds to its checkpointer."""
        c = self.config
        if not self.scripted and not self._own_experience():
            apply_torch_threads(c.run.threads, c.model.spec)
        episodes = EpisodeSink()
        builder = build_graph_run if c.plays_graph else build.build_run  # a user's graph, or marlang's own team
        parts = self.parts = builder(
            c, prompts=self.prompts, run_path=self.run_dir.path, stop=self._stop,
            trajectory=self.record.episodes.trajectory, watchers=[in_flight], chat_model=self._chat_model,
            cache=self._cache, learner_model=self._learner_model, callbacks=self.callbacks,
            reward_hook=self.reward_hook, episodes=episodes, checkpoint=checkpoint)
        check_directory(self.run_dir, c, self.resume)
        entries = parts.learner.start()
        self._create_directory(parts, entries)
        self.record.load()
        loop = RunLoop(
            config=c, record=self.record, setting=self.setting, make_env=self._make_env, learner=parts.learner,
            episode_graph=parts.episode_graph, recorder=parts.recorder, call=parts.call, options=parts.options,
            agents=parts.agents, decide=parts.decide, neural=parts.neural_slots, on_episode=self.on_episode,
            player=parts.player, progress=self._progress(parts.learner))
        episodes.bind(loop.write_episode)
        return loop

    def _progress(self, learner: Learner) -> Progress | None:
        """The progress bar of training episodes (none where a trainer of its own shows its own)."""
        c = self.config
        if not c.run.progress or learner.own_experience:
            return None
        from tqdm.auto import tqdm

        done = len(self.record.episodes.metrics_rows("train"))
        return tqdm(total=max(c.run.episodes, done), initial=done, desc=f"{c.run.name} [{self.setting}]",
                    unit="ep", leave=True)

    async def arun(self, review: dict[str, Any] | None = None) -> RunResult:

        """Drive the training graph over the run's parts (see `run`)."""
        c = self.config
        aloop, task = asyncio.get_running_loop(), asyncio.current_task()
        if task is None:  # asyncio.run runs every coroutine in a task
            raise RuntimeError("Experiment.arun runs in an asyncio task")
        self._cancel = lambda: aloop.call_soon_threadsafe(task.cancel)  # what the first Ctrl-C does
        in_flight, checkpoint = InFlightCalls(), CheckpointBarrier()
        loop = self._start(in_flight, checkpoint)
        learner = loop.learner
        paused = finished = completed = False
        self._in_flight = in_flight
        for engine in self._engines():
            self._watching.enter_context(engine.watching(self._stop))
        try:
            async with self._checkpointer() as saver:
                checkpoint.bind(saver.flushed)
                graph = build_training_graph(loop, learner, loop.options, checkpointer=saver)
                snapshot = await graph.aget_state(THREAD)
                loop.rollouts = int((snapshot.values or {}).get("rollouts") or c.rollouts_per_iteration)
                cfg = {**THREAD, "recursion_limit": 50 + 40 * loop.iterations_left(snapshot.values)}
                replayed = 0
                if (snapshot.values or {}).get("policy") and not (self.run_dir.path / "learner_state.json").exists():
                    # moved aside (it was damaged): the checkpoint holds the state the last commit wrote
                    self.run_dir.write_json("learner_state.json", snapshot.values["policy"])
                if snapshot.values:
                    self.run_dir.rebuild_llm_calls({e for _, _, e in self.record.episodes.recorded()},
                                                   learner.roles)
                    self.record.calls.load(self.run_dir.read_llm_calls())
                    replayed = await replay_lost_episodes(graph, loop, snapshot, self.notify)
                decision = decide(snapshot, loop.finished, review, self.run_dir.path)
                if decision is Resume.EXTEND:
                    await graph.aupdate_state(cfg, {}, as_node="commit")
                if decision.runs:
                    await graph.ainvoke(self._graph_input(decision, review), cfg)
                    snapshot = await graph.aget_state(THREAD)
                paused = any(t.interrupts for t in snapshot.tasks)
                finished = decision is Resume.FINISHED and not replayed
            completed = True
        finally:
            if loop.progress is not None:
                total = loop.progress.total
                if completed and not paused and total is not None and loop.progress.n < total:
                    loop.progress.total = loop.progress.n  # fewer episodes than planned: end at 100%
                loop.progress.close()
            self.run_dir.append_llm_calls(loop.recorder)
            loop.close()
        return RunResult(self.run_dir.path, self.finalize(), loop.played, paused, already_finished=finished)

    def _graph_input(self, decision: Resume, review: dict[str, Any] | None) -> Any:
        """What the training graph is invoked with for ``decision``."""
        from langgraph.types import Command

        if decision is Resume.APPLY_REVIEW:
            return Command(resume=review)
        if decision is Resume.FRESH and self.learner is not None:
            initial = self.learner.initial_state(self._initial_policies())
            initial.memories.update({a: list(own.memory) for a, own in self.config.team.items() if own.memory})
            return {"policy": initial.to_dict(), "rollouts": self.config.rollouts_per_iteration,
                    "next_episode": 0}
        return None  # CONTINUE, EXTEND: from the checkpoint

    @contextlib.asynccontextmanager
    async def _checkpointer(self) -> AsyncIterator[Any]:
        """The training graph's checkpointer on the run's checkpoint file (`_drive` ends its
        database thread however the run ends)."""
        import sqlite3

        from marlang.graphs.checkpoints import CheckpointDatabase
        from marlang.rundir.untrusted import checkpoint_error

        path = self.run_dir.path / CHECKPOINT_FILE
        database = self._checkpoints = CheckpointDatabase(path)
        try:
            saver = await database.open()
            try:
                yield saver
            finally:
                await database.aclose()
        except sqlite3.DatabaseError as err:  # a damaged file, a full or read-only disk: one line
            raise checkpoint_error(path, err) from None

    def finalize(self) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the run's files."""
        if self.learner is None and self._own_experience():
            self._learner = build.build_learner(
                self.config, model=None, learner_model=self._learner_model, prompts=self.prompts,
                call=CallContext(seed=self.config.run.seed), env=None, actors={}, trajectory=None,
                run_path=self.run_dir.path, stop=self._stop, chat=False, callbacks=self.callbacks,
                reward_hook=self.reward_hook)
        own_summary = self.learner.summary(self.setting) if self.learner is not None else None
        if own_summary is not None:
            return own_summary
        if self.parts is None:  # finalize without a run in this process: index the directory
            self.record.load()
        return self.record.finalize(
            setting=self.setting, config=self.config, initial_policies=self._initial_policies(),
            scripted=self.scripted, learner=build.learning_method(self.config), cache=self.cache)

    def _create_directory(self, parts: RunParts, entries: dict[str, Any]) -> None:
        """Write config and manifest (once the model is built, so the manifest names its
        weights; ``entries``: the learner's own). A resume keeps the original start and
        command and appends its own."""
        rd = self.run_dir
        manifest = {**self.manifest(self.model_id, parts.env, parts.adapters, model=parts.model), **entries}
        check_adapters(rd, parts.adapters)
        rd.create(redact_secrets(self.config.to_yaml()), rd.resumed_manifest(manifest))

    def manifest(self, model_id: str, env: MultiAgentEnv | None = None, adapters: dict[str, str] | None = None,
                 model: BaseChatModel | None = None) -> dict[str, Any]:
        return build.manifest(self.config, setting=self.setting, model_id=model_id, prompts=self.prompts,
                            model=model, env=env, adapters=adapters)


def run_experiment(config: ExperimentConfig, out_dir: str | Path, resume: bool = False, **kwargs: Any) -> RunResult:
    """Sync entry point: run (or resume) one config into ``out_dir``."""
    return Experiment(config, out_dir, resume=resume, **kwargs).run()
