"""Where a run starts: a fresh directory, a run to continue, an update waiting for review,
or a finished run; the checks of the directory before anything is written, and the replay
of episodes whose records were lost (a torn or damaged line)."""

from __future__ import annotations

import enum
import logging
from typing import Any

from marlang.config import ConfigError, ExperimentConfig, check_resume_compatible, load_saved_config
from marlang.rundir import RunDirectory
from marlang.rundir.untrusted import check_config_unedited
from marlang.types import Candidate, PolicyState, RolloutPlan

logger = logging.getLogger(__name__)

THREAD = {"configurable": {"thread_id": "training"}}
"""The training graph's one checkpoint thread."""


class Resume(enum.Enum):
    """What a run does with the training checkpoint it finds."""

    FRESH = "fresh"
    """No checkpoint: start the loop at iteration 0."""
    CONTINUE = "continue"
    """An interrupted run: go on at the node after the last finished one."""
    EXTEND = "extend"
    """A finished run given more episodes or iterations: go on from its last commit."""
    AWAIT_REVIEW = "await_review"
    """An update waits for ``marlang review``: nothing to do until it is decided."""
    APPLY_REVIEW = "apply_review"
    """A reviewer's decisions given for the waiting update: continue with them."""
    FINISHED = "finished"
    """Nothing left to play."""

    @property
    def runs(self) -> bool:
        """Whether the training graph is invoked."""
        return self not in (Resume.AWAIT_REVIEW, Resume.FINISHED)


def decide(snapshot: Any, finished: Any, review: dict[str, Any] | None, where: Any = "") -> Resume:
    """The decision for a training graph in ``snapshot`` (``finished(state)``: whether a
    committed state has nothing left); ``review``: decisions given by ``marlang review`` for
    the run at ``where``."""
    waiting = any(t.interrupts for t in snapshot.tasks)
    if review is not None:
        if not waiting:
            raise ConfigError(f"{where}: no update is waiting for review")
        return Resume.APPLY_REVIEW
    if waiting:
        return Resume.AWAIT_REVIEW
    if not snapshot.values:
        return Resume.FRESH
    if snapshot.next:
        return Resume.CONTINUE
    return Resume.FINISHED if finished(snapshot.values) else Resume.EXTEND


def check_directory(rd: RunDirectory, config: ExperimentConfig, resume: bool) -> None:
    """Refuse a run directory that holds a run (unless resuming), or a resume that would
    measure something else; writes nothing but the repair of a torn episodes file."""
    if rd.exists() and not holds_progress(rd) and rd.read_json("review.json") is None:
        # Nothing was measured (e.g. the model failed at its first call): start afresh,
        # with or without --resume, and with whatever config is given now.
        logger.info("%s holds no finished episode: starting it afresh", rd.path)
        rd.discard_run_files()
        return
    if rd.exists() and not resume:
        raise ConfigError(f"run directory {rd.path} already holds a run; pass --resume {rd.path} to continue it "
                          "or --out to choose another directory")
    if resume and rd.exists():
        for name in ("learner_state.json", "review.json"):  # a damaged file refuses before any work
            rd.read_json(name)
        rd.read_iterations(), rd.read_llm_calls()
        check_config_unedited(rd.path, rd.read_json("manifest.json"))
        check_resume_compatible(load_saved_config(rd.config_file, beside=config), config)
        if rd.episodes_file.exists():
            rd.repair_episodes()
            dicts = rd.load_episode_dicts()
            rd.rewrite_metrics([d["metrics"] for d in dicts])
            logger.info("resuming %s: %d episodes already finished", rd.path, len(dicts))


def check_not_a_comparison(rd: RunDirectory) -> None:
    """Refuse a comparison's folder as a run directory (checked before the run locks it)."""
    if (rd.path / "comparison.yaml").is_file():
        raise ConfigError(f"{rd.path} holds a comparison (comparison.yaml), not a run; choose another directory "
                          "(--out) for this run")


