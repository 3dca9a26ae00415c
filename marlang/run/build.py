"""Building a run, config to components: the chat models, the env, the LLM agents, the
protocol's decider, the episode graph and the learner (:func:`build_run`, read top to bottom
at the end of this file), and the manifest that names them. Nothing here writes a file or drives an event loop; that is
`marlang.run.experiment`'s.

Every refusal here is a one-line `ConfigError` raised before the run directory is created.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marlang.agents import CallContext, LLMAgent, ReflexionMemory
from marlang.config import ConfigError, ExperimentConfig, ModelConfig, redact_secrets, slot_player
from marlang.envs import make as make_env
from marlang.envs.core.base import MultiAgentEnv
from marlang.envs.core.numeric import NumericObservations
from marlang.learners import CheckpointBarrier, EpisodeSink, Learner, LearnerContext, learner_entry
from marlang.models.capabilities import NamesWeights, engine_of, scores_choices
from marlang.models.local_policy import LocalPolicy, local_policies
from marlang.prompts import PromptLibrary
from marlang.run.loop import LoopOptions
from marlang.rundir import package_versions

if TYPE_CHECKING:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.language_models import BaseChatModel

    from marlang.graphs.episode import DecideFn, EpisodeGraph
    from marlang.methods.neural.slot_policy import NeuralPolicy
    from marlang.models import SQLiteResponseCache, UsageRecorder
    from marlang.models.local_engine import LocalLM
    from marlang.types import StopFlag, Trajectory
    from marlang.usergraph import GraphPlayer


def default_response_cache_path() -> Path:
    from marlang.models import default_cache_dir

    return Path(default_cache_dir()) / "responses.sqlite"


def build_chat_model(m: ModelConfig, engine: Any = None) -> tuple[Any, Any]:
    """The configured chat model and its response cache (None when caching is off); a local
    model on ``engine`` (a loaded `LocalLM` of the same spec) when given."""
    from marlang.models import SQLiteResponseCache, load_chat_model

    cache_path = Path(m.cache_path) if m.cache_path else default_response_cache_path()
    cache = SQLiteResponseCache(cache_path) if m.cache else None
    params: dict[str, Any] = {
        "temperature": m.temperature, "top_p": m.top_p, "max_tokens": m.max_tokens,
        "timeout": m.timeout, "max_retries": m.max_retries, "cache": cache,
    }
    if engine is not None:
        params["engine"] = engine
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


# the env ------------------------------------------------------------------------------------
def build_env(config: ExperimentConfig) -> Any:
    """One instance of the configured env (each concurrent episode gets its own)."""
    c = config.env
    kwargs = dict(c.kwargs)
    if c.max_steps is not None:
        kwargs["max_steps"] = c.max_steps
    kwargs.update(sandbox_options(config))
    try:
        return make_env(c.id, n_agents=c.n_agents, **kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"env: {err}") from None


def sandbox_options(config: ExperimentConfig) -> dict[str, Any]:
    """The config's `sandbox:` section as the env's parameters, where the env runs
    generated code; set for an env that runs none, it is an error naming the section."""
    options = config.sandbox.model_dump(exclude_defaults=True)
    if options and not config.env.id.startswith("code/"):
        raise ConfigError(f"sandbox: {', '.join(options)} applies to the envs that run "
                          f"generated code (code/...), not {config.env.id!r}")
    return options


def start_sandbox(env: Any) -> None:
    """An env that runs generated code starts its sandbox now, so that a machine that cannot
    confine the code is refused in one line before anything is created."""
    if not isinstance(env, MultiAgentEnv):  # an env of one's own (a plain ParallelEnv) runs no code
        return
    from marlang.sandbox import IsolationUnavailableError

    try:
        env.sandbox  # noqa: B018 - the property starts the pool
    except IsolationUnavailableError as err:
        raise ConfigError(str(err)) from None


def world(env: Any) -> str:
    from marlang.envs.core.narration import world_description

    return world_description(env)


def instructions(agent: str, n_agents: int, world_text: str) -> str:
    """The fixed part of an actor's prompt, as learners see it (never rewritten)."""
    return (f"{agent} is one of {n_agents} agents acting together in {world_text}; at every step it reads "
            "its own observation, the team mission and the legal actions, thinks briefly, and answers "
            "one legal action.")


