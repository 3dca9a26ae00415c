"""Environments and their episodes told in words for learners: what the world is, what mattered
to one agent at one step (Reflexion), a whole joint episode within a token budget (a critic).
An env narrates itself through ``env.narrator()``; any other ParallelEnv gets ``Narrator``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from marlang.types import Step, TextObservation, Trajectory

GENERIC_WORLD = "a shared environment"
"""The world of an env that does not describe itself (no ``world_description``)."""

MESSAGE_CHARS = 200
"""Longest message shown in a narration; longer ones are cut with an ellipsis."""

TokenCounter = Callable[[str], int]
After = Mapping[str, TextObservation] | None
"""The observations right after a step (the next step's, or the trajectory's final ones);
``None`` when the trajectory does not store them."""


def estimate_tokens(text: str) -> int:
    """The default token count: ``ceil(len(text) / 4)``, about four characters per token for
    English text under BPE tokenizers. Pass a tokenizer's own count where exactness matters."""
    return -(-len(text) // 4)


# ------------------------------------------------------------------------------ public API


def world_description(env: Any) -> str:
    """A noun phrase for "... agents acting together in {world}": ``env.world_description``,
    or ``"a shared environment"`` for an env that does not describe itself."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        world = getattr(candidate, "world_description", None)
        if isinstance(world, str) and world.strip():
            return world.strip()
    return GENERIC_WORLD


def narrator_for(env: Any) -> Narrator:
    """``env.narrator()`` where the env has one, else the generic ``Narrator``."""
    for candidate in (env, getattr(env, "unwrapped", None)):
        make = getattr(candidate, "narrator", None)
        if callable(make):
            return make()
    return Narrator(env)


def step_summary(env: Any, step: Step, agent: str, after: After = None) -> str:
    """One line on what mattered to ``agent`` at ``step``: what it saw, what it did, the
    reward and events. ``after`` (the next observations, when known) adds what changed."""
    return narrator_for(env).step_summary(step, agent, after)


def format_trajectory(
    env: Any,
    trajectory: Trajectory,
    max_tokens: int = 1500,
    count_tokens: TokenCounter | None = None,
) -> str:
    """The whole joint trajectory (every agent) in at most ``max_tokens`` tokens, for a
    centralized critic: a header, one entry per step (or per window of steps, for envs that
    sample over time), per-agent totals, and always last the outcome line.

    ``count_tokens(text) -> int`` measures the budget (default ``estimate_tokens``: ceil of a
    quarter of the characters). Over budget, the middle steps are left out (a line says how
    many) or, for sampling envs, steps are grouped into coarser windows; the header and the
    totals go only when even they do not fit, and the outcome line is cut last.
    """
    count = count_tokens or estimate_tokens
    narrator = narrator_for(env)
    steps = trajectory.steps
    afters = _afters(trajectory)

    def windows(k: int) -> list[tuple[str, int]]:
        return [
            (
                narrator.entry(steps[i : i + k], afters[min(i + k, len(steps)) - 1]),
                len(steps[i : i + k]),
            )
            for i in range(0, len(steps), k)
        ]

    return _fit(
        narrator.header(trajectory) if steps else [],
        windows,
        narrator.summary(trajectory) if steps else [],
        narrator.outcome(trajectory),
        max_tokens,
        count,
        sampling=narrator.sampling,
        noun=narrator.step_noun,
        n_steps=len(steps),
    )


def agent_trajectory(
    env: Any,
    trajectory: Trajectory,
    agent: str,
    max_tokens: int = 800,
    count_tokens: TokenCounter | None = None,
) -> str:
    """``agent``'s own steps (``step_summary`` lines), its totals and the outcome line, in at
    most ``max_tokens`` tokens (middle steps left out when over budget, as in
    ``format_trajectory``), for prompts that must see only that agent's side."""
    count = count_tokens or estimate_tokens
    narrator = narrator_for(env)
    afters = _afters(trajectory)
    own = [
        (narrator.step_summary(step, agent, after), 1)
        for step, after in zip(trajectory.steps, afters)
        if agent in step.observations or agent in step.decisions
    ]
    return _fit(
        [],
        lambda k: own,
        narrator.agent_summary(trajectory, agent) if own else [],
        narrator.outcome(trajectory),
        max_tokens,
        count,
        sampling=False,
        noun=narrator.step_noun,
        n_steps=len(own),
    )


# ------------------------------------------------------------------------------ generic narrator


class Narrator:
    """Narrates any ParallelEnv with ``TextObservation``s: first observation lines, actions,
    rewards and messages. Env-specific narrators override the parts they know better.

    ``entry`` renders a window of consecutive steps (one step, unless ``sampling``), all
    agents; ``after`` is the observations following the window's last step, when stored.
    Narrators read only what a ``Trajectory`` stores (observations' text and ``data``,
    decisions, rewards, infos, messages), so a trajectory loaded back from a run file reads
    exactly as the live one did; the env is there for static facts only.
    """

    sampling: ClassVar[bool] = False
    """Fit a long episode by coarser windows of steps (True) rather than by leaving out the
    middle (False)."""
    step_noun: ClassVar[str] = "step"

    def __init__(self, env: Any):
        self.env = env

    # one agent ------------------------------------------------------------------------------
    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        seen = obs.text.splitlines()[0] if obs is not None and obs.text else ""
        parts = [f"step {step.t}: saw '{seen}'", f"did '{_action(step, agent)}'"]
        parts += _reward_and_words(step, agent)
        return "; ".join(parts)

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        illegal = sum(bool(s.infos.get(agent, {}).get("illegal_action")) for s in trajectory.steps)
        sent = sum(m.sender == agent for s in trajectory.steps for m in s.messages)
        illegal_text, sent_text = _plural(illegal, "illegal action"), _plural(sent, "message")
        return [f"{agent} totals: {illegal_text}, {sent_text} sent."]

    # all agents -----------------------------------------------------------------------------
    def header(self, trajectory: Trajectory) -> list[str]:
        lines = [f"Episode of {trajectory.env_id} with agents {', '.join(_agents(trajectory))}."]
        mission = _mission(trajectory)
        if mission:
            lines.append(f"Mission: {mission}")
        return lines

    def entry(self, steps: Sequence[Step], after: After) -> str:
        return "\n".join(self._step_line(step) for step in steps)

    def _step_line(self, step: Step) -> str:
        acts = "; ".join(f"{a} did '{d.action}'" for a, d in step.decisions.items())
        line = f"step {step.t}: {acts}"
        reward = _team_reward(step)
        if reward:
            line += f"; reward {reward:g}"
        return "\n".join([line, *_message_lines(step)])

    def summary(self, trajectory: Trajectory) -> list[str]:
        return []

    def outcome(self, trajectory: Trajectory) -> str:
        verdict = "success" if trajectory.success else "failure"
        return (
            f"Outcome: {verdict}; team return {trajectory.team_return:g}; "
            f"{_plural(trajectory.n_steps, self.step_noun)}."
        )


# ------------------------------------------------------------------------------ BabyAI


class BabyAINarrator(Narrator):
    """Multi-agent BabyAI: poses, carried objects, what each agent faces and sees, actions,
    pick-ups, drops and doors opened, messages."""

    def header(self, trajectory: Trajectory) -> list[str]:
        agents = ", ".join(_agents(trajectory))
        legend = (
            "Positions are (x, y), x growing east and y south; each line: a step, then per agent "
            "its position, facing, what it carries and faces, its action and what came of it."
        )
        return [
            f"BabyAI level {trajectory.env_id}; agents {agents}; mission: {_mission(trajectory)}.",
            legend,
        ]

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        parts = [f"step {step.t}: {_babyai_pose(obs.data, long=True)}" if obs else f"step {step.t}"]
        if obs is not None:
            front = _babyai_front(obs.data)
            if front:
                parts.append(f"facing {front}")
            seen = _babyai_seen(obs.data, obs.mission)
            if seen:
                parts.append(f"sees {seen}")
        parts.append(f"did '{_action(step, agent)}'{_babyai_result(step, agent, after)}")
        parts += _reward_and_words(step, agent)
        return "; ".join(parts)

    def entry(self, steps: Sequence[Step], after: After) -> str:
        return "\n".join(
            self._babyai_step(step, after if i == len(steps) - 1 else steps[i + 1].observations)
            for i, step in enumerate(steps)
        )

    def _babyai_step(self, step: Step, after: After) -> str:
        cells = []
        for agent, obs in step.observations.items():
            cell = f"{agent} {_babyai_pose(obs.data, long=False)}"
            front = _babyai_front(obs.data)
            if front:
                cell += f" facing {front}"
            cell += f": {_action(step, agent)}{_babyai_result(step, agent, after)}"
            cells.append(cell)
        line = f"step {step.t}: " + "; ".join(cells)
        reward = _team_reward(step)
        if reward:
            done_by = next(
                (i.get("completed_by") for i in step.infos.values() if i.get("completed_by")), None
            )
            line += f"; reward {reward:.2f}" + (
                f" (mission completed by {done_by})" if done_by else ""
            )
        return "\n".join([line, *_message_lines(step)])

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        infos = [s.infos.get(agent, {}) for s in trajectory.steps]
        blocked = sum(bool(i.get("blocked")) for i in infos)
        illegal = sum(bool(i.get("illegal_action")) for i in infos)
        sent = sum(m.sender == agent for s in trajectory.steps for m in s.messages)
        done = any(i.get("completed_by") == agent for i in infos)
        totals = (
            f"{agent} totals: {_plural(blocked, 'blocked action')}, "
            f"{_plural(illegal, 'illegal action')}, {_plural(sent, 'message')} sent"
        )
        return [totals + ("; it completed the mission." if done else ".")]

    def summary(self, trajectory: Trajectory) -> list[str]:
        return [
            line for agent in _agents(trajectory) for line in self.agent_summary(trajectory, agent)
        ]


def _babyai_pose(data: Mapping[str, Any], *, long: bool) -> str:
    x, y = data.get("position", ("?", "?"))
    facing = data.get("direction", "?")
    carrying = _babyai_object(data.get("carrying"))
    if long:
        return f"at ({x}, {y}) facing {facing}, carrying {carrying or 'nothing'}"
    return f"({x},{y}) {facing}" + (f" carrying {carrying}" if carrying else "")


def _babyai_object(record: Mapping[str, Any] | None) -> str | None:
    if not record:
        return None
    name = f"{record.get('color', '')} {record.get('type', '')}".strip()
    return f"{record['state']} {name}" if record.get("state") else name


def _babyai_front(data: Mapping[str, Any]) -> str | None:
    front = data.get("front") or {}
    if front.get("agent"):
        return front["agent"]
    record = front.get("object")
    if record and record.get("type") == "wall":
        return "a wall"
    return _babyai_object(record)


def _babyai_seen(data: Mapping[str, Any], mission: str, most: int = 3) -> str:
    """Objects in view, those the mission names first (nearest first within each), then the
    other agents in view."""
    words = set(mission.lower().replace(",", " ").split())

    def named(record: Mapping[str, Any]) -> bool:
        return record.get("type") in words or record.get("color") in words

    objects = sorted(
        data.get("visible_objects", []), key=lambda r: not named(r)
    )  # stable: nearest first
    shown = [f"{_babyai_object(r)} {_relative(r.get('relative', {}))}" for r in objects[:most]]
    if len(objects) > most:
        shown.append(f"{len(objects) - most} more objects")
    shown += [
        f"{r['name']} {_relative(r.get('relative', {}))}" for r in data.get("visible_agents", [])
    ]
    return ", ".join(shown)


def _relative(offset: Mapping[str, int]) -> str:
    right, forward = int(offset.get("right", 0)), int(offset.get("forward", 0))
    parts = []
    if forward:
        parts.append(f"{abs(forward)} {'forward' if forward > 0 else 'back'}")
    if right:
        parts.append(f"{abs(right)} {'right' if right > 0 else 'left'}")
    return " ".join(parts) or "here"


def _babyai_result(step: Step, agent: str, after: After) -> str:
    """What the action did, in parentheses: blocked, illegal, skipped, picked up, dropped,
    a door opened or closed (from the observation after it, when stored)."""
    info = step.infos.get(agent, {})
    notes = [flag for flag in ("blocked", "skipped") if info.get(flag)]
    if info.get("illegal_action"):
        notes.append("illegal")
    before = step.observations.get(agent)
    now = after.get(agent) if after else None
    if before is not None and now is not None and not info.get("skipped"):
        held_before, held_now = before.data.get("carrying"), now.data.get("carrying")
        if held_before != held_now:
            if held_now:
                notes.append(f"picked up {_babyai_object(held_now)}")
            if held_before:
                notes.append(f"dropped {_babyai_object(held_before)}")
        door_before = (before.data.get("front") or {}).get("object") or {}
        door_now = (now.data.get("front") or {}).get("object") or {}
        if door_before.get("type") == door_now.get("type") == "door" and door_before.get(
            "state"
        ) != door_now.get("state"):
            notes.append(f"{door_before.get('color')} door now {door_now.get('state')}")
    return f" ({', '.join(notes)})" if notes else ""


# ------------------------------------------------------------------------------ Overcooked


_SUBGOAL_ENDS = {"done": "done", "failed": "gave up", "aborted": "blocked, gave up"}


class OvercookedNarrator(Narrator):
    """Overcooked: per decision point the ticks, each cook's held item, chosen subgoal and how
    it ended, shaped rewards, illegal actions, pot and counter changes, deliveries."""

    step_noun: ClassVar[str] = "decision point"

    def header(self, trajectory: Trajectory) -> list[str]:
        data = _first_data(trajectory)
        orders = "; ".join(
            f"soup of {_ingredients(o.get('ingredients', []))} worth {o.get('value', '?')}"
            for o in data.get("orders", [])
        )
        kitchen = (
            f"Overcooked {trajectory.env_id}: cooks {', '.join(_agents(trajectory))}, "
            f"{_plural(len(data.get('pots', [])), 'pot')}, {data.get('horizon', '?')} ticks; "
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
            parts.append(f"'{_action(step, agent)}' was not a legal action")
        if info.get("shaped_reward"):
            parts.append(f"shaped reward +{info['shaped_reward']:g}")
        if info.get("sparse_reward"):
            parts.append(f"delivered soup (+{info['sparse_reward']:g} team reward)")
        elif _team_reward(step):
            parts.append(f"team reward +{_team_reward(step):g}")
        parts += _said(step, agent)
        return "; ".join(parts)

    def entry(self, steps: Sequence[Step], after: After) -> str:
        return "\n".join(
            self._cook_step(step, after if i == len(steps) - 1 else steps[i + 1].observations)
            for i, step in enumerate(steps)
        )

    def _cook_step(self, step: Step, after: After) -> str:
        cooks = []
        for agent, obs in step.observations.items():
            info = step.infos.get(agent, {})
            cell = f"{agent} [{obs.data.get('held') or '-'}] {_cook_choice(step, agent)}"
            cell += _cook_end(step, agent, after)
            if info.get("illegal_action"):
                cell += f" (ILLEGAL '{_action(step, agent)}')"
            if info.get("shaped_reward"):
                cell += f" +{info['shaped_reward']:g} shaped"
            cooks.append(cell)
        events = _kitchen_changes(step, after)
        for agent, info in step.infos.items():
            if info.get("sparse_reward"):
                events.append(f"{agent} delivered soup +{info['sparse_reward']:g}")
        line = f"step {step.t} ({_ticks(step)}): " + "; ".join(cooks)
        if events:
            line += ". " + "; ".join(events)
        return "\n".join([line, *_message_lines(step)])

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
            f"{agent} totals: {_plural(chosen, 'subgoal')} chosen, {ended} done, {gave_up} given "
            f"up, {_plural(illegal, 'illegal action')}; shaped reward {shaped:g}; "
            f"delivered soups worth {delivered:g}."
        )
        return [totals]

    def summary(self, trajectory: Trajectory) -> list[str]:
        return [
            line for agent in _agents(trajectory) for line in self.agent_summary(trajectory, agent)
        ]

    def outcome(self, trajectory: Trajectory) -> str:
        last = next(iter(trajectory.steps[-1].infos.values()), {}) if trajectory.steps else {}
        verdict = "success" if trajectory.success else "failure"
        soups = _plural(int(last.get("soups_delivered", 0)), "soup")
        return (
            f"Outcome: {verdict}; {soups} delivered; "
            f"team score {trajectory.team_return:g}; {_plural(trajectory.n_steps, self.step_noun)} "
            f"over {_plural(int(last.get('tick', 0)), 'tick')}."
        )


def _ticks(step: Step) -> str:
    start = next((o.data.get("tick") for o in step.observations.values()), None)
    end = next((i.get("tick") for i in step.infos.values()), None)
    if start is None or end is None:
        return "ticks ?"
    return f"tick {end}" if end - start <= 1 else f"ticks {start + 1}-{end}"


def _cook_choice(step: Step, agent: str) -> str:
    action = _action(step, agent)
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


# ------------------------------------------------------------------------------ Pistonball


_MOVES = {"move up": 1, "move down": -1}
WINDOW_MESSAGES = 2
"""Messages shown per window of several cycles (the rest are counted)."""


class PistonballNarrator(Narrator):
    """Pistonball: the pistons' heights row and the ball's distance to the wall and motion,
    sampled every k cycles (k as small as the budget allows), each piston's net moves."""

    sampling: ClassVar[bool] = True
    step_noun: ClassVar[str] = "cycle"

    def header(self, trajectory: Trajectory) -> list[str]:
        agents = _agents(trajectory)
        row = (
            f"Pistonball {trajectory.env_id}: {len(agents)} pistons, {agents[0]} next to the left "
            f"wall to {agents[-1]} on the right; rows list them left to right."
        )
        legend = (
            "Each line: cycles, ball distance to the left wall (piston widths) and its motion, the "
            "team reward, heights (0-16) at the start, moves (ups minus downs in those cycles)."
        )
        return [row, legend]

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        obs = step.observations.get(agent)
        d = obs.data if obs is not None else {}
        parts = [f"cycle {d.get('cycle', step.t) + 1}"]
        if d:
            sides = (("left", d.get("left_height")), ("right", d.get("right_height")))
            neighbours = ", ".join(f"{side} {h}" for side, h in sides if h is not None)
            parts.append(
                f"height {d.get('height')}/{d.get('max_height', 16)} (neighbours: {neighbours})"
            )
            side = {"left": "to your left", "right": "to your right", "above": "above you"}
            parts.append(
                f"ball {side.get(d.get('ball_relative'), '?')} {d.get('ball_distance', 0):.1f} "
                f"widths away, {d.get('ball_wall_distance', 0):.1f} from the wall, "
                f"{_ball_motion(d)}"
            )
        action = _action(step, agent)
        parts.append(
            f"did '{action}'"
            + (" (illegal)" if step.infos.get(agent, {}).get("illegal_action") else "")
        )
        reward = step.rewards.get(agent)
        if reward:
            parts.append(f"reward {reward:+.2f}")
        parts += _said(step, agent)
        return "; ".join(parts)

    def entry(self, steps: Sequence[Step], after: After) -> str:
        first = _pistons(steps[0])
        start = next(iter(first.values()), {})
        end_data = (
            next(iter(after.values())).data
            if after
            else next(iter(_pistons(steps[-1]).values()), {})
        )
        c0 = start.get("cycle", steps[0].t)
        cycles = f"cycle {c0 + 1}" if len(steps) == 1 else f"cycles {c0 + 1}-{c0 + len(steps)}"
        reward = sum(_team_reward(s) for s in steps)
        heights = " ".join(str(d.get("height", "?")) for d in first.values())
        moves = " ".join(
            _signed(sum(_MOVES.get(_action(s, agent), 0) for s in steps)) for agent in first
        )
        line = (
            f"{cycles}: ball {start.get('ball_wall_distance', 0):.1f}->"
            f"{end_data.get('ball_wall_distance', 0):.1f} from wall, {_ball_motion(start)}; "
            f"reward {reward:+.1f}; heights {heights}; moves {moves}"
        )
        messages = [m for step in steps for m in step.messages]
        said = [f"  {m.sender} said: {_short(m.content)}" for m in messages[:WINDOW_MESSAGES]]
        if len(messages) > WINDOW_MESSAGES:
            said.append(f"  ({len(messages) - WINDOW_MESSAGES} more messages in these cycles)")
        return "\n".join([line, *said])

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        up, stay, down = self._counts(trajectory, agent)
        return [f"{agent} totals: {up} up, {stay} stay, {down} down."]

    def summary(self, trajectory: Trajectory) -> list[str]:
        counts = ", ".join(
            f"{agent} {'/'.join(map(str, self._counts(trajectory, agent)))}"
            for agent in _agents(trajectory)
        )
        return [f"Moves up/stay/down per piston: {counts}."]

    @staticmethod
    def _counts(trajectory: Trajectory, agent: str) -> tuple[int, int, int]:
        actions = Counter(_action(s, agent) for s in trajectory.steps if agent in s.decisions)
        return (
            actions["move up"],
            sum(actions.values()) - actions["move up"] - actions["move down"],
            actions["move down"],
        )

    def outcome(self, trajectory: Trajectory) -> str:
        verdict = (
            "success: the ball reached the left wall"
            if trajectory.success
            else "failure: the ball did not reach the left wall"
        )
        final = next(iter(trajectory.final_observations.values()), None)
        where = ""
        if final is not None and not trajectory.success and "ball_wall_distance" in final.data:
            where = f" (it ended {final.data['ball_wall_distance']:.1f} piston widths away)"
        return (
            f"Outcome: {verdict}{where}; team return {trajectory.team_return:.1f}; "
            f"{_plural(trajectory.n_steps, self.step_noun)}."
        )


def _pistons(step: Step) -> dict[str, dict[str, Any]]:
    """Each piston's data at a step, left to right."""
    pairs = [(agent, obs.data) for agent, obs in step.observations.items()]
    pairs.sort(key=lambda p: p[1].get("index", 0))
    return dict(pairs)


def _ball_motion(data: Mapping[str, Any]) -> str:
    direction = data.get("ball_direction", "")
    if not direction or direction == "at rest":
        return "at rest"
    return f"moving {direction} {data.get('ball_speed', 0):.1f} widths/s"


def _signed(n: int) -> str:
    return f"{n:+d}" if n else "0"


# ------------------------------------------------------------------------------ helpers


def _afters(trajectory: Trajectory) -> list[After]:
    """For each step, the observations that followed it."""
    steps = trajectory.steps
    afters: list[After] = [steps[i + 1].observations for i in range(len(steps) - 1)]
    if steps:
        afters.append(trajectory.final_observations or None)
    return afters


def _agents(trajectory: Trajectory) -> list[str]:
    if trajectory.agents:
        return list(trajectory.agents)
    seen: dict[str, None] = {}
    for step in trajectory.steps:
        seen.update(dict.fromkeys(step.observations))
    return list(seen)


def _mission(trajectory: Trajectory) -> str:
    for step in trajectory.steps:
        for obs in step.observations.values():
            return obs.mission
    return ""


def _first_data(trajectory: Trajectory) -> Mapping[str, Any]:
    for step in trajectory.steps:
        for obs in step.observations.values():
            return obs.data
    return {}


def _action(step: Step, agent: str) -> str:
    decision = step.decisions.get(agent)
    return decision.action if decision is not None else "-"


def _team_reward(step: Step) -> float:
    return sum(step.rewards.values()) / len(step.rewards) if step.rewards else 0.0


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _short(text: str, limit: int = MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _said(step: Step, agent: str) -> list[str]:
    return [f"said '{_short(m.content)}'" for m in step.messages if m.sender == agent]


def _reward_and_words(step: Step, agent: str) -> list[str]:
    parts = []
    reward = step.rewards.get(agent)
    if reward:
        parts.append(f"reward {reward:g}")
    info = step.infos.get(agent, {})
    if info.get("illegal_action"):
        parts.append("the action was not legal")
    return parts + _said(step, agent)


def _message_lines(step: Step) -> list[str]:
    return [f"  {m.sender} said: {_short(m.content)}" for m in step.messages]


# ------------------------------------------------------------------------------ fitting a budget


def _fit(
    head: list[str],
    windows: Callable[[int], list[tuple[str, int]]],
    summary: list[str],
    outcome: str,
    budget: int,
    count: TokenCounter,
    *,
    sampling: bool,
    noun: str,
    n_steps: int,
) -> str:
    """Join header, body entries, summary and outcome within ``budget`` tokens.

    ``windows(k)`` gives the body as (text, steps covered) entries for windows of ``k`` steps.
    The fixed parts go first to last priority: outcome, summary, header; the body fills what
    is left, by coarser windows (``sampling``) and then by leaving out its middle.
    """
    if budget < 1:
        raise ValueError(f"max_tokens must be at least 1, got {budget}")
    omitted_probe = _omitted(n_steps, noun)
    for fixed_head, fixed_tail in (
        (head, [*summary, outcome]),
        (head[:1], [*summary, outcome]),
        ([], [*summary, outcome]),
        ([], [outcome]),
    ):
        if count(_join(fixed_head, [omitted_probe], fixed_tail)) > budget:
            continue
        if sampling and n_steps > 1:
            text = _fit_by_windows(fixed_head, windows, fixed_tail, budget, count, n_steps)
            if text is not None:
                return text
            entries = windows(max(1, math.ceil(n_steps / 8)))
        else:
            entries = windows(1)
        return _fit_by_eliding(fixed_head, entries, fixed_tail, budget, count, noun)
    return _cut(outcome, budget, count)


def _fit_by_windows(
    head: list[str],
    windows: Callable[[int], list[tuple[str, int]]],
    tail: list[str],
    budget: int,
    count: TokenCounter,
    n_steps: int,
) -> str | None:
    """The finest windows whose whole body fits (binary search over the window size)."""

    def attempt(k: int) -> str | None:
        text = _join(head, [e for e, _ in windows(k)], tail)
        return text if count(text) <= budget else None

    best = attempt(1)
    if best is not None:
        return best
    low, high = 1, n_steps  # attempt(low) fails
    best = attempt(high)
    if best is None:
        return None
    while high - low > 1:
        mid = (low + high) // 2
        text = attempt(mid)
        if text is None:
            low = mid
        else:
            high, best = mid, text
    return best


def _fit_by_eliding(
    head: list[str],
    entries: list[tuple[str, int]],
    tail: list[str],
    budget: int,
    count: TokenCounter,
    noun: str,
) -> str:
    """All entries if they fit, else the first and last ones with a line in between saying
    how many steps were left out. The caller made sure ``head``, that line and ``tail`` fit."""
    texts = [e for e, _ in entries]
    full = _join(head, texts, tail)
    if count(full) <= budget:
        return full
    total_steps = sum(n for _, n in entries)
    room = budget - count(_join(head, [_omitted(total_steps, noun)], tail))
    costs = [count(e + "\n") for e in texts]
    front = back = 0
    used = 0
    while front + back < len(entries):
        order = (
            (front, len(entries) - 1 - back) if front <= back else (len(entries) - 1 - back, front)
        )
        for index in order:
            if used + costs[index] <= room:
                used += costs[index]
                if index == front:
                    front += 1
                else:
                    back += 1
                break
        else:
            break
    while True:
        kept_back = len(entries) - back
        left_out = sum(n for _, n in entries[front:kept_back])
        text = _join(head, [*texts[:front], _omitted(left_out, noun), *texts[kept_back:]], tail)
        if count(text) <= budget or front + back == 0:
            return text
        # The per-entry costs were an estimate for this counter: drop one more and recount.
        if back >= front:
            back -= 1
        else:
            front -= 1


def _omitted(n: int, noun: str) -> str:
    return f"... ({_plural(n, noun)} omitted) ..."


def _join(head: list[str], body: list[str], tail: list[str]) -> str:
    return "\n".join([*head, *body, *tail])


def _cut(text: str, budget: int, count: TokenCounter) -> str:
    """The longest prefix of ``text`` (ending in "...") within ``budget`` tokens."""
    if count(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count(text[:mid] + "...") <= budget:
            low = mid
        else:
            high = mid - 1
    return text[:low] + "..." if count(text[:low] + "...") <= budget else ""
