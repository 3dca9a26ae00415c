"""What one cook sees in the Overcooked text env, in words and as structured data.

Coordinates are (x, y) with x growing to the right and y growing downward; distances are the
moves a cook needs to stand in front of a thing, facing it.

The text is rendered every tick for both cooks, so each line is made once per layout and the
facts it depends on (``_Lines``, kept on the layout's `Kitchen`, which the envs of that layout in
one process share), and each tick only looks the lines up. The same goes for the
``data`` records below the top level (a pot, a counter, the other cook, the dispensers, the
serving spots, the orders): they are made once and shared between observations, as a
`FrozenRecord` or `FrozenList` that refuses to change (copy one with ``dict(...)`` or
``list(...)`` to change it; ``TextObservation.to_dict`` keeps them frozen). Each observation's
top-level ``data`` dict is its own.
"""

from __future__ import annotations

import itertools
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


class _Frozen:
    """What a frozen record and list share: a copy is the object itself (it cannot change), and
    pickling makes it again from its plain value (``_plain``: dict or list)."""

    __slots__ = ()
    _plain: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._plain(self),))

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self


class FrozenRecord(_Frozen, dict):
    """A ``dict`` (equal to one, written to JSON as one) that refuses to change."""

    __slots__ = ()
    _plain = dict
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse


class FrozenList(_Frozen, list):
    """A ``list`` (equal to one, written to JSON as one) that refuses to change."""

    __slots__ = ()
    _plain = list
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse


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

    __slots__ = (
        "counter_blocks", "counter_distances", "counter_lines", "dispensers", "fixed_lines", "point",
        "pot_blocks", "pot_distances", "serving", "you",
    )

    dispensers: FrozenRecord
    serving: FrozenList

    def __init__(self, kitchen: Kitchen, pos_and_or: PosOr):
        self.point = _point(*pos_and_or[0])
        self.pot_distances = [kitchen.distance(pos_and_or, pot) for pot in kitchen.pots]
        self.counter_distances = {counter: kitchen.distance(pos_and_or, counter) for counter in kitchen.counters}
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
        self.counter_lines: dict[tuple[int, Pos, str], tuple[str, FrozenRecord]] = {}
        """(line, record) of a counter holding an item, by (number, position, item)."""
        self.pot_blocks: dict[int, tuple[list[str], FrozenList]] = {}
        """The pot lines read here and their records, by the pots' contents (``_Lines.scene``)."""
        self.counter_blocks: dict[int, tuple[list[str], FrozenList]] = {}
        """The counter lines read here and their records, by the counters' contents."""


_MAX_BLOCKS = 20_000


def _place(position: Pos, distance: int | None) -> str:
    return f"{tuple(position)} {_steps(distance)}"


