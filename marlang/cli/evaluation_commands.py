"""``marlang compare``, ``marlang crossplay`` and ``marlang credit-check``: sets of runs from one
base config (a grid, seeds, cross-play pairings, the swapped-seed check) and the credit critics' grade.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from marlang.cli.outcomes import EXIT_FAILED_RUNS, EXIT_INTERRUPTED, EXIT_MODEL, _model_failure, _notify, _redact


def _credit_check(args: argparse.Namespace) -> int:
    from marlang.config import ConfigError
    from marlang.evaluation.creditcheck import (
        CREDIT_CHECK_FILE,
        CreditCheckOptions,
        credit_check,
        credit_table,
        write_credit_check,
    )
    from marlang.evaluation.creditcheck.critics import parse_critics

    critics = None if args.critics is None else tuple(parse_critics(args.critics))
    options = CreditCheckOptions(critics=critics, model=args.model, temperature=args.temperature,
                                 rollout=args.rollout, samples=args.samples,
                                 seed=args.seed, horizon=args.horizon, episodes=args.episodes, steps=args.steps,
                                 alternatives=args.alternatives, against=args.against, shapley=not args.no_shapley,
                                 progress=True)
    from marlang.models import ModelNotAvailableError, ModelServerError

    out = Path(args.out or Path(args.run_dir) / CREDIT_CHECK_FILE)
    # refused before the model calls the result costs, not after
    if out.is_dir():
        raise ConfigError(f"--out {out} is a directory; give a file path (e.g. {out / CREDIT_CHECK_FILE})")
    blocking = next((p for p in out.parents if p.exists() or p.is_symlink()), None)
    if blocking is not None and not blocking.is_dir():
        raise ConfigError(f"--out {out}: {blocking} is not a directory")
    if (out.exists() or out.is_symlink()) and not args.overwrite:
        # as run refuses a directory that holds a run: an earlier check's result is not replaced unasked
        raise ConfigError(f"{out} already holds a credit check; pass --overwrite to replace it, or --out FILE "
                          "to write this one beside it")
    try:
        result = credit_check(args.run_dir, options)
    except (ModelServerError, ModelNotAvailableError) as err:  # the critics' model: one line, as a run says it
        print(f"marlang: {_redact(str(err))}", file=sys.stderr)
        return EXIT_MODEL
    print(credit_table(result))  # shown before the write, so a failing write loses nothing on screen
    path = write_credit_check(result, out)
    print(f"wrote {path}")
    return 0


def _check_out(path: Path) -> None:
    """Refuse an output directory that is a file or a link to nothing, before anything is
    loaded or written."""
    from marlang.rundir.untrusted import check_output_folder

    check_output_folder(path)


def _load_base(config_path: str, overrides: list[str], unset: Sequence[str] = (),
               seeds: list[int] | None = None) -> dict:
    from marlang.config import apply_override, apply_overrides, build_config, read_config_file

    base = apply_overrides(read_config_file(config_path), overrides, list(unset))
    if seeds is not None:
        apply_override(base, "run.seeds", seeds)
    build_config(base)  # validates the base before any setting runs
    return base


def _compare(args: argparse.Namespace) -> int:
    from marlang.config import ConfigError, build_config
    from marlang.evaluation.compare import parse_grid, parse_seeds

    if args.command == "crossplay":
        from marlang.evaluation.crossplay import plan_crossplay

        base, grid, out = plan_crossplay(_load_base(args.config, args.overrides), args.players, args.episodes,
                                         args.out)
        _check_out(out)
    else:
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        base = _load_base(args.config, args.overrides, args.unset, seeds)
        cfg = build_config(base)
        grid = parse_grid(args.grid) if args.grid else [(k, list(v)) for k, v in cfg.grid.items()]
        if not grid and cfg.run.seeds is None:
            raise ConfigError("compare needs --grid KEY=V1,V2, a 'grid:' section in the config, or seeds "
                              "(--seeds 0,1,2)")
        out = Path(args.out or f"runs/{cfg.run.name}-compare")
        _check_out(out)
    if args.address and args.executor != "ray":
        raise ConfigError("--address names a Ray cluster: use it with --executor ray")
    crossplay_episodes = getattr(args, "crossplay_episodes", None)
    if crossplay_episodes is not None and crossplay_episodes < 0:
        raise ConfigError(f"--crossplay-episodes must be 0 (no swapped-seed check) or more, not {crossplay_episodes}")
    swapped = args.command == "compare" and not args.no_crossplay and crossplay_episodes != 0
    if swapped:
        from marlang.evaluation.crossplay import swapped_seed_outline

        outline = swapped_seed_outline(base, grid, crossplay_episodes)
        if outline:
            _notify(outline)  # before the runs: the check can cost more than the training
    executor = None
    if args.executor == "ray":
        from marlang.run.executors import RayExecutor

        executor = RayExecutor(address=args.address)
    again = _rerun_command(args, out)
    code = _run_grid(base, grid, out, reference=args.command == "compare" and not args.no_reference,
                     executor=executor, again=again)
    if code or not swapped:
        return code
    import json

    from marlang.evaluation.crossplay import swapped_seed_plans

    summaries = json.loads((out / "summary.json").read_text())
    for cells_base, cells, folder in swapped_seed_plans(out, summaries, crossplay_episodes, beside=build_config(base)):
        held_out = "" if "graph" in cells_base else "held-out "  # a graph plays its task's inputs
        _notify(f"swapped-seed check: {len(cells[0][1])} cells x {cells_base['run']['episodes']} {held_out}episodes "
                f"(each trained agent beside the partners trained on the other seeds), in {folder}")
        code = _run_grid(cells_base, cells, folder, reference=False, executor=executor, again=again)
        if code:
            break  # interrupted or failed: plan (and announce) no further check
    return code


def _rerun_command(args: argparse.Namespace, out: Path) -> str:
    """The command that continues this one where it stopped: the same command, with its
    output folder named (a rerun resumes every run it finds there)."""
    import shlex

    argv = list(getattr(args, "argv", None) or [args.command])
    if not args.out:
        argv += ["--out", str(out)]
    return shlex.join(["marlang", *argv])


def _run_grid(base: dict, grid: list, out: Path, reference: bool, executor: Any = None, again: str = "") -> int:
    """Run (or resume) a set of runs and print its table; ``again``: the command that continues it."""
    from marlang.config import build_config
    from marlang.evaluation.compare import run_comparison

    message: str | None
    try:
        result = run_comparison(base, grid, out, reference=reference, notify=_notify, executor=executor,
                                training_plots=not _is_crossplay(out))
    except KeyboardInterrupt:
        message, code = "interrupted", EXIT_INTERRUPTED
    except Exception as exc:
        message = _model_failure(exc, build_config(base))
        if message is None:
            raise
        code = EXIT_MODEL
    else:
        message, code = None, 0
    if message is not None:
        message = _redact(message, build_config(base))
        kept = any(out.glob("*/episodes.jsonl"))
        go_on = f"continue with: {_redact(again, build_config(base))}" if again else \
            "rerun the same command to continue"
        print(f"marlang: {message.rstrip('.')}" + (f"; finished episodes are kept under {out}; {go_on}" if kept
                                                   else (f"; {go_on}" if code == EXIT_INTERRUPTED else "")),
              file=sys.stderr)
        return code
    print(_with_crossplay(out, result.table))
    print(f"cross-play directory: {out} (table.md, summary.json, crossplay.json, crossplay.png)"
          if _is_crossplay(out) else
          f"comparison directory: {out} (table.md, summary.json, learning_curve.png, score_vs_cost.png)")
    if result.failed:
        print(f"marlang: {len(result.failed)} run(s) failed: " + "; ".join(
            f"{name}: {reason}" for name, reason in result.failed.items())
            + "; rerun the same command to retry them", file=sys.stderr)
        return EXIT_FAILED_RUNS
    return 0


def _is_crossplay(out: Path) -> bool:
    """Whether a comparison folder is a cross-play's (its cells train nothing: no learning
    curves or score-against-cost plot, the matrices instead)."""
    from marlang.evaluation.crossplay import CROSSPLAY_FILE

    return (out / CROSSPLAY_FILE).is_file()


def _with_crossplay(out: Path, table: str) -> str:
    """A comparison folder's table, with its cross-play matrices first where it is a cross-play's."""
    from marlang.evaluation.crossplay import write_matrix

    if _is_crossplay(out) and write_matrix(out) is not None:
        return (out / "table.md").read_text(encoding="utf-8")
    return table
