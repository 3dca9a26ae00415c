"""The ``marlang`` command: ``dispatch`` parses the command line and runs one subcommand,
``parser`` declares every subcommand and its arguments, ``review`` is ``marlang review``.
"""

from __future__ import annotations

from marlang.cli.dispatch import main

__all__ = ["main"]
