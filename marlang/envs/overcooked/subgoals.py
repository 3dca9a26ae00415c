"""The subgoal layer of the Overcooked text env: which high-level actions a cook may take, and
how the package's motion planner carries them out one tick at a time.

A cook that makes no progress for ``patience`` ticks (another cook is in the way and no detour
exists) gives its subgoal up, so two cooks blocking each other never deadlock.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from marlang.envs.overcooked.kitchen import INGREDIENTS, Kitchen, Pos, PrimitiveAction
from marlang.envs.overcooked.package import Action, Direction, OvercookedState, PlayerState

CONTINUE = "continue"
WAIT = "wait"
STEP_ASIDE = "step aside"


# ----------------------------------------------------------------------------- subgoals


@dataclass(frozen=True)
class Subgoal:
    """One high-level action. ``targets`` are the features it may use (the nearest is taken)."""

    action: str
    """The action string an agent names, e.g. ``"put onion in pot 1"``."""
    kind: str
    """fetch | take | put | cook | fill | deliver | place | wait | step aside"""
    targets: tuple[Pos, ...] = ()
    item: str | None = None


_subgoal = functools.lru_cache(maxsize=4096)(Subgoal)
"""``Subgoal(...)``, the same (immutable) record each time a cook is offered it again."""

_ALWAYS = (_subgoal(WAIT, "wait"), _subgoal(STEP_ASIDE, "step aside"))
"""The subgoals every cook is offered, last."""


def held_item(player: PlayerState) -> str | None:
    obj = player.held_object
    return None if obj is None else obj.name


def pot_contents(state: OvercookedState, pot: Pos) -> tuple[int, str]:
    """(number of ingredients, status) with status empty | filling | cooking | ready."""
    soup = state.objects.get(pot)
    if soup is None:
        return 0, "empty"
    n = len(soup._ingredients)  # (``ingredients`` makes a list of their names)
    if soup.is_idle:  # not started (the package's is_ready and is_cooking are both False)
        return n, "filling"
    return n, "ready" if soup.is_ready else "cooking"


def _pot_takes_ingredient(state: OvercookedState, pot: Pos, capacity: int) -> bool:
    n, status = pot_contents(state, pot)
    return status in ("empty", "filling") and n < capacity


def _counter_item(state: OvercookedState, counter: Pos) -> str | None:
    obj = state.objects.get(counter)
    return None if obj is None else obj.name


def is_valid(kitchen: Kitchen, state: OvercookedState, index: int, subgoal: Subgoal, capacity: int) -> str:
    """Empty string when ``subgoal`` still makes sense for cook ``index``, else why not."""
    kind = subgoal.kind
    if kind in ("wait", "step aside"):
        return ""
    held = held_item(state.players[index])
    if kind in ("fetch", "take", "cook") and held is not None:
        return f"your hands are full ({held})"
    if kind in ("put", "fill", "deliver", "place") and held != subgoal.item:
        return f"you no longer hold {_article(subgoal.item)}"
    target = subgoal.targets[0]
    if kind == "take" and _counter_item(state, target) != subgoal.item:
        return f"counter {kitchen.counter_number(target)} no longer has {_article(subgoal.item)}"
    if kind == "place" and _counter_item(state, target) is not None:
        return f"counter {kitchen.counter_number(target)} is taken"
    if kind == "put" and not _pot_takes_ingredient(state, target, capacity):
        return f"pot {kitchen.pot_number(target)} takes no more ingredients"
    if kind == "cook" and pot_contents(state, target)[1] != "filling":
        return f"pot {kitchen.pot_number(target)} has nothing to cook"
    if kind == "fill" and pot_contents(state, target)[1] not in ("cooking", "ready"):
        return f"pot {kitchen.pot_number(target)} has no soup"
    return ""


def _article(item: str | None) -> str:
    return "an onion" if item == "onion" else f"a {item}"


def legal_subgoals(
    kitchen: Kitchen, state: OvercookedState, index: int, *, capacity: int = 3, counter_options: int = 3,
    holding: tuple[tuple[int, Pos, str], ...] | None = None,
) -> list[Subgoal]:
    """The subgoals cook ``index`` may start now, filtered by what it holds and can reach.

    Counters to put things on are offered sparingly: the ``counter_options`` closest empty
    ones, counters the other cooks can also reach first (that is how items change hands).
    ``holding``: ``kitchen.holding(state.objects)``, where the caller has it already.
    """
    player = state.players[index]
    held = held_item(player)
    reachable = kitchen.within_reach(player.position)
    objects = state.objects
    out: list[Subgoal] = []
    if held is None:
        out.extend(_fetches(kitchen, reachable))
        for _, counter, item in kitchen.holding(objects) if holding is None else holding:
            if counter in reachable:
                out.append(_offer(kitchen, "take", counter, item))
        for pot in kitchen.pots:
            if pot in reachable and pot_contents(state, pot)[1] == "filling":
                out.append(_offer(kitchen, "cook", pot, None))
    elif held in INGREDIENTS:
        for pot in kitchen.pots:
            if pot in reachable and _pot_takes_ingredient(state, pot, capacity):
                out.append(_offer(kitchen, "put", pot, held))
    elif held == "dish":
        for pot in kitchen.pots:
            if pot in reachable and pot_contents(state, pot)[1] in ("cooking", "ready"):
                out.append(_offer(kitchen, "fill", pot, "dish"))
    elif held == "soup":
        targets = tuple(p for p in kitchen.serving if p in reachable)
        if targets:
            out.append(_subgoal("deliver soup", "deliver", targets, "soup"))
    if held is not None and counter_options > 0:
        regions = kitchen.region
        others = tuple([regions.get(p.position, -1) for i, p in enumerate(state.players) if i != index])
        offered = 0
        for counter in kitchen.placing_order(player.pos_and_or, others):
            if counter not in objects:  # (free)
                out.append(_offer(kitchen, "place", counter, held))
                offered += 1
                if offered == counter_options:
                    break
    out += _ALWAYS
    return out


def _fetches(kitchen: Kitchen, reachable: frozenset[Pos]) -> tuple[Subgoal, ...]:
    """The ``pick up`` subgoals at the dispensers within ``reachable`` (remembered)."""
    known = kitchen.fetches.get(reachable)
    if known is None:
        offers = []
        for item in (*INGREDIENTS, "dish"):
            targets = tuple(p for p in kitchen.dispensers[item] if p in reachable)
            if targets:
                offers.append(_subgoal(f"pick up {item}", "fetch", targets, item))
        known = kitchen.fetches[reachable] = tuple(offers)
    return known


_OFFERS = {
    "take": "pick up {item} from counter {number}",
    "place": "place {item} on counter {number}",
    "put": "put {item} in pot {number}",
    "cook": "start cooking pot {number}",
    "fill": "fill dish from pot {number}",
}
"""The subgoals at one pot or counter, by kind: their action strings."""


def _offer(kitchen: Kitchen, kind: str, target: Pos, item: str | None) -> Subgoal:
    """The ``kind`` subgoal at the pot or counter ``target`` with ``item`` (remembered)."""
    key = (kind, target, item)
    known = kitchen.offers.get(key)
    if known is None:
        number = kitchen.counter_number(target) if kind in ("take", "place") else kitchen.pot_number(target)
        action = _OFFERS[kind].format(item=item, number=number)
        known = kitchen.offers[key] = _subgoal(action, kind, (target,), item)
    return known


# ----------------------------------------------------------------------------- execution


@dataclass
class Task:
    """A subgoal being carried out by one cook."""

    subgoal: Subgoal
    ticks: int = 0
    stalled: int = 0
    """Consecutive ticks without progress (blocked by another cook)."""
    blocked_by: int | None = None
    aside: Pos | None = None
    waiting_for_soup: bool = False


@dataclass
class Outcome:
    """How a subgoal ended: ``done``, ``failed`` (no longer possible) or ``aborted`` (blocked)."""

    subgoal: Subgoal
    status: str
    note: str = ""
    ticks: int = 0


@dataclass
class SubgoalRunner:
    """Turns every cook's subgoal into one primitive action per tick and tracks its progress."""

    kitchen: Kitchen
    n_cooks: int
    names: Sequence[str]
    patience: int = 5
    wait_ticks: int = 3
    capacity: int = 3
    tasks: list[Task | None] = field(init=False)
    outcomes: dict[int, Outcome] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.tasks = [None] * self.n_cooks

    def reset(self) -> None:
        self.tasks = [None] * self.n_cooks
        self.outcomes = {}

    def assign(self, index: int, subgoal: Subgoal) -> None:
        self.tasks[index] = Task(subgoal)

    def running(self, index: int) -> Subgoal | None:
        task = self.tasks[index]
        return None if task is None else task.subgoal

    def _finish(self, index: int, status: str, note: str = "") -> None:
        task = self.tasks[index]
        if task is not None:
            self.outcomes[index] = Outcome(task.subgoal, status, note, task.ticks)
        self.tasks[index] = None

    # one tick ---------------------------------------------------------------------------
    def joint_action(self, state: OvercookedState) -> tuple[PrimitiveAction, ...]:
        """Each cook's primitive action for this tick (cooks without a subgoal stay).

        Cooks route in index order: each one avoids the cells the others stand on and the
        routes of the cooks before it, so two cooks meeting in a corridor do not both turn
        back (when no such route exists it falls back to waiting for the way to clear).
        """
        players = state.players
        positions = [p.position for p in players]
        reserved: set[Pos] = set()
        actions: list[PrimitiveAction] = []
        for i, player in enumerate(players):
            task = self.tasks[i]
            action: PrimitiveAction = Action.STAY
            if task is not None:
                reason = is_valid(self.kitchen, state, i, task.subgoal, self.capacity)
                if reason:
                    self._finish(i, "failed", f"gave up '{task.subgoal.action}': {reason}")
                elif task.subgoal.kind == "wait":
                    task.blocked_by = None
                    reserved.add(positions[i])
                else:
                    action, route = self._action_for(i, task, player, state, positions, reserved)
                    reserved |= route
            actions.append(action)
        self._avoid_collisions(positions, actions)
        return tuple(actions)

    def _action_for(
        self, index: int, task: Task, player: PlayerState, state: OvercookedState, positions: Sequence[Pos],
        reserved: set[Pos],
    ) -> tuple[PrimitiveAction, AbstractSet[Pos]]:
        """The cook's action this tick and the cells of the route it is taking (``positions``:
        where every cook stands)."""
        kind = task.subgoal.kind
        here = player.position
        task.blocked_by = None
        if kind == "step aside":
            if task.aside is None:
                task.aside = self._aside_cell(index, state, reserved)
                if task.aside is None:
                    return Action.STAY, {here}
            return _direction_between(here, task.aside), {here, task.aside}
        way = self.kitchen.approach((here, player.orientation), task.subgoal.targets)
        if way.at is not None:
            if kind == "fill" and pot_contents(state, way.at)[1] != "ready":
                task.waiting_for_soup = True
                return Action.STAY, {here}
            return Action.INTERACT, {here}
        if way.turn is not None:  # in place, facing the wrong way: turn
            return way.turn, {here}
        if way.first is None:
            self._finish(index, "failed", f"gave up '{task.subgoal.action}': out of your reach")
            return Action.STAY, {here}
        cells = way.cells
        others = {p for j, p in enumerate(positions) if j != index}
        if way.path.isdisjoint(others) and way.path.isdisjoint(reserved):
            return way.first, way.route
        # Someone is in the way: walk around them, and around the routes of earlier cooks.
        goal_cells = way.goal_cells
        for blocked in (others | reserved, others):
            route = self.kitchen.detour(here, goal_cells, frozenset(blocked - goal_cells))
            if route is not None and route[0] not in others:
                return _direction_between(here, route[0]), {here, *route}
        nxt = cells[0]
        if nxt in others:
            task.blocked_by = next(j for j, p in enumerate(state.players) if p.position == nxt)
            return Action.STAY, {here}
        return way.first, way.route

    def _aside_cell(self, index: int, state: OvercookedState, reserved: set[Pos]) -> Pos | None:
        """A free neighbouring cell, off the other cooks' routes (``reserved``: those of the
        cooks routed before it this tick) when possible."""
        players = state.players
        here = players[index].position
        order = self.kitchen.aside_order(here, tuple([p.position for j, p in enumerate(players) if j != index]))
        if not order:
            return None
        routes = [
            self.kitchen.plan_cells(player.pos_and_or, task.subgoal.targets)
            for j, (player, task) in enumerate(zip(players, self.tasks))
            if j != index and task is not None and task.subgoal.targets
        ]
        for cell in order:  # the first off the others' routes, else the first (none is occupied)
            if cell in reserved:
                continue
            for route in routes:
                if cell in route:
                    break
            else:
                return cell
        return order[0]

    def _avoid_collisions(self, old: Sequence[Pos], actions: list[PrimitiveAction]) -> None:
        """Two cooks stepping into one cell (or through each other) both stay in the package;
        let the later one wait instead, so the first one gets through. ``old``: where the
        cooks stand."""
        if _DIRECTIONS.isdisjoint(actions):
            return  # (nobody moves: the cooks stand on distinct cells, so nothing collides)
        step_to = self.kitchen.step_to
        new = [step_to.get((here, action), here) for here, action in zip(old, actions)]
        for i in range(1, len(actions)):
            for j in range(i):
                if new[i] == new[j] or (new[i] == old[j] and new[j] == old[i]):
                    actions[i] = Action.STAY
                    new[i] = old[i]
                    task = self.tasks[i]
                    if task is not None:
                        task.blocked_by = j

    def update(
        self, before: OvercookedState, after: OvercookedState, actions: Sequence[PrimitiveAction]
    ) -> dict[int, Outcome]:
        """Account for one tick: finish subgoals that succeeded, failed or got stuck; return and
        clear every outcome since the last call."""
        for i, task in enumerate(self.tasks):
            if task is None:
                continue
            task.ticks += 1
            kind = task.subgoal.kind
            old, new = before.players[i], after.players[i]
            if kind == "wait":
                if task.ticks >= self.wait_ticks:
                    self._finish(i, "done")
                continue
            if kind == "step aside":
                if task.aside is None:
                    self._finish(i, "failed", "there was no free cell to step aside to")
                elif new.position == task.aside:
                    self._finish(i, "done")
                elif self._stalled(task, old, new, actions[i]):
                    self._finish(i, "aborted", "could not step aside: the cell was taken")
                continue
            if actions[i] == Action.INTERACT:
                if _achieved(self.kitchen, before, after, i, task.subgoal):
                    self._finish(i, "done")
                else:
                    self._finish(i, "failed", f"'{task.subgoal.action}' had no effect")
                continue
            if self._stalled(task, old, new, actions[i]):
                blocker = self.names[task.blocked_by] if task.blocked_by is not None else "another cook"
                self._finish(
                    i,
                    "aborted",
                    f"gave up '{task.subgoal.action}' after {task.stalled} ticks without "
                    f"progress: {blocker} was in the way",
                )
        outcomes, self.outcomes = self.outcomes, {}
        return outcomes

    def _stalled(self, task: Task, old: PlayerState, new: PlayerState, action: PrimitiveAction) -> bool:
        moved = old.position != new.position or old.orientation != new.orientation
        wanted_to_move = action in _DIRECTIONS or task.blocked_by is not None
        if moved or not wanted_to_move:
            task.stalled = 0
            return False
        task.stalled += 1
        return task.stalled >= self.patience


_DIRECTIONS = frozenset(Direction.ALL_DIRECTIONS)


def _direction_between(a: Pos, b: Pos) -> PrimitiveAction:
    return (b[0] - a[0], b[1] - a[1])


def _achieved(
    kitchen: Kitchen, before: OvercookedState, after: OvercookedState, index: int, subgoal: Subgoal
) -> bool:
    held_before = held_item(before.players[index])
    held_after = held_item(after.players[index])
    kind = subgoal.kind
    if kind in ("fetch", "take"):
        return held_after == subgoal.item
    if kind == "fill":
        return held_after == "soup"
    if kind == "cook":
        return pot_contents(after, subgoal.targets[0])[1] == "cooking"
    if kind in ("put", "deliver", "place"):
        return held_before is not None and held_after is None
    return False
