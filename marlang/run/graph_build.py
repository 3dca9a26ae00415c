"""Building a run of a user's own LangGraph graph (``graph:`` and ``task:``): the compiled graph,
the task's inputs and reward, the marked prompts found in the app's source (the policies a learner
rewrites, starting from their defaults), the chat model every marked model plays, the player and
the learner. As for a run of marlang's own team, every refusal is a one-line `ConfigError`
raised before the run directory is created.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlang.agents import CallContext
from marlang.config import ConfigError, ExperimentConfig
from marlang.envs.core.graph_narrator import GraphWorld
from marlang.learners import CheckpointBarrier, EpisodeSink, Learner, learner_entry
from marlang.prompts import PromptLibrary
from marlang.run.build import RunParts, build_chat_model, build_learner, learning_method
from marlang.run.loop import LoopOptions
from marlang.usergraph import GraphPlayer, app_marks

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import BaseChatModel

    from marlang.models import SQLiteResponseCache
    from marlang.types import StopFlag, Trajectory


def prompt_instruction(name: str, build: str) -> str:
    """The fixed part of a marked prompt, as a learner sees it: where it plays."""
    return (f"{name} is a prompt of the LangGraph graph {build}; the graph's nodes read it when they call their "
            "chat model, and only its text may change.")


def graph_player(config: ExperimentConfig, model: BaseChatModel) -> GraphPlayer:
    """The player of ``config``'s graph over its task, every marked chat model playing ``model``:
    the graph built and its keys checked, the inputs loaded, the reward and the app's prompts found,
    each starting from its ``graph.prompts`` text where the config gives one, else the app's default;
    a one-line `ConfigError` for what is wrong with any of them."""
    spec, task = config.graph, config.task
    if spec is None or task is None:
        raise ConfigError("graph: a run of a graph needs graph: and task: sections")
    graph = spec.build_graph()
    items = task.load_items(spec.input)
    reward = task.reward_function()
    try:
        marks = app_marks(spec.build)
    except ValueError as err:  # a prompt marked twice with different defaults
        raise ConfigError(f"graph.build {spec.build!r}: {err}") from None
    defaults = marks.prompt_defaults()
    unknown = [name for name in spec.prompts if name not in defaults]
    if unknown:
        raise ConfigError(f"graph.prompts: {unknown[0]!r} is not a prompt {spec.build} marks; its marked prompts: "
                          f"{', '.join(defaults) or 'none'}")
    return GraphPlayer(graph=graph, spec=spec, task=task, items=items, reward=reward,
                       prompts={**defaults, **spec.prompts}, model=model)


def build_graph_run(config: ExperimentConfig, *, prompts: PromptLibrary, run_path: Path, stop: StopFlag,
                    trajectory: Callable[[int], Trajectory], watchers: Sequence[BaseCallbackHandler] = (),
                    chat_model: BaseChatModel | None = None, cache: SQLiteResponseCache | None = None,
                    learner_model: BaseChatModel | None = None, callbacks: Sequence[Any] = (),
                    reward_hook: Callable[..., Any] | None = None, episodes: EpisodeSink | None = None,
                    checkpoint: CheckpointBarrier | None = None) -> RunParts:
    """Every part of a run of ``config``'s graph (see `marlang.run.build.build_run`): the run's
    ``model`` (or ``chat_model``) plays every marked chat model, with the run's response cache,
    usage records and callbacks; the learner's agents are the marked prompts. It takes
    `build_run`'s arguments (``callbacks`` and ``reward_hook``, a neural learner's, go unused)."""
    from marlang.graphs.episode import build_episode_graph
    from marlang.models import UsageRecorder

    c = config
    method = learning_method(c)
    entry = learner_entry(method)
    learner_class = entry.learner_class or Learner
    if chat_model is not None:
        model = chat_model
    else:
        model, cache = build_chat_model(c.model)
    player = graph_player(c, model)
    if method != "none" and not player.prompts:
        raise ConfigError(f"learning.method {method!r} rewrites marked prompts, and {c.graph.build if c.graph else ''} "
                          "marks none; mark each prompt to train with marlang.prompt(NAME, DEFAULT) where the "
                          "node uses it, or use learning.method: none to play and record the graph")
    recorder = UsageRecorder()
    call = CallContext(seed=c.run.seed, callbacks=[recorder, *watchers],
                       limiter=asyncio.Semaphore(c.model.max_concurrency))
    build = c.graph.build if c.graph is not None else ""
    world = GraphWorld(build, tuple(player.prompts))
    fixed = {name: prompt_instruction(name, build) for name in player.prompts}
    learner = build_learner(c, model=model, learner_model=learner_model, prompts=prompts, call=call, env=world,
                            actors={}, trajectory=trajectory, run_path=run_path, stop=stop, episodes=episodes,
                            checkpoint=checkpoint, fixed=fixed)
    options = LoopOptions.from_config(c, None if method == "none" else learner_class)
    return RunParts(options=options, learner=learner, env=None, model=model, cache=cache, slot_models={},
                    neural_slots={}, agents={}, adapters={}, decide=None, episode_graph=build_episode_graph({}),
                    recorder=recorder, call=call, player=player)
