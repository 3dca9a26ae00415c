"""Cross-play: who a trained agent can play with.

A pool of players plays every pairing, slot by slot, on one set of levels: the held-out set
(``run.levels: held_out``: ``run.eval_seed``'s levels, the ones learners evaluate on, played
greedily). A player is anything a ``team:`` slot holds (``scripted``, ``base``: the config's
model as it is) or what a learner trained, read from its run directory: adapters (PPO,
MAGRPO, GRPO), the accepted policy text (LangMARL), the memory (Reflexion), a neural policy.
A player in a slot plays what its run trained for that slot. For a user's own graph (``graph:``)
the slots are the marked prompts, in the order the app marks them, and a player is a run that
rewrote them (LangMARL), one that keeps lessons for them (Reflexion) or ``base``: the config's
texts (``graph.prompts``, else the app's defaults); each cell plays the task's inputs, the same
ones in every cell.

With two slots, cell (i, j) is player i in slot 0 beside player j in slot 1; with more, player
i in slot 0 beside player j in every other slot (a focal player among partners). Each cell is
an ordinary run of a comparison folder, so a cross-play resumes cell by cell. The matrix holds
each cell's mean return (and success rate where the env knows success) with its interval;
self-play is the diagonal. The cross-play gap is, level by level, the mean self-play return
minus the mean cross-play return, averaged over the levels with its bootstrap interval
(every cell plays the same levels, so the difference is paired).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from marlang.config import ConfigError, ExperimentConfig, build_config, build_saved_config, trains_weights
from marlang.evaluation.compare import check_comparison_folder, expand_grid, folder_name
from marlang.prompts import lessons_text
from marlang.rundir import atomic_write_text, dumps_json, save_figure
from marlang.rundir.untrusted import (
    DamagedRunFile,
    damaged,
    read_csv_rows,
    read_json_object,
    read_yaml_mapping,
)
from marlang.statistics.intervals import BOOTSTRAP, mean_interval, show, wilson_interval

CROSSPLAY_FILE = "crossplay.yaml"
"""What makes a comparison folder a cross-play's: its players (written before its first cell)."""

KEYWORDS = {"scripted": "the env's scripted agent", "base": "the config's model, untrained"}

GRAPH_PREFIX = "graph:"
"""How what a run plays names a user's graph (``ExperimentConfig.played``), never an env id."""


@dataclass(frozen=True)
class Player:
    """One player of the pool: what plays a slot, and where it comes from."""

    name: str
    what: str
    """In a few words: ``ppo adapters``, ``langmarl policy``, ``scripted``, ..."""
    source: str | None = None
    """The run directory it was read from (None: ``scripted``, ``base``)."""
    policies: dict[str, str] | None = None
    memories: dict[str, list[str]] | None = None

    def slot(self, agent: str) -> dict[str, Any]:
        """The ``team.<agent>`` entry that makes this player play ``agent``'s slot."""
        if self.what == "scripted":
            return {"kind": "scripted"}
        if self.source is None:
            return {"kind": "llm"}
        if self.what.startswith("neural"):
            return {"kind": "neural", "checkpoint": self.source}
        if self.what.endswith("adapters"):
            return {"kind": "llm", "adapters": self.source}
        entry: dict[str, Any] = {"kind": "llm"}
        if self.policies and agent in self.policies:
            entry["policy"] = self.policies[agent]
        if self.memories and self.memories.get(agent):
            entry["memory"] = list(self.memories[agent])
        return entry

    def prompts(self, start: Mapping[str, str]) -> dict[str, str]:
        """The texts this player plays for a graph's marked prompts, of those ``start`` names with
        the texts they start from: its run's text (else the start's), then the lessons of its
        Reflexion memory, as the run's nodes read them; none where its run changed neither
        (``base``: the config's own)."""
        texts = {}
        for name, text in start.items():
            own = (self.policies or {}).get(name)
            lessons = lessons_text((self.memories or {}).get(name, []))
            if own is not None or lessons:
                texts[name] = "\n\n".join(filter(None, (own or text, lessons)))
        return texts


def _section(saved: dict[str, Any], key: str, file: Path) -> dict[str, Any]:
    """``saved[key]`` as a mapping (empty if absent); another kind of value there is damage."""
    value = saved.get(key) or {}
    if not isinstance(value, dict):
        raise damaged(file, f"its {key} is a {type(value).__name__}, not a mapping")
    return value


