"""``marlang credit-check RUN``: grade marlang's credit critics against a counterfactual oracle
on the recorded episodes of a run, and write ``credit_check.json``.

The oracle (``marlang.evaluation.creditcheck.oracle``) restores each graded step of an episode and plays
counterfactuals on; the critics (``marlang.evaluation.creditcheck.critics``) read the same steps; the
grading (``marlang.evaluation.creditcheck.grading``) compares their orders of the agents. A run
of a user's graph is forked by ``marlang.evaluation.creditcheck.graph_oracle`` and graded per
episode and marked prompt. See docs/howto/credit-check.md for the formulas and the cost.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from marlang.config import ConfigError
from marlang.evaluation.creditcheck.critics import (
    CRITICS,
    CriticCredits,
    CriticInputs,
    GradedStep,
    episode_totals,
    run_critic,
)
from marlang.evaluation.creditcheck.grading import grade
from marlang.evaluation.creditcheck.oracle import (
    ALTERNATIVES,
    MAX_SHAPLEY_AGENTS,
    RESTORABLE_ENVS,
    Cost,
    ReplayMismatch,
    Rollout,
    one_step_difference,
    replay,
    restorable,
    step_credit,
)
from marlang.statistics.intervals import UNDEFINED, show
from marlang.types import Trajectory

logger = logging.getLogger(__name__)

CREDIT_CHECK_FILE = "credit_check.json"
GRAPH_SAMPLES = 4
"""Forks per prompt and episode of a graph run's oracle unless --samples says."""
GRAPH_TEMPERATURE = 0.7
"""Sampling temperature of a graph run's forked calls unless --temperature says."""
AGAINST: tuple[str, ...] = ("difference", "shapley")
FORMULAS = {
    "V(joint)": "team return from step t on (sum over steps of the mean reward across agents): the joint "
                "action at t, then the rollout policy, for at most the recorded episode's remaining steps "
                "(or --horizon); the mean over --samples draws for the random policy",
    "difference": "D_i(t) = V(recorded) - mean over a in A_i of V(recorded with a_i = a); A_i: i's other legal "
                  "actions at t (--alternatives legal), or its no-op where it has one (default)",
    "shapley": "phi_i(t) = sum over S not holding i of |S|!(n-|S|-1)!/n! (v(S+i) - v(S)); v(S) = V(members "
               "recorded, others their no-op; without one, the mean over their legal actions)",
    "episode credit": "sum over the episode's graded steps of the step credit (what a per-episode critic is "
                      "graded against)",
}


@dataclass
class CreditCheckOptions:
    critics: tuple[str, ...] | None = None
    """None: every critic the run can be graded with (a graph run's: langmarl)."""
    model: str | None = None
    rollout: str = "recorded"
    samples: int | None = None
    """Rollouts per counterfactual (None: 1 on an env, `GRAPH_SAMPLES` forks per prompt on a graph)."""
    seed: int = 0
    temperature: float | None = None
    """Sampling temperature of a graph run's forked calls (None: `GRAPH_TEMPERATURE`)."""
    horizon: int | None = None
    episodes: int | None = None
    steps: int | None = None
    """Graded steps per episode at most (evenly spread; None: every step)."""
    alternatives: str = "legal"
    against: str = "difference"
    shapley: bool = True
    progress: bool = False
    """Progress bars (tqdm's, on stderr) of the oracle's graded steps and of the critics."""


def _check_options(o: CreditCheckOptions) -> None:
    if o.alternatives not in ALTERNATIVES:
        raise ConfigError(f"--alternatives {o.alternatives!r}: valid choices are {', '.join(ALTERNATIVES)}")
    if o.against not in AGAINST:
        raise ConfigError(f"--against {o.against!r}: valid choices are {', '.join(AGAINST)}")
    if o.against == "shapley" and not o.shapley:
        raise ConfigError("--against shapley needs the Shapley values: drop --no-shapley")
    critics = () if o.critics is None else o.critics
    unknown = [c for c in critics if c not in CRITICS]
    if unknown or o.critics == ():
        raise ConfigError(f"--critics: unknown critic {', '.join(unknown) or '(none given)'}; "
                          f"valid choices: {', '.join(CRITICS)}")
    for name, value in (("--episodes", o.episodes), ("--steps", o.steps), ("--horizon", o.horizon)):
        if value is not None and value < (0 if name == "--horizon" else 1):
            raise ConfigError(f"{name} must be at least {0 if name == '--horizon' else 1}, not {value}")


