"""What one cook sees in the Overcooked text env, in words and as structured data.

Coordinates are (x, y) with x growing to the right and y growing downward; distances are the
moves a cook needs to stand in front of a thing, facing it.

The text is rendered every tick for both cooks, so each line is made once per layout and the
facts it depends on (``_Lines``), and each tick only looks the lines up. The same goes for the
``data`` records below the top level (a pot, a counter, the other cook, the dispensers, the
serving spots, the orders): they are made once and shared between observations, as a
`FrozenRecord` or `FrozenList` that refuses to change (copy one with ``dict(...)`` or
``list(...)`` to change it). Each observation's top-level ``data`` dict is its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from marlang.envs.overcooked.kitchen import DIRECTION_NAMES, Kitchen, Pos, PosOr
from marlang.envs.overcooked.package import Recipe
from marlang.envs.overcooked.subgoals import Subgoal, pot_contents

MISSION = (
    "Cook and serve soup together: put the ordered ingredients in a pot, start cooking it, "
    "fill a dish with the finished soup and deliver it at a serving spot. Every delivered "
    "soup scores for the whole team."
)


def _refuse(self: Any, *args: Any, **kwargs: Any) -> Any:
    raise TypeError(
        f"this {type(self).__name__} is shared between Overcooked observations and cannot change; "
        "change a copy (dict(...) or list(...))"
    )


class FrozenRecord(dict):
    """A ``dict`` (equal to one, written to JSON as one) that refuses to change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))

    def __copy__(self) -> FrozenRecord:
        return self

    def __deepcopy__(self, memo: Any) -> FrozenRecord:
        return self