def read_player(name: str, path: Path, played: str, n_agents: int, protocol: str | None = None,
                model: str | None = None) -> Player:
    """The player a run directory holds; one line when it holds none (no committed update, or a
    static run), was trained on another env (``played``: an env id, or a graph as
    `ExperimentConfig.played` names it), team size, ``protocol`` or ``model`` (spec) than the
    cross-play's (None: not checked), or its files cannot be read as what they should hold."""
    try:
        return _read_player(name, path, played, n_agents, protocol, model)
    except (OSError, DamagedRunFile) as err:
        raise ConfigError(f"--players {name}={path}: {str(err).splitlines()[0]}") from None


def _read_player(name: str, path: Path, played: str, n_agents: int, protocol: str | None,
                 model: str | None) -> Player:
    from marlang.config import ModelConfig, ProtocolConfig

    config_file = path / "config.yaml"
    saved = read_yaml_mapping(config_file)
    if saved is None:
        raise ConfigError(f"--players {name}={path}: not a run directory (no config.yaml); give a run "
                          f"directory, or one of {', '.join(KEYWORDS)}")
    env, agents = _section(saved, "env", config_file), _section(saved, "agents", config_file)
    learning = _section(saved, "learning", config_file)
    build = _section(saved, "graph", config_file).get("build")
    if played.startswith(GRAPH_PREFIX) or build is not None:
        there = f"{GRAPH_PREFIX}{build}" if build is not None else env.get("id")
        if there != played:
            kind = "graph" if played.startswith(GRAPH_PREFIX) else "env"
            raise ConfigError(f"--players {name}={path}: trained on {there}; this cross-play plays {played} "
                              f"(give players of that {kind})")
        protocol = None  # a graph has no protocol: its nodes are its own
    else:
        saved_agents = env.get("n_agents")
        if env.get("id") != played or not isinstance(saved_agents, int) or saved_agents != n_agents:
            raise ConfigError(f"--players {name}={path}: trained on {env.get('id')} with {env.get('n_agents')} "
                              f"agents; this cross-play plays {played} with {n_agents} (give players of that env)")
    method = str(learning.get("method", "none" if build is not None else "reflexion"))
    if agents.get("kind") == "neural":
        return Player(name, f"neural {method}", str(path))
    if method in ("none", "static"):
        raise ConfigError(f"--players {name}={path}: a static run (learning.method {method}) commits no update, "
                          "so it holds no trained player; give a trained run, or base for the untrained model")
    trained_with = {
        "protocol": (protocol, _section(saved, "protocol", config_file).get("name", ProtocolConfig().name)),
        "model": (model, _section(saved, "model", config_file).get("spec", ModelConfig().spec))}
    for key, (here, there) in trained_with.items():
        if here is not None and str(there) != here:
            raise ConfigError(f"--players {name}={path}: trained with {key} {there}; this cross-play plays "
                              f"{key} {here} (give players trained with it, or --set {key}"
                              f"{'.name' if key == 'protocol' else '.spec'}={there})")
    state_file = path / "learner_state.json"
    state = read_json_object(state_file)
    if state is None:
        raise ConfigError(f"--players {name}={path}: holds no trained player (no learner_state.json: the run "
                          "has not committed an update)")
    if state.get("adapters"):
        if build is not None:
            raise ConfigError(f"--players {name}={path}: its nodes' adapters ({method}) are not cross-played; "
                              "crossplay swaps a graph's marked prompts, as a langmarl or reflexion run left them")
        return Player(name, f"{method} adapters", str(path))
    policies = {a: str(p) for a, p in _section(state, "policies", state_file).items()}
    memories = {a: [str(m) for m in ms] for a, ms in _section(state, "memories", state_file).items()
                if isinstance(ms, list) and ms}
    what = f"{method} memory" if memories else f"{method} policy"
    return Player(name, what, str(path), policies=policies, memories=memories or None)