def load_run(run_dir: Path, episodes: int | None = None) -> tuple[Any, list[Trajectory]]:
    """The run's config and recorded episodes; one line where it is no run, an env the oracle
    cannot restore, or holds no episode (a run of a user's graph forks by replaying its replies)."""
    from marlang.config import load_saved_config
    from marlang.rundir import RunDirectory

    if not (run_dir / "config.yaml").is_file():
        hint = "; give one of its runs" if any(run_dir.glob("*/config.yaml")) else ""
        raise ConfigError(f"credit-check {run_dir}: not a run directory (no config.yaml){hint}")
    config = load_saved_config(run_dir / "config.yaml")
    env_id = config.env.id
    if not config.plays_graph and not restorable(env_id):
        raise ConfigError(f"credit-check: env {env_id} cannot restore its state for counterfactuals (its episodes "
                          f"do not replay into a state that forks, or its actions are free text); the envs that "
                          f"can: {', '.join(RESTORABLE_ENVS)}")
    trajectories = [t for t in RunDirectory(run_dir).load_trajectories() if t.steps]
    if not trajectories:
        raise ConfigError(f"credit-check {run_dir}: the run holds no recorded episode (episodes.jsonl is missing "
                          "or empty); play some first: marlang run CONFIG --out DIR")
    return config, trajectories[:episodes] if episodes else trajectories


def graded_steps(n_steps: int, at_most: int | None) -> list[int]:
    """Which steps of an episode are graded: all, or ``at_most`` spread evenly (first and last kept)."""
    if at_most is None or at_most >= n_steps:
        return list(range(n_steps))
    if at_most == 1:
        return [0]
    return sorted({round(k * (n_steps - 1) / (at_most - 1)) for k in range(at_most)})


def _state_text(env: Any, observations: dict[str, Any]) -> str:
    if callable(getattr(env, "state_text", None)):
        return env.state_text()
    return "; ".join(f"{a}: {o.text}" for a, o in observations.items())


