"""``marlang review``: a LangMARL update paused for review (``learning.review: true``) shown
with its credits and old/new policies, then accepted, edited or rejected per agent, and the
run continued."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any


def review_command(args: argparse.Namespace, print_result: Callable[[Any, Any], None]) -> int:
    """``marlang review RUN``: show the update waiting for review, then apply the decisions
    (from --accept / --reject / --edit or asked at the prompt) and continue the run."""
    from marlang.config import ConfigError, load_saved_config
    from marlang.run import Experiment

    run_dir = Path(args.run_dir)
    if args.accept and args.reject:
        raise ConfigError("review: --accept and --reject contradict each other; give one of them")
    if args.show and (args.accept or args.reject or args.edit):
        raise ConfigError("review: --show only shows the update; drop --accept, --reject and --edit, or --show")
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no config.yaml)")
    config = load_saved_config(run_dir / "config.yaml")
    exp = Experiment(config, run_dir, resume=True)
    pending = exp.pending_review()
    if pending is None:
        raise ConfigError(f"{run_dir}: no update is waiting for review")
    print(f"Update of iteration {pending['iteration']}")
    ev = pending.get("evaluation") or {}
    if ev.get("candidate_return") is not None:
        print(f"evaluation: candidate mean return {ev['candidate_return']:.3f} against "
              f"{ev['baseline_return']:.3f} for the current policies")
    for agent, info in pending["agents"].items():
        print(f"\n== {agent}")
        for k, credit in enumerate(info.get("credits") or []):
            print(f"  credit {k}: {credit or '(none: the critic gave no credit)'}")
        if info.get("aggregated_gradient"):
            print(f"  update direction: {info['aggregated_gradient']}")
        print(f"  old policy: {info['old_policy']}")
        print(f"  new policy: {info['new_policy']}")
    if args.show:
        return 0
    edits = {}
    for item in args.edit:
        agent, sep, file = item.partition("=")
        if not sep or agent not in pending["agents"]:
            raise ConfigError(f"--edit {item!r} must be AGENT=FILE with AGENT one of {', '.join(pending['agents'])}")
        if not Path(file).is_file():
            raise ConfigError(f"--edit {item}: no such file: {file}")
        edits[agent] = Path(file).read_text().strip()
        if not edits[agent]:
            raise ConfigError(f"--edit {item}: {file} is empty; write {agent}'s new policy in it")
    decisions = {}
    for agent in pending["agents"]:
        if agent in edits:
            decisions[agent] = {"action": "edit", "text": edits[agent]}
        elif args.accept or (edits and not args.reject):
            decisions[agent] = {"action": "accept"}
        elif args.reject:
            decisions[agent] = {"action": "reject"}
        else:
            decisions[agent] = ask_decision(agent)
    result = exp.review(decisions)
    print_result(result, config)
    return 0


def ask_decision(agent: str) -> dict:
    """One agent's decision, asked at the prompt until it is a valid one."""
    from marlang.config import ConfigError

    while True:
        try:
            answer = input(f"{agent}: [a]ccept, [e]dit or [r]eject the new policy? ").strip().lower()[:1]
        except EOFError:
            raise ConfigError("review: no answer (standard input closed); nothing was changed; answer at the "
                              "prompt, or pass --accept, --reject or --edit AGENT=FILE") from None
        if answer == "a":
            return {"action": "accept"}
        if answer == "r":
            return {"action": "reject"}
        if answer == "e":
            try:
                text = input(f"{agent}'s policy (one line): ").strip()
            except EOFError:
                raise ConfigError("review: no policy given (standard input closed); nothing was changed") from None
            if text:
                return {"action": "edit", "text": text}