def parse_players(items: list[str], played: str, n_agents: int, protocol: str | None = None,
                  model: str | None = None) -> list[Player]:
    """``NAME=RUN_DIR``, ``scripted`` or ``base`` each (a graph: no ``scripted``); names are
    unique; a run trained on another ``played`` env or graph, ``protocol`` or ``model`` than the
    cross-play's is refused (None: not checked)."""
    players: list[Player] = []
    keywords = [k for k in KEYWORDS if k != "scripted"] if played.startswith(GRAPH_PREFIX) else list(KEYWORDS)
    for item in items:
        name, sep, path = item.partition("=")
        name = name.strip()
        if not sep:
            if name == "scripted" and "scripted" not in keywords:
                raise ConfigError(f"--players {item!r}: a graph has no scripted team; give NAME=RUN_DIR, or base "
                                  "for the config's prompts")
            if name not in keywords:
                raise ConfigError(f"--players {item!r}: give NAME=RUN_DIR, or one of {', '.join(keywords)}")
            players.append(Player(name, name))
            continue
        if not name or not path or "/" in name or "|" in name:
            raise ConfigError(f"--players {item!r}: give NAME=RUN_DIR (a name without '/' or '|')")
        players.append(read_player(name, Path(path).expanduser(), played, n_agents, protocol, model))
    names = [p.name for p in players]
    if len(players) < 2:
        raise ConfigError("--players: cross-play needs at least two players")
    if len(set(names)) != len(names):
        raise ConfigError(f"--players: {next(n for n in names if names.count(n) > 1)!r} is named twice")
    return players


def cell_name(first: str, second: str) -> str:
    """The cell's setting name (its run directory: the name as compare names folders)."""
    return f"{first} / {second}"


def graph_prompts(config: ExperimentConfig) -> dict[str, str]:
    """A graph's slots in a cross-play: its marked prompts, in the order the app marks them, each
    with the text it starts from (``graph.prompts``, else the app's default)."""
    from marlang.usergraph import app_marks

    assert config.graph is not None  # (called for a config that plays a graph)
    try:
        defaults = app_marks(config.graph.build).prompt_defaults()
    except ValueError as err:  # a prompt marked twice with different defaults
        raise ConfigError(f"graph.build {config.graph.build!r}: {err}") from None
    return {name: config.graph.prompts.get(name, text) for name, text in defaults.items()}


def cells(base: dict[str, Any], players: list[Player], episodes: int) -> tuple[dict[str, Any], list[Any]]:
    """The cross-play's base config and its ``setting`` grid values: one per (i, j)."""
    data = copy.deepcopy(base)
    for key in ("grid", "team"):
        data.pop(key, None)
    data["learning"] = {"method": "none"}
    data.setdefault("model", {})["adapters"] = None
    run = data.setdefault("run", {})
    run.pop("seeds", None)
    if "graph" in data:
        # the task's inputs, the same in every cell (a graph has no held-out levels), prompt by prompt
        run["episodes"] = episodes
        start = graph_prompts(build_config(copy.deepcopy(data)))
        focal = dict(list(start.items())[:1])
        partners = {name: text for name, text in start.items() if name not in focal}
        return data, [{"name": cell_name(first.name, second.name),
                       "graph.prompts": {**second.prompts(partners), **first.prompts(focal)}}
                      for first in players for second in players]
    run.update({"levels": "held_out", "episodes": episodes})
    data["agents"] = {**(data.get("agents") or {}), "kind": "llm"}
    config = build_config(copy.deepcopy(data))
    names = config.agent_names()
    values = []
    for first in players:
        for second in players:
            team = {names[0]: first.slot(names[0]), **{a: second.slot(a) for a in names[1:]}}
            values.append({"name": cell_name(first.name, second.name), "team": team})
    return data, values