# the agents ---------------------------------------------------------------------------------
def action_selection(config: ExperimentConfig, model: Any, agent: str | None = None) -> str:
    """``agents.action_selection`` of ``agent``'s slot (None: the top-level one) resolved for
    its model (``auto``: score where it can)."""
    slot = config.slot(agent) if agent is not None else None
    settings, spec = (slot.agents, slot.model.spec) if slot is not None else (config.agents, config.model.spec)
    where = f"team.{agent}." if agent in config.team else "agents."
    mode = settings.action_selection
    scores = scores_choices(model)
    if mode == "auto":
        mode = "score" if scores else "generate"
    elif mode == "score" and not scores:
        raise ConfigError(
            f"{where}action_selection: 'score' needs a local model (local:... or hf:...); "
            f"{spec!r} can only 'generate'"
        )
    if mode == "generate" and settings.calibration != "none":
        raise ConfigError(
            f"{where}calibration {settings.calibration!r} calibrates scored actions and "
            f"{where}action_selection is 'generate'; use action_selection 'score' (a local model) "
            "or calibration 'none'")
    return mode


def slot_models(config: ExperimentConfig, model: Any) -> dict[str, Any]:
    """The chat model of every LLM slot: ``model`` on the top-level model section, one per other
    model section (slots whose sections differ only in ``adapters`` share it). Local weights
    are loaded once per spec: sections that differ in sampling settings share the engine."""
    loaded: dict[str, Any] = {}
    out: dict[str, Any] = {}
    engines = {e.model_id: e for e in [engine_of(model)] if e is not None}
    top = config.model.model_copy(update={"adapters": None})
    for name, slot in config.slots().items():
        if slot.kind != "llm":
            continue
        section = slot.model.model_copy(update={"adapters": None})
        if section == top:
            out[name] = model
            continue
        key = section.model_dump_json()
        if key not in loaded:
            try:
                loaded[key] = build_chat_model(section, engines.get(section.spec))[0]
            except ConfigError as err:
                raise ConfigError(str(err).replace("'model.", f"'team.{name}.model.", 1)) from None
            engine = engine_of(loaded[key])
            if engine is not None:
                engines.setdefault(engine.model_id, engine)
        out[name] = loaded[key]
    return out


def neural_slots(config: ExperimentConfig, env: Any) -> dict[str, NeuralPolicy]:
    """The trained policy of every neural slot (one loaded per checkpoint), checked against
    the env: a neural policy reads the numeric observations the env must have."""
    wanted = {a: s.checkpoint for a, s in config.slots().items() if s.kind == "neural" and s.checkpoint}
    if not wanted:
        return {}
    first = next(iter(wanted))
    if not isinstance(env.unwrapped, NumericObservations):
        raise ConfigError(f"team.{first}: a neural slot reads numeric observations, and env {config.env.id!r} "
                          "has none (the envs neural runs train on have them: lbf/*, rware/*, gridworld/*, "
                          "babyai-marl/*, ...)")
    from marlang.methods.neural.slot_policy import NeuralPolicy

    loaded: dict[str, NeuralPolicy] = {}
    for agent, spec in wanted.items():
        if spec not in loaded:
            loaded[spec] = NeuralPolicy.load(spec, config, f"team.{agent}.checkpoint")
    return {a: loaded[spec] for a, spec in wanted.items()}


def build_agents(config: ExperimentConfig, model: Any, prompts: PromptLibrary, world_text: str,
                 models: dict[str, Any] | None = None) -> dict[str, LLMAgent]:
    """One `LLMAgent` per LLM slot (a scripted slot has none), with its slot's settings and
    chat model (``models``: agent -> model, from :func:`slot_models`; default ``model``)."""
    c = config
    memory_size = c.learning.options.memory_capacity
    agents = {}
    for name, slot in c.slots().items():
        if slot.kind != "llm":
            continue
        chat = (models or {}).get(name, model)
        a, m = slot.agents, slot.model
        own = {key: getattr(a, key) for key in ("chain_of_thought", "reprompt", "fallback_action", "history",
                                                 "calibration")}
        own |= {key: getattr(m, key) for key in ("max_tokens", "message_max_tokens", "reflection_max_tokens")}
        agents[name] = LLMAgent(name, chat, policy=a.policy, memory=ReflexionMemory(memory_size), prompts=prompts,
                                n_agents=c.env.n_agents, sample_seeds=m.temperature > 0,
                                action_selection=action_selection(c, chat, name), world=world_text, role=slot.role,
                                **own)
    return agents


