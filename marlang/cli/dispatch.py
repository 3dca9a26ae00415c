"""The ``marlang`` command: run, compare, review, report, view, credit-check, envs, models, protocols,
learners.

Bad input ends with one line naming what to fix and a non-zero exit, never a traceback;
an interrupted or failed run says where its finished episodes are and how to resume.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
from pathlib import Path
from typing import Any

EXIT_CONFIG = 2
EXIT_MODEL = 3
EXIT_INTERRUPTED = 130
EXIT_FAILED_RUNS = 4  # a comparison finished, but some of its runs ended in an error
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe


def _version() -> str:
    from marlang import __version__

    return __version__


def _plugins_from_cwd() -> None:
    """Let configs name plugins by import path from modules in the working directory, as
    ``python -m`` would: the ``marlang`` script's own ``sys.path`` starts at its bin folder.
    Appended, so a local file never shadows an installed package."""
    import os

    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


def main(argv: list[str] | None = None) -> int:
    from marlang.cli.parser import parser

    args = parser(_version()).parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what an interrupted command says to rerun
    _plugins_from_cwd()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_redact_record)
    from marlang.config import ConfigError
    from marlang.registry import trusting_imports

    try:
        with trusting_imports(getattr(args, "trust_imports", False)):
            code = _dispatch(args)
    except BrokenPipeError:
        # The reader went away (`marlang envs | head`): stop quietly, as Unix tools do. A run
        # stopped this way keeps its finished episodes and resumes with --resume.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_BROKEN_PIPE
    except (ConfigError, OSError) as err:  # OSError: a full or read-only disk (report, view)
        from marlang.rundir.untrusted import storage_failure

        line = str(err) if isinstance(err, ConfigError) else storage_failure(err)
        if line is None:
            raise
        print(f"marlang: error: {_redact(line)}", file=sys.stderr)
        return EXIT_CONFIG
    if code == EXIT_INTERRUPTED and argv is None:
        _exit_at_next_ctrl_c()
    return code


def _redact(text: str, config: Any = None) -> str:
    """``text`` without secrets (`marlang.config.redact_secrets`), the key of ``config``'s
    model too: what the command prints goes through it."""
    import os

    from marlang.config import redact_secrets

    secrets = []
    if config is not None:
        secrets.append(os.environ.get(config.model.api_key_env, ""))
        url = config.model.base_url or ""
        if "@" in url.partition("://")[2].partition("/")[0]:
            secrets.append(url.partition("://")[2].partition("@")[0].partition(":")[2])
    return redact_secrets(text, secrets)


def _redact_record(record: logging.LogRecord) -> bool:
    """A logging filter: the message without secrets."""
    try:
        record.msg, record.args = _redact(record.getMessage()), None
    except (TypeError, ValueError):  # a message its arguments do not fit: logging reports it
        pass
    return True


def _exit_at_next_ctrl_c() -> None:
    """The command was interrupted and has said what it kept: a further Ctrl-C while the
    process exits (it waits for the model's threads) ends it at once, with the same status."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def exit_now(signum: int, frame: Any) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)

    signal.signal(signal.SIGINT, exit_now)


LISTINGS = {
    "envs": ("marlang.envs", "list_envs", ("env id", "description")),
    "models": ("marlang.models", "list_model_specs", ("spec", "backend")),
    "protocols": ("marlang.graphs.protocols", "list_protocols", ("protocol", "description")),
    "learners": ("marlang.learners", "list_learners", ("learning.method", "description")),
}
"""The listing commands: where each one's ``name -> description`` table comes from."""


def _dispatch(args: argparse.Namespace) -> int:
    if args.command in LISTINGS:
        module, function, headers = LISTINGS[args.command]
        listing = getattr(importlib.import_module(module), function)()
        _print_table([[k, v] for k, v in listing.items()], list(headers))
        return 0
    if args.command == "report":
        return _report(Path(args.run_dir))
    if args.command == "review":
        return _review(args)
    if args.command == "view":
        return _view(args)
    if args.command == "export":
        return _export(args)
    if args.command == "credit-check":
        return _credit_check(args)
    if args.command == "run":
        return _run(args)
    if args.command in ("compare", "crossplay"):
        return _compare(args)
    raise AssertionError(args.command)


def _export(args: argparse.Namespace) -> int:
    from marlang.methods.neural.critics.dataset import export_dataset

    try:
        out, rows = export_dataset(args.run_dir, args.out, args.format)
    except (FileNotFoundError, ValueError) as err:
        print(f"marlang export: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {rows} timesteps ({args.format}); "
          f"load it with datasets.load_dataset({str(out)!r}, split='train')")
    return 0


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

    options = CreditCheckOptions(critics=tuple(parse_critics(args.critics)), model=args.model,
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


def _view(args: argparse.Namespace) -> int:
    from marlang.config import ConfigError
    from marlang.view import ViewError, write_view

    if args.max_episodes < 1:
        raise ConfigError(f"--max-episodes must be at least 1, not {args.max_episodes}")
    try:
        page = write_view(args.run_dirs, out=args.out, max_episodes=args.max_episodes)
    except ViewError as err:
        raise ConfigError(str(err)) from None
    print(f"wrote {page}: open {page.resolve().as_uri()} in a browser")
    if args.open:
        import os
        import webbrowser

        # Without a display a browser cannot open here (a server, CI); the line above says where it is.
        if sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
            webbrowser.open(page.resolve().as_uri())
        else:
            print("no display here to open it on; copy the file to a machine with a browser")
    return 0


def _print_table(rows: list[list[str]], headers: list[str]) -> None:
    from tabulate import tabulate

    print(tabulate(rows, headers=headers, tablefmt="github"))


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


def _check_out(path: Path) -> None:
    """Refuse an output directory that is a file or a link to nothing, before anything is
    loaded or written."""
    from marlang.rundir.untrusted import check_output_folder

    check_output_folder(path)


def _how_to_go_on(config: Any) -> str:
    """What lengthens a finished run of this kind."""
    if config.agents.kind == "neural":
        return ("a neural run's length is learning.frames, fixed at its start: train longer in a new "
                "run directory (--out)")
    return "to go on, raise run.episodes or learning.iterations with --set"


def _notify(message: str) -> None:
    print(f"marlang: {_redact(message)}", file=sys.stderr, flush=True)


def _model_failure(exc: BaseException, config) -> str | None:
    """One line for a model that cannot be loaded, a server that stays unreachable or broken
    after the retries, a refused key, or a full or read-only disk (None for any other error,
    which is a bug and keeps its traceback)."""
    from marlang.models import ModelNotAvailableError, ModelServerError
    from marlang.rundir.untrusted import storage_failure

    if isinstance(exc, ModelServerError) and getattr(exc, "status_code", None) == 401:
        # the model layer knows no config: name the variable this config reads the key from
        return str(exc).replace("(OPENAI_API_KEY by default)", f"({config.model.api_key_env})")
    if isinstance(exc, (ModelServerError, ModelNotAvailableError)):
        return str(exc)
    if storage_failure(exc) is not None:  # a full or read-only disk
        return storage_failure(exc)
    if type(exc).__name__ in ("AuthenticationError", "PermissionDeniedError") or \
            getattr(exc, "status_code", None) in (401, 403):
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return (f"model {config.model.spec}: the server refused the API key ({first[:300]}); set the key in "
                f"the variable model.api_key_env names ({config.model.api_key_env})")
    return None


def _kept(run_dir: Path, neural: bool) -> str | None:
    """What an interrupted or failed run keeps ("3 finished episode(s)"), or None if nothing."""
    from marlang.rundir import RunDirectory

    if not (run_dir / "config.yaml").is_file():
        return None
    if neural:
        batches = len(RunDirectory(run_dir).read_iterations())
        return f"{batches} trained batch(es)" if batches else None
    n = len(RunDirectory(run_dir).load_episode_dicts())
    return f"{n} finished episode(s)" if n else None


def _remove_unfinished(run_dir: Path) -> None:
    """Remove a run directory this command created that holds no finished episode, so a
    fixed command starts afresh."""
    import shutil

    if (run_dir / "config.yaml").is_file():
        shutil.rmtree(run_dir, ignore_errors=True)


def _print_result(result, config) -> None:
    from marlang.tables.report import markdown_table, policies_text

    model = result.summary.get("model", config.model.spec)  # neural runs name their networks
    print(markdown_table({result.summary["setting"]: result.summary}, title=f"{config.env.id} ({model})"))
    if result.summary.get("policies"):
        print(policies_text(result.summary["policies"]))
    if result.paused:
        print(f"paused for review before an update: marlang review {result.run_dir}")
    print(f"run directory: {result.run_dir}")


def _review(args: argparse.Namespace) -> int:
    from marlang.cli.review import review_command

    return review_command(args, _print_result)


def _load_base(config_path: str, overrides: list[str], unset: list[str] = (), seeds: list[int] | None = None) -> dict:
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
    for cells_base, cells, folder in swapped_seed_plans(out, summaries, crossplay_episodes):
        _notify(f"swapped-seed check: {len(cells[0][1])} cells x {cells_base['run']['episodes']} held-out episodes "
                f"(each trained agent beside the partners trained on the other seeds), in {folder}")
        code = _run_grid(cells_base, cells, folder, reference=False, executor=executor, again=again)
        if code:
            break  # interrupted or failed: plan (and announce) no further check
    return code


def _resume_command(run_dir: Path) -> str:
    """The command that continues the run in ``run_dir``: with ``--trust-imports`` where its
    config names a plugin by import path (a resume reads the directory's config, which imports
    nothing unasked) or this command was given it."""
    import shlex

    from marlang.config import ConfigError
    from marlang.config.loading import UntrustedImportError, load_saved_config
    from marlang.registry import TRUST_IMPORTS_FLAG, imports_trusted

    trust = imports_trusted()
    if not trust:
        try:
            load_saved_config(run_dir / "config.yaml")
        except UntrustedImportError:
            trust = True
        except (ConfigError, OSError):
            pass  # the resume itself will say what is wrong
    return shlex.join(["marlang", "run", "--resume", str(run_dir), *([TRUST_IMPORTS_FLAG] if trust else [])])


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


def _report(path: Path) -> int:
    from marlang.config import ConfigError, load_saved_config
    from marlang.tables.report import markdown_table

    if (path / "config.yaml").is_file():
        from marlang.tables.report import current_summary, policies_text

        summary = current_summary(path)
        if summary is None:  # an interrupted run: rebuild summary.json (and the plot) from its files
            from marlang.run import Experiment

            config = load_saved_config(path / "config.yaml")
            if _kept(path, config.agents.kind == "neural") is None:
                what = "trained batch" if config.agents.kind == "neural" else "episode"
                raise ConfigError(f"{path}: no {what} has finished yet, so there is nothing to report; "
                                  f"continue the run with: {_resume_command(path)}")
            summary = Experiment(config, path, resume=True).finalize()
        if "cost" not in summary:  # a neural run's, or one written before runs kept their cost
            from marlang.tables.cost import run_cost

            summary["cost"] = run_cost(path)
        print(markdown_table({summary["setting"]: summary}, title=summary.get("env_id", "")))
        if summary.get("policies"):
            print(policies_text(summary["policies"]))
        return 0
    if any(path.glob("*/summary.json")):
        from marlang.evaluation.compare import write_comparison

        print(_with_crossplay(path, write_comparison(path, training_plots=not _is_crossplay(path)).table))
        return 0
    raise ConfigError(f"{path}: not a run or comparison directory (no config.yaml, no */summary.json)")

