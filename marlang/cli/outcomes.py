"""How a ``marlang`` command ends: its exit codes, the one line it prints for a failure (secrets
redacted), what an interrupted run keeps, and the command that continues it.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

EXIT_CONFIG = 2
EXIT_MODEL = 3
EXIT_INTERRUPTED = 130
EXIT_FAILED_RUNS = 4  # a comparison finished, but some of its runs ended in an error
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer killed by a closed pipe


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