def plan_crossplay(base: dict[str, Any], items: list[str], episodes: int, out: str | None
                   ) -> tuple[dict[str, Any], list[tuple[str, list[Any]]], Path]:
    """What ``marlang crossplay`` runs: the cells' base config, their grid (``setting`` values)
    and the folder, with ``crossplay.yaml`` (the players) written into it first."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be at least 1, not {episodes}")
    config = build_config(copy.deepcopy(base))
    if config.plays_graph:
        slots = list(graph_prompts(config))
        if len(slots) < 2:
            raise ConfigError(f"crossplay swaps a graph's marked prompts, one beside the others; "
                              f"{config.played} marks {len(slots)} ({', '.join(slots) or 'none'}): mark two or more "
                              "with marlang.prompt(NAME, DEFAULT)")
        players = parse_players(items, config.played, len(slots), model=config.model.spec)
    else:
        if config.agents.kind == "neural":
            raise ConfigError("crossplay plays LLM teams slot by slot (a neural player plays a slot of one); "
                              "give a config with agents.kind llm")
        if config.env.n_agents < 2:
            raise ConfigError(f"crossplay needs a team of two or more slots; env.n_agents is {config.env.n_agents}")
        slots = config.agent_names()
        players = parse_players(items, config.env.id, config.env.n_agents, config.protocol.name, config.model.spec)
    data, values = cells(base, players, episodes)
    folder = Path(out or f"runs/{config.run.name}-crossplay")
    # Every refusal of the folder comes before crossplay.yaml is written into it.
    check_comparison_folder(folder, data, [("setting", values)])
    saved = _read_plan(folder) if folder.is_dir() else None
    if saved is not None and [p["name"] for p in saved["players"]] != [p.name for p in players]:
        raise ConfigError(f"--out {folder} holds a cross-play of other players; choose another --out, or "
                          "give the same --players to continue it")
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder / CROSSPLAY_FILE, yaml.safe_dump(
        {"players": [{"name": p.name, "what": p.what, "source": p.source} for p in players],
         "slots": slots, "episodes": episodes, **({"graph": config.graph.build} if config.graph else {})},
        sort_keys=False))
    return data, [("setting", values)], folder


def _read_plan(folder: Path) -> dict[str, Any] | None:
    """The folder's ``crossplay.yaml`` (None: no such file), its ``players`` a list of named
    players; a file that holds anything else is one line naming it."""
    plan_file = folder / CROSSPLAY_FILE
    plan = read_yaml_mapping(plan_file)
    if plan is None:
        return None
    players = plan.setdefault("players", []) or []
    if not isinstance(players, list) or not all(isinstance(p, dict) and isinstance(p.get("name"), str)
                                                for p in players):
        raise damaged(plan_file, "its players are not a list of named players")
    return plan


def _cell_rows(out: Path, names: list[str]) -> tuple[dict[tuple[str, str], list[dict[str, str]]], bool]:
    """Each finished cell's episode rows (``metrics.csv``) and whether the env knows success."""
    found: dict[tuple[str, str], list[dict[str, str]]] = {}
    knows_success = False
    for i in names:
        for j in names:
            run = out / folder_name(cell_name(i, j))
            try:
                summary = read_json_object(run / "summary.json")
                if summary is None:
                    continue  # not played yet
                found[(i, j)] = read_csv_rows(run / "metrics.csv")
                knows_success |= bool(summary.get("success_defined", True))
            except (OSError, DamagedRunFile):
                continue  # damaged (or a FIFO, never read): left out of the matrix until a rerun plays it
    return found, knows_success


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)  # (gap's lists hold a cell per player pair: never empty)


def matrix(out: Path) -> dict[str, Any] | None:
    """The cross-play matrices of the folder ``out`` (None before any cell finished)."""
    plan = _read_plan(out)
    if plan is None:
        return None
    players = [p["name"] for p in plan["players"]]
    rows, knows_success = _cell_rows(out, players)
    if not rows:
        return None
    returns: dict[str, dict[str, Any]] = {}
    success: dict[str, dict[str, Any]] = {}
    by_level: dict[tuple[str, str], dict[str, float]] = {}
    for i in players:
        returns[i], success[i] = {}, {}
        for j in players:
            found = rows.get((i, j))
            if not found:
                returns[i][j] = success[i][j] = None
                continue
            values = [float(r["return"]) for r in found]
            solved = [r["success"] == "True" for r in found]
            returns[i][j] = mean_interval(values)
            success[i][j] = wilson_interval(sum(solved), len(solved))
            by_level[(i, j)] = {r["seed"]: float(r["return"]) for r in found}
    # the env's scripted agent is a fixed partner, not one trained to coordinate: its cells would
    # pull the gap toward how well it plays, so the gap is over the other players
    gap_players = [p["name"] for p in plan["players"] if p.get("what") != "scripted"]
    return {"players": plan.get("players"), "slots": plan.get("slots"), "graph": plan.get("graph"), "return": returns,
            "success_rate": success if knows_success else None, "gap": gap(gap_players, by_level),
            "gap_leaves_out": [p for p in players if p not in gap_players],
            "levels": len(set.intersection(*(set(v) for v in by_level.values()))) if by_level else 0}


