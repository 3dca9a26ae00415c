"""Runs every combination of a config grid and writes one comparison table and plot.

Each setting is an ordinary run directory under the comparison folder, so a comparison
is resumable setting by setting; the env's scripted team is added as a reference row (a
user's own graph, grouped as ``graph:<build>``, has none).
Seeds (``run.seeds``) are the grid's last axis, over ``run.seed``: one run per setting and
seed, pooled into one row per setting in the table.
"""

from __future__ import annotations

import copy
import itertools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from marlang.config import (
    ConfigError,
    ExperimentConfig,
    UntrustedImportError,
    apply_override,
    build_config,
    build_saved_config,
    config_difference,
    learning_method,
    method_keys,
    parse_value,
    trains_weights,
)
from marlang.config.loading import load_yaml
from marlang.rundir import RunDirectory, atomic_write_text, dumps_json, save_figure
from marlang.rundir.untrusted import DamagedRunFile, check_output_folder, read_yaml_mapping
from marlang.statistics.plots import iteration_figure, score_vs_cost_figure
from marlang.tables.cost import run_cost, score_and_cost
from marlang.tables.report import (
    SEED_PART,
    markdown_table,
    policies_text,
    pool_seeds,
    pool_summaries,
    seed_groups,
)

logger = logging.getLogger(__name__)


@dataclass
class Setting:
    name: str
    config: ExperimentConfig
    group: str
    """Settings in one group share a table (one group per environment, or per user's graph)."""
    label: str | None = None
    """The run's row name (its summary's ``setting``); None: the run's own (a scripted team's
    ``scripted, N steps``)."""


@dataclass
class ComparisonResult:
    out_dir: Path
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    table: str = ""
    failed: dict[str, str] = field(default_factory=dict)
    """Runs that ended in an error, each with its reason."""


def parse_grid(items: list[str]) -> list[tuple[str, list[Any]]]:
    """``["protocol=none,alternating-2", "env.id=babyai/pickup"]`` -> keys and value lists."""
    grid = []
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise ConfigError(f"--grid {item!r} must look like key=value1,value2")
        grid.append((key.strip(), [parse_value(v.strip()) for v in values.split(",") if v.strip()]))
    return grid


def parse_seeds(text: str) -> list[int]:
    """``"0,1,2"`` (``--seeds``) -> ``[0, 1, 2]``."""
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--seeds {text!r} must be integers separated by commas, e.g. --seeds 0,1,2") from None


def seeds_axis(base: dict[str, Any], grid: list[tuple[str, list[Any]]]) -> list[tuple[str, list[Any]]]:
    """``grid`` with ``run.seeds`` of ``base`` (validated) as its last axis, over ``run.seed``:
    a setting runs once per seed, named ``..., run.seed=N`` as a grid over ``run.seed`` names it."""
    run = base.get("run")
    if not isinstance(run, dict) or run.get("seeds") is None:
        return grid
    seeds = build_config({"run": copy.deepcopy(run)}).run.seeds
    assert seeds is not None  # (a given run.seeds validates to a list)
    keys = [k for k, _ in grid]
    if "run.seed" in keys or "run.seeds" in keys:
        raise ConfigError("seeds are given twice: run.seeds (or --seeds) and a grid over run.seed; give them once")
    return [*grid, ("run.seed", list(seeds))]


FOLDER_NAME_BYTES = 200
"""The longest run folder name, in bytes (file systems allow 255)."""


def folder_name(text: str) -> str:
    """A setting's run folder: its name with every character but letters, digits, - _ . as -;
    never ``.`` or ``..`` (the folder itself, or the one above), and a name longer than
    `FOLDER_NAME_BYTES` cut, ending in a hash of the whole, so settings stay apart."""
    import hashlib

    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)
    if set(name) <= {"."}:
        name = name.replace(".", "-") or "-"
    if len(name.encode()) > FOLDER_NAME_BYTES:
        digest = hashlib.sha256(text.encode()).hexdigest()[:16]
        name = name.encode()[: FOLDER_NAME_BYTES - 17].decode(errors="ignore") + "-" + digest
    return name


