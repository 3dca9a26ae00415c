"""Overcooked episodes told in words for learners: per decision point each cook's held item,
subgoal and how it ended, shaped rewards, pot and counter changes, deliveries.
``OvercookedTextEnv.narrator()`` returns an ``OvercookedNarrator``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from marlang.envs.core.narrator import (
    After,
    Narrator,
    action_of,
    agents_of,
    first_data,
    plural,
    said_by,
    team_reward,
)
from marlang.types import Step, Trajectory

_SUBGOAL_ENDS = {"done": "done", "failed": "gave up", "aborted": "blocked, gave up"}


class OvercookedNarrator(Narrator):
    """Overcooked: per decision point the ticks, each cook's held item, chosen subgoal and how
    it ended, shaped rewards, illegal actions, pot and counter changes, deliveries."""

    step_noun: ClassVar[str] = "decision point"

    def header(self, trajectory: Trajectory) -> list[str]:
        data = first_data(trajectory)
        orders = "; ".join(
            f"soup of {_ingredients(o.get('ingredients', []))} worth {o.get('value', '?')}"
            for o in data.get("orders", [])
        )
        kitchen = (
            f"Overcooked {trajectory.env_id}: cooks {', '.join(agents_of(trajectory))}, "
            f"{plural(len(data.get('pots', [])), 'pot')}, {data.get('horizon', '?')} ticks; "
            f"order: {orders or 'none'}."
        )
        chosen = (
            "its subgoal ('kept': still running) -> how it ended"
            if "subgoal" in data
            else "its move"
        )
        legend = (
            f"Each line: a decision point and its ticks; per cook [what it held] {chosen}, "
            "shaped reward; then pot and counter changes and soups delivered."
        )
        return [kitchen, legend]

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        data = obs.data if obs is not None else {}
        info = step.infos.get(agent, {})
        where = ""
        if data:
            x, y = data.get("position", ("?", "?"))
            where = f" at ({x}, {y}) holding {data.get('held') or 'nothing'}"
        parts = [f"step {step.t} ({_ticks(step)}):{where}"]
        parts.append(f"subgoal {_cook_choice(step, agent)}{_cook_end(step, agent, after)}")
        if info.get("illegal_action"):
            parts.append(f"'{action_of(step, agent)}' was not a legal action")
        if info.get("shaped_reward"):
            parts.append(f"shaped reward +{info['shaped_reward']:g}")
        if info.get("sparse_reward"):
            parts.append(f"delivered soup (+{info['sparse_reward']:g} team reward)")
        elif team_reward(step):
            parts.append(f"team reward +{team_reward(step):g}")
        parts += said_by(step, agent)
        return "; ".join(parts)

    _step_line = Narrator._cells_line

    def _step_label(self, step: Step) -> str:
        return f"step {step.t} ({_ticks(step)})"

    def _agent_cell(self, step: Step, agent: str, obs: Any, after: After) -> str:
        info = step.infos.get(agent, {})
        cell = f"{agent} [{obs.data.get('held') or '-'}] {_cook_choice(step, agent)}"
        cell += _cook_end(step, agent, after)
        if info.get("illegal_action"):
            cell += f" (ILLEGAL '{action_of(step, agent)}')"
        if info.get("shaped_reward"):
            cell += f" +{info['shaped_reward']:g} shaped"
        return cell

    def _step_events(self, step: Step, after: After) -> str:
        events = _kitchen_changes(step, after)
        for agent, info in step.infos.items():
            if info.get("sparse_reward"):
                events.append(f"{agent} delivered soup +{info['sparse_reward']:g}")
        return ". " + "; ".join(events) if events else ""

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        chosen = ended = gave_up = illegal = 0
        shaped = delivered = 0.0
        for step in trajectory.steps:
            info = step.infos.get(agent, {})
            decision = step.decisions.get(agent)
            chosen += bool(
                decision and decision.action != "continue" and not info.get("illegal_action")
            )
            ended += info.get("subgoal_outcome") == "done"
            gave_up += info.get("subgoal_outcome") in ("failed", "aborted")
            illegal += bool(info.get("illegal_action"))
            shaped += float(info.get("shaped_reward") or 0.0)
            delivered += float(info.get("sparse_reward") or 0.0)
        totals = (
            f"{agent} totals: {plural(chosen, 'subgoal')} chosen, {ended} done, {gave_up} given "
            f"up, {plural(illegal, 'illegal action')}; shaped reward {shaped:g}; "
            f"delivered soups worth {delivered:g}."
        )
        return [totals]

    def summary(self, trajectory: Trajectory) -> list[str]:
        return [
            line
            for agent in agents_of(trajectory)
            for line in self.agent_summary(trajectory, agent)
        ]

    def outcome(self, trajectory: Trajectory) -> str:
        last = next(iter(trajectory.steps[-1].infos.values()), {}) if trajectory.steps else {}
        verdict = "success" if trajectory.success else "failure"
        soups = plural(int(last.get("soups_delivered", 0)), "soup")
        return (
            f"Outcome: {verdict}; {soups} delivered; "
            f"team score {trajectory.team_return:g}; {plural(trajectory.n_steps, self.step_noun)} "
            f"over {plural(int(last.get('tick', 0)), 'tick')}."
        )


def _ticks(step: Step) -> str:
    start = next((o.data.get("tick") for o in step.observations.values()), None)
    end = next((i.get("tick") for i in step.infos.values()), None)
    if start is None or end is None:
        return "ticks ?"
    return f"tick {end}" if end - start <= 1 else f"ticks {start + 1}-{end}"


def _cook_choice(step: Step, agent: str) -> str:
    action = action_of(step, agent)
    obs = step.observations.get(agent)
    running = obs.data.get("subgoal") if obs is not None else None
    if action == "continue" or (running and action == running):
        return f"{running or 'continue'} (kept)"
    if step.infos.get(agent, {}).get("illegal_action"):
        return f"{running} (kept)" if running else "wait"
    return action


def _cook_end(step: Step, agent: str, after: After) -> str:
    outcome = step.infos.get(agent, {}).get("subgoal_outcome")
    if not outcome:
        return ""
    text = f" -> {_SUBGOAL_ENDS.get(outcome, outcome)}"
    if outcome != "done" and after and agent in after:
        reasons = [n.split(": ", 1)[1] for n in after[agent].data.get("notes", []) if ": " in n]
        if reasons:
            text += f" ({reasons[0]})"
    return text


def _ingredients(names: Sequence[str]) -> str:
    counts = Counter(names)
    return (
        " ".join(f"{n} {name}{'s' if n != 1 else ''}" for name, n in sorted(counts.items()))
        or "nothing"
    )


def _pot_state(pot: Mapping[str, Any]) -> str:
    status = pot.get("status")
    if status == "empty":
        return "empty"
    what = _ingredients(pot.get("ingredients", []))
    if status == "cooking":
        return f"cooking {what}"
    if status == "ready":
        return f"soup of {what} ready"
    return what


def _kitchen_changes(step: Step, after: After) -> list[str]:
    """Pots and counters whose contents changed during the step (when ``after`` is stored)."""
    before = next((o.data for o in step.observations.values()), None)
    now = next((o.data for o in after.values()), None) if after else None
    if not before or not now:
        return []
    changes = []
    pots_before = {p["number"]: p for p in before.get("pots", [])}
    for pot in now.get("pots", []):
        old = pots_before.get(pot["number"])
        if old is not None and (old.get("status"), old.get("ingredients")) != (
            pot.get("status"),
            pot.get("ingredients"),
        ):
            changes.append(f"pot {pot['number']}: {_pot_state(pot)}")
    items_before = {c["number"]: c["item"] for c in before.get("counters", [])}
    items_now = {c["number"]: c["item"] for c in now.get("counters", [])}
    for number in sorted(set(items_before) | set(items_now)):
        if items_before.get(number) != items_now.get(number):
            changes.append(f"counter {number}: {items_now.get(number) or 'emptied'}")
    return changes