def initial_policies(config: ExperimentConfig) -> dict[str, str]:
    return {a: s.agents.policy for a, s in config.slots().items()}


def check_play_back(config: ExperimentConfig) -> None:
    """``model.adapters`` plays a trained LLM team back: a one-line error where no LLM agent
    could act with it (a scripted or neural team)."""
    if config.model.adapters and config.agents.kind != "llm":
        raise ConfigError(f"model.adapters plays a trained team of LLM agents back; agents.kind "
                          f"{config.agents.kind!r} has none (unset model.adapters, or use agents.kind llm)")


def _adapters_key(config: ExperimentConfig, name: str) -> str:
    """The config key that gives slot ``name`` its adapters directory."""
    own = config.team.get(name)
    return f"team.{name}.adapters" if own is not None and own.adapters else "model.adapters"


def play_back_adapters(config: ExperimentConfig, model: Any, agents: dict[str, Any]) -> dict[str, str]:
    """``model.adapters`` (or a slot's ``adapters``): those agents act with trained adapters
    (the ones that have one), loaded onto their slot's local model; slots on one model may name
    different runs (cross-play)."""
    wanted = {name: config.slot(name).model.adapters for name in agents}
    if not any(wanted.values()):
        return {}
    from marlang.methods.lora.playback import attach_trained_adapters

    hashes: dict[str, str] = {}
    engines: dict[int, tuple[LocalLM, dict[str, tuple[str, str]]]] = {}
    for name, spec in wanted.items():
        if not spec:
            continue
        key = _adapters_key(config, name)
        engine = engine_of(agents[name].model)
        if engine is None:
            raise ConfigError(f"{key} needs a local model (local:... or hf:...), not {config.slot(name).model.spec!r}")
        engines.setdefault(id(engine), (engine, {}))[1][name] = (spec, key)
    for engine, sources in engines.values():
        try:
            found = attach_trained_adapters(engine, sources, team=config.agent_names())
        except ValueError as err:
            raise ConfigError(str(err)) from None
        hashes.update({a: h for a, h in found.items() if a in sources})
    for name, agent in agents.items():
        agent.adapter = name if name in hashes else None
    return hashes


# the learner --------------------------------------------------------------------------------
def learning_method(config: ExperimentConfig) -> str:
    """The learner the run drives: the configured one, or ``none`` where nothing learns (a
    scripted team, a trained team played back with ``model.adapters``)."""
    if config.all_scripted or config.plays_back:
        return "none"
    return config.learning.method


def build_learner(config: ExperimentConfig, *, model: Any, learner_model: Any, prompts: PromptLibrary,
                  call: CallContext, env: Any, actors: dict[str, Any], trajectory: Any,
                  local: dict[str, LocalPolicy] | None = None,
                  run_path: Path, stop: Any, chat: bool = True, callbacks: Any = (),
                  reward_hook: Any = None, episodes: EpisodeSink | None = None,
                  checkpoint: CheckpointBarrier | None = None,
                  fixed: Mapping[str, str] | None = None, graph: GraphPlayer | None = None,
                  learner_class: type[Learner] | None = None) -> Learner:
    """The run's learner (``chat``: it may make model calls of its own, with ``learning.model``
    or the actors' model). ``episodes`` and ``checkpoint``: the run's hooks, which it binds
    once its loop and checkpointer exist (None: unbound ones, for a learner used alone).
    ``fixed``: the agents and the fixed part of each one's prompt where they are not the env's
    slots (a user's graph: its marked prompts or models); ``graph``: a user's graph's player;
    ``learner_class``: the class that trains it (`Learner.graph_learner`)."""
    c = config
    method = learning_method(c)
    entry = learner_entry(method)
    options = c.learning.options if method == c.learning.method else entry.options_model()
    own_model = options.learning_model
    if learner_model is None and chat and not c.all_scripted:
        learner_model = build_chat_model(own_model)[0] if own_model is not None else model
    world_text = world(env) if env is not None else ""
    if fixed is None:
        fixed = {a: instructions(a, c.env.n_agents, world_text) for a in c.agent_names()}
    context = LearnerContext(
        agents=list(fixed),
        model=learner_model,
        prompts=prompts,
        call=replace(call),
        env=env,
        actors=actors,
        local=dict(local or {}),
        trajectory=trajectory,
        record_episode=episodes if episodes is not None else EpisodeSink(),
        run_dir=run_path,
        instructions=dict(fixed),
        structured=(own_model.structured if own_model is not None else None) or c.model.structured,
        before_calls=checkpoint if checkpoint is not None else CheckpointBarrier(),
        stop=stop,
        config=c,
        learning=c.learning_slots() if not c.plays_graph else None,
        callbacks=list(callbacks),
        reward_hook=reward_hook,
        graph=graph,
    )
    return learner_class(options, context) if learner_class is not None else entry.factory(options, context)




