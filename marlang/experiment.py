"""Runs one experiment config: builds env, model, agents and graphs; writes the run directory.

Episodes run in waves of ``run.parallel``; every episode of a wave sees the Reflexion memory
left by the episodes before the wave, so a run (and a resumed run) is deterministic and a
rerun replays from the response cache without a single model call.
"""

from __future__ import annotations

import asyncio
import logging
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from marlang.agents import CallContext, LLMAgent, ReflexionMemory
from marlang.config import ConfigError, ExperimentConfig, ModelConfig
from marlang.envs_text import make as make_env
from marlang.graphs.episode import (
    build_episode_graph,
    protocol_decider,
    run_episode,
    scripted_decider,
)
from marlang.graphs.protocols import build_protocol
from marlang.prompts import PromptLibrary
from marlang.report import plot_learning_curves, summarize_episodes
from marlang.rundir import RunDirectory
from marlang.types import Trajectory

logger = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    episodes_run: int
    """Episodes played by this invocation (0 when everything was already finished)."""


def episode_metrics(traj: Trajectory, llm: dict[str, float] | None = None) -> dict[str, Any]:
    """The per-episode row of ``metrics.csv`` (also stored with the episode)."""
    decisions = [d for s in traj.steps for d in s.decisions.values()]
    invalid = sum(1 for d in decisions if not d.valid)
    llm = llm or {}
    return {
        "episode": traj.episode,
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
    if m.spec.startswith(("openai:", "litellm:")):
        if m.base_url:
            params["base_url"] = m.base_url
        if os.environ.get(m.api_key_env):
            params["api_key"] = os.environ[m.api_key_env]
    return load_chat_model(m.spec, **params), cache


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("marlang", "torch", "transformers", "langchain-core", "langgraph", "minigrid", "pettingzoo",
                "overcooked-ai", "pymunk"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


class Experiment:
    """One configured run. ``chat_model`` overrides the configured model (tests, notebooks)."""

    def __init__(
        self,
        config: ExperimentConfig,
        out_dir: str | Path,
        *,
        resume: bool = False,
        chat_model: Any = None,
        cache: Any = None,
        on_episode: Callable[[Trajectory], None] | None = None,
    ) -> None:
        self.config = config
        self.run_dir = RunDirectory(out_dir)
        self.resume = resume
        self._chat_model = chat_model
        self.on_episode = on_episode
        self.prompts = PromptLibrary(config.agents.prompt_dir)
        self.recorder: Any = None
        self.cache: Any = cache
        self.model: Any = None

    # building --------------------------------------------------------------------------------
    def _build_model(self) -> Any:
        if self._chat_model is not None:
            return self._chat_model
        self.model, self.cache = build_chat_model(self.config.model)
        return self.model

    def _build_agents(self, model: Any) -> dict[str, LLMAgent]:
        c = self.config
        return {
            name: LLMAgent(
                name,
                model,
                policy=c.agents.policies.get(name, c.agents.policy),
                memory=ReflexionMemory(c.learning.memory_size),
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
    def setting(self) -> str:
        """The row label of this run in reports: the protocol, or the scripted team and its cap."""
        c = self.config
        if c.agents.kind == "llm":
            return c.protocol.label
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

    def manifest(self, model_id: str) -> dict[str, Any]:
        return {
            "name": self.config.run.name,
            "setting": self.setting,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": sys.argv,
            "seed": self.config.run.seed,
            "env_id": self.config.env.id,
            "model_id": model_id,
            "prompt_hashes": self.prompts.hashes(),
            "versions": _versions(),
        }

    # running ---------------------------------------------------------------------------------
    def run(self) -> RunResult:
        return asyncio.run(self.arun())

    async def arun(self) -> RunResult:
        c = self.config
        finished = self._prepare_directory()
        todo = [e for e in range(c.run.episodes) if e not in finished]
        if not todo:
            return RunResult(self.run_dir.path, self.finalize(), 0)

        scripted = c.agents.kind == "scripted"
        envs = [self._make_env() for _ in range(min(c.run.parallel, len(todo)))]
        # The env truncates episodes; the graph's recursion limit only guards against a runaway loop.
        max_steps = c.env.max_steps or 100_000
        agents: dict[str, LLMAgent] = {}
        if not scripted:
            self.model = self._build_model()
            agents = self._build_agents(self.model)
            protocol_graph = build_protocol(c.protocol.name, agents, c.protocol)
            decide = protocol_decider(protocol_graph)
        from marlang.models import UsageRecorder

        self.recorder = UsageRecorder()
        graph = build_episode_graph(agents, learn=(c.learning.method == "reflexion" and not scripted))
        limiter = asyncio.Semaphore(c.model.max_concurrency)
        ctx_base = {"seed": c.run.seed, "callbacks": [self.recorder], "limiter": limiter}
        setting = self.setting

        progress = None
        if c.run.progress:
            from tqdm.auto import tqdm

            progress = tqdm(total=c.run.episodes, initial=len(finished), desc=f"{c.run.name} [{setting}]", unit="ep",
                            leave=False)

        async def play(episode: int, slot: int) -> None:
            env = envs[slot]
            team = env.scripted_team() if scripted else None
            traj = await run_episode(
                graph, env=env, episode=episode, seed=c.run.seed + episode,
                decide=scripted_decider(team) if scripted else decide,
                ctx=CallContext(episode=episode, **ctx_base), max_steps=max_steps + 1,
                env_id=c.env.id, protocol=setting, team=team,
            )
            llm = self.recorder.totals_by_episode().get(episode, {})
            self.run_dir.append_episode(traj, episode_metrics(traj, llm))
            self.recorder.append_csv(self.run_dir.llm_calls_file)
            finished[episode] = traj.to_dict()
            if progress is not None:
                progress.update(1)
            if self.on_episode is not None:
                self.on_episode(traj)

        played = 0
        try:
            parallel = c.run.parallel
            for wave_start in range(0, c.run.episodes, parallel):
                wave = [e for e in range(wave_start, min(c.run.episodes, wave_start + parallel)) if e not in finished]
                if not wave:
                    continue
                self._restore_memories(agents, finished, before=wave_start)
                await asyncio.gather(*(play(e, slot) for slot, e in enumerate(wave)))
                played += len(wave)
        finally:
            if progress is not None:
                progress.close()
            if self.recorder is not None:
                self.recorder.append_csv(self.run_dir.llm_calls_file)
        return RunResult(self.run_dir.path, self.finalize(), played)

    def _prepare_directory(self) -> dict[int, dict[str, Any]]:
        """Create the run directory, or load what a resumed run already finished."""
        rd = self.run_dir
        if rd.exists() and not self.resume:
            raise ConfigError(f"run directory {rd.path} already holds a run; pass --resume {rd.path} to continue it "
                              "or --out to choose another directory")
        finished: dict[int, dict[str, Any]] = {}
        if self.resume and rd.exists():
            dicts = rd.load_episode_dicts(repair=True)
            for d in dicts:
                if d["episode"] < self.config.run.episodes:
                    finished.setdefault(d["episode"], d)
            rd.rewrite_metrics([d["metrics"] for d in dicts])
            logger.info("resuming %s: %d of %d episodes already finished", rd.path, len(finished),
                        self.config.run.episodes)
        model_id = self.config.model.spec if self.config.agents.kind == "llm" else "scripted"
        rd.create(self.config.to_yaml(), self.manifest(model_id))
        return finished

    def _restore_memories(self, agents: dict[str, LLMAgent], finished: dict[int, dict[str, Any]], before: int) -> None:
        """Long-term memory for a wave: the reflections of every episode before it, in order."""
        for name, agent in agents.items():
            texts = [finished[e].get("reflections", {}).get(name, "") for e in sorted(finished) if e < before]
            agent.memory.load_state_dict({"reflections": [t for t in texts if t]})

    def finalize(self) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the episodes on disk."""
        dicts = sorted(self.run_dir.load_episode_dicts(), key=lambda d: d["episode"])
        rows = [d["metrics"] for d in dicts]
        summary = summarize_episodes(rows) if rows else {"episodes": 0}
        summary["setting"] = self.setting
        summary["env_id"] = self.config.env.id
        summary["model"] = self.config.model.spec if self.config.agents.kind == "llm" else "scripted"
        if self.cache is not None:
            summary["response_cache"] = {"hits": self.cache.hits, "misses": self.cache.misses}
        self.run_dir.write_json("summary.json", summary)
        if rows:
            plot_learning_curves({summary["setting"]: [r["steps"] for r in rows]},
                                 self.run_dir.path / "learning_curve.png")
        return summary


def run_experiment(config: ExperimentConfig, out_dir: str | Path, resume: bool = False, **kwargs: Any) -> RunResult:
    """Sync entry point: run (or resume) one config into ``out_dir``."""
    return Experiment(config, out_dir, resume=resume, **kwargs).run()
