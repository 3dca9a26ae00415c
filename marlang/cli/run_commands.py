"""``marlang run`` (one run, or the set of runs of a config with a grid or seeds) and ``marlang
review``: a run's result printed as a table, and an interrupted or failed run's one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from marlang.cli.evaluation_commands import _check_out, _load_base, _rerun_command, _run_grid
from marlang.cli.outcomes import EXIT_INTERRUPTED, EXIT_MODEL, _kept, _model_failure, _notify, _redact, _resume_command


def _run(args: argparse.Namespace) -> int:
    from marlang.config import ConfigError, check_resume_compatible, load_config, load_saved_config

    if args.resume:
        run_dir = Path(args.resume)
        saved = run_dir / "config.yaml"
        if not saved.is_file() and (run_dir / "comparison.yaml").is_file():
            raise ConfigError(f"--resume {run_dir}: a set of runs (a grid or run.seeds); rerun the command "
                              "that ran them, with --out, to continue it")
        if not saved.is_file():
            raise ConfigError(f"--resume {run_dir}: no config.yaml there; is it a marlang run directory?")
        # The directory's config may import what the config named with it names, nothing else.
        given = load_config(args.config, args.overrides, args.unset) if args.config else None
        config = load_saved_config(saved, args.overrides, args.unset, beside=given)
        if config.run.seeds is not None:
            raise ConfigError(f"--resume {run_dir} continues one run, which has one seed (run.seed); "
                              "for run.seeds, rerun the command that ran them (marlang run CONFIG --out DIR)")
        if given is not None:
            # The config named with --resume must be the run's (up to what a resume may change).
            try:
                check_resume_compatible(load_saved_config(saved, beside=given), given)
            except ConfigError as err:
                raise ConfigError(f"{args.config} is not the config of {run_dir}: {err}") from None
            config = given
    else:
        if not args.config:
            raise ConfigError("run needs a CONFIG file (or --resume DIR)")
        config = load_config(args.config, args.overrides, args.unset)
        if config.grid or config.run.seeds is not None:
            # A config with a grid or seeds is a set of runs: run each setting and seed, print
            # one table (a rerun resumes it).
            out = Path(args.out or f"runs/{config.run.name}")
            _check_out(out)
            grid = [(k, list(v)) for k, v in config.grid.items()]
            return _run_grid(_load_base(args.config, args.overrides, args.unset), grid, out, reference=False,
                             again=_rerun_command(args, out))
        run_dir = Path(args.out or f"runs/{config.run.name}-{time.strftime('%Y%m%d-%H%M%S')}")
        _check_out(run_dir)
    from marlang.run.experiment import Experiment

    existed = (run_dir / "config.yaml").is_file()
    neural = config.agents.kind == "neural"

    def on_failure(message: str, interrupted: bool) -> int:
        message = _redact(message, config)
        kept = _kept(run_dir, neural)
        if kept is None and interrupted and (run_dir / "config.yaml").is_file():
            # As after a kill: the directory stays, and its next run starts it afresh.
            print(f"marlang: {message} before any episode finished; nothing was measured; start it again "
                  f"with: {_resume_command(run_dir)}", file=sys.stderr)
        elif kept is None:
            if not existed:
                _remove_unfinished(run_dir)
            print(f"marlang: {message}", file=sys.stderr)
        else:
            print(f"marlang: {message.rstrip('.')}; {kept} are kept in {run_dir}; continue with: "
                  f"{_resume_command(run_dir)}", file=sys.stderr)
        return EXIT_INTERRUPTED if interrupted else EXIT_MODEL

    try:
        result = Experiment(config, run_dir, resume=bool(args.resume), notify=_notify).run()
    except KeyboardInterrupt:
        return on_failure("interrupted", interrupted=True)
    except Exception as exc:
        message = _model_failure(exc, config)
        if message is None:
            raise
        return on_failure(message, interrupted=False)
    if result.already_finished:
        print(f"nothing left to do: {run_dir} has finished; " + _how_to_go_on(config))
    _print_result(result, config)
    return 0


def _how_to_go_on(config: Any) -> str:
    """What lengthens a finished run of this kind."""
    if config.agents.kind == "neural":
        return ("a neural run's length is learning.frames, fixed at its start: train longer in a new "
                "run directory (--out)")
    return "to go on, raise run.episodes or learning.iterations with --set"


def _remove_unfinished(run_dir: Path) -> None:
    """Remove a run directory this command created that holds no finished episode, so a
    fixed command starts afresh."""
    import shutil

    if (run_dir / "config.yaml").is_file():
        shutil.rmtree(run_dir, ignore_errors=True)


def _print_result(result, config) -> None:
    from marlang.tables.report import markdown_table, policies_text

    model = result.summary.get("model", config.model.spec)  # neural runs name their networks
    print(markdown_table({result.summary["setting"]: result.summary}, title=f"{config.played} ({model})"))
    if result.summary.get("policies"):
        print(policies_text(result.summary["policies"]))
    if result.paused:
        print(f"paused for review before an update: marlang review {result.run_dir}")
    print(f"run directory: {result.run_dir}")


def _review(args: argparse.Namespace) -> int:
    from marlang.cli.review import review_command

    return review_command(args, _print_result)
