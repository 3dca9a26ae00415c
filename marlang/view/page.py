"""Write ``view.html``: one self-contained page (data, styles and script inline; no server, no
network) showing runs read by :mod:`marlang.view.collect`."""

from __future__ import annotations

import html
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

from marlang.rundir import atomic_write_text, json_safe
from marlang.view.collect import collect

VIEW_FILE = "view.html"


def _asset(name: str) -> str:
    return resources.files("marlang.view").joinpath(name).read_text(encoding="utf-8")


def _embedded_json(data: Any) -> str:
    """JSON that cannot end its ``<script>`` element early (``</`` and ``<!--`` escaped)."""
    text = json.dumps(json_safe(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def render(data: dict[str, Any], title: str) -> str:
    page = _asset("page.html")
    for key, value in (("{{CSS}}", _asset("page.css")), ("{{JS}}", _asset("page.js")),
                       ("{{TITLE}}", html.escape(title)), ("{{DATA}}", _embedded_json(data))):
        page = page.replace(key, value)
    return page


def write_view(paths: list[str | Path], out: str | Path | None = None, max_episodes: int = 2000) -> Path:
    """Write the page for the runs under ``paths`` to ``out`` (default: ``view.html`` in the
    first path) and return where it went."""
    from marlang import __version__

    data = collect(paths, max_episodes=max_episodes)
    data["written"] = time.strftime("%Y-%m-%d %H:%M")
    data["version"] = __version__
    first = Path(paths[0])
    target = Path(out) if out else first / VIEW_FILE
    title = "marlang: " + (first.resolve().name if len(paths) == 1 else ", ".join(Path(p).name for p in paths))
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, render(data, title))
    return target