@contextmanager
def _progress(total: int, desc: str, unit: str, on: bool) -> Iterator[Any]:
    """A progress bar as ``marlang run``'s, cleared rather than left when the work fails (so a
    refusal stays one line)."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, leave=True, disable=not on)
    try:
        yield bar
    except BaseException:
        bar.leave = False
        raise
    finally:
        bar.close()


def credit_check(run_dir: str | Path, options: CreditCheckOptions | None = None) -> dict[str, Any]:
    """The credit check of ``run_dir``'s episodes (the content of ``credit_check.json``)."""
    from marlang.methods.neural.critics.options import critic_name
    from marlang.run.build import build_env, initial_policies

    o = options or CreditCheckOptions()
    run_dir = Path(run_dir)
    if o.critics is not None:
        o = replace(o, critics=tuple(dict.fromkeys(critic_name(c) for c in o.critics)))  # llm-mca is llm_mca
    _check_options(o)
    config, trajectories = load_run(run_dir, o.episodes)
    if config.plays_graph:
        return _graph_check(run_dir, config, trajectories, o)
    if o.temperature is not None:
        raise ConfigError("--temperature samples the forked calls of a run of a user's graph; an env's "
                          "counterfactuals play on with --rollout")
    critics = tuple(CRITICS) if o.critics is None else o.critics
    try:
        rollout = Rollout(o.rollout, 1 if o.samples is None else o.samples, o.seed, o.horizon)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    agents = list(trajectories[0].agents)
    shapley = o.shapley and len(agents) <= MAX_SHAPLEY_AGENTS
    cost, started = Cost(), time.perf_counter()
    oracle_steps: list[dict[str, Any]] = []
    graded: list[GradedStep] = []
    difference = CriticCredits("difference", "step")
    critic_cost = Cost()  # the difference critic's own env steps, apart from the oracle's
    llm = [c for c in critics if c != "difference"]
    model_spec = o.model or config.model.spec
    # built before the oracle's work, so a model that cannot load is said before minutes of it
    model = _chat_model(config, model_spec) if llm else None
    n_graded = sum(len(graded_steps(len(traj.steps), o.steps)) for traj in trajectories)
    with _progress(n_graded, "credit-check: oracle", "step", o.progress) as bar:
        for traj in trajectories:
            logger.info("oracle: episode %d (%d steps)", traj.episode, len(traj.steps))
            env = build_env(config)
            chosen = set(graded_steps(len(traj.steps), o.steps))
            try:
                for t, observations in replay(env, traj, cost):
                    if t not in chosen:
                        continue
                    credit = step_credit(env, traj, t, observations, rollout, cost, alternatives=o.alternatives,
                                         shapley=shapley, seed=o.seed)
                    row = {"episode": traj.episode, **asdict(credit)}
                    if credit.shapley is not None and credit.coalitions is not None:  # (set together)
                        row["efficiency_gap"] = sum(credit.shapley.values()) - (credit.coalitions[
                            "+".join(sorted(agents))] - credit.coalitions["{}"])
                    oracle_steps.append(row)
                    if "difference" in critics:
                        tick = time.perf_counter()
                        difference.credits[(traj.episode, t)] = one_step_difference(env, traj, t, critic_cost)
                        difference.asked += len(agents)
                        difference.seconds += time.perf_counter() - tick
                    after = (traj.steps[t + 1].observations if t + 1 < len(traj.steps) else traj.final_observations)
                    graded.append(GradedStep(traj.episode, t, credit.actions, sum(traj.steps[t].rewards.values())
                                             / max(len(traj.steps[t].rewards), 1), _state_text(env, observations),
                                             {a: ob.text for a, ob in observations.items()},
                                             {a: ob.text for a, ob in after.items()}))
                    bar.update(1)
            except ReplayMismatch as err:
                raise ConfigError(f"credit-check: {err}") from None
    oracle_seconds = time.perf_counter() - started - difference.seconds
    key = "shapley" if o.against == "shapley" else "difference"
    oracle = {(r["episode"], r["t"]): r[key] for r in oracle_steps}
    results: list[CriticCredits] = []
    if llm:
        env = build_env(config)
        env.reset(seed=trajectories[0].seed)
        inputs = CriticInputs(env=env, model=model, prompts=_prompts(config),
                              seed=config.run.seed, agents=agents, episodes=trajectories, steps=graded,
                              structured=config.model.structured, policies=initial_policies(config),
                              max_concurrency=config.model.max_concurrency)
    with _progress(len(critics), "credit-check: critics", "critic", o.progress) as bar:
        for name in critics:
            bar.set_postfix_str(name)
            if name == "difference":
                difference.notes["env_steps"] = critic_cost.env_steps
                results.append(difference)
            else:
                logger.info("critic %s on %d steps of %d episodes", name, len(graded), len(trajectories))
                results.append(run_critic(name, inputs))
            bar.update(1)
    rows = _critic_rows(results, oracle, agents, model_spec)
    return {
        "run": str(run_dir), "env_id": config.env.id, "agents": agents,
        "oracle": {
            "restore": "replay of the recorded joint actions from the recorded env seed, every observation and "
                       "reward checked against the record; a deep copy of the env at each graded step per "
                       "counterfactual",
            "rollout": o.rollout, "samples": rollout.draws, "seed": o.seed,
            "horizon": o.horizon if o.horizon is not None else "to the recorded episode's end",
            "alternatives": o.alternatives, "shapley": shapley,
            "default_action": "the agent's no-op (stay, wait, noop, ...) where it has one",
            "graded_against": key, "formulas": FORMULAS,
            "cost": {"env_steps": cost.env_steps, "forks": cost.forks, "seconds": round(oracle_seconds, 2)},
        },
        "counts": {"episodes": len(trajectories), "steps": len(oracle_steps),
                   "levels": len({t.seed for t in trajectories}),
                   "oracle_ties": sum(1 for c in oracle.values() if max(c.values()) - min(c.values()) <= 1e-9)},
        "critics": rows,
        "replies": {r.name: r.notes for r in results if r.notes and r.name != "difference"},
        "steps": [{**row, "critics": {r.name: r.credits.get((row["episode"], row["t"]))
                                      for r in results if r.unit == "step"}} for row in oracle_steps],
        "episodes": [{"episode": e, "oracle": c,
                      "critics": {r.name: r.credits.get((e, -1)) for r in results if r.unit == "episode"}}
                     for (e, _), c in episode_totals(oracle).items()],
    }