def gap(players: list[str], by_level: dict[tuple[str, str], dict[str, float]]) -> dict[str, Any]:
    """Self-play minus cross-play return of ``players``' cells, level by level over the levels
    every cell played, with the bootstrap interval over levels; each player's own gap too (its
    self-play against its cells with others, in either slot)."""
    if len(players) < 2:
        return {"mean": None, "low": None, "high": None, "n": 0, "interval": "fewer than two players besides scripted"}
    mine = [(i, j) for i in players for j in players]
    if not all(c in by_level for c in mine):
        return {"mean": None, "low": None, "high": None, "n": 0, "interval": "cells missing"}
    levels = sorted(set.intersection(*(set(by_level[c]) for c in mine)))
    cross = [(i, j) for i in players for j in players if i != j]
    overall = [round(_mean([by_level[(i, i)][lv] for i in players]) - _mean([by_level[c][lv] for c in cross]), 12)
               for lv in levels]
    result = mean_interval(overall)
    result["players"] = {
        p: mean_interval([by_level[(p, p)][lv] - _mean([by_level[c][lv] for c in cross if p in c])
                          for lv in levels]) for p in players}
    return result


def matrix_table(found: dict[str, Any]) -> str:
    """The matrices as markdown: return (and success) by slot-0 player (rows) and partner
    (columns), then the gap."""
    names = [p["name"] for p in found["players"]]
    slots = found.get("slots") or ["slot 0", "slot 1"]
    partner = slots[1] if len(slots) == 2 else f"{', '.join(slots[1:])} (partners)"
    played = (f"{found['levels']} inputs of the task per cell, the same in every cell; a player's prompt texts "
              "where its run rewrote them, else the config's" if found.get("graph") else
              f"{found['levels']} held-out levels per cell, the same in every cell")
    intro = f"Rows: the player in {slots[0]}; columns: the player in {partner}; self-play on the diagonal; {played}."
    parts = ["## Cross-play", "", intro, ""]
    for key, title, digits in (("return", "mean return", 3), ("success_rate", "success rate", 2)):
        if found.get(key) is None:
            continue
        parts += [f"{title} [95% interval]:", "", "| | " + " | ".join(names) + " |",
                  "|---" * (len(names) + 1) + "|"]
        for i in names:
            parts.append(f"| {i} | " + " | ".join(show(found[key][i][j], digits) for j in names) + " |")
        parts.append("")
    g = found["gap"]
    left_out = found.get("gap_leaves_out") or []
    apart = (f"; {', '.join(left_out)} left out: the env's scripted agent is a fixed partner, not one trained "
             "to coordinate, so its row and column above show it apart" if left_out else "")
    parts.append(f"Cross-play gap (self-play minus cross-play return, paired by level, {BOOTSTRAP} interval "
                 f"over levels{apart}): {show(g, 3)}")
    for p, stat in (g.get("players") or {}).items():
        parts.append(f"- {p}: {show(stat, 3)}")
    return "\n".join(parts) + "\n"


def write_matrix(out: Path) -> dict[str, Any] | None:
    """Write ``crossplay.json`` and ``crossplay.png``, and add the matrices to ``table.md`` and
    ``summary.json`` (``crossplay``); None when the folder is not a cross-play's."""
    found = matrix(out)
    if found is None:
        return None
    atomic_write_text(out / "crossplay.json", dumps_json(found, indent=2) + "\n")
    table = out / "table.md"
    text = table.read_text(encoding="utf-8") if table.is_file() else ""
    text = text.split("## Cross-play\n", 1)[0].rstrip("\n")
    atomic_write_text(table, matrix_table(found) + ("\n" + text + "\n" if text else ""))
    summary_file = out / "summary.json"
    try:
        summary = read_json_object(summary_file) or {}
    except (OSError, DamagedRunFile):  # rebuilt: a damaged one is replaced
        summary = {}
    summary["crossplay"] = found
    atomic_write_text(summary_file, dumps_json(summary, indent=2) + "\n")
    from marlang.statistics.plots import crossplay_figure

    names = [p["name"] for p in found["players"]]
    # the return, the measure the gap is computed on (the success rate is in the table)
    grid = [[(found["return"][i][j] or {}).get("mean") for j in names] for i in names]
    save_figure(crossplay_figure(grid, names, title="cross-play: mean return (the gap's measure)",
                                 slots=found.get("slots")), out / "crossplay.png")
    return found


