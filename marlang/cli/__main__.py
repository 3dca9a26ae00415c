"""``python -m marlang.cli``: the ``marlang`` command, for launchers such as ``accelerate launch``."""

from __future__ import annotations

import sys

from marlang.cli.dispatch import main

sys.exit(main())
