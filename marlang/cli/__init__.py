"""The ``marlang`` command: ``dispatch`` parses the command line and runs one command, from
``run_commands`` (run, review), ``evaluation_commands`` (compare, crossplay, credit-check) or
``reading_commands`` (report, view, export); ``outcomes`` is how a command ends (exit codes, one
line per failure), ``parser`` declares every command's arguments, ``review`` is ``marlang review``.
"""

from __future__ import annotations

from marlang.cli.dispatch import main

__all__ = ["main"]
