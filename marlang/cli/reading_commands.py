"""``marlang report``, ``marlang view`` and ``marlang export``: the commands that read what runs
wrote (a run or comparison directory) into a table, the HTML viewer or a credit dataset.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from marlang.cli.evaluation_commands import _is_crossplay, _with_crossplay
from marlang.cli.outcomes import _kept, _resume_command


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
