"""Read run and comparison directories into the plain data ``marlang view`` embeds in its page.

Everything comes from the run directory's own files (``summary.json``, ``iterations.csv``,
``episodes.jsonl``, ``updates.jsonl``, ``policies.jsonl``, ``review.json``, ``evaluation.json``,
``credit/``); a run still in progress (no ``summary.json`` yet) is shown with what it has.
Long fields are shortened, and what an episode carries only for training (scored prompts,
per-action scores, structured observation data) is left out, so the page stays small.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from marlang.rundir import RunDirectory
from marlang.rundir.untrusted import read_regular

TEXT_LIMIT = 6000
"""Characters kept of any one text (observation, message, thought, policy)."""

_VERDICT_KEYS = ("status", "passed", "total", "pass_rate", "score", "solved", "helpers_needed",
                 "levelled_reward", "invalid")
# helpers_needed: the cooperation check of runs recorded before it was read from the code.
"""Step infos that make up a sandbox or answer verdict (coding and reasoning tasks)."""


class ViewError(ValueError):
    """A path given to ``marlang view`` that holds no run."""


def is_run(path: Path) -> bool:
    return (path / "config.yaml").is_file() and not (path / "comparison.yaml").is_file()


NOT_GROUPS = ("score_vs_cost", "failed_runs")
"""Keys of a comparison's summary.json beside its environment groups."""


def find_runs(path: Path) -> tuple[list[Path], str | None]:
    """The run directories under ``path`` (itself, or each run of a comparison directory, in
    the order its table lists them) and the comparison's ``table.md``, if any."""
    if not path.is_dir():
        raise ViewError(f"{path}: no such directory")
    if is_run(path):
        return [path], None
    runs = sorted((p for p in path.iterdir() if p.is_dir() and is_run(p)), key=lambda p: p.name)
    table = path / "table.md"
    order: list[object] = []  # setting names as the comparison's summary.json gives them
    summary = _read_json(path / "summary.json")
    if isinstance(summary, dict):  # a comparison's summary: {env group: {setting: summary}}
        for key, group in summary.items():
            for name, row in (group.items() if isinstance(group, dict) and key not in NOT_GROUPS else ()):
                seeds = row.get("seeds") if isinstance(row, dict) else None
                if isinstance(seeds, dict):  # a setting's seeds pooled: its runs, seed by seed
                    order += [s.get("setting") for s in seeds.values() if isinstance(s, dict)]
                else:
                    order.append(name)
    by_setting = {(_read_json(p / "summary.json") or {}).get("setting", p.name): p for p in runs}
    ordered = [by_setting[name] for name in order if name in by_setting]
    ordered += [p for p in runs if p not in ordered]
    if not ordered:
        raise ViewError(f"{path}: neither a run directory (config.yaml) nor a folder of runs")
    return ordered, _read_text(table)


def collect(paths: list[str | Path], max_episodes: int = 2000) -> dict[str, Any]:
    """The page's data: every run under ``paths`` and the comparison tables found on the way."""
    runs: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    fronts: list[dict[str, Any]] = []
    seen: set[Path] = set()
    for given in paths:
        found, table = find_runs(Path(given))
        if table:
            crossplay = _read_json(Path(given) / "crossplay.json")
            tables.append({"path": str(given), "markdown": table,
                           "crossplay": crossplay if isinstance(crossplay, dict) else None})
            fronts += score_vs_cost(Path(given))
        for path in found:
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            runs.append(collect_run(path, max_episodes=max_episodes))
    names = [r["name"] for r in runs]
    for run in runs:  # two runs of one setting (e.g. two folders given) stay apart
        if names.count(run["name"]) > 1:
            run["name"] = f"{run['name']} ({run['path']})"
    return {"runs": runs, "tables": tables, "fronts": fronts}


def score_vs_cost(path: Path) -> list[dict[str, Any]]:
    """A comparison's score-against-cost points and Pareto front, one entry per environment
    (its summary.json's ``score_vs_cost``, as ``marlang compare`` drew score_vs_cost.png)."""
    summary = _read_json(path / "summary.json")
    found = summary.get("score_vs_cost") if isinstance(summary, dict) else None
    return [{"path": str(path), "group": group, **{k: f.get(k) for k in ("score", "cost", "points", "frontier")}}
            for group, f in (found.items() if isinstance(found, dict) else ())
            if isinstance(f, dict) and isinstance(f.get("points"), dict) and f["points"]]


def collect_run(path: Path, max_episodes: int = 2000) -> dict[str, Any]:
    rd = RunDirectory(path)
    summary = rd.read_json("summary.json") or {}
    manifest = rd.read_json("manifest.json") or {}
    episodes = rd.load_episode_dicts()
    updates = rd.read_jsonl("updates.jsonl")
    credits = _credits(updates)
    kept = episodes[:max_episodes]
    run: dict[str, Any] = {
        "name": summary.get("setting") or manifest.get("setting") or path.name,
        "path": str(path),
        "env_id": summary.get("env_id") or manifest.get("env_id"),
        "learner": summary.get("learner") or manifest.get("learner"),
        "model": summary.get("model") or manifest.get("model_id"),
        "team": manifest.get("team"),
        "neural": (summary.get("agents") or manifest.get("agents")) == "neural",
        "finished": bool(summary),
        "summary": {k: v for k, v in summary.items() if k not in ("iterations", "policies")},
        "iterations": rd.read_iterations(),
        "episodes": [_episode(e, credits) for e in kept],
        "episodes_total": len(episodes),
        "updates": [_update(u) for u in updates],
        "policies": [_shorten(p) for p in rd.read_jsonl("policies.jsonl")],
        "review": _shorten(rd.read_json("review.json")),
        "evaluation": _evaluation(rd.read_json("evaluation.json")),
        "credit": _credit_files(path / "credit"),
        "credit_check": _credit_check(rd.read_json("credit_check.json")),
    }
    return run