def expand_grid(base: dict[str, Any], grid: list[tuple[str, list[Any]]], reference: bool = True) -> list[Setting]:
    """Every combination of the grid values applied to ``base`` (validated), plus one scripted
    reference setting per environment when ``reference`` (unless its settings are all scripted
    teams; a user's graph has no scripted team). With ``run.seeds`` every setting
    runs once per seed; the reference runs on the first seed only (the scripted team is a
    fixed yardstick, not what the seeds measure)."""
    seeded = isinstance(base.get("run"), dict) and base["run"].get("seeds") is not None
    grid = seeds_axis(base, grid)
    keys = [k for k, _ in grid]
    settings: list[Setting] = []
    method_keys = _method_keys(base, grid)
    for combo in itertools.product(*[vals for _, vals in grid]) if grid else [()]:
        data = copy.deepcopy(base)
        if seeded:
            del data["run"]["seeds"]  # each run is one seed of them
        names: list[str] = []
        for k, v in zip(keys, combo):
            if k == SETTING_KEY:
                names.append(_apply_setting(data, v))
            else:
                apply_override(data, k, v)
        if method_keys:
            _drop_other_methods_keys(data, method_keys)
        cfg = build_config(data)
        group = cfg.played
        kind = "graph" if cfg.plays_graph else "scripted" if cfg.all_scripted else cfg.agents.kind
        head = {"llm": [cfg.protocol.label, cfg.learning_label], "neural": [cfg.learning.label],
                "graph": ["graph", cfg.learning_label]}.get(kind, ["scripted"])
        if kind == "llm" and cfg.team_label:
            head[-1] += f"; {cfg.team_label}"
        label_parts = [*names] if names else head
        label_parts += [
            f"{k}={v}" for k, v in zip(keys, combo)
            if k not in ("protocol", "env.id", "graph.build", "learning", SETTING_KEY)
            and not k.startswith("learning.")]
        name = ", ".join(label_parts)
        label: str | None = name
        if kind == "scripted":
            # A scripted team keeps its own name; its seeds stay apart by their seed part.
            seed = SEED_PART.search(name)
            label = f"{cfg.scripted_label}, {seed.group(0).strip(' ,')}" if seed else None
        settings.append(Setting(name, cfg, group, label))
    if reference:
        for group in dict.fromkeys(s.group for s in settings):
            first = next(s for s in settings if s.group == group)
            if first.config.plays_graph:
                continue  # a user's graph has no scripted team to measure it against
            if all(s.config.all_scripted for s in settings if s.group == group):
                continue  # the settings are the scripted team already: a reference would repeat them
            data = first.config.model_dump(mode="json")
            data["agents"]["kind"] = "scripted"
            data["team"] = {}  # every slot the env's scripted agent
            data["protocol"] = {"name": "none"}
            data["model"]["adapters"] = None  # the scripted team acts with no model
            settings.append(Setting("scripted (reference)", build_config(data), group))
            if data["env"]["max_steps"] is not None:
                # Under a step cap below what the level needs, the capped row says nothing
                # about solving; this one shows the scripted team on the level's own limit.
                data["env"]["max_steps"] = None
                settings.append(Setting("scripted (level's step limit)", build_config(data), group))
    keys_of = [(s.group, s.name) for s in settings]
    if len(set(keys_of)) != len(keys_of):
        raise ConfigError("--grid produces duplicate settings; list each value once")
    return settings


SETTING_KEY = "setting"
"""A grid key whose values each change several keys together, e.g. a neural learner next to
LLM teams: ``{name: mappo, agents.kind: neural, learning: {method: mappo}}``."""


def _apply_setting(data: dict[str, Any], value: Any) -> str:
    """Apply one ``setting`` value (its keys as ``--set`` applies them: a dotted key sets one
    value, a mapping updates its section) and return its row name."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or len(value) < 2:
        raise ConfigError(
            f"grid: each 'setting' value must be a mapping with a 'name' and the keys it changes, "
            f"e.g. {{name: mappo, agents.kind: neural, learning: {{method: mappo}}}}; got {value!r}")
    for key, v in value.items():
        if key != "name":
            apply_override(data, key, copy.deepcopy(v))
    return value["name"]


def _unset_method(data: dict[str, Any]) -> str:
    """The ``learning.method`` a config that names none runs: a user's graph plays and records."""
    return "none" if "graph" in data else "reflexion"


def _grid_methods(base: dict[str, Any], grid: list[tuple[str, list[Any]]]) -> list[str]:
    methods = [str((base.get("learning") or {}).get("method", _unset_method(base)))]
    for key, values in grid:
        for v in values:
            if key == "learning.method":
                methods.append(str(v))
            elif key == "learning" and isinstance(v, dict) and "method" in v:
                methods.append(str(v["method"]))
    return list(dict.fromkeys(methods))