def holds_progress(rd: RunDirectory) -> bool:
    """Whether the directory holds work worth resuming: a finished episode, or a trained
    batch of a learner that plays no LLM episodes (its ``iterations.csv``)."""
    return rd.holds_episode_records() or rd.iterations_file.exists()


def check_adapters(rd: RunDirectory, adapters: dict[str, str]) -> None:
    """A resumed play-back must act with the adapters it started with."""
    previous = rd.read_json("manifest.json") if rd.exists() else None
    if not previous:
        return
    saved = previous.get("adapters") or {}
    if saved != adapters:
        changed = sorted(set(saved) | set(adapters), key=str)
        first = next(a for a in changed if saved.get(a) != adapters.get(a))
        raise ConfigError(f"cannot resume: the adapter of {first} is {saved.get(first) or '(none)'} in the saved "
                          f"run but {adapters.get(first) or '(none)'} now; start a new run directory instead")


async def replay_lost_episodes(graph: Any, loop: Any, snapshot: Any, notify: Any) -> int:
    """Play again, exactly, the episodes whose records were lost (a torn or damaged line)
    from work the training graph has done: each with the policy state it was played with,
    as the checkpoints keep it (``loop``: the run's `RunLoop`). Says in one line which were
    replayed; returns how many."""
    c, learner = loop.config, loop.learner
    on_disk = loop.record.episodes.recorded()
    plays: list[tuple[RolloutPlan, PolicyState, str]] = []

    def check(plan: RolloutPlan | None, policy: PolicyState, phase: str) -> None:
        if plan is not None and any((phase, policy.iteration, e) not in on_disk for e in plan.episodes):
            plays.append((plan, policy, phase))

    seen: set[tuple[str, int]] = set()
    # A learner that records its own rollouts (MAGRPO's trees) writes them in its update: an
    # update still to run writes what is missing; a finished one's lost episodes are gone.
    pending = PolicyState.from_dict(snapshot.values["policy"]).iteration \
        if snapshot.next == ("update",) and "policy" in (snapshot.values or {}) else None
    unplayable: list[int] = []
    async for past in graph.aget_state_history(THREAD):
        state = past.values or {}
        if past.next not in (("update",), ("evaluate",)) or "policy" not in state:
            continue
        policy = PolicyState.from_dict(state["policy"])
        if (past.next[0], policy.iteration) in seen:
            continue
        seen.add((past.next[0], policy.iteration))
        episodes = list(state.get("episodes") or [])
        if past.next == ("update",) and episodes:  # the iteration's rollouts had finished
            plan = learner.planned(policy.iteration, episodes)
            if not learner.records_rollouts:
                check(plan, policy, "train")
            elif policy.iteration != pending:
                unplayable += [e for e in plan.episodes if ("train", policy.iteration, e) not in on_disk]
            if not loop.scripted:
                check(learner.evaluation_plan(policy.iteration, c.run.eval_seed), policy, "test")
        elif past.next == ("evaluate",) and state.get("candidate"):
            for plan, played_by in loop.evaluation_plans(policy, Candidate.from_dict(state["candidate"])):
                check(plan, played_by, "eval")
    if not snapshot.next and loop.finished(snapshot.values) and not loop.scripted:
        final = PolicyState.from_dict(snapshot.values["policy"])
        check(learner.evaluation_plan(final.iteration, c.run.eval_seed, final=True), final, "test")
    before = loop.played
    for plan, policy, phase in sorted(plays, key=lambda p: p[1].iteration):
        await loop.play(plan, policy, phase)
    lost = sorted({e for plan, policy, phase in plays for e in plan.episodes
                   if (phase, policy.iteration, e) not in on_disk})
    if lost:
        notify(f"replayed episode(s) {', '.join(map(str, lost))}: their records in "
               f"{loop.run_dir.episodes_file} were lost or damaged")
    if unplayable:
        notify(f"episode(s) {', '.join(map(str, sorted(unplayable)))} were lost or damaged in "
               f"{loop.run_dir.episodes_file} and cannot be played again: the {learner.name} update that "
               "played them has finished (its trees/ and adapters/ keep what it learned)")
    return loop.played - before
