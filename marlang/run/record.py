"""The run directory as a run writes it: episodes with their metrics rows, LLM calls,
iterations, the summary and the learning curve, with an in-memory index of what is on disk.

The index is filled once when a run starts (or resumes) and then as episodes are written, so
a run never reads its whole ``episodes.jsonl`` again: the cost of an episode stays the same
from the first to the last one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from marlang.run.commit import Commit
from marlang.rundir import CallRows, RunDirectory
from marlang.rundir.untrusted import json_value, open_regular
from marlang.tables.cost import run_cost
from marlang.tables.report import iteration_row, paired_change, summarize_episodes
from marlang.types import Trajectory

logger = logging.getLogger(__name__)

EpisodeKey = tuple[str, int, int]
"""(phase, iteration, episode): held-out episodes repeat their ids at every evaluation."""


def episode_metrics(traj: Trajectory, llm: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The per-episode row of ``metrics.csv`` (also stored with the episode); ``failed``: an
    episode that ended in an error (a user's graph that raised, or whose reward did)."""
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
        "level": level_of(traj),
        "failed": bool(traj.metrics.get("error")),
    }


def level_of(traj: Trajectory) -> str:
    """What level an episode played: the problem an env poses from a fixed set (``task_id`` in
    its first observations' data: the coding and reasoning tasks, where many seeds pose one
    problem), else its env seed. Kept with the episode (not a ``metrics.csv`` column) for the
    tables' level counts."""
    for step in traj.steps[:1]:
        for obs in step.observations.values():
            task = (getattr(obs, "data", None) or {}).get("task_id")
            if task is not None:
                return str(task)
    return str(traj.seed)


@dataclass
class EpisodeEntry:
    """Where one finished episode's record is in ``episodes.jsonl``, and its metrics row."""

    offset: int
    length: int
    metrics: dict[str, Any]


@dataclass
class EpisodeIndex:
    """Every finished episode of the run by (phase, iteration, episode): its byte range in
    ``episodes.jsonl`` and its metrics row; the trajectories this process played stay in
    memory, the others are read by their byte range when asked for."""

    path: Path
    entries: dict[EpisodeKey, EpisodeEntry] = field(default_factory=dict)
    by_episode: dict[int, EpisodeKey] = field(default_factory=dict)
    played: dict[int, Trajectory] = field(default_factory=dict)

    def load(self) -> None:
        """Index the file as it is on disk (valid records only: a damaged line is skipped)."""
        self.entries.clear()
        self.by_episode.clear()
        self.played.clear()
        fh = open_regular(self.path)  # a FIFO or directory there is refused, never waited on
        if fh is None:
            return
        offset = 0
        with fh:
            for line in fh:
                record = _record(line)
                if record is not None:
                    self._add(record, offset, len(line))
                offset += len(line)

    def _add(self, record: dict[str, Any], offset: int, length: int) -> EpisodeKey:
        key = (record.get("phase", "train"), int(record.get("iteration", 0)), int(record["episode"]))
        self.entries[key] = EpisodeEntry(offset, length, record.get("metrics") or {})
        self.by_episode.setdefault(key[2], key)
        return key

    def add(self, traj: Trajectory, offset: int, length: int) -> None:
        """Index a record just appended at ``offset``; its trajectory stays in memory."""
        key = self._add({"phase": traj.phase, "iteration": traj.iteration, "episode": traj.episode,
                         "metrics": traj.metrics}, offset, length)
        self.by_episode[traj.episode] = key
        self.played[traj.episode] = traj

    def recorded(self) -> set[EpisodeKey]:
        return set(self.entries)

    def done(self, phase: str, iteration: int) -> set[int]:
        """The episodes of ``phase`` played with the policy of ``iteration``."""
        return {e for p, i, e in self.entries if p == phase and i == iteration}

    def metrics_rows(self, phase: str | None = None) -> list[dict[str, Any]]:
        """Metrics rows in episode order (of one phase, or all)."""
        keys = sorted((k for k in self.entries if phase is None or k[0] == phase), key=lambda k: k[2])
        return [self.entries[k].metrics for k in keys]

    def trajectory(self, episode: int) -> Trajectory:
        if episode in self.played:
            return self.played[episode]
        entry = self.entries[self.by_episode[episode]]
        with open(self.path, "rb") as fh:
            fh.seek(entry.offset)
            return Trajectory.from_dict(json.loads(fh.read(entry.length)))

    def __len__(self) -> int:
        return len(self.entries)