def _method_keys(base: dict[str, Any], grid: list[tuple[str, list[Any]]]) -> dict[str, set[str]]:
    """For a grid over learning methods: each method's own ``learning.*`` keys (empty when the
    grid keeps one method, or names an unknown one, which validation then reports)."""
    methods = _grid_methods(base, grid)
    if len(methods) < 2:
        return {}
    out: dict[str, set[str]] = {}
    for m in methods:
        try:
            out[m] = set(method_keys(learning_method(m)))
        except (KeyError, ValueError):
            return {}
    return out


def _drop_other_methods_keys(data: dict[str, Any], method_keys: dict[str, set[str]]) -> None:
    """A grid over learning methods applies a method's own keys (``learning.memory_size`` of
    reflexion) only to that method's settings: keys of another method in the grid that this
    setting's method does not take are dropped. Keys of no method in the grid stay (and fail
    validation, naming the key)."""
    learning = data.get("learning")
    if not isinstance(learning, dict):
        return
    mine = method_keys.get(str(learning.get("method", _unset_method(data))))
    if mine is None:
        return
    others = set().union(*method_keys.values()) - mine
    for key in [k for k in learning if k in others]:
        del learning[key]


def build_chat_model(model_config: Any) -> tuple[Any, Any]:
    """The model every setting shares (``marlang.run.build.build_chat_model``, imported only
    when a comparison runs)."""
    from marlang.run.build import build_chat_model as build

    return build(model_config)


def run_comparison(
    base: dict[str, Any], grid: list[tuple[str, list[Any]]], out_dir: str | Path, reference: bool = True,
    notify: Callable[[str], None] | None = None, executor: Any = None, training_plots: bool = True,
) -> ComparisonResult:
    """Run (or resume) every setting, then write ``table.md``, ``summary.json`` and
    ``learning_curve.png`` into ``out_dir``. ``executor`` runs the settings
    (`marlang.run.executors`: in this process, one after another, by default)."""
    # Imported here: rebuilding a table (write_comparison, marlang report) needs no run machinery.
    from marlang.run.executors import LocalExecutor, RunJob

    executor = executor if executor is not None else LocalExecutor()
    out = Path(out_dir)
    settings = expand_grid(base, grid, reference)
    check_comparison_folder(out, base, grid)
    executor.prepare()  # a cluster that cannot be joined fails before anything is written
    shared_model: Any = None
    shared_cache: Any = None
    shares_model = executor.shares_model and not any(k.startswith("model") for k, _ in grid)
    first_llm = next((s for s in settings if _can_share(s.config, s.config)), None)
    if first_llm is not None and shares_model:
        # The model loads before anything is written: a spec that cannot load leaves nothing.
        shared_model, shared_cache = build_chat_model(first_llm.config.model)
    multi_group = len({s.group for s in settings}) > 1
    names = [folder_name(f"{s.group}__{s.name}" if multi_group else s.name) for s in settings]
    jobs = []
    for s, name in zip(settings, names):
        kwargs: dict[str, Any] = {"label": s.label}
        if shares_model and _can_share(s.config, first_llm.config if first_llm else None):
            kwargs.update(chat_model=shared_model, cache=shared_cache, model_id=s.config.model.spec)
        jobs.append(RunJob(name, s.config, kwargs))
    # Written before the first run, so a rerun of an interrupted comparison knows the folder is its own.
    atomic_write_text(out / COMPARISON_FILE, yaml.safe_dump(
        {"base": base, "grid": [{k: v} for k, v in grid], "reference": reference, "runs": names},
        sort_keys=False))
    failed = executor.run(jobs, out, notify=notify)
    return write_comparison(out, runs=names, failed=failed, training_plots=training_plots)


COMPARISON_FILE = "comparison.yaml"
"""What makes a folder a comparison's: its base config, grid and runs."""


RUN_MARKS = ("config.yaml", "manifest.json", "episodes.jsonl", "metrics.csv", "checkpoints.sqlite", ".lock")
"""Files only a run directory holds (a comparison's folder holds its runs one level down)."""


