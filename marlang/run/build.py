"""The parts of a run built from its config: the chat model, the env, the LLM agents, the
protocol's decider, the learner, and the manifest that names them.

Every refusal here is a one-line `ConfigError` raised before the run directory is created.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from marlang.agents import CallContext, LLMAgent, ReflexionMemory
from marlang.config import ConfigError, ExperimentConfig, ModelConfig, redact_secrets
from marlang.envs import make as make_env
from marlang.learners import Learner, LearnerContext, learner_entry
from marlang.prompts import PromptLibrary
from marlang.rundir import package_versions


def default_response_cache_path() -> Path:
    from marlang.models import default_cache_dir

    return Path(default_cache_dir()) / "responses.sqlite"


def build_chat_model(m: ModelConfig) -> tuple[Any, Any]:
    """The configured chat model and its response cache (None when caching is off)."""
    from marlang.models import SQLiteResponseCache, load_chat_model

    cache_path = Path(m.cache_path) if m.cache_path else default_response_cache_path()
    cache = SQLiteResponseCache(cache_path) if m.cache else None
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


def versions() -> dict[str, str]:
    return package_versions(("marlang", "torch", "transformers", "langchain-core", "langgraph", "minigrid",
                             "pettingzoo", "overcooked-ai", "pymunk"))


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
    if isinstance(getattr(type(env), "sandbox", None), property):
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
def action_selection(config: ExperimentConfig, model: Any) -> str:
    """``agents.action_selection`` resolved for the model (``auto``: score where it can)."""
    mode = config.agents.action_selection
    scores = getattr(model, "supports_choices", False)
    if mode == "auto":
        mode = "score" if scores else "generate"
    elif mode == "score" and not scores:
        raise ConfigError(
            f"agents.action_selection: 'score' needs a local model (local:... or hf:...); "
            f"{config.model.spec!r} can only 'generate'"
        )
    if mode == "generate" and config.agents.calibration != "none":
        raise ConfigError(
            f"agents.calibration {config.agents.calibration!r} calibrates scored actions and "
            "agents.action_selection is 'generate'; use action_selection 'score' (a local model) "
            "or calibration 'none'")
    return mode


def build_agents(config: ExperimentConfig, model: Any, prompts: PromptLibrary, world_text: str
                 ) -> dict[str, LLMAgent]:
    c = config
    memory_size = getattr(c.learning.options, "memory_size", 3)
    selection = action_selection(c, model)
    return {
        name: LLMAgent(
            name,
            model,
            policy=c.agents.policies.get(name, c.agents.policy),
            memory=ReflexionMemory(memory_size),
            prompts=prompts,
            n_agents=c.env.n_agents,
            chain_of_thought=c.agents.chain_of_thought,
            reprompt=c.agents.reprompt,
            fallback_action=c.agents.fallback_action,
            history=c.agents.history,
            max_tokens=c.model.max_tokens,
            message_max_tokens=c.model.message_max_tokens,
            reflection_max_tokens=c.model.reflection_max_tokens,
            sample_seeds=c.model.temperature > 0,
            action_selection=selection,
            world=world_text,
            calibration=c.agents.calibration,
        )
        for name in c.agent_names()
    }


def initial_policies(config: ExperimentConfig) -> dict[str, str]:
    c = config
    return {a: c.agents.policies.get(a, c.agents.policy) for a in c.agent_names()}


def check_play_back(config: ExperimentConfig) -> None:
    """``model.adapters`` plays a trained LLM team back: a one-line error where no LLM agent
    could act with it (a scripted or neural team)."""
    if config.model.adapters and config.agents.kind != "llm":
        raise ConfigError(f"model.adapters plays a trained team of LLM agents back; agents.kind "
                          f"{config.agents.kind!r} has none (unset model.adapters, or use agents.kind llm)")


def play_back_adapters(config: ExperimentConfig, model: Any, agents: dict[str, Any]) -> dict[str, str]:
    """``model.adapters``: the agents act with trained adapters (those that have one)."""
    spec = config.model.adapters
    if not spec:
        return {}
    from marlang.trainers.playback import attach_trained_adapters

    engine = getattr(model, "engine", None)
    if engine is None:
        raise ConfigError(f"model.adapters needs a local model (local:... or hf:...), not {config.model.spec!r}")
    try:
        hashes = attach_trained_adapters(engine, spec, list(agents))
    except ValueError as err:
        raise ConfigError(str(err)) from None
    for name, agent in agents.items():
        agent.adapter = name if name in hashes else None
    return {a: h for a, h in hashes.items() if a in agents}


# the learner --------------------------------------------------------------------------------
def learning_method(config: ExperimentConfig) -> str:
    """The learner the run drives: the configured one, or ``none`` where nothing learns (a
    scripted team, a trained team played back with ``model.adapters``)."""
    if config.agents.kind == "scripted" or config.plays_back:
        return "none"
    return config.learning.method


def build_learner(config: ExperimentConfig, *, model: Any, learner_model: Any, prompts: PromptLibrary,
                  call: dict[str, Any], env: Any, actors: dict[str, Any], trajectory: Any,
                  run_path: Path, stop: Any, chat: bool = True, callbacks: Any = (),
                  reward_hook: Any = None) -> Learner:
    """The run's learner (``chat``: it may make model calls of its own, with ``learning.model``
    or the actors' model)."""
    c = config
    method = learning_method(c)
    entry = learner_entry(method)
    options = c.learning.options if method == c.learning.method else entry.options_model()
    if learner_model is None and chat and c.agents.kind != "scripted":
        learning_model = getattr(options, "model", None)
        learner_model = build_chat_model(learning_model)[0] if learning_model is not None else model
    world_text = world(env) if env is not None else ""
    context = LearnerContext(
        agents=c.agent_names(),
        model=learner_model,
        prompts=prompts,
        call=CallContext(**call),
        env=env,
        actors=actors,
        trajectory=trajectory,
        run_dir=run_path,
        instructions={a: instructions(a, c.env.n_agents, world_text) for a in c.agent_names()},
        structured=getattr(getattr(options, "model", None), "structured", None) or c.model.structured,
        stop=stop,
        config=c,
        callbacks=list(callbacks),
        reward_hook=reward_hook,
    )
    return entry.factory(options, context)


# the manifest -------------------------------------------------------------------------------
def manifest(config: ExperimentConfig, *, setting: str, model_id: str, prompts: PromptLibrary,
             model: Any = None, env: Any = None) -> dict[str, Any]:
    """The run's ``manifest.json``: what ran, with which versions, seed and prompt hashes."""
    c = config
    out = {
        "name": c.run.name,
        "setting": setting,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": [redact_secrets(arg) for arg in sys.argv],
        "seed": c.run.seed,
        "env_id": c.env.id,
        "model_id": model_id,
        "learner": learning_method(c),
        "iterations": c.total_iterations,
        "rollouts_per_iteration": c.rollouts_per_iteration,
        "prompt_hashes": prompts.hashes(),
        "versions": versions(),
    }
    if c.plays_back:
        out["played_back"] = c.learning.method
    weights = getattr(model, "weights_id", None)
    if weights:
        out["weights_id"] = weights
    sandbox = getattr(env, "sandbox", None)
    if sandbox is not None:
        # Which isolation ran the generated code: it differs between machines.
        out["sandbox"] = sandbox.isolation.to_dict()
    return out
