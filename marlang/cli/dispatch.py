"""The ``marlang`` command: run, compare, review, report, view, credit-check, envs, models, protocols,
learners. `main` parses the command line and hands it to one command.

Bad input ends with one line naming what to fix and a non-zero exit, never a traceback;
an interrupted or failed run says where its finished episodes are and how to resume.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path
from typing import Any

from marlang.cli.evaluation_commands import _compare, _credit_check
from marlang.cli.outcomes import EXIT_BROKEN_PIPE, EXIT_CONFIG, EXIT_INTERRUPTED, _redact, _redact_record
from marlang.cli.reading_commands import _export, _report, _view
from marlang.cli.run_commands import _review, _run


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


def _print_table(rows: list[list[str]], headers: list[str]) -> None:
    from tabulate import tabulate

    print(tabulate(rows, headers=headers, tablefmt="github"))