def check_comparison_folder(out: Path, base: dict[str, Any], grid: list[tuple[str, list[Any]]]) -> None:
    """Refuse to write a comparison into a folder that holds a run, or another comparison:
    one on another base config (its grids may differ: a new grid on the same base adds its
    runs beside the earlier ones, and a rerun resumes them). A run is known by any of its own
    files, so one that lost its config.yaml is not written over either."""
    check_output_folder(out)
    held = next((n for n in RUN_MARKS if (out / n).exists() or (out / n).is_symlink()), None)
    if held is not None:
        raise ConfigError(f"--out {out} holds a run ({held}), not a comparison; give the comparison a "
                          "folder of its own (--out)")
    saved_file = out / COMPARISON_FILE
    if not saved_file.is_file():
        return
    given = build_config(copy.deepcopy(base))
    try:
        saved = load_yaml(saved_file.read_text(encoding="utf-8"))  # its aliases bounded
        saved_base, saved_grid = saved["base"], [next(iter(g.items())) for g in saved["grid"]]
        # the import paths the given config names (a graph's builder, data, reward) are the user's own
        saved_config = build_saved_config(copy.deepcopy(saved_base), saved_file, beside=given)
    except UntrustedImportError:
        raise
    except (OSError, ValueError, yaml.YAMLError, RecursionError, KeyError, TypeError, AttributeError,
            StopIteration) as err:
        raise ConfigError(f"--out {out}: its {COMPARISON_FILE} is damaged or unreadable ({type(err).__name__}); "
                          "choose another --out, or restore that file to continue the comparison there") from None
    varied = ["run.seed", "run.seeds"]
    for key, values in [*saved_grid, *grid]:
        varied += [k for v in values if isinstance(v, dict) for k in v if k != "name"] if key == SETTING_KEY else [key]
    difference = config_difference(saved_config, given, tuple(varied))
    if difference is not None:
        key, old, now = difference
        raise ConfigError(f"--out {out} holds another comparison ({saved_file}: {key!r} is {old} there but "
                          f"{now} here); choose another --out, or rerun that comparison's command to continue it")


def _can_share(config: Any, shared: Any) -> bool:
    """Whether a setting can act with the comparison's shared model: an LLM team on the same
    model section, which neither trains the model's weights (a weight-space learner attaches
    its adapters to the model it gets) nor plays adapters back. Other settings load their own,
    so no setting's adapters reach another's model."""
    if shared is None or config.agents.kind != "llm" or config.model != shared.model or config.model.adapters:
        return False
    if any(s.model.adapters for s in config.slots().values()):  # a slot's adapters attach to its model
        return False
    return not trains_weights(config.learning.method)