class _Lines:
    """One layout's observation lines, each made the first time its facts occur.

    Soup and order facts depend on the package's recipe settings (``Recipe.configure``, which
    every new env sets for the whole process), so different settings start afresh.
    """

    def __init__(self, kitchen: Kitchen):
        self.kitchen = kitchen
        self.recipes = Recipe._conf
        self.places: dict[PosOr, _Place] = {}
        # (line, record) of the other cook (and a list of just that record), a counter, a pot,
        # as seen by a cook
        self.others: dict[tuple[Any, ...], tuple[str, FrozenRecord, FrozenList]] = {}
        self.counters: dict[tuple[Any, ...], tuple[str, FrozenRecord]] = {}
        self.soups: dict[tuple[Any, ...], tuple[str, int | None, str]] = {}
        self.pots: dict[tuple[Any, ...], tuple[str, FrozenRecord]] = {}
        self.orders: dict[tuple[int, ...], tuple[list[str], FrozenList]] = {}
        self.notes: dict[tuple[str, ...], tuple[list[str], FrozenList]] = {}
        # An id for each contents of the pots, and of the counters, seen so far: a place keeps its
        # pot and counter lines by these (ids are never reused, so forgetting one is safe)
        self.pot_scenes: dict[tuple[Any, ...], int] = {}
        self.counter_scenes: dict[tuple[Any, ...], int] = {}
        self._ids = itertools.count(1)  # (from 1: a found id is never falsy)
        self._blocks_kept = 0
        """How many pot and counter blocks the places keep, all together."""

    def scene(self, scenes: dict[tuple[Any, ...], int], facts: tuple[Any, ...]) -> int:
        """The id of ``facts`` in ``scenes`` (``pot_scenes`` or ``counter_scenes``), new if unseen."""
        known = scenes.get(facts)
        if known is None:
            if len(scenes) >= _MAX_BLOCKS:  # (seen contents add up over a long run)
                scenes.clear()
            known = scenes[facts] = next(self._ids)
        return known

    def _keep_block(self) -> None:
        """Count one more block kept; past ``_MAX_BLOCKS`` every place starts afresh (the
        contents seen add up over a long run)."""
        self._blocks_kept += 1
        if self._blocks_kept > _MAX_BLOCKS:
            for place in list(self.places.values()):  # (a copy: other threads may add places)
                place.pot_blocks.clear()
                place.counter_blocks.clear()
            self._blocks_kept = 1

    def pot_block(self, place: _Place, pots: Sequence[tuple[Any, ...]], scene: int) -> tuple[list[str], FrozenList]:
        """The pot lines a cook at ``place`` reads, with their records (``scene``: the pots' id)."""
        self._keep_block()
        lines, records = [], []
        for (number, pot, pot_status, left, what, ingredients, facts), distance in zip(pots, place.pot_distances):
            key = (number, distance, facts)
            known = self.pots.get(key)
            if known is None:
                known = self.pots[key] = (
                    f"Pot {number} at {pot}: {what}; {_steps(distance)}.",
                    FrozenRecord(
                        number=number, position=_point(*pot), ingredients=FrozenList(ingredients),
                        status=pot_status, cook_time_left=left, distance=distance,
                    ),
                )
            lines.append(known[0])
            records.append(known[1])
        block = place.pot_blocks[scene] = (lines, FrozenList(records))
        return block

    def counter_block(
        self, place: _Place, counters_held: tuple[tuple[int, Pos, str], ...], scene: int,
    ) -> tuple[list[str], FrozenList]:
        """The counter lines a cook at ``place`` reads, with their records (``scene``: the
        counters' id)."""
        self._keep_block()
        lines, records = [], []
        seen_here = place.counter_lines
        for held in counters_held:
            known = seen_here.get(held)
            if known is None:
                number, counter, item = held
                distance = place.counter_distances[counter]
                key = (number, distance, item)
                known = self.counters.get(key)
                if known is None:
                    known = self.counters[key] = (
                        f"Counter {number} at {counter} holds {_with_article(item)}; {_steps(distance)}.",
                        FrozenRecord(number=number, position=_point(*counter), item=item, distance=distance),
                    )
                seen_here[held] = known
            lines.append(known[0])
            records.append(known[1])
        if not counters_held:
            lines.append("Counters: nothing on them.")
        block = place.counter_blocks[scene] = (lines, FrozenList(records))
        return block

    def note_lines(self, notes: tuple[str, ...]) -> tuple[list[str], FrozenList]:
        """The "Note:" lines of a cook's notes, and the notes as a record."""
        known = self.notes.get(notes)
        if known is None:
            if len(self.notes) >= _MAX_BLOCKS:
                self.notes.clear()
            known = self.notes[notes] = ([f"Note: {note}." for note in notes], FrozenList(notes))
        return known

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
    holding: tuple[tuple[int, Pos, str], ...] | None = None,
) -> list[tuple[str, dict[str, Any]]]:
    """The observation text and ``data`` of each cook in ``indices``: what they all see (the
    cooks, the pots, the counters, the orders) is looked up once. ``holding``:
    ``kitchen.holding(state.objects)``, where the caller has it already."""
    made, recipes = kitchen.text_cache, Recipe._conf
    if made is None or made.recipes is not recipes:  # (every new env configures the package)
        if made is None or made.recipes != recipes:
            made = kitchen.text_cache = _Lines(kitchen)
        made.recipes = recipes
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
    counters_held = kitchen.holding(objects) if holding is None else holding
    pot_facts = tuple([pot[-1] for pot in pots])
    scenes = (
        made.pot_scenes.get(pot_facts) or made.scene(made.pot_scenes, pot_facts),
        made.counter_scenes.get(counters_held) or made.scene(made.counter_scenes, counters_held),
    )
    order_lines, orders = made.order_lines(state)
    return [
        _describe(made, index, cooks, pots, counters_held, scenes, order_lines, orders, statuses[index],
                  header, tick=tick, horizon=horizon, delivered=delivered, subgoal_mode=subgoal_mode)
        for index in indices
    ]


