"""Secrets (API keys, tokens, passwords in URLs) masked in anything marlang writes or prints:
the manifest's command, config.yaml, logs, error lines and the run directory's lock file."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

REDACTED = "***"
_SECRET_NAME = (r"(?:[A-Za-z0-9]+[_-])*"
                r"(?:api[_-]?key|apikey|key|token|secret|password|passwd|credentials?|authorization)")
# `name=value`, `name: value` or `"name": "value"`, where the name (its last dotted part) says
# it holds a secret: model.api_key=..., env.kwargs.hf_token: ..., "password": "..."
_SECRET_SETTING = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(" + _SECRET_NAME + r")(\"?\s*[=:]\s*[\"']?(?:bearer\s+)?)([^\s\"',}]+)")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):([^/\s@]+)@")
_SECRET_ENV = re.compile(r"(?i)(?:api[_-]?key|token|secret|password|passwd)")


def redact_secrets(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with what looks secret replaced by ``***``: the password of a URL
    (``https://user:***@host``), the value of a setting whose name says it is a secret
    (``--set model.api_key=***``; ``*_env`` names of variables are kept), each of ``secrets``,
    and the value of every environment variable whose name says it holds one (OPENAI_API_KEY,
    HF_TOKEN, ...). What marlang writes to a run directory and prints goes through it."""
    known = {s for s in secrets if s and len(s) >= 6}
    known |= {v for name, v in os.environ.items() if _SECRET_ENV.search(name) and len(v) >= 6}
    for secret in sorted(known, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _URL_PASSWORD.sub(rf"\1:{REDACTED}@", text)
    return _SECRET_SETTING.sub(
        lambda m: m.group(0) if m.group(3) == REDACTED else f"{m.group(1)}{m.group(2)}{REDACTED}", text)