class FrozenList(list):
    """A ``list`` (equal to one, written to JSON as one) that refuses to change."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (list(self),))

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: Any) -> FrozenList:
        return self


def _point(x: int, y: int) -> FrozenList:
    return FrozenList((x, y))


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


class _Place:
    """What never changes as seen from one place and facing: distances to the pots, the
    dispenser and serving-spot lines and their (x, y, distance) facts, the "You are" lines."""

    __slots__ = ("dispensers", "fixed_lines", "pot_distances", "serving", "you")

    dispensers: FrozenRecord
    serving: FrozenList

    def __init__(self, kitchen: Kitchen, pos_and_or: PosOr):
        self.pot_distances = [kitchen.distance(pos_and_or, pot) for pot in kitchen.pots]
        dispensers = [
            (item, [(p, kitchen.distance(pos_and_or, p)) for p in positions])
            for item, positions in kitchen.dispensers.items()
            if positions
        ]
        serving = [(p, kitchen.distance(pos_and_or, p)) for p in kitchen.serving]
        lines = []
        for item, places in dispensers:
            label = f"{item.capitalize()} dispenser{'s' if len(places) > 1 else ''}"
            lines.append(f"{label}: " + "; ".join(_place(p, d) for p, d in places) + ".")
        label = f"Serving spot{'s' if len(serving) > 1 else ''}"
        lines.append(f"{label}: " + "; ".join(_place(p, d) for p, d in serving) + ".")
        self.fixed_lines = lines
        self.dispensers = FrozenRecord(
            (item, FrozenList(FrozenRecord(position=_point(*p), distance=d) for p, d in places))
            for item, places in dispensers
        )
        self.serving = FrozenList(FrozenRecord(position=_point(*p), distance=d) for p, d in serving)
        self.you: dict[tuple[str, str | None], str] = {}


def _place(position: Pos, distance: int | None) -> str:
    return f"{tuple(position)} {_steps(distance)}"


class _Lines:
    """One layout's observation lines, each made the first time its facts occur.

    Soup and order facts depend on the package's recipe settings (``Recipe.configure``, which
    every new layout sets for the whole process), so a change of settings starts afresh.
    """

    def __init__(self, kitchen: Kitchen):
        self.kitchen = kitchen
        self.recipes = Recipe._conf
        self.places: dict[PosOr, _Place] = {}
        # (line, record) of the other cook, a counter, a pot, as seen by a cook
        self.others: dict[tuple[Any, ...], tuple[str, FrozenRecord]] = {}
        self.counters: dict[tuple[Any, ...], tuple[str, FrozenRecord]] = {}
        self.soups: dict[tuple[Any, ...], tuple[str, int | None, str]] = {}
        self.pots: dict[tuple[Any, ...], tuple[str, FrozenRecord]] = {}
        self.orders: dict[tuple[int, ...], tuple[list[str], FrozenList]] = {}

    def place(self, pos_and_or: PosOr) -> _Place:
        place = self.places[pos_and_or] = _Place(self.kitchen, pos_and_or)
        return place

    def soup(self, state: Any, pot: Pos, soup: Any) -> tuple[str, int | None, str, list[str], tuple[Any, ...]]:
        """(status, cook ticks left as the record says, what the pot line says, ingredients,
        the facts all these follow from)."""
        ingredients = soup.ingredients
        key = (tuple(ingredients), soup._cooking_tick, soup._cook_time)
        known = self.soups.get(key)
        if known is None:
            _, status = pot_contents(state, pot)
            phrase = _ingredients_phrase(ingredients)
            if status == "filling":
                left, what = None, f"{phrase}, not cooking"
            elif status == "cooking":
                left = soup.cook_time_remaining
                what = f"cooking {phrase}, {left} tick{'s' if left != 1 else ''} left"
            else:
                left, what = 0, f"soup of {phrase} ready"
            known = self.soups[key] = (status, left, what)
        return (*known, ingredients, key)

    def order_lines(self, state: Any) -> tuple[list[str], FrozenList]:
        key = tuple(map(id, state._all_orders))  # recipes are the package's interned singletons
        known = self.orders.get(key)
        if known is None:
            lines, facts = [], []
            for recipe in sorted(state.all_orders, key=lambda r: r.ingredients):
                facts.append(FrozenRecord(
                    ingredients=FrozenList(recipe.ingredients), value=recipe.value, cook_time=recipe.time,
                ))
                lines.append(
                    f"Order: soup of {_ingredients_phrase(recipe.ingredients)} (cooks {recipe.time} ticks), "
                    f"worth {recipe.value} points."
                )
            known = self.orders[key] = (lines, FrozenList(facts))
        return known


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
    return describe_cooks(kitchen, state, (index,), names, statuses, tick=tick, horizon=horizon,
                          delivered=delivered, subgoal_mode=subgoal_mode)[0]


def describe_cooks(
    kitchen: Kitchen,
    state: Any,
    indices: Sequence[int],
    names: Sequence[str],
    statuses: Sequence[CookStatus],
    *,
    tick: int,
    horizon: int,
    delivered: int,
    subgoal_mode: bool,
) -> list[tuple[str, dict[str, Any]]]:
    """`describe` for each cook in ``indices``: what they all see (the cooks, the pots, the
    counters, the orders) is looked up once."""
    made = kitchen.text_cache
    if made is None or made.recipes is not Recipe._conf:
        made = kitchen.text_cache = _Lines(kitchen)
    header = f"Tick {tick} of {horizon}; soups delivered so far: {delivered}."
    cooks = []
    for j, player in enumerate(state.players):
        position, orientation = player.position, player.orientation
        pos_and_or = (position, orientation)
        obj = player.held_object
        subgoal = statuses[j].subgoal if subgoal_mode else None
        cooks.append((
            names[j], position, orientation, pos_and_or, None if obj is None else obj.name,
            DIRECTION_NAMES[orientation], None if subgoal is None else subgoal.action,
        ))
    objects = state.objects
    pots = []
    for number, pot in enumerate(kitchen.pots, 1):
        soup = objects.get(pot)
        facts = ("empty", None, "empty", (), None) if soup is None else made.soup(state, pot, soup)
        pots.append((number, pot, *facts))
    counters_held = [
        (kitchen.counter_number(c), c, objects[c].name) for c in kitchen.counters_holding(objects)
    ]
    order_lines, orders = made.order_lines(state)
    out = []
    for index in indices:
        name, position, _, pos_and_or, held, facing, _ = cooks[index]
        place = made.places.get(pos_and_or) or made.place(pos_and_or)
        status = statuses[index]
        you = place.you.get((name, held))
        if you is None:
            you = place.you[name, held] = (
                f"You are {name}, at {tuple(position)} facing {facing}, holding {_with_article(held)}."
            )
        lines = [header, you]
        data: dict[str, Any] = {
            "agent": name,
            "tick": tick,
            "horizon": horizon,
            "soups_delivered": delivered,
            "position": [position[0], position[1]],
            "facing": facing,
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
        if status.notes:
            lines.extend(f"Note: {note}." for note in status.notes)
        data["notes"] = list(status.notes)

        others = data["others"] = []
        for j, (other, position_j, orientation_j, _, held_j, facing_j, subgoal) in enumerate(cooks):
            if j == index:
                continue
            key = (other, position_j, orientation_j, held_j, subgoal_mode, subgoal)
            known = made.others.get(key)
            if known is None:
                line = f"{other} is at {tuple(position_j)} facing {facing_j}, holding {_with_article(held_j)}"
                fields = {"agent": other, "position": _point(*position_j), "facing": facing_j, "held": held_j}
                if subgoal_mode:
                    line += f"; working on: {subgoal}" if subgoal else "; choosing what to do"
                    fields["subgoal"] = subgoal
                known = made.others[key] = (line + ".", FrozenRecord(fields))
            lines.append(known[0])
            others.append(known[1])

        records = data["pots"] = []
        for (number, pot, pot_status, left, what, ingredients, facts), distance in zip(pots, place.pot_distances):
            key = (number, distance, facts)
            known = made.pots.get(key)
            if known is None:
                known = made.pots[key] = (
                    f"Pot {number} at {pot}: {what}; {_steps(distance)}.",
                    FrozenRecord(
                        number=number, position=_point(*pot), ingredients=FrozenList(ingredients),
                        status=pot_status, cook_time_left=left, distance=distance,
                    ),
                )
            lines.append(known[0])
            records.append(known[1])

        records = data["counters"] = []
        for number, counter, item in counters_held:
            distance = kitchen.distance(pos_and_or, counter)
            key = (number, distance, item)
            known = made.counters.get(key)
            if known is None:
                known = made.counters[key] = (
                    f"Counter {number} at {counter} holds {_with_article(item)}; {_steps(distance)}.",
                    FrozenRecord(number=number, position=_point(*counter), item=item, distance=distance),
                )
            lines.append(known[0])
            records.append(known[1])
        if not counters_held:
            lines.append("Counters: nothing on them.")

        lines.extend(place.fixed_lines)
        data["dispensers"] = place.dispensers
        data["serving"] = place.serving
        lines.extend(order_lines)
        data["orders"] = orders
        out.append(("\n".join(lines), data))
    return out
