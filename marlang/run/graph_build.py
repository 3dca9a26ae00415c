"""Building a run of a user's own LangGraph graph (``graph:`` and ``task:``): the compiled graph,
the task's inputs and reward, the marks found in the app's source (the prompts a learner rewrites,
starting from their defaults, or the models whose adapters it trains), the chat model every
marked model plays, the player and the learner. As for a run of marlang's own team, every
refusal is a one-line `ConfigError` raised before the run directory is created.
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
from marlang.models.accounting import UNKNOWN_ROLE
from marlang.models.capabilities import engine_of
from marlang.models.local_policy import local_policies
from marlang.prompts import PromptLibrary
from marlang.run.build import RunParts, build_chat_model, build_learner, learning_method
from marlang.run.loop import LoopOptions
from marlang.tables.report import LLM_ROLES
from marlang.usergraph import AppMarks, GraphPlayer, MarkedModel, app_marks

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import BaseChatModel

    from marlang.models import SQLiteResponseCache
    from marlang.types import StopFlag, Trajectory


def prompt_instruction(name: str, build: str) -> str:
    """The fixed part of a marked prompt, as a learner sees it: where it plays."""
    return (f"{name} is a prompt of the LangGraph graph {build}; the graph's nodes read it when they call their "
            "chat model, and only its text may change.")


def graph_player(config: ExperimentConfig, model: BaseChatModel) -> tuple[GraphPlayer, AppMarks]:
    """The player of ``config``'s graph over its task, every marked chat model playing ``model``,
    and the marks found in the app's source: the graph built and its keys checked, the inputs
    loaded, the reward and the marks found; a one-line `ConfigError` for what is wrong."""
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
    taken = [role for role in marks.models if role in (*LLM_ROLES, UNKNOWN_ROLE)]
    if taken:  # llm_calls.csv and the cost tables count a marked model's calls under its role
        raise ConfigError(f"graph.build {spec.build!r} marks a chat model with the role {taken[0]!r}, which "
                          f"marlang's own calls are counted under ({', '.join(LLM_ROLES)}); give it another name")
    defaults = marks.prompt_defaults()
    unknown = [name for name in spec.prompts if name not in defaults]
    if unknown:
        raise ConfigError(f"graph.prompts: {unknown[0]!r} is not a prompt {spec.build} marks; its marked prompts: "
                          f"{', '.join(defaults) or 'none'}")
    # each prompt starts from its graph.prompts text where the config gives one, else the app's default
    player = GraphPlayer(graph=graph, spec=spec, task=task, items=items, reward=reward,
                         prompts={**defaults, **spec.prompts}, model=model)
    return player, marks


def _trained(config: ExperimentConfig, method: str, learner_class: type[Learner], player: GraphPlayer,
             marks: AppMarks, model: BaseChatModel) -> tuple[dict[str, str], dict[str, MarkedModel]]:
    """What ``method`` trains in the graph, with the fixed part of each one's prompt as the
    learner sees it, and, for a weight-space method, each marked model role as an actor."""
    build = config.graph.build if config.graph is not None else ""
    if method == "none":
        return {name: prompt_instruction(name, build) for name in player.prompts}, {}
    if learner_class.uses_adapters:
        if not marks.models:
            raise ConfigError(f"learning.method {method!r} trains a LoRA adapter per marked chat model, and {build} "
                              "marks none; mark each model to train with marlang.chat_model(ROLE, DEFAULT) where "
                              "the node builds it")
        try:
            learner_entry(method).check_model(model, config.learning.options)
        except ValueError as err:
            raise ConfigError(f"learning: {err}") from None
        fixed = {role: f"{role} is a marked chat model of the LangGraph graph {build}" for role in marks.models}
        return fixed, {role: MarkedModel(role, model) for role in marks.models}
    if not player.prompts:
        raise ConfigError(f"learning.method {method!r} rewrites marked prompts, and {build} marks none; mark each "
                          "prompt to train with marlang.prompt(NAME, DEFAULT) where the node uses it, or use "
                          "learning.method: none to play and record the graph")
    return {name: prompt_instruction(name, build) for name in player.prompts}, {}


def play_back(config: ExperimentConfig, player: GraphPlayer, marks: AppMarks, model: BaseChatModel) -> dict[str, str]:
    """``model.adapters`` on a graph trained by grpo or magrpo: each marked model role plays its
    trained adapter greedily on the local base (the player's models); returns each role's
    adapter hash (the manifest's)."""
    from marlang.methods.lora.playback import attach_trained_adapters
    from marlang.methods.magrpo.graph import GraphChatModel

    engine, spec = engine_of(model), config.model.adapters
    if engine is None or spec is None:
        raise ConfigError(f"model.adapters needs a local model (local:... or hf:...), not {config.model.spec!r}")
    roles = list(marks.models)
    try:
        hashes = attach_trained_adapters(engine, dict.fromkeys(roles, (spec, "model.adapters")), team=roles)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    longest = getattr(config.learning.options, "max_new_tokens", config.model.max_tokens)  # as trained
    player.models = {role: GraphChatModel(engine=engine, adapter=role, role=role, temperature=0.0,
                                          max_tokens=longest) for role in hashes}
    return hashes


def build_graph_run(config: ExperimentConfig, *, prompts: PromptLibrary, run_path: Path, stop: StopFlag,
                    trajectory: Callable[[int], Trajectory], watchers: Sequence[BaseCallbackHandler] = (),
                    chat_model: BaseChatModel | None = None, cache: SQLiteResponseCache | None = None,
                    learner_model: BaseChatModel | None = None, callbacks: Sequence[Any] = (),
                    reward_hook: Callable[..., Any] | None = None, episodes: EpisodeSink | None = None,
                    checkpoint: CheckpointBarrier | None = None) -> RunParts:
    """Every part of a run of ``config``'s graph (see `marlang.run.build.build_run`): the run's
    ``model`` (or ``chat_model``) plays every marked chat model, with the run's response cache,
    usage records and callbacks; the learner's agents are the marked prompts (``langmarl``) or
    the marked models (``grpo``, ``magrpo``: an adapter each on the local base, loaded once). It
    takes `build_run`'s arguments (``callbacks`` and ``reward_hook``, a neural learner's, go
    unused)."""
    from marlang.graphs.episode import build_episode_graph
    from marlang.models import UsageRecorder

    c = config
    method = learning_method(c)
    learner_class = (learner_entry(method).learner_class or Learner).graph_learner()
    if learner_class is None:
        raise ConfigError(f"learning.method {method!r} does not train a graph")
    try:
        learner_class.check_config(c)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    if chat_model is not None:
        model = chat_model
    else:
        model, cache = build_chat_model(c.model)
    player, marks = graph_player(c, model)
    adapters = play_back(c, player, marks, model) if c.plays_back else {}
    fixed, actors = _trained(c, method, learner_class, player, marks, model)
    recorder = UsageRecorder()
    call = CallContext(seed=c.run.seed, callbacks=[recorder, *watchers],
                       limiter=asyncio.Semaphore(c.model.max_concurrency))
    world = GraphWorld(c.graph.build if c.graph is not None else "", tuple(player.prompts))
    learner = build_learner(c, model=model, learner_model=learner_model, prompts=prompts, call=call, env=world,
                            actors=actors, local=local_policies({role: model for role in actors}),
                            trajectory=trajectory, run_path=run_path, stop=stop, episodes=episodes,
                            checkpoint=checkpoint, fixed=fixed, graph=player,
                            learner_class=None if method == "none" else learner_class)
    options = LoopOptions.from_config(c, None if method == "none" else learner_class)
    return RunParts(options=options, learner=learner, env=None, model=model, cache=cache, slot_models={},
                    neural_slots={}, agents={}, adapters=adapters, decide=None, episode_graph=build_episode_graph({}),
                    recorder=recorder, call=call, player=player)
