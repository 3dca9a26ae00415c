"""What one cook sees in the Overcooked text env, in words and as structured data.

Coordinates are (x, y) with x growing to the right and y growing downward; distances are the
moves a cook needs to stand in front of a thing, facing it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marlang.envs.overcooked.subgoals import (
    DIRECTION_NAMES,
    Kitchen,
    Subgoal,
    held_item,
    pot_contents,
)

MISSION = (
    "Cook and serve soup together: put the ordered ingredients in a pot, start cooking it, "
    "fill a dish with the finished soup and deliver it at a serving spot. Every delivered "
    "soup scores for the whole team."
)


@dataclass
class CookStatus:
    """What the env tracks about a cook beyond the package's state."""

    subgoal: Subgoal | None = None
    subgoal_ticks: int = 0
    notes: tuple[str, ...] = ()


def _with_article(item: str | None) -> str:
    if item is None:
        return "nothing"
    return f"an {item}" if item[0] in "aeiou" else f"a {item}"


def _steps(distance: int | None) -> str:
    if distance is None:
        return "out of your reach"
    if distance == 0:
        return "right in front of you"
    return f"{distance} step{'s' if distance != 1 else ''} away"


def _ingredients_phrase(names: Sequence[str]) -> str:
    counts = Counter(names)
    return " and ".join(f"{n} {name}{'s' if n != 1 else ''}" for name, n in sorted(counts.items()))


def describe(
    kitchen: Kitchen,
    state: Any,
    index: int,
    names: Sequence[str],
    statuses: Sequence[CookStatus],
    *,
    tick: int,
    horizon: int,
    delivered: int,
    subgoal_mode: bool,
) -> tuple[str, dict[str, Any]]:
    """The observation text and ``data`` of cook ``index``."""
    player = state.players[index]
    pos_and_or = player.pos_and_or
    status = statuses[index]
    held = held_item(player)
    lines = [
        f"Tick {tick} of {horizon}; soups delivered so far: {delivered}.",
        (
            f"You are {names[index]}, at {tuple(player.position)} facing "
            f"{DIRECTION_NAMES[player.orientation]}, holding {_with_article(held)}."
        ),
    ]
    data: dict[str, Any] = {
        "agent": names[index],
        "tick": tick,
        "horizon": horizon,
        "soups_delivered": delivered,
        "position": list(player.position),
        "facing": DIRECTION_NAMES[player.orientation],
        "held": held,
    }
    if subgoal_mode:
        if status.subgoal is None:
            lines.append("Your subgoal: none; choose one.")
        else:
            lines.append(
                f"Your subgoal: {status.subgoal.action} (running for {status.subgoal_ticks} "
                f"tick{'s' if status.subgoal_ticks != 1 else ''}; 'continue' keeps it)."
            )
        data["subgoal"] = None if status.subgoal is None else status.subgoal.action
        data["subgoal_ticks"] = status.subgoal_ticks
    lines.extend(f"Note: {note}." for note in status.notes)
    data["notes"] = list(status.notes)

    others = []
    for j, other in enumerate(state.players):
        if j == index:
            continue
        other_held = held_item(other)
        line = (
            f"{names[j]} is at {tuple(other.position)} facing {DIRECTION_NAMES[other.orientation]}, "
            f"holding {_with_article(other_held)}"
        )
        record = {
            "agent": names[j],
            "position": list(other.position),
            "facing": DIRECTION_NAMES[other.orientation],
            "held": other_held,
        }
        if subgoal_mode:
            subgoal = statuses[j].subgoal
            line += f"; working on: {subgoal.action}" if subgoal else "; choosing what to do"
            record["subgoal"] = None if subgoal is None else subgoal.action
        lines.append(line + ".")
        others.append(record)
    data["others"] = others

    pots = []
    for pot in kitchen.pots:
        _, pot_status = pot_contents(state, pot)
        distance = kitchen.distance(pos_and_or, pot)
        record = {
            "number": kitchen.pot_number(pot),
            "position": list(pot),
            "ingredients": [],
            "status": pot_status,
            "cook_time_left": None,
            "distance": distance,
        }
        if pot_status == "empty":
            what = "empty"
        else:
            soup = state.get_object(pot)
            record["ingredients"] = list(soup.ingredients)
            phrase = _ingredients_phrase(soup.ingredients)
            if pot_status == "filling":
                what = f"{phrase}, not cooking"
            elif pot_status == "cooking":
                left = soup.cook_time_remaining
                record["cook_time_left"] = left
                what = f"cooking {phrase}, {left} tick{'s' if left != 1 else ''} left"
            else:
                record["cook_time_left"] = 0
                what = f"soup of {phrase} ready"
        lines.append(f"Pot {record['number']} at {pot}: {what}; {_steps(distance)}.")
        pots.append(record)
    data["pots"] = pots

    counters = []
    for counter in kitchen.counters:
        if not state.has_object(counter):
            continue
        item = state.get_object(counter).name
        distance = kitchen.distance(pos_and_or, counter)
        number = kitchen.counter_number(counter)
        counters.append({"number": number, "position": list(counter), "item": item, "distance": distance})
        lines.append(f"Counter {number} at {counter} holds {_with_article(item)}; {_steps(distance)}.")
    if not counters:
        lines.append("Counters: nothing on them.")
    data["counters"] = counters

    fixed_lines, dispensers, serving = _fixed_places(kitchen, pos_and_or)
    lines.extend(fixed_lines)
    data["dispensers"] = dispensers
    data["serving"] = serving

    orders = []
    for recipe in sorted(state.all_orders, key=lambda r: r.ingredients):
        orders.append({"ingredients": list(recipe.ingredients), "value": recipe.value, "cook_time": recipe.time})
        lines.append(
            f"Order: soup of {_ingredients_phrase(recipe.ingredients)} (cooks {recipe.time} ticks), "
            f"worth {recipe.value} points."
        )
    data["orders"] = orders
    return "\n".join(lines), data


def _fixed_places(
    kitchen: Kitchen, pos_and_or: Any
) -> tuple[list[str], dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Dispenser and serving-spot lines and records seen from ``pos_and_or`` (they never change,
    so their text is made once per place and orientation)."""
    lines = kitchen.fixed_lines.get(pos_and_or)
    dispensers = {
        item: [{"position": list(p), "distance": kitchen.distance(pos_and_or, p)} for p in positions]
        for item, positions in kitchen.dispensers.items()
        if positions
    }
    serving = [{"position": list(p), "distance": kitchen.distance(pos_and_or, p)} for p in kitchen.serving]
    if lines is None:
        lines = []
        for item, records in dispensers.items():
            label = f"{item.capitalize()} dispenser{'s' if len(records) > 1 else ''}"
            lines.append(f"{label}: " + "; ".join(_place(r) for r in records) + ".")
        label = f"Serving spot{'s' if len(serving) > 1 else ''}"
        lines.append(f"{label}: " + "; ".join(_place(r) for r in serving) + ".")
        kitchen.fixed_lines[pos_and_or] = lines
    return lines, dispensers, serving


def _place(record: dict[str, Any]) -> str:
    return f"{tuple(record['position'])} {_steps(record['distance'])}"
