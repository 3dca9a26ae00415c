"""The run's side of the training loop: plays an iteration's rollouts, evaluates candidate
policies, commits updates, and writes the run directory (episodes, iterations, summary).

`RunRuntime` is what the training graph's nodes call; `marlang.experiment` builds the
pieces (env, model, agents, protocol, learner) and hands them over.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marlang.agents import CallContext
from marlang.config import ExperimentConfig
from marlang.graphs.episode import run_episode, scripted_decider
from marlang.report import iteration_row, paired_change, plot_iteration_curves, summarize_episodes
from marlang.rundir import EVAL_EPISODE_BASE, RunDirectory
from marlang.types import Candidate, PolicyState, RolloutPlan, Trajectory

logger = logging.getLogger(__name__)

EVAL_BASELINE_OFFSET = 500_000
"""A check's episodes with the current policies: the candidate's episode ids plus this."""

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



def _adapter_ref(ref: Any) -> dict[str, Any]:
    """An adapter as the summary names it: hash, path and the update that wrote it."""
    if not isinstance(ref, dict):  # a play-back's manifest gives the hash alone
        return {"hash": ref}
    out = {"hash": ref.get("hash"), "path": ref.get("path")}
    update = Path(str(ref.get("path") or "")).parent.name
    if update.isdigit():
        out["update"] = int(update)
    return out


@dataclass
class RunRuntime:
    """The training graph's runtime for one run: rollouts, evaluation, commits, run files."""

    config: ExperimentConfig
    run_dir: RunDirectory
    setting: str
    make_env: Callable[[], Any]
    initial_policies: dict[str, str]
    agents: dict[str, Any] = field(default_factory=dict)
    learner: Any = None
    recorder: Any = None
    decide: Any = None
    episode_graph: Any = None
    ctx_base: dict[str, Any] = field(default_factory=dict)
    cache: Any = None
    on_episode: Callable[[Trajectory], None] | None = None
    progress: Any = None
    played: int = 0
    rollouts: int | None = None
    """K as stored in the training checkpoint (None: not started yet, the config's K)."""
    _envs: list[Any] = field(default_factory=list)
    _free_envs: asyncio.Queue[Any] | None = None
    _trajectories: dict[int, Trajectory] = field(default_factory=dict)

    @property
    def scripted(self) -> bool:
        return self.config.agents.kind == "scripted"

    def close(self) -> None:
        for env in self._envs:
            env.close()
        self._envs = []

    def total_iterations(self) -> int:
        """``learning.iterations``, or ``run.episodes`` / K rounded up, with the K the run
        started with (``rollouts``), not today's ``run.parallel``."""
        c = self.config
        if c.learning.iterations is not None or self.rollouts is None:
            return c.total_iterations
        return -(-c.run.episodes // self.rollouts)

    def finished(self, state: dict[str, Any]) -> bool:
        """Whether the training state after a commit has nothing left to play: its
        ``learning.iterations`` done, or (a run measured in episodes) ``run.episodes`` training
        episodes played, a partly filled last iteration counting only its own episodes."""
        c = self.config
        iteration = int(state["policy"]["iteration"])
        if c.learning.iterations is not None or self.rollouts is None:
            return iteration >= self.total_iterations()
        return int(state.get("next_episode", iteration * self.rollouts)) >= c.run.episodes

    def iterations_left(self, state: dict[str, Any] | None) -> int:
        """At most how many iterations a run in ``state`` (None: not started) still plays."""
        if not state or self.config.learning.iterations is not None or self.rollouts is None:
            return self.total_iterations()
        left = self.config.run.episodes - int(state.get("next_episode", 0))
        return 1 + max(0, -(-left // self.rollouts))

    def trajectory(self, episode: int) -> Trajectory:
        if episode not in self._trajectories:
            for d in self.run_dir.load_episode_dicts():
                self._trajectories.setdefault(d["episode"], Trajectory.from_dict(d))
        return self._trajectories[episode]

    def trajectories(self, episodes: list[int]) -> list[Trajectory]:
        return [self.trajectory(e) for e in episodes]

    async def rollout(self, policy: PolicyState, first_episode: int, rollouts: int) -> list[int]:
        """Play one iteration's training episodes: ids from ``first_episode`` on, K =
        ``rollouts`` of them (both kept in the training checkpoint, so a resume with another
        ``run.parallel`` plays the same episodes and never trains on another iteration's)."""
        c = self.config
        await self.evaluate_policy(policy)
        count = max(1, min(rollouts, c.run.episodes - first_episode))
        plan = self.learner.rollout_plan(policy.iteration, first_episode, count, c.run.seed)
        await self.play(plan, policy, phase="train")
        return list(plan.episodes)

    async def evaluate_policy(self, policy: PolicyState, final: bool = False) -> list[int]:
        """Play the learner's held-out evaluation episodes of ``policy`` (phase ``test``)."""
        if self.learner is None or self.scripted:
            return []
        plan = self.learner.evaluation_plan(policy.iteration, self.config.run.seed, final=final)
        if plan is None:
            return []
        await self.play(plan, policy, phase="test")
        return list(plan.episodes)

    async def evaluate(self, policy: PolicyState, candidate: Candidate, episodes: list[int]) -> dict[str, Any]:
        """Play ``learning.eval_rollouts`` fresh episodes with the candidate policies and the same
        episodes (same seeds) with the current ones, and keep the candidate only if its mean
        return is not below theirs. Comparing on the same seeds keeps luck out of the verdict:
        against the iteration's own rollouts, a candidate drawn easier levels would win."""
        from marlang.report import mean_ci

        plans = self.evaluation_plans(policy, candidate)
        if not plans:
            baseline = mean_ci([t.team_return for t in self.trajectories(episodes)])["mean"]
            return {"baseline_return": baseline, "candidate_return": None, "accepted": True, "episodes": []}
        for plan, played_by in plans:
            await self.play(plan, played_by, phase="eval")
        (base, _), (trial, _) = plans
        base_ids, ids = base.episodes, trial.episodes
        baseline = mean_ci([t.team_return for t in self.trajectories(list(base_ids))])["mean"]
        value = mean_ci([t.team_return for t in self.trajectories(list(ids))])["mean"]
        accepted = value is not None and (baseline is None or value >= baseline)
        return {"baseline_return": baseline, "candidate_return": value, "accepted": accepted,
                "episodes": list(ids), "baseline_episodes": list(base_ids)}

    def evaluation_plans(self, policy: PolicyState, candidate: Candidate) -> list[tuple[RolloutPlan, PolicyState]]:
        """A candidate check's episodes: the current policies' and, on the same seeds, the
        candidate's (none when the candidate changes no policy)."""
        changed = {a: t for a, t in candidate.policies.items() if t != policy.policies.get(a)}
        if not changed:
            return []
        n = int(getattr(self.config.learning.options, "eval_rollouts", 3))
        ids = tuple(EVAL_EPISODE_BASE + policy.iteration * n + j for j in range(n))
        seeds = tuple(self.config.run.seed + e for e in ids)
        base_ids = tuple(EVAL_BASELINE_OFFSET + e for e in ids)
        trial = PolicyState.from_dict(policy.to_dict())
        for a, text in changed.items():
            trial.policies[a] = text
            trial.versions[a] = policy.versions.get(a, 0) + 1
        return [(RolloutPlan(base_ids, seeds, tuple(None for _ in ids)), policy),
                (RolloutPlan(ids, seeds, tuple(None for _ in ids)), trial)]

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
        adapter_rows = []
        for agent, ref in candidate.adapters.items():
            accepted = bool(accepted_by_eval)
            if accepted:
                new.adapters[agent] = dict(ref)
                new.versions[agent] = policy.versions.get(agent, 0) + 1
            adapter_rows.append({"agent": agent, "accepted": accepted, **ref})
        if candidate.extra:
            new.extra.update(candidate.extra)
        new.iteration = i + 1
        if self.finished({**state, "policy": new.to_dict()}):
            await self.evaluate_policy(new, final=True)  # the trained policy's held-out evaluation
        rd = self.run_dir
        self.recorder.append_csv(rd.llm_calls_file)
        if self.learner is not None and self.learner.uses_policies:
            rd.append_iteration_rows("policies.jsonl", i, policy_rows)
        verdicts = {r["agent"]: r["accepted"] for r in policy_rows + adapter_rows}
        rd.append_iteration_rows("updates.jsonl", i, [
            {"iteration": i, **r, "accepted": verdicts.get(r["agent"]), "evaluation": evaluation or None}
            for r in candidate.records
        ])
        if decisions:
            rd.write_json("review.json", {**self._review(state), "decided": True, "decisions": decisions})
        episodes = self.trajectories(state.get("episodes") or [])
        row = iteration_row(i, episodes, rd.read_llm_calls(), candidate.counters, evaluation,
                            accepted=[r["accepted"] for r in policy_rows + adapter_rows])
        row.update(self._test_columns(i))
        rd.append_iteration_csv(row)
        rd.write_json("learner_state.json", new.to_dict())
        logger.info("iteration %d committed: mean return %.3f", i, row["return_mean"])
        return new

    async def play(self, plan: RolloutPlan, policy: PolicyState, phase: str) -> None:
        """Play the plan's episodes not yet on disk, at most ``run.parallel`` at once."""
        c = self.config
        flushed = self.learner.context.before_calls if self.learner is not None else None
        if flushed is not None:
            await flushed()  # the checkpoint before this node is on disk first
        # An episode on disk counts as played only for this phase and iteration: another
        # iteration's episode is never this iteration's training data.
        done = {d["episode"] for d in self.run_dir.load_episode_dicts()
                if d.get("phase", "train") == phase and d.get("iteration", 0) == policy.iteration}
        todo = [(e, s, g) for e, s, g in zip(plan.episodes, plan.seeds, plan.groups) if e not in done]
        if not todo:
            return
        for name, agent in self.agents.items():
            agent.policy = policy.policies.get(name, agent.policy)
            agent.memory.load_state_dict({"reflections": policy.memories.get(name, [])})
        if self.learner is not None and not self.scripted:
            await self.learner.prepare_rollout(policy, phase)
        if self._free_envs is None:
            self._free_envs = asyncio.Queue()
        while len(self._envs) < min(c.run.parallel, len(todo)):
            env = self.make_env()
            self._envs.append(env)
            self._free_envs.put_nowait(env)
        versions = {a: policy.versions.get(a, 0) for a in c.agent_names()}

        async def play(episode: int, seed: int, group: int | None) -> None:
            env = await self._free_envs.get()
            try:
                team = env.scripted_team() if self.scripted else None
                ctx = CallContext(episode=episode, iteration=policy.iteration,
                                  salt=0 if group is None else episode, **self.ctx_base)
                traj = await run_episode(
                    self.episode_graph, env=env, episode=episode, seed=seed,
                    decide=scripted_decider(team) if self.scripted else self.decide,
                    # Turn-based envs (one agent acts per step) count env.max_steps in turns.
                    ctx=ctx, max_steps=plan.max_steps,
                    env_id=c.env.id, protocol=self.setting, team=team,
                )
            finally:
                self._free_envs.put_nowait(env)
            traj.iteration, traj.policy_versions, traj.phase, traj.group = policy.iteration, versions, phase, group
            llm = self.recorder.totals_by_episode().get(episode, {})
            # The episode's calls first: a finished episode never lacks its rows (a resume
            # drops the rows of an episode whose record is missing).
            self.recorder.append_csv(self.run_dir.llm_calls_file)
            self.run_dir.append_episode(traj, episode_metrics(traj, llm))
            self._trajectories[episode] = traj
            self.played += 1
            if self.progress is not None and phase == "train":
                self.progress.update(1)
            if self.on_episode is not None:
                self.on_episode(traj)

        # Each episode runs in a fresh context: the episode and protocol graphs must not
        # inherit the training graph's checkpointer (they would checkpoint every step).
        await asyncio.gather(*(asyncio.create_task(play(e, s, g), context=contextvars.Context())
                               for e, s, g in todo))

    def _test_rows(self) -> dict[int, list[dict[str, Any]]]:
        """Held-out evaluation episodes' metric rows, by the iteration of the policy played."""
        out: dict[int, list[dict[str, Any]]] = {}
        for d in self.run_dir.load_episode_dicts():
            if d.get("phase") == "test":
                out.setdefault(int(d.get("iteration", 0)), []).append(d["metrics"])
        return out

    def _test_columns(self, iteration: int) -> dict[str, Any]:
        """``iterations.csv`` columns of the held-out evaluation of the policy that played
        ``iteration``'s rollouts (none where the learner does not evaluate)."""
        from marlang.report import mean_ci, wilson_ci

        rows = self._test_rows().get(iteration)
        if not rows:
            return {}
        ret = mean_ci([r["return"] for r in rows])
        sr = wilson_ci(sum(1 for r in rows if r["success"]), len(rows))
        return {"test_episodes": len(rows), "test_return_mean": ret["mean"], "test_return_ci95": ret["ci95"],
                "test_success_rate": sr["mean"]}

    def finalize(self) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the episodes and iterations on disk."""
        dicts = sorted(self.run_dir.load_episode_dicts(), key=lambda d: d["episode"])
        rows = [d["metrics"] for d in dicts if d.get("phase", "train") == "train"]
        summary = summarize_episodes(rows) if rows else {"episodes": 0}
        summary["setting"] = self.setting
        summary["env_id"] = self.config.env.id
        manifest = self.run_dir.read_json("manifest.json") or {}
        summary["model"] = manifest.get("model_id") or (self.config.model.spec if not self.scripted else "scripted")
        summary["learner"] = "none" if self.scripted else self.config.learning.method
        summary["max_steps"] = self.config.env.max_steps
        tests = self._test_rows()
        if tests:
            # Held-out evaluation (greedy, unseen seeds): the policy before training and the
            # last one evaluated, reported apart from the training rollouts.
            first, last = min(tests), max(tests)
            summary["evaluation"] = {"iteration": last, **summarize_episodes(tests[last])}
            summary["evaluation_initial"] = {"iteration": first, **summarize_episodes(tests[first])}
            change = paired_change(tests[first], tests[last]) if last != first else None
            if change is not None:
                # the same held-out seeds before and after: the change per seed, with its interval
                summary["evaluation_change"] = change
        iterations = self.run_dir.read_iterations()
        if iterations:
            summary["iterations"] = iterations
            summary["credit_failures"] = sum(int(r.get("credit_failures") or 0) for r in iterations)
        if (self.run_dir.path / "policies.jsonl").exists():  # a learner that rewrites policies
            final = (self.run_dir.read_json("learner_state.json") or {}).get("policies", {})
            summary["policies"] = {a: {"initial": text, "final": final.get(a, text)}
                                   for a, text in self.initial_policies.items()}
            updates = self.run_dir.read_jsonl("updates.jsonl")
            checks = {(u.get("iteration"), u.get("agent")): u.get("evaluation") or {} for u in updates}
            for u in updates:
                if u.get("malformed") and u.get("agent") in summary["policies"]:
                    # An optimizer reply that was no policy never became a candidate; shown anyway.
                    summary["policies"][u["agent"]].setdefault("rejected", []).append({
                        "iteration": u.get("iteration"), "text": u.get("optimizer_reply"),
                        "decided_by": f"the parser ({u['malformed']})"})
            for row in self.run_dir.read_jsonl("policies.jsonl"):
                if row.get("accepted") is False and row.get("agent") in summary["policies"]:
                    # A candidate the check or the reviewer turned down stays in the report.
                    check = checks.get((row.get("iteration"), row.get("agent"))) or {}
                    summary["policies"][row["agent"]].setdefault("rejected", []).append({
                        "iteration": row.get("iteration"), "text": row.get("text"),
                        "decided_by": row.get("decided_by"), "baseline_return": check.get("baseline_return"),
                        "candidate_return": check.get("candidate_return")})
        adapters = (self.run_dir.read_json("learner_state.json") or {}).get("adapters") or manifest.get("adapters")
        if adapters:
            # The adapters the trained policy acts with, agent by agent: the accepted ones of a
            # weight-space learner (or those a play-back loaded), each with its content hash.
            summary["adapters"] = {a: _adapter_ref(ref) for a, ref in adapters.items()}
        if self.cache is not None:
            summary["response_cache"] = {"hits": self.cache.hits, "misses": self.cache.misses}
        self.run_dir.write_json("summary.json", summary)
        if iterations:
            plot_iteration_curves({summary["setting"]: iterations}, self.run_dir.path / "learning_curve.png")
        return summary