def _describe(
    made: _Lines,
    index: int,
    cooks: Sequence[tuple[Any, ...]],
    pots: Sequence[tuple[Any, ...]],
    counters_held: tuple[tuple[int, Pos, str], ...],
    scenes: tuple[int, int],
    order_lines: list[str],
    orders: FrozenList,
    status: CookStatus,
    header: str,
    *,
    tick: int,
    horizon: int,
    delivered: int,
    subgoal_mode: bool,
) -> tuple[str, dict[str, Any]]:
    """Cook ``index``'s observation text and ``data``, from what `describe_cooks` looked up."""
    name, position, _, pos_and_or, held, facing, _ = cooks[index]
    place = made.places.get(pos_and_or) or made.place(pos_and_or)
    you = place.you.get((name, held))
    if you is None:
        you = place.you[name, held] = (
            f"You are {name}, at {tuple(position)} facing {facing}, holding {_with_article(held)}."
        )
    lines = [header, you]
    data: dict[str, Any] = {
        "agent": name, "tick": tick, "horizon": horizon, "soups_delivered": delivered,
        "position": place.point, "facing": facing, "held": held,
    }
    if subgoal_mode:
        subgoal, ticks = status.subgoal, status.subgoal_ticks
        if subgoal is None:
            lines.append("Your subgoal: none; choose one.")
            data["subgoal"] = None
        else:
            lines.append(
                f"Your subgoal: {subgoal.action} (running for {ticks} "
                f"tick{'s' if ticks != 1 else ''}; 'continue' keeps it)."
            )
            data["subgoal"] = subgoal.action
        data["subgoal_ticks"] = ticks
    note_lines, data["notes"] = made.note_lines(status.notes)
    lines += note_lines

    others = []
    for j, (other, position_j, orientation_j, _, held_j, facing_j, subgoal_j) in enumerate(cooks):
        if j == index:
            continue
        key = (other, position_j, orientation_j, held_j, subgoal_mode, subgoal_j)
        known = made.others.get(key)
        if known is None:
            line = f"{other} is at {tuple(position_j)} facing {facing_j}, holding {_with_article(held_j)}"
            fields = {"agent": other, "position": _point(*position_j), "facing": facing_j, "held": held_j}
            if subgoal_mode:
                line += f"; working on: {subgoal_j}" if subgoal_j else "; choosing what to do"
                fields["subgoal"] = subgoal_j
            record = FrozenRecord(fields)
            known = made.others[key] = (line + ".", record, FrozenList((record,)))
        lines.append(known[0])
        others.append(known)
    # (with one other cook, as in every layout, its record's list is made once too)
    data["others"] = others[0][2] if len(others) == 1 else FrozenList(known[1] for known in others)

    pot_scene, counter_scene = scenes
    pot_lines, data["pots"] = place.pot_blocks.get(pot_scene) or made.pot_block(place, pots, pot_scene)
    counter_lines, data["counters"] = (
        place.counter_blocks.get(counter_scene) or made.counter_block(place, counters_held, counter_scene)
    )
    lines += pot_lines
    lines += counter_lines

    lines.extend(place.fixed_lines)
    data["dispensers"] = place.dispensers
    data["serving"] = place.serving
    lines.extend(order_lines)
    data["orders"] = orders
    return "\n".join(lines), data