def write_comparison(out_dir: str | Path, runs: list[str] | None = None,
                     failed: dict[str, str] | None = None, training_plots: bool = True) -> ComparisonResult:
    """(Re)build the comparison table and plot from the run directories under ``out_dir``:
    those named in ``runs`` (a grid's settings; the others there are named in a note below
    the table), or every one when ``runs`` is None. ``failed``: runs that ended in an error,
    each with its reason (a note below the table, and ``failed_runs`` in summary.json).
    ``training_plots``: draw the learning curves and the score-against-cost plot (False for a
    cross-play's cells, which train nothing)."""
    out = Path(out_dir)
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    curves: dict[str, dict[str, list[dict[str, Any]]]] = {}
    others: list[str] = []
    found: dict[str, tuple[str, str]] = {}  # run folder -> its group and setting (then: its row)
    for run_path in sorted(p.parent for p in out.glob("*/summary.json")):
        if runs is not None and run_path.name not in runs:
            others.append(run_path.name)
            continue
        summary = RunDirectory(run_path).read_json("summary.json")  # damaged: one line naming it
        if summary is None or not summary.get("episodes"):  # (None: removed since the glob)
            continue
        if "cost" not in summary:  # a neural run's, or one written before runs kept their cost
            summary["cost"] = run_cost(run_path)
        group = summary.get("env_id", "?")
        name = summary.get("setting", run_path.name)
        groups.setdefault(group, {})[name] = summary
        found[run_path.name] = (group, name)
        curves.setdefault(group, {})[name] = RunDirectory(run_path).read_iterations()
    parts: list[str] = []
    summaries: dict[str, dict[str, dict[str, Any]]] = {}
    runs_of: dict[str, dict[str, dict[str, Any]]] = {}
    groups = dict(sorted(groups.items(), key=lambda kv: _natural(kv[0])))
    for group, by_name in groups.items():
        ordered = dict(sorted(by_name.items(), key=lambda kv: (_is_scripted(kv[0]), _setting_order(kv[0]))))
        runs_of[group] = ordered
        # One row per setting: its seeds pooled (each seed's own summary kept under "seeds").
        summaries[group] = pool_summaries(ordered)
        row_of = {name: label for label, names in seed_groups(ordered).items() for name in names}
        found.update({folder: (group, row_of[name]) for folder, (g, name) in found.items() if g == group})
    rows = {group: next(iter(by_name.values())) for group, by_name in summaries.items()}
    if len(groups) > 1 and all(len(by_name) == 1 for by_name in summaries.values()) and \
            len({(s.get("setting"), s.get("model")) for s in rows.values()}) == 1:
        # One setting on many environments (e.g. a scripted team on every layout): one table.
        setting = next(iter(rows.values())).get("setting", "?")
        model = next(iter(rows.values())).get("model", "?")
        parts.append(markdown_table(rows, title=f"{setting} (model: {model})", first_column="environment"))
    else:
        for group, ordered in summaries.items():
            model = next((s.get("model") for s in ordered.values() if s.get("model") != "scripted"),
                         next(iter(ordered.values())).get("model", "?"))
            parts.append(markdown_table(ordered, title=f"{group} (model: {model})"))
    for group, ordered in runs_of.items():
        for name, s in ordered.items():
            if s.get("policies"):
                parts.append(policies_text(s["policies"], heading=f"### {group}: {name}"))
    if others:
        parts.append(f"Not in this grid (earlier runs in {out}, shown by marlang report {out}): "
                     f"{', '.join(others)}\n")
    if failed:
        parts.append("Failed runs (rerun the same command to retry them):\n\n" + "".join(
            f"- {name}: {reason}\n" for name, reason in failed.items()))
    fronts = _score_vs_cost(out, summaries) if training_plots else {}
    drawn = [f"{f['figure']}: {f['score']} against {f['cost']}; the front: {', '.join(f['frontier'])}" + "".join(
        f"; not drawn: {name} ({why})" for name, why in (f.get("left_out") or {}).items())
        for f in fronts.values() if f.get("frontier")]
    if drawn:
        parts.append("Score against cost, one point per setting (the Pareto front: no other setting scores "
                     "higher at a lower cost):\n\n" + "".join(f"- {d}\n" for d in drawn))
    missing = _missing_runs(out, runs, found, failed or {}, summaries)
    if missing:
        parts.append("Missing runs (no finished summary.json: deleted, or not run yet; the rows above are "
                     "without them; rerun the comparison's command to run them):\n\n" + "".join(
                         f"- {m['setting']}: without seed {m['seed']} ({name})\n" if m["seed"] is not None
                         else f"- {m['setting']} ({name})\n" for name, m in missing.items()))
    table = "\n".join(parts)
    atomic_write_text(out / "table.md", table)
    record: dict[str, Any] = {**summaries, **({"score_vs_cost": fronts} if fronts else {})}
    if failed:
        record["failed_runs"] = dict(failed)
    if missing:
        record["missing_runs"] = missing
    atomic_write_text(out / "summary.json", dumps_json(record, indent=2) + "\n")
    for i, (group, curves_of) in enumerate(curves.items() if training_plots else ()):
        suffix = "" if i == 0 else f"_{folder_name(group)}"
        of_run = runs_of[group]  # the curves are each run's; pool_seeds pools them
        neural = {k: v for k, v in curves_of.items() if v and of_run[k].get("agents") == "neural"}
        llm = {k: v for k, v in curves_of.items() if not _is_scripted(k) and v and k not in neural}
        # A scripted team is a reference only under the LLM settings' own step cap.
        caps = {of_run[k].get("max_steps") for k in llm}
        ref = {f"{k}: mean return": of_run[k]["return"]["mean"] for k in curves_of
               if _is_scripted(k) and of_run[k].get("max_steps") in caps
               and of_run[k]["return"].get("mean") is not None} or None
        # Seeds of one setting are drawn as one curve (their mean, with the interval over seeds).
        if llm:
            save_figure(iteration_figure(pool_seeds(llm)[0], reference=ref), out / f"learning_curve{suffix}.png")
        elif not neural and any(curves_of.values()):
            save_figure(iteration_figure(pool_seeds({k: v for k, v in curves_of.items() if v})[0]),
                        out / f"learning_curve{suffix}.png")
        if neural:
            # Neural learners against frames, with their closing greedy evaluation.
            final = {k: (of_run[k]["frames"], of_run[k]["return"]["mean"]) for k in neural
                     if of_run[k].get("frames") is not None
                     and (of_run[k].get("return") or {}).get("mean") is not None}
            name = f"learning_curve{suffix}.png" if not llm else f"learning_curve_frames{suffix}.png"
            success = any(of_run[k].get("success_defined", True) for k in neural)
            pooled, pooled_final = pool_seeds(neural, final)
            save_figure(iteration_figure(pooled, final=pooled_final, success=success), out / name)
    return ComparisonResult(out, summaries, table, dict(failed or {}))