def _critic_rows(results: list[CriticCredits], oracle: dict[tuple[int, int], dict[str, float]], agents: list[str],
                 model_spec: str) -> list[dict[str, Any]]:
    """Each critic graded against the oracle (per step, or per episode for a per-episode critic)."""
    rows = []
    for r in results:
        reference = episode_totals(oracle) if r.unit == "episode" else oracle
        rows.append({"critic": r.name, "what": CRITICS[r.name], "unit": r.unit,
                     "model": None if r.name == "difference" else model_spec,
                     **grade(reference, r.credits, agents), "credited": len(r.credits),
                     "malformed": r.malformed, "asked": r.asked,
                     "cost": {**r.cost(), **({"env_steps": r.notes["env_steps"]} if "env_steps" in r.notes else {})}})
    return rows


_ENV_ONLY = (("--rollout", "rollout", "recorded"), ("--alternatives", "alternatives", "legal"),
             ("--against", "against", "difference"), ("--horizon", "horizon", None), ("--steps", "steps", None))
"""Options of an env's oracle, with their defaults: a graph run's oracle forks whole runs of the graph."""


def _graph_check(run_dir: Path, config: Any, trajectories: list[Trajectory], o: CreditCheckOptions) -> dict[str, Any]:
    """The credit check of a run of a user's graph: the graph oracle (`graph_oracle`) per episode
    and prompt, and LangMARL's critic reading the same episodes, graded per episode."""
    from marlang.config.sections import trains_weights
    from marlang.envs.core.graph_narrator import GraphWorld
    from marlang.evaluation.creditcheck.graph_oracle import GRAPH_FORMULAS, GRAPH_RESTORE, GraphCost, episode_credit
    from marlang.run.graph_build import graph_player

    for flag, name, default in _ENV_ONLY:
        if getattr(o, name) != default:
            raise ConfigError(f"credit-check: {flag} is an option of an env's oracle; {run_dir} plays a user's graph "
                              f"({config.played}), whose oracle forks whole runs of it (--samples, --temperature)")
    critics = ("langmarl",) if o.critics is None else o.critics
    steps = [c for c in critics if c != "langmarl"]
    if steps:
        raise ConfigError(f"credit-check: critic {steps[0]} credits an env's steps; {run_dir} plays a user's graph "
                          f"({config.played}): the valid choice there is --critics langmarl")
    samples = GRAPH_SAMPLES if o.samples is None else o.samples
    temperature = GRAPH_TEMPERATURE if o.temperature is None else o.temperature
    if samples < 1:
        raise ConfigError(f"--samples must be at least 1, not {samples}")
    if temperature < 0:
        raise ConfigError(f"--temperature must be at least 0, not {temperature}")
    played = [t for t in trajectories if t.metrics.get("error") is None]
    if not played:
        raise ConfigError(f"credit-check {run_dir}: every recorded episode failed (nothing to fork); give a run "
                          "whose graph answered some of its inputs")
    model_spec = o.model or config.model.spec
    model = _chat_model(config, model_spec)
    player, _ = graph_player(config, model)
    agents = list(dict.fromkeys(a for t in played for a in t.agents))
    cost, started = GraphCost(), time.perf_counter()

    async def oracle_credits(bar: Any) -> list[Any]:
        limiter = asyncio.Semaphore(config.model.max_concurrency)
        return list(await asyncio.gather(*(
            episode_credit(player, t, model, samples=samples, seed=o.seed, temperature=temperature,
                           limiter=limiter, cost=cost, done=lambda: bar.update(1)) for t in played)))

    forks = sum(len(t.agents) for t in played) * samples
    with _progress(forks, "credit-check: oracle", "graph run", o.progress) as bar:
        try:
            found = asyncio.run(oracle_credits(bar))
        except ReplayMismatch as err:
            raise ConfigError(f"credit-check: {err}") from None
    oracle_seconds = time.perf_counter() - started
    oracle = {(c.episode, -1): c.credit for c in found}
    world = GraphWorld(config.graph.build, tuple(player.prompts))
    graded = [GradedStep(t.episode, -1, {}, float(t.metrics.get("reward") or 0.0), "", {}, {}) for t in played]
    inputs = CriticInputs(env=world, model=model, prompts=_prompts(config), seed=config.run.seed, agents=agents,
                          episodes=played, steps=graded, structured=config.model.structured,
                          policies=dict(player.prompts), max_concurrency=config.model.max_concurrency)
    with _progress(1, "credit-check: critics", "critic", o.progress) as bar:
        logger.info("critic langmarl on %d episodes", len(played))
        result = run_critic("langmarl", inputs)
        bar.update(1)
    weights = trains_weights(config.learning.method) or bool(config.model.adapters)
    return {
        "run": str(run_dir), "env_id": config.played, "agents": agents,
        "oracle": {
            "restore": GRAPH_RESTORE, "rollout": f"sampled afresh at temperature {temperature:g}",
            "alternatives": f"{samples} forks per prompt", "samples": samples, "seed": o.seed,
            "temperature": temperature, "model": model_spec,
            "adapters": ("the run trained adapters; the forks sample the base model, not them" if weights
                         else None),
            "graded_against": "leave-one-out", "formulas": GRAPH_FORMULAS,
            "cost": {"graph_runs": cost.graph_runs, "model_calls": cost.model_calls,
                     "replayed_calls": cost.replayed_calls, "failed_forks": cost.failed_forks,
                     "seconds": round(oracle_seconds, 2)},
        },
        "counts": {"episodes": len(played), "steps": 0, "levels": len({t.seed for t in played}),
                   "failed_left_out": len(trajectories) - len(played),
                   "oracle_ties": sum(1 for c in oracle.values() if len(c) < 2 or max(c.values()) - min(c.values())
                                      <= 1e-9)},
        "critics": _critic_rows([result], oracle, agents, model_spec),
        "replies": {result.name: result.notes} if result.notes else {},
        "steps": [],
        "episodes": [{"episode": c.episode, "reward": c.reward, "values": c.values, "oracle": c.credit,
                      "critics": {result.name: result.credits.get((c.episode, -1))}} for c in found],
    }