SWAPPED_SEED_EPISODES = 32
"""Held-out levels each cell of a swapped-seed check plays where the learner evaluates on none."""


def trains_a_team(config: Any) -> bool:
    """Whether a run of ``config`` trains an LLM team of two or more slots (what a swapped-seed
    check cross-plays; a static or scripted team, or one playing adapters back, trains none): for
    a graph, two or more marked prompts that a learner rewrites in words."""
    if config.plays_graph:
        method = config.learning.method
        return method != "none" and not trains_weights(method) and len(graph_prompts(config)) >= 2
    return not (config.env.n_agents < 2 or config.learning.method in ("none", "static") or config.all_scripted
                or config.plays_back or config.agents.kind != "llm")


def swapped_seed_episodes(config: Any, episodes: int | None = None) -> int:
    """Levels each cell of a setting's swapped-seed check plays: ``episodes`` where given
    (``--crossplay-episodes``), else the learner's held-out evaluation's size, else 32."""
    if episodes is not None:
        return episodes
    return int(getattr(config.learning.options, "eval_episodes", 0) or SWAPPED_SEED_EPISODES)


def swapped_seed_outline(base: dict[str, Any], grid: list[tuple[str, list[Any]]], episodes: int | None = None
                         ) -> str | None:
    """What the swapped-seed check will add after a comparison over ``run.seeds`` (settings,
    cells, episodes), said before the comparison runs; None where it adds nothing."""
    seeds = build_config(copy.deepcopy(base)).run.seeds
    if not seeds or len(seeds) < 2 or episodes == 0:
        return None
    settings = [s for s in expand_grid(base, grid, reference=False)
                if s.config.run.seed == seeds[0] and trains_a_team(s.config)]
    if not settings:
        return None
    cells_each = len(seeds) ** 2
    per_cell = sorted({swapped_seed_episodes(s.config, episodes) for s in settings})
    total = cells_each * sum(swapped_seed_episodes(s.config, episodes) for s in settings)
    held_out = "" if settings[0].config.plays_graph else "held-out "  # a graph plays its task's inputs
    return (f"after the runs, a swapped-seed check cross-plays each trained team's seeds: {len(settings)} "
            f"setting(s) x {len(seeds)}^2 = {cells_each} cells x {'/'.join(map(str, per_cell))} {held_out}"
            f"episodes = {total} episodes; --crossplay-episodes N sizes it, --crossplay-episodes 0 skips it")


def swapped_seed_plans(out: Path, summaries: dict[str, dict[str, dict[str, Any]]], episodes: int | None = None,
                       beside: ExperimentConfig | None = None
                       ) -> list[tuple[dict[str, Any], list[tuple[str, list[Any]]], Path]]:
    """The swapped-seed check of a comparison over seeds: for each setting whose learner trained
    a team of two or more LLM slots on several seeds, a cross-play of its seeds' runs (each
    trained agent beside the partners trained on the other seeds), in ``out/crossplay/<setting>``.
    ``summaries``: the comparison's pooled rows (env group -> setting -> summary); ``episodes``:
    the levels each cell plays (None: :func:`swapped_seed_episodes`'s default; 0: no check);
    ``beside``: the comparison's own config, whose import paths (a graph's builder, data and
    reward) the runs' saved configs may name without --trust-imports."""
    plans: list[tuple[dict[str, Any], list[tuple[str, list[Any]]], Path]] = []
    if episodes == 0:
        return plans
    for rows in summaries.values():
        for setting, row in rows.items():
            seeds = row.get("seeds") if isinstance(row, dict) else None
            if not isinstance(seeds, dict) or len(seeds) < 2 or row.get("agents") == "neural":
                continue
            runs = [(seed, out / folder_name(str(s.get("setting")))) for seed, s in seeds.items()]
            if not all((path / "learner_state.json").is_file() for _, path in runs):
                continue  # a learner that commits nothing trained no player
            base = read_yaml_mapping(runs[0][1] / "config.yaml") or {}
            config = build_saved_config(copy.deepcopy(base), runs[0][1] / "config.yaml", beside=beside)
            if not trains_a_team(config):
                continue  # nothing trained an LLM team: its seeds hold no players
            folder = out / "crossplay" / folder_name(setting)
            plans.append(plan_crossplay(base, [f"seed {seed}={path}" for seed, path in runs],
                                        swapped_seed_episodes(config, episodes), str(folder)))
    return plans
