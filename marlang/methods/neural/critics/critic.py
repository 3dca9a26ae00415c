"""The critic seam of the neural learners: one small interface every per-agent credit method
implements, and ``build_critic``, which makes the configured one (``learning.critic``) after
checking that the env can serve it.

A ``Critic`` gives each env instance its step observers (what it records at every step: env
snapshots, ego texts, counterfactual rewards; see ``marlang.methods.neural.critics.records``), maps each
collected batch to the per-agent rewards the learner trains on (it is a reward hook), and
reports columns for ``iterations.csv`` and entries for the manifest.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from marlang.methods.neural.critics.difference import DIFFERENCE_ENVS, DifferenceCritic, supports_difference

if TYPE_CHECKING:
    import torch
    from tensordict import TensorDictBase

    from marlang.config import ExperimentConfig


class Critic(Protocol):
    """A per-agent credit method for the neural learners."""

    name: str

    def observers(self) -> list[Any]:
        """Step observers for one new env instance (``marlang.methods.neural.critics.records.StepObserver``)."""
        ...

    def __call__(self, batch: TensorDictBase) -> torch.Tensor:
        """The per-agent training rewards of a collected batch (like ``("next", "agents", "reward")``)."""
        ...

    def metrics(self) -> dict[str, Any]:
        """Columns of this batch's ``iterations.csv`` row."""
        ...

    def manifest(self) -> dict[str, Any]:
        """What the run's manifest records about this critic."""
        ...


def build_critic(config: ExperimentConfig, out_dir: str | Path, *, resume: bool = False) -> Critic | None:
    """The critic ``learning.critic`` names (None for ``none``); a one-line ``ValueError`` when
    the env cannot serve it. ``out_dir`` is the run directory (LLM-MCA and LCA write
    ``credit/`` there)."""
    o = config.learning.options
    critic = getattr(o, "critic", "none")
    if critic == "none":
        return None
    env_id = config.env.id
    if critic == "difference":
        if not supports_difference(env_id):
            raise ValueError(f"learning.critic 'difference' needs an env whose state forks cleanly; "
                             f"env.id {env_id!r} is not one; valid choices: {', '.join(DIFFERENCE_ENVS)}")
        return DifferenceCritic(env_id)
    if critic in ("llm_mca", "llm_taca"):
        return _build_llm_mca(config, Path(out_dir), resume)
    return _build_lca(config, Path(out_dir), resume)