def _chat_model(config: Any, spec: str) -> Any:
    from marlang.run.build import build_chat_model

    try:
        m = config.model.model_copy(update={"spec": spec})
        return build_chat_model(m)[0]
    except ValueError as err:
        raise ConfigError(f"--model {spec}: {err}") from None


def _prompts(config: Any) -> Any:
    from marlang.prompts import PromptLibrary

    return PromptLibrary(config.agents.prompt_dir)


def write_credit_check(result: dict[str, Any], out: str | Path) -> Path:
    from marlang.rundir import atomic_write_text, dumps_json

    path = Path(out)
    atomic_write_text(path, dumps_json(result, indent=1) + "\n")  # it makes the parent folders
    return path


def credit_table(result: dict[str, Any]) -> str:
    """The graded critics as a markdown table."""
    c = result["counts"]
    cost = result["oracle"]["cost"]
    if "graph_runs" in cost:  # a user's graph: whole runs of it forked per prompt
        played = f"{c['episodes']} episodes"
        spent = f"{cost['graph_runs']} graph runs ({cost['model_calls']} model calls)"
    else:
        played, spent = f"{c['episodes']} episodes, {c['steps']} steps", f"{cost['env_steps']} env steps"
    title = (f"Credit oracle of {result['run']} ({result['env_id']}): {played}, "
             f"{c['levels']} distinct levels; rollout {result['oracle']['rollout']}, graded against "
             f"{result['oracle']['graded_against']}; oracle cost {spent}, {cost['seconds']} s")
    head = ("| critic | model | unit | Spearman (chance 0) | top-agent agreement | chance | graded | oracle ties "
            "| malformed | calls | seconds |")
    lines = [title, "", head, "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["critics"]:
        rho = show(r["spearman"], 2)
        rho += "" if "n=" in rho else f" n={r['spearman']['n']}"
        chance = UNDEFINED if r["top_agent_chance"] is None else f"{r['top_agent_chance']:.2f}"
        lines.append(f"| {r['critic']} | {r['model'] or UNDEFINED} | {r['unit']} | {rho} | "
                     f"{show(r['top_agent'], 2)} | {chance} | {r['graded']} | "
                     f"{r['oracle_ties']} | {r['malformed']}/{r['asked']} | {r['cost']['calls']} | "
                     f"{r['cost']['seconds']} |")
    return "\n".join(lines)