def _credit_check(found: Any) -> dict[str, Any] | None:
    """``marlang credit-check``'s result without its per-step rows: the oracle, counts, the table."""
    if not isinstance(found, dict) or not isinstance(found.get("critics"), list):
        return None
    return {k: found.get(k) for k in ("env_id", "oracle", "counts", "critics")}


# episodes ----------------------------------------------------------------------------------------
def _episode(e: dict[str, Any], credits: dict[object, dict[object, str]]) -> dict[str, Any]:
    steps = [_step(s) for s in e.get("steps") or []]
    final = {a: _text((o or {}).get("text")) for a, o in (e.get("final_observations") or {}).items()}
    return {
        "episode": e.get("episode"),
        "iteration": e.get("iteration", 0),
        "phase": e.get("phase", "train"),
        "seed": e.get("seed"),
        "success": e.get("success"),
        "return": e.get("return"),
        "n_steps": e.get("n_steps", len(steps)),
        "agents": e.get("agents") or sorted({a for s in steps for a in s["decisions"]}),
        "policy_versions": e.get("policy_versions") or {},
        "mission": next((o.get("mission") for s in (e.get("steps") or [])[:1]
                         for o in (s.get("observations") or {}).values() if isinstance(o, dict)), None),
        "steps": steps,
        "final_observations": final,
        "credit": credits.get(e.get("episode"), {}),
        "error": _text((e.get("metrics") or {}).get("error")),
    }


def _step(s: dict[str, Any]) -> dict[str, Any]:
    observations = {a: _text(o.get("text") if isinstance(o, dict) else o)
                    for a, o in (s.get("observations") or {}).items()}
    decisions = {}
    for agent, d in (s.get("decisions") or {}).items():
        d = d or {}
        decisions[agent] = {
            "action": _text(d.get("action")), "thought": _text(d.get("thought")),
            "valid": d.get("valid", True), "reprompted": d.get("reprompted", False),
            "fallback": d.get("fallback", False), "logprob": d.get("logprob"), "value": d.get("value"),
        }
    messages = [{"sender": m.get("sender"), "content": _text(m.get("content")), "round": m.get("round")}
                for m in s.get("messages") or []]
    verdicts = {}
    for agent, info in (s.get("infos") or {}).items():
        found = {k: info[k] for k in _VERDICT_KEYS if isinstance(info, dict) and k in info}
        if "status" in found or "passed" in found or "score" in found:
            report = info.get("report") if isinstance(info, dict) else None
            if isinstance(report, dict):
                found["report"] = _shorten({k: report[k] for k in ("status", "error_type", "message", "duration_s")
                                            if k in report})
            verdicts[agent] = found
    return {
        "t": s.get("t"), "observations": observations, "messages": messages, "decisions": decisions,
        "rewards": s.get("rewards") or {}, "terminated": s.get("terminated"), "truncated": s.get("truncated"),
        "success": (s.get("info") or {}).get("success"), "verdicts": verdicts,
        # a user's graph: the node that made the call, and the call's error
        "node": _text((s.get("info") or {}).get("node")), "call_error": _text((s.get("info") or {}).get("error")),
    }


def _credits(updates: list[dict[str, Any]]) -> dict[object, dict[object, str]]:
    """{episode: {agent: the critic's credit}} from LangMARL's updates (keys as the run's
    JSON gives them)."""
    out: dict[object, dict[object, str]] = {}
    for u in updates:
        for t in u.get("trajectories") or []:
            if t.get("credit") is not None:
                out.setdefault(t.get("episode"), {})[u.get("agent")] = _text(t["credit"])
    return out


# learner records ------------------------------------------------------------------------------
def _update(u: dict[str, Any]) -> dict[str, Any]:
    evaluation = u.get("evaluation")
    if isinstance(evaluation, dict):
        evaluation = {k: v for k, v in evaluation.items() if k != "episodes"}
    out = _shorten({k: v for k, v in u.items() if k != "evaluation"})
    out["evaluation"] = evaluation
    return out


def _evaluation(data: Any) -> dict[str, Any] | None:
    """A neural run's final greedy evaluation: its frames and per-episode returns."""
    if not isinstance(data, dict):
        return None
    rows = data.get("episodes") or []
    return {"frames": data.get("frames"),
            "returns": [r.get("return") for r in rows if isinstance(r, dict)]}


def _credit_files(folder: Path, limit: int = 200) -> dict[str, Any] | None:
    """LCA's ``credit/``: the first rankings and the per-iteration records, shortened."""
    if not folder.is_dir():
        return None
    out: dict[str, Any] = {}
    for path in sorted(folder.glob("*.jsonl")):
        rows = RunDirectory(folder).read_jsonl(path.name)
        out[path.stem] = {"rows": [_shorten(r) for r in rows[:limit]], "total": len(rows)}
    for path in sorted(folder.glob("*.txt")):
        out[path.stem] = {"text": _text(_read_text(path))}
    return out or None


# helpers -----------------------------------------------------------------------------------------
def _text(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + f" … [{len(value) - TEXT_LIMIT} more characters]"
    return value


def _shorten(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items() if k not in ("prompt", "scores")}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return _text(value)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(read_regular(path) or b"")
    except (OSError, ValueError):  # absent, damaged, or no regular file (DamagedRunFile)
        return None


def _read_text(path: Path) -> str | None:
    """The text of the regular file ``path`` (None if absent); a FIFO or a directory there is a
    `DamagedRunFile`, never waited on."""
    data = read_regular(path)
    return None if data is None else data.decode("utf-8", errors="replace")
