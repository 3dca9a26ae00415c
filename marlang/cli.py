"""The ``marlang`` command: run, compare, review, report, envs, models, protocols, learners.

Bad input ends with one line naming what to fix and a non-zero exit, never a traceback;
an interrupted or failed run says where its finished episodes are and how to resume.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import yaml

EXIT_CONFIG = 2
EXIT_MODEL = 3
EXIT_INTERRUPTED = 130


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marlang", description="Multi-agent RL with language-model agents.")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run one experiment config (every setting of its grid: section, if any)")
    r.add_argument("config", nargs="?", help="YAML config (optional with --resume)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set run.episodes=5 (repeatable)")
    r.add_argument("--out", help="run directory (default: runs/<run.name>-<time>)")
    r.add_argument("--resume", metavar="DIR", help="continue an interrupted run in DIR")

    c = sub.add_parser("compare", help="run every combination of a grid and write one table")
    c.add_argument("config")
    c.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                   help="values to compare, e.g. --grid protocol=none,bidirectional,alternating-2 "
                        "(repeatable; default: the config's grid: section)")
    c.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    c.add_argument("--out", help="comparison directory (default: runs/<run.name>-compare); rerun to resume")
    c.add_argument("--no-reference", action="store_true", help="skip the scripted reference team")

    rev = sub.add_parser("review", help="review a paused update (learning.review: true), then continue the run")
    rev.add_argument("run_dir")
    rev.add_argument("--accept", action="store_true", help="accept every agent's new policy without asking")
    rev.add_argument("--reject", action="store_true", help="reject every agent's new policy without asking")
    rev.add_argument("--edit", action="append", default=[], metavar="AGENT=FILE",
                     help="use the text in FILE as AGENT's new policy (repeatable); the others are accepted")
    rev.add_argument("--show", action="store_true", help="only show the pending update")

    rep = sub.add_parser("report", help="print (and rewrite) the summary of a run or comparison directory")
    rep.add_argument("run_dir")

    sub.add_parser("envs", help="list the registered environments")
    sub.add_parser("models", help="list the supported model specs")
    sub.add_parser("protocols", help="list the registered conversation protocols")
    sub.add_parser("learners", help="list the registered learning methods")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from marlang.config import ConfigError

    try:
        return _dispatch(args)
    except ConfigError as err:
        print(f"marlang: error: {err}", file=sys.stderr)
        return EXIT_CONFIG


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "envs":
        from marlang.envs_text import list_envs

        _print_table([[k, v] for k, v in list_envs().items()], ["env id", "description"])
        return 0
    if args.command == "models":
        from marlang.models import list_model_specs

        _print_table([[k, v] for k, v in list_model_specs().items()], ["spec", "backend"])
        return 0
    if args.command == "protocols":
        from marlang.graphs.protocols import list_protocols

        _print_table([[k, v] for k, v in list_protocols().items()], ["protocol", "description"])
        return 0
    if args.command == "learners":
        from marlang.learners import list_learners

        _print_table([[k, v] for k, v in list_learners().items()], ["learning.method", "description"])
        return 0
    if args.command == "report":
        return _report(Path(args.run_dir))
    if args.command == "review":
        return _review(args)
    if args.command == "run":
        return _run(args)
    if args.command == "compare":
        return _compare(args)
    raise AssertionError(args.command)


def _print_table(rows: list[list[str]], headers: list[str]) -> None:
    from tabulate import tabulate

    print(tabulate(rows, headers=headers, tablefmt="github"))


def _run(args: argparse.Namespace) -> int:
    from marlang.config import ConfigError, load_config

    if args.resume:
        run_dir = Path(args.resume)
        saved = run_dir / "config.yaml"
        if not saved.is_file():
            raise ConfigError(f"--resume {run_dir}: no config.yaml there; is it a marlang run directory?")
        config = load_config(saved, args.overrides)
    else:
        if not args.config:
            raise ConfigError("run needs a CONFIG file (or --resume DIR)")
        config = load_config(args.config, args.overrides)
        if config.grid:
            # A config with a grid is a set of runs: run each setting, print one table.
            out = Path(args.out or f"runs/{config.run.name}")
            grid = [(k, list(v)) for k, v in config.grid.items()]
            return _run_grid(_load_base(args.config, args.overrides), grid, out, reference=False)
        run_dir = Path(args.out or f"runs/{config.run.name}-{time.strftime('%Y%m%d-%H%M%S')}")
    from marlang.experiment import Experiment

    def on_interrupt(exc: BaseException) -> int:
        n = _count_episodes(run_dir)
        print(f"marlang: {exc}\n{n} finished episode(s) are kept in {run_dir}; continue with: "
              f"marlang run --resume {run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED if isinstance(exc, KeyboardInterrupt) else EXIT_MODEL

    try:
        result = Experiment(config, run_dir, resume=bool(args.resume)).run()
    except KeyboardInterrupt:
        return on_interrupt(KeyboardInterrupt("interrupted"))
    except Exception as exc:
        from marlang.models import ModelNotAvailableError, ModelUnreachableError

        if isinstance(exc, (ModelUnreachableError, ModelNotAvailableError)):
            return on_interrupt(exc)
        raise
    _print_result(result, config)
    return 0


def _print_result(result, config) -> None:
    from marlang.report import markdown_table, policies_text

    model = result.summary.get("model", config.model.spec)  # neural runs name their networks
    print(markdown_table({result.summary["setting"]: result.summary}, title=f"{config.env.id} ({model})"))
    if result.summary.get("policies"):
        print(policies_text(result.summary["policies"]))
    if result.paused:
        print(f"paused for review before an update: marlang review {result.run_dir}")
    print(f"run directory: {result.run_dir}")


def _review(args: argparse.Namespace) -> int:
    from marlang.config import ConfigError, load_config
    from marlang.experiment import Experiment

    run_dir = Path(args.run_dir)
    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir}: not a run directory (no config.yaml)")
    config = load_config(run_dir / "config.yaml")
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
        edits[agent] = Path(file).read_text().strip()
    decisions = {}
    for agent in pending["agents"]:
        if agent in edits:
            decisions[agent] = {"action": "edit", "text": edits[agent]}
        elif args.accept or (edits and not args.reject):
            decisions[agent] = {"action": "accept"}
        elif args.reject:
            decisions[agent] = {"action": "reject"}
        else:
            decisions[agent] = _ask_decision(agent)
    result = exp.review(decisions)
    _print_result(result, config)
    return 0


def _ask_decision(agent: str) -> dict:
    while True:
        answer = input(f"{agent}: [a]ccept, [e]dit or [r]eject the new policy? ").strip().lower()[:1]
        if answer == "a":
            return {"action": "accept"}
        if answer == "r":
            return {"action": "reject"}
        if answer == "e":
            text = input(f"{agent}'s policy (one line): ").strip()
            if text:
                return {"action": "edit", "text": text}


def _count_episodes(run_dir: Path) -> int:
    from marlang.rundir import RunDirectory

    return len(RunDirectory(run_dir).load_episode_dicts())


def _load_base(config_path: str, overrides: list[str]) -> dict:
    from marlang.config import ConfigError, apply_override, build_config, parse_value

    path = Path(config_path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    base = yaml.safe_load(path.read_text()) or {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"override {item!r} must look like section.key=value")
        apply_override(base, key.strip(), parse_value(raw))
    build_config(base)  # validates the base before any setting runs
    return base


def _compare(args: argparse.Namespace) -> int:
    from marlang.compare import parse_grid
    from marlang.config import ConfigError, build_config

    base = _load_base(args.config, args.overrides)
    cfg = build_config(base)
    grid = parse_grid(args.grid) if args.grid else [(k, list(v)) for k, v in cfg.grid.items()]
    if not grid:
        raise ConfigError("compare needs --grid KEY=V1,V2 or a 'grid:' section in the config")
    out = Path(args.out or f"runs/{cfg.run.name}-compare")
    return _run_grid(base, grid, out, reference=not args.no_reference)


def _run_grid(base: dict, grid: list, out: Path, reference: bool) -> int:
    from marlang.compare import run_comparison

    try:
        result = run_comparison(base, grid, out, reference=reference)
    except KeyboardInterrupt:
        print(f"marlang: interrupted; finished episodes are kept under {out}; rerun the same command to "
              "continue", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        from marlang.models import ModelNotAvailableError, ModelUnreachableError

        if isinstance(exc, (ModelUnreachableError, ModelNotAvailableError)):
            print(f"marlang: {exc}\nfinished episodes are kept under {out}; rerun the same command to continue",
                  file=sys.stderr)
            return EXIT_MODEL
        raise
    print(result.table)
    print(f"comparison directory: {out} (table.md, summary.json, learning_curve.png)")
    return 0


def _report(path: Path) -> int:
    from marlang.config import ConfigError, load_config
    from marlang.report import markdown_table

    if (path / "config.yaml").is_file():
        from marlang.experiment import Experiment
        from marlang.report import policies_text

        summary = Experiment(load_config(path / "config.yaml"), path, resume=True).finalize()
        print(markdown_table({summary["setting"]: summary}, title=summary.get("env_id", "")))
        if summary.get("policies"):
            print(policies_text(summary["policies"]))
        return 0
    if any(path.glob("*/summary.json")):
        from marlang.compare import write_comparison

        print(write_comparison(path).table)
        return 0
    raise ConfigError(f"{path}: not a run or comparison directory (no config.yaml, no */summary.json)")


if __name__ == "__main__":
    sys.exit(main())