# the manifest -------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    return package_versions(("marlang", "torch", "transformers", "langchain-core", "langgraph", "minigrid",
                             "pettingzoo", "overcooked-ai", "pymunk"))


def team_players(config: ExperimentConfig, model_id: str,
                 played: Mapping[str, str] | None = None) -> dict[str, str]:
    """What plays each slot (the manifest's ``team``): ``scripted``, its model (``model_id``
    on the top-level model section), ``+ adapters DIR`` and ``(frozen)`` where they apply.
    ``played``: the slots that act with trained adapters (see ``play_back_adapters``); a slot
    whose adapters directory holds none for it plays its base model and is named so."""
    top = config.model.model_copy(update={"adapters": None})
    learns = learning_method(config) != "none"
    out = {}
    for name, slot in config.slots().items():
        bare = slot.model.model_copy(update={"adapters": None})
        if played is not None and slot.model.adapters and name not in played:
            slot = slot.model_copy(update={"model": bare})
        frozen = slot.kind == "llm" and learns and not slot.learn
        out[name] = slot_player(slot, model_id if bare == top else None) + (" (frozen)" if frozen else "")
    return out


def manifest(config: ExperimentConfig, *, setting: str, model_id: str, prompts: PromptLibrary,
             model: Any = None, env: Any = None, adapters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The run's ``manifest.json``: what ran, with which versions, seed and prompt hashes.
    ``adapters``: the trained adapters played back, agent -> hash; ``team`` then names them
    slot by slot, as it does for a ``team:`` section."""
    c = config
    out = {
        "name": c.run.name,
        "setting": setting,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": [redact_secrets(arg) for arg in sys.argv],
        "seed": c.run.seed,
        "env_id": c.played,
        "model_id": model_id,
        "learner": learning_method(c),
        "iterations": c.total_iterations,
        "rollouts_per_iteration": c.rollouts_per_iteration,
        "prompt_hashes": prompts.hashes(),
        "versions": versions(),
    }
    if c.plays_back:
        out["played_back"] = c.learning.method
    if c.team or adapters:
        out["team"] = team_players(c, model_id, adapters if adapters else None)
    if adapters:
        out["adapters"] = dict(adapters)
    if isinstance(model, NamesWeights) and model.weights_id:
        out["weights_id"] = model.weights_id
    engine = engine_of(model)
    if engine is not None:
        out["device"] = str(engine.device)  # where the local model ran (cuda: the cost's GPU seconds)
    sandbox = env.sandbox if isinstance(env, MultiAgentEnv) else None
    if sandbox is not None:
        # Which isolation ran the generated code: it differs between machines.
        out["sandbox"] = sandbox.isolation.to_dict()
    return out


# the whole run ------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunParts:
    """Every part of one run, built from its config by :func:`build_run`."""

    options: LoopOptions
    learner: Learner
    env: MultiAgentEnv | None
    """The env the prompts describe and the learner narrates (None: a learner with
    experience of its own plays no text episodes)."""
    model: BaseChatModel | None
    """The actors' chat model (None: no LLM slot)."""
    cache: SQLiteResponseCache | None
    slot_models: dict[str, BaseChatModel]
    """Each LLM slot's chat model (``model`` for slots on the top-level section)."""
    neural_slots: dict[str, NeuralPolicy]
    agents: dict[str, LLMAgent]
    adapters: dict[str, str]
    """The trained adapters played back, agent -> hash."""
    decide: DecideFn | None
    """The protocol graph as a decider (None: no LLM slot)."""
    episode_graph: EpisodeGraph
    recorder: UsageRecorder
    call: CallContext
    """The run's call context: seed, call callbacks (the recorder first), concurrency limit."""
    player: GraphPlayer | None = None
    """Plays a user's graph (``graph:``) in place of env, agents and protocol."""


def build_run(config: ExperimentConfig, *, prompts: PromptLibrary, run_path: Path, stop: StopFlag,
              trajectory: Callable[[int], Trajectory], watchers: Sequence[BaseCallbackHandler] = (),
              chat_model: BaseChatModel | None = None, cache: SQLiteResponseCache | None = None,
              learner_model: BaseChatModel | None = None, callbacks: Sequence[Any] = (),
              reward_hook: Callable[..., Any] | None = None, episodes: EpisodeSink | None = None,
              checkpoint: CheckpointBarrier | None = None) -> RunParts:
    """Every part of a run of ``config``, checked: config to components, nothing written (the
    run directory at ``run_path`` is the learner's to write once the run starts). A setting
    the env, a model or the learner cannot serve is a one-line `ConfigError`. ``chat_model``
    and ``learner_model`` replace the configured models (tests, notebooks); ``watchers`` see
    every model call (the driver's in-flight calls); ``trajectory`` reads an episode back;
    ``episodes`` and ``checkpoint`` are the learner's hooks into the run, which the driver
    binds to its loop's writer and its checkpointer once they exist."""
    from marlang.graphs.episode import build_episode_graph, protocol_decider
    from marlang.graphs.protocols import build_protocol
    from marlang.models import UsageRecorder

    c = config
    if c.plays_graph:
        raise ValueError("build_run builds a run of marlang's own team; a run of a user's graph (graph:) is "
                         "built by marlang.run.graph_build.build_graph_run")
    check_play_back(c)
    method = learning_method(c)
    entry = learner_entry(method)
    learner_class = entry.learner_class or Learner
    own = learner_class.own_experience
    options = LoopOptions.from_config(c, None if method == "none" else learner_class)
    if not c.all_scripted:
        try:  # settings the learner cannot train fail here
            entry.check_config(c)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    env: MultiAgentEnv | None = None
    if not own:  # a learner with experience of its own plays no text episodes
        env = build_env(c)
        start_sandbox(env)
        try:  # a team the level cannot hold (too many agents for its room) fails here
            env.reset(seed=c.run.seed)
        except ValueError as err:
            raise ConfigError(f"env: {err}") from None
    model, models, neural, agents, adapters, decide = None, {}, {}, {}, {}, None
    if not c.all_scripted and env is not None:  # env: None for a learner with experience of its own
        if chat_model is not None:
            model = chat_model
        else:
            model, cache = build_chat_model(c.model)
        models = slot_models(c, model)
        neural = neural_slots(c, env)
        agents = build_agents(c, model, prompts, world(env), models)
        adapters = play_back_adapters(c, model, agents)
        try:  # a model the learner cannot train fails here
            trained = {id(m): m for a in c.learning_slots() if (m := models.get(a)) is not None}
            for m in trained.values() or [model]:
                entry.check_model(m, c.learning.options)
        except ValueError as err:
            raise ConfigError(f"learning: {err}") from None
        decide = protocol_decider(build_protocol(c.protocol.name, agents, c.protocol))
    recorder = UsageRecorder()
    call = CallContext(seed=c.run.seed, callbacks=[recorder, *watchers],
                       limiter=asyncio.Semaphore(c.model.max_concurrency))
    learner = build_learner(c, model=model, learner_model=learner_model, prompts=prompts, call=call, env=env,
                            actors=agents, local=local_policies({a: m.model for a, m in agents.items()}),
                            trajectory=trajectory, run_path=run_path, stop=stop, chat=not own,
                            callbacks=callbacks, reward_hook=reward_hook, episodes=episodes,
                            checkpoint=checkpoint)
    return RunParts(options=options, learner=learner, env=env, model=model, cache=cache, slot_models=models,
                    neural_slots=neural, agents=agents, adapters=adapters, decide=decide,
                    episode_graph=build_episode_graph(agents), recorder=recorder, call=call)