def _build_llm_mca(config: ExperimentConfig, out_dir: Path, resume: bool) -> Critic:
    from marlang.methods.neural.critics.llm_mca import LLMCreditCritic
    from marlang.models import UsageRecorder
    from marlang.models.structured import StructuredReplies
    from marlang.prompts import PromptLibrary

    o = config.learning.options
    env = _make_env(config, "text")
    for needed in ("state_text", "ego_text", "rank_snapshot"):
        if not callable(getattr(env, needed, None)):
            raise ValueError(  # noqa: TRY004 (config errors are ValueErrors: reported in one line)
                f"learning.critic {o.critic!r} needs the env's {needed}(); env.id {config.env.id!r} has none")
    model = critic_chat_model(config)
    return LLMCreditCritic(env, model, PromptLibrary(config.agents.prompt_dir), out_dir, options=o,
                           seed=config.run.seed, capacity=2 * (o.frames_per_batch // o.n_envs) + 4,
                           usage=UsageRecorder(), structured=StructuredReplies(config.model.structured, model),
                           max_concurrency=config.model.max_concurrency, resume=resume,
                           task_size=o.task_size if o.critic == "llm_taca" else 0)


def _make_env(config: ExperimentConfig, observation_mode: str) -> Any:
    from marlang.envs import make

    kwargs = dict(config.env.kwargs)
    if config.env.max_steps is not None:
        kwargs["max_steps"] = config.env.max_steps
    return make(config.env.id, n_agents=config.env.n_agents, observation_mode=observation_mode, **kwargs)


def _build_lca(config: ExperimentConfig, out_dir: Path, resume: bool) -> Critic:
    from marlang.methods.neural.critics.lca import LCACritic, default_groups, named_groups
    from marlang.methods.neural.critics.rankers import HeuristicRanker, SyntheticRanker

    o, env_id = config.learning.options, config.env.id
    env = _make_env(config, "numeric")
    env.reset(seed=config.run.seed)
    if o.ranker in ("heuristic", "synthetic") and not (callable(getattr(env, "rank_states", None))
                                                       and callable(getattr(env, "rank_snapshot", None))):
        raise ValueError(f"learning.ranker {o.ranker!r} needs the env's rank_states heuristic; env.id {env_id!r} "
                         "has none; use learning.ranker: llm")
    if o.ranker == "llm" and not callable(getattr(env, "ego_text", None)):
        raise ValueError(f"learning.ranker 'llm' needs ego-view text of every state; env.id {env_id!r} has none")
    groups = named_groups(o.ranker_groups) if o.ranker_groups else default_groups(env)
    # One batch's steps per env, plus a reset record per episode (at most one per step).
    capacity = 2 * (o.frames_per_batch // o.n_envs) + 4
    usage, notes = None, {}
    if o.ranker == "heuristic":
        ranker: Any = HeuristicRanker(env)
    elif o.ranker == "synthetic":
        ranker = SyntheticRanker(env, o.ranker_accuracy, seed=config.run.seed)
    else:
        ranker, usage = _llm_ranker(config, env, groups)
        notes["key_steps.txt"] = ranker.preamble + "\n"
    return LCACritic(env, ranker, groups, out_dir, options=o, seed=config.run.seed, capacity=capacity,
                     texts=o.ranker == "llm", usage=usage, resume=resume, notes=notes)


def _llm_ranker(config: ExperimentConfig, env: Any, groups: dict[str, list[str]]) -> tuple[Any, Any]:
    from marlang.methods.neural.critics.lca import ranker_prompts
    from marlang.methods.neural.critics.rankers import LLMRanker
    from marlang.models import UsageRecorder
    from marlang.prompts import PromptLibrary

    preamble, question, _ = ranker_prompts(PromptLibrary(config.agents.prompt_dir), env, _make_env(config, "text"),
                                           groups, dependence=config.learning.options.ranker_dependence,
                                           seed=config.run.seed)
    usage = UsageRecorder()
    ranker = LLMRanker(critic_chat_model(config), preamble=preamble, question=question,
                       max_tokens=config.model.max_tokens, seed=config.run.seed,
                       max_concurrency=config.model.max_concurrency, callbacks=[usage])
    return ranker, usage


def critic_chat_model(config: ExperimentConfig) -> Any:
    """The chat model of ``learning.critic_model`` (default ``model.spec``), called as the
    actors' model is (``model.*`` settings) through the response cache."""
    from marlang.models import SQLiteResponseCache, default_cache_dir, load_chat_model

    m = config.model
    spec = config.learning.options.critic_model or m.spec
    cache = None
    if m.cache:
        cache = SQLiteResponseCache(Path(m.cache_path) if m.cache_path
                                    else Path(default_cache_dir()) / "responses.sqlite")
    params: dict[str, Any] = {"temperature": m.temperature, "top_p": m.top_p, "max_tokens": m.max_tokens,
                              "timeout": m.timeout, "max_retries": m.max_retries, "cache": cache}
    if spec.startswith("openai:"):
        params["token_limit_field"] = m.token_limit_field
    if spec.startswith(("openai:", "litellm:")):
        if m.base_url:
            params["base_url"] = m.base_url
        if os.environ.get(m.api_key_env):
            params["api_key"] = os.environ[m.api_key_env]
    try:
        return load_chat_model(spec, **params)
    except ValueError as err:
        raise ValueError(f"learning.critic_model {spec!r}: {err}") from None