SEED_FOLDER = re.compile(r"(^|--)run\.seed-(-?[^-]*)$")
"""The seed part of a run folder's name (``none--reflexion--run.seed-1``, ``...--run.seed--1``)."""


def planned_runs(out: Path) -> list[str] | None:
    """The run folders the comparison in ``out`` last planned (its ``comparison.yaml``'s
    ``runs``), None where it names none that can be read."""
    try:
        runs = (read_yaml_mapping(out / COMPARISON_FILE) or {}).get("runs")
    except (OSError, DamagedRunFile):  # a FIFO there is refused, never waited on
        return None
    return [r for r in runs if isinstance(r, str)] if isinstance(runs, list) else None


def _missing_runs(out: Path, runs: list[str] | None, found: dict[str, tuple[str, str]], failed: dict[str, str],
                  summaries: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The planned runs (``runs``, else the folder's :func:`planned_runs`) with no finished
    summary in ``out``, failed ones apart, each with its row (that of its setting's other
    seeds, ``found``: folder -> group and row; else its folder) and seed; the rows they belong
    to get ``missing_seeds``. A seed's
    run deleted or never finished would otherwise leave a row over fewer seeds without a word."""
    planned = runs if runs is not None else planned_runs(out)
    missing = [r for r in planned or [] if r not in found and r not in failed]
    if not missing:
        return {}
    # a setting's folder without its seed part -> the group and row of its seeds found
    row_of = {SEED_FOLDER.sub("", folder): (group, label) for folder, (group, label) in found.items()}
    found_missing: dict[str, dict[str, Any]] = {}
    for folder in missing:
        seed = SEED_FOLDER.search(folder)
        row = row_of.get(SEED_FOLDER.sub("", folder))
        label = row[1] if row else None
        found_missing[folder] = {"setting": label or SEED_FOLDER.sub("", folder), "seed": seed and seed.group(2)}
        if row is not None and seed is not None:
            summaries[row[0]][row[1]].setdefault("missing_seeds", []).append(seed.group(2))
    return found_missing


def _score_vs_cost(out: Path, summaries: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Draw ``score_vs_cost.png`` (``score_vs_cost_GROUP.png`` past the first environment): one
    point per setting, its seeds pooled, with the Pareto front; the points and front by group."""
    fronts: dict[str, dict[str, Any]] = {}
    for i, (group, rows) in enumerate(summaries.items()):
        found = score_and_cost(rows)
        if found is None:
            continue
        if found["points"]:
            found["figure"] = f"score_vs_cost{'' if i == 0 else '_' + folder_name(group)}.png"
            # the scripted team, under the settings' own step cap, as a line (it calls no model)
            caps = {rows[n].get("max_steps") for n in found["points"]}
            ref = {f"{n}: mean return": s["return"]["mean"] for n, s in rows.items() if _is_scripted(n)
                   and s.get("max_steps") in caps and (s.get("return") or {}).get("mean") is not None}
            save_figure(score_vs_cost_figure(found["points"], found["frontier"], score_label=found["score"],
                                             cost_label=found["cost"], reference=ref or None,
                                             title=f"{group}: score against cost (filled: Pareto front)"),
                        out / found["figure"])
        fronts[group] = found
    return fronts


_ORDER = ["none", "bidirectional", "unidirectional"]


def _natural(text: str) -> list[Any]:
    """Sort key that puts pistonball/n5 before pistonball/n10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _is_scripted(setting: str) -> bool:
    return setting.startswith("scripted")


def _setting_order(name: str) -> tuple[int, str]:
    head = name.split(",")[0]
    if head in _ORDER:
        return (_ORDER.index(head), name)
    return (len(_ORDER), name)
