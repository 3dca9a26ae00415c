"""Scripted reference team for the Overcooked text env: greedy cooks on the subgoal layer.

It decides from the observations alone (their ``data``), like an LLM team would, so its score
shows what the subgoal interface allows; it is a reference point, not a tuned planner.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from marlang.envs.overcooked.kitchen import INGREDIENTS
from marlang.envs.overcooked.subgoals import CONTINUE, STEP_ASIDE, WAIT
from marlang.types import TextObservation


class ScriptedOvercookedTeam:
    """Greedy cooks that share the work through what they see of each other.

    A cook with a running subgoal keeps it. A free cook, in this order: delivers a soup it
    holds; fills a dish it holds from the readiest pot; puts an ingredient it holds into the
    fullest pot that takes it; starts cooking a full pot; fetches a dish when there are more
    soups cooking than dishes on the way; fetches an ingredient when the pots (counting the
    next round of pots that are busy cooking) need more than is on the way. A cook that cannot
    reach any pot (forced coordination) puts what it fetched on a counter the other cook can
    reach, and the other cook picks it up from there. A cook with nothing to do steps aside
    when its teammate reported it in the way, and otherwise waits.

    Usage: ``team = env.scripted_team()``, then ``env.step(team.act(obs))`` each step; it
    needs the ``subgoal`` action mode.
    """

    def __init__(self, env: Any):
        if getattr(env, "action_mode", "subgoal") != "subgoal":
            raise ValueError("the scripted Overcooked team needs action_mode='subgoal'")
        self.env = env

    def reset(self) -> None:
        """Nothing to forget: every decision is made from the current observations."""

    def act(self, observations: Mapping[str, TextObservation]) -> dict[str, str]:
        """One legal action per cook."""
        claims: dict[str, str | None] = {}
        for agent, obs in observations.items():
            if CONTINUE in obs.legal_actions:
                claims[agent] = obs.data.get("subgoal")
        actions: dict[str, str] = {}
        for agent, obs in observations.items():
            if CONTINUE in obs.legal_actions:
                actions[agent] = CONTINUE
                continue
            others = [claims.get(o["agent"], o.get("subgoal")) for o in obs.data["others"]]
            choice = self._choose(obs, [c for c in others if c])
            if choice == WAIT and self._in_the_way(agent, observations) and STEP_ASIDE in obs.legal_actions:
                choice = STEP_ASIDE
            actions[agent] = choice
            claims[agent] = choice
        return actions

    # ------------------------------------------------------------------ decisions

    def _choose(self, obs: TextObservation, claims: Sequence[str]) -> str:
        data, legal = obs.data, obs.legal_actions
        kitchen = self.env.kitchen
        held = data["held"]
        pots = data["pots"]
        my_pots = [p for p in pots if p["distance"] is not None]
        recipe = data["orders"][0]["ingredients"] if data["orders"] else ["onion"] * 3
        capacity = len(recipe)
        ingredient = recipe[0]
        cooks = [tuple(data["position"]), *(tuple(o["position"]) for o in data["others"])]
        # Cooks that can reach a pot use what lies on counters; the others supply them.
        pot_side = [c for c in cooks if any(kitchen.reachable(c, tuple(p["position"])) for p in pots)]

        def usable(counter: dict[str, Any]) -> bool:
            return any(kitchen.reachable(c, tuple(counter["position"])) for c in pot_side)

        def options(prefix: str) -> list[str]:
            return [a for a in legal if a.startswith(prefix)]

        def pot_of(action: str) -> dict[str, Any]:
            number = int(action.rsplit(" ", 1)[1])
            return next(p for p in pots if p["number"] == number)

        def shared_places(item: str) -> list[str]:
            places = options(f"place {item} on counter")
            good = [a for a in places if any(
                kitchen.reachable(c, kitchen.counters[int(a.rsplit(" ", 1)[1]) - 1]) for c in pot_side
            )]
            return good

        holders = [held, *(o["held"] for o in data["others"])]
        soups = sum(1 for p in pots if p["status"] in ("cooking", "ready") or len(p["ingredients"]) >= capacity)
        dishes_moving = sum(1 for h in holders if h in ("dish", "soup"))
        dishes_moving += sum(1 for c in claims if "dish" in c and not c.startswith("place"))
        dishes_on_counters = [c for c in data["counters"] if c["item"] == "dish" and usable(c)]
        need = sum(
            capacity - len(p["ingredients"]) if p["status"] in ("empty", "filling") else capacity
            for p in pots
        )
        moving = sum(1 for h in holders if h == ingredient)
        moving += sum(1 for c in claims if c.startswith(f"pick up {ingredient}"))
        on_counters = [c for c in data["counters"] if c["item"] == ingredient and usable(c)]

        if held == "soup":
            return "deliver soup" if "deliver soup" in legal else _first(shared_places("soup"), WAIT)
        if held == "dish":
            fills = [a for a in options("fill dish from pot") if a not in claims]
            if fills:
                return min(fills, key=lambda a: (pot_of(a)["cook_time_left"] or 0, pot_of(a)["distance"]))
            if not my_pots:
                return _first(shared_places("dish"), WAIT)
            return WAIT
        if held in INGREDIENTS:
            puts = options(f"put {held} in pot")
            if puts:
                return max(puts, key=lambda a: (len(pot_of(a)["ingredients"]), -pot_of(a)["distance"]))
            if not my_pots or soups > dishes_moving + len(dishes_on_counters):
                return _first(shared_places(held), WAIT)
            return WAIT

        # Empty hands.
        starts = [a for a in options("start cooking pot") if len(pot_of(a)["ingredients"]) >= capacity]
        starts = [a for a in starts if a not in claims]
        if starts:
            return starts[0]
        if my_pots:
            if soups > dishes_moving:
                take = options("pick up dish from counter")
                if take:
                    return take[0]
                if soups > dishes_moving + len(dishes_on_counters) and "pick up dish" in legal:
                    return "pick up dish"
            if need > moving:
                take = options(f"pick up {ingredient} from counter")
                if take:
                    return take[0]
                if need > moving + len(on_counters) and f"pick up {ingredient}" in legal:
                    return f"pick up {ingredient}"
            soup = options("pick up soup from counter")
            if soup and any(s["distance"] is not None for s in data["serving"]):
                return soup[0]
            return WAIT
        if soups > dishes_moving + len(dishes_on_counters) and "pick up dish" in legal:
            return "pick up dish"
        if need > moving + len(on_counters) and f"pick up {ingredient}" in legal:
            return f"pick up {ingredient}"
        return WAIT

    @staticmethod
    def _in_the_way(agent: str, observations: Mapping[str, TextObservation]) -> bool:
        return any(
            agent in note and "in the way" in note
            for other, obs in observations.items() if other != agent
            for note in obs.data.get("notes", [])
        )


def _first(items: Sequence[str], default: str) -> str:
    return items[0] if items else default