def _record(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    record = json_value(line)[0]  # None for a damaged line
    return record if isinstance(record, dict) and "episode" in record else None


@dataclass
class CallIndex:
    """The run's LLM calls as ``llm_calls.csv`` rows, read once and then kept up to date from
    the run's `UsageRecorder`: per episode (its ``metrics.csv`` columns) and per iteration
    (its ``iterations.csv`` columns)."""

    by_iteration: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    by_episode: dict[Any, dict[str, int]] = field(default_factory=dict)
    seen: int = 0
    """How many of the recorder's rows are indexed."""

    def load(self, rows: Iterable[dict[str, Any]]) -> None:
        self.by_iteration.clear()
        self.by_episode.clear()
        self.seen = 0
        for row in rows:
            self._add_row(row)

    def _add_row(self, row: dict[str, Any]) -> None:
        key = "" if row.get("iteration") is None else str(row.get("iteration"))
        self.by_iteration.setdefault(key, []).append(row)

    def sync(self, recorder: Any) -> None:
        """Index the recorder's calls finished since the last sync."""
        rows = recorder.rows
        for record in rows[self.seen:]:
            self._add_row(asdict(record))
            # What UsageRecorder totals per episode: every call; tokens of answered ones.
            totals = self.by_episode.setdefault(record.episode, {
                "calls": 0, "cached": 0, "input_tokens": 0, "output_tokens": 0})
            totals["calls"] += 1
            totals["cached"] += int(bool(record.cached))
            if not record.error:
                totals["input_tokens"] += record.input_tokens
                totals["output_tokens"] += record.output_tokens
        self.seen = len(rows)

    def of_iteration(self, iteration: int) -> list[dict[str, Any]]:
        return self.by_iteration.get(str(iteration), [])


class RunRecord:
    """What a run records, with the indexes that spare it re-reading: it decides what goes
    into the run's files and `RunDirectory` writes them (each file has that one writer)."""

    def __init__(self, run_dir: RunDirectory) -> None:
        self.run_dir = run_dir
        self.episodes = EpisodeIndex(run_dir.episodes_file)
        self.calls = CallIndex()
        self._jsonl_iterations: dict[str, set[Any]] = {}

    def load(self) -> None:
        """Index what is on disk (once, when a run starts or resumes)."""
        self.episodes.load()
        self.calls.load(self.run_dir.read_llm_calls())
        self._jsonl_iterations.clear()

    # episodes and calls -------------------------------------------------------------------
    def write_calls(self, recorder: CallRows) -> None:
        """Append the recorder's new calls to ``llm_calls.csv`` and index them."""
        self.calls.sync(recorder)
        self.run_dir.append_llm_calls(recorder)

    def append_episode(self, traj: Trajectory, metrics: dict[str, Any]) -> None:
        """Record a finished episode: its full trajectory and its metrics row."""
        offset, length = self.run_dir.append_episode(traj, metrics)
        self.episodes.add(traj, offset, length)

    def trajectories(self, episodes: Iterable[int]) -> list[Trajectory]:
        return [self.episodes.trajectory(e) for e in episodes]

    def test_rows(self) -> dict[int, list[dict[str, Any]]]:
        """Held-out evaluation episodes' metric rows, by the iteration of the policy played."""
        out: dict[int, list[dict[str, Any]]] = {}
        for (phase, iteration, _), entry in sorted(self.episodes.entries.items(), key=lambda kv: kv[1].offset):
            if phase == "test":
                out.setdefault(iteration, []).append(entry.metrics)
        return out

    def test_columns(self, iteration: int) -> dict[str, Any]:
        """``iterations.csv`` columns of the held-out evaluation of the policy that played
        ``iteration``'s rollouts (none where the learner does not evaluate)."""
        from marlang.statistics.intervals import mean_interval, wilson_interval

        rows = self.test_rows().get(iteration)
        if not rows:
            return {}
        ret = mean_interval([r["return"] for r in rows])
        sr = wilson_interval(sum(1 for r in rows if r["success"]), len(rows))
        return {"test_episodes": len(rows), "test_return_mean": ret["mean"], "test_return_low": ret["low"],
                "test_return_high": ret["high"], "test_success_rate": sr["mean"]}

    # iterations ---------------------------------------------------------------------------
    def append_iteration_rows(self, name: str, iteration: int, rows: list[dict[str, Any]]) -> None:
        """Append one iteration's rows to a JSONL file, once (a commit replayed after a crash
        finds them there); which iterations a file holds is read once."""
        if name not in self._jsonl_iterations:
            self._jsonl_iterations[name] = {r.get("iteration") for r in self.run_dir.read_jsonl(name)}
        if iteration in self._jsonl_iterations[name]:
            return
        self.run_dir.append_jsonl(name, rows)
        self._jsonl_iterations[name].add(iteration)

    def append_iteration_csv(self, row: dict[str, Any]) -> None:
        """Add (or replace) the row of ``row["iteration"]`` in ``iterations.csv``."""
        self.run_dir.append_iteration_csv(row)

    def write_commit(self, commit: Commit, *, policies: bool, episodes: list[Trajectory] | None) -> None:
        """Write an iteration's commit: its ``policies.jsonl`` rows (``policies``: the learner
        rewrites policy texts), ``updates.jsonl`` rows, a decided ``review.json``, its
        ``iterations.csv`` row from its training ``episodes`` (None: a learner whose own
        trainer writes its rows) and, last, ``learner_state.json``: a commit replayed after a
        crash finds its rows already written and writes them once."""
        i, rd = commit.iteration, self.run_dir
        if policies:
            self.append_iteration_rows("policies.jsonl", i, commit.policy_rows)
        self.append_iteration_rows("updates.jsonl", i, commit.update_rows)
        if commit.review is not None:
            rd.write_json("review.json", commit.review)
        if episodes is not None:
            row = iteration_row(i, episodes, self.calls.of_iteration(i), commit.counters, commit.evaluation,
                                accepted=commit.accepted)
            row.update(self.test_columns(i))
            self.append_iteration_csv(row)
            logger.info("iteration %d committed: mean return %.3f", i, row["return_mean"])
        rd.write_json("learner_state.json", commit.policy.to_dict())

    # the summary ----------------------------------------------------------------------------
    def finalize(self, *, setting: str, config: Any, initial_policies: dict[str, str], scripted: bool,
                 learner: str, cache: Any = None) -> dict[str, Any]:
        """Write summary.json and learning_curve.png from the episodes and iterations."""
        rd = self.run_dir
        iterations = rd.read_iterations()
        rows = with_sampling_cost(self.episodes.metrics_rows("train"), iterations)
        summary: dict[str, Any] = summarize_episodes(rows) if rows else {"episodes": 0}
        summary["setting"] = setting
        summary["env_id"] = config.played
        manifest = rd.read_json("manifest.json") or {}
        summary["model"] = manifest.get("model_id") or (config.model.spec if not scripted else "scripted")
        summary["learner"] = learner
        summary["max_steps"] = config.env.max_steps
        tests = self.test_rows()
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
            summary["held_out"] = (f"run.eval_seed {config.run.eval_seed}'s {len(tests[last])} levels, "
                                   "the same for every run.seed")
        if iterations:
            summary["iterations"] = iterations
            summary["credit_failures"] = sum(int(r.get("credit_failures") or 0) for r in iterations)
        if (rd.path / "policies.jsonl").exists():  # a learner that rewrites policies
            summary["policies"] = self._policies_summary(initial_policies)
        adapters = (rd.read_json("learner_state.json") or {}).get("adapters") or manifest.get("adapters")
        if adapters:
            # The adapters the trained policy acts with, agent by agent: the accepted ones of a
            # weight-space learner (or those a play-back loaded), each with its content hash.
            summary["adapters"] = {a: _adapter_ref(ref) for a, ref in adapters.items()}
        if cache is not None:
            summary["response_cache"] = {"hits": cache.hits, "misses": cache.misses}
        summary["cost"] = run_cost(rd.path, self.episodes.metrics_rows("train"), iterations)
        rd.write_json("summary.json", summary)
        if iterations:
            rd.write_learning_curve(summary["setting"], iterations)
        return summary

    def _policies_summary(self, initial_policies: dict[str, str]) -> dict[str, Any]:
        rd = self.run_dir
        final = (rd.read_json("learner_state.json") or {}).get("policies", {})
        policies = {a: {"initial": text, "final": final.get(a, text)} for a, text in initial_policies.items()}
        updates = rd.read_jsonl("updates.jsonl")
        checks = {(u.get("iteration"), u.get("agent")): u.get("evaluation") or {} for u in updates}
        for u in updates:
            if u.get("malformed") and u.get("agent") in policies:
                # An optimizer reply that was no policy never became a candidate; shown anyway.
                policies[u["agent"]].setdefault("rejected", []).append({
                    "iteration": u.get("iteration"), "text": u.get("optimizer_reply"),
                    "decided_by": f"the parser ({u['malformed']})"})
        for row in rd.read_jsonl("policies.jsonl"):
            if row.get("accepted") is False and row.get("agent") in policies:
                # A candidate the check or the reviewer turned down stays in the report.
                check = checks.get((row.get("iteration"), row.get("agent"))) or {}
                policies[row["agent"]].setdefault("rejected", []).append({
                    "iteration": row.get("iteration"), "text": row.get("text"),
                    "decided_by": row.get("decided_by"), "baseline_return": check.get("baseline_return"),
                    "candidate_return": check.get("candidate_return")})
        return policies


def _adapter_ref(ref: Any) -> dict[str, Any]:
    """An adapter as the summary names it: hash, path and the update that wrote it."""
    if not isinstance(ref, dict):  # a play-back's manifest gives the hash alone
        return {"hash": ref}
    out = {"hash": ref.get("hash"), "path": ref.get("path")}
    update = Path(str(ref.get("path") or "")).parent.name
    if update.isdigit():
        out["update"] = int(update)
    return out


def with_sampling_cost(rows: list[dict[str, Any]], iterations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Episode rows with the LLM cost a learner paid outside their own calls added, shared out
    among its iteration's episodes: MAGRPO's trees sample every completion in batched generates
    (``completions_sampled``, ``tokens_prompt`` and ``tokens_sampled`` in ``iterations.csv``),
    which no episode's calls record."""
    cost = {}
    for r in iterations:
        if r.get("completions_sampled") not in (None, ""):
            cost[str(r.get("iteration"))] = (int(float(r["completions_sampled"])),
                                             int(float(r.get("tokens_prompt") or 0)),
                                             int(float(r.get("tokens_sampled") or 0)))
    if not cost:
        return rows
    count: dict[str, int] = {}
    for row in rows:
        count[str(row.get("iteration"))] = count.get(str(row.get("iteration")), 0) + 1
    out = []
    for row in rows:
        it = str(row.get("iteration"))
        if it not in cost:
            out.append(row)
            continue
        calls, tokens_in, tokens_out = (c / count[it] for c in cost[it])
        out.append({**row, "llm_calls": row["llm_calls"] + calls, "tokens_in": row["tokens_in"] + tokens_in,
                    "tokens_out": row["tokens_out"] + tokens_out})
    return out

