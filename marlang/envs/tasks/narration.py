"""Cooperative task episodes told in words for a learner's critic: the task, each agent's
answer per turn (code shortened), tests passed or correctness per judged turn, invalid answers.
It reads only observations' ``data``, decisions, rewards and a few info fields: never the
sandbox report, hidden tests, expected values, canonical solutions or reference answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from marlang.envs.core.narrator import (
    After,
    Narrator,
    agents_of,
    message_lines,
    plural,
    said_by,
    shorten,
)
from marlang.types import Step, Trajectory

TASK_CHARS = 700
"""Longest task statement in a header (the rest is cut with an ellipsis)."""
CODE_LINES = 14
CODE_CHARS = 700
ANSWER_CHARS = 200


class CooperativeTaskNarrator(Narrator):
    """Narrates ``CooperativeTaskEnv`` episodes: one entry per env step (an answer in turn, or
    every agent's answers at once), with the verdict on judged steps."""

    step_noun: ClassVar[str] = "step"

    def header(self, trajectory: Trajectory) -> list[str]:
        data = _first_data(trajectory)
        agents = agents_of(trajectory)
        structure = data.get("structure", getattr(self.env, "structure", "sequential"))
        if structure == "sequential":
            order = (
                f"they answer in turn, {agents[-1]}'s answer is the team's and is judged at "
                "the end of each turn"
            )
        elif data.get("answer_format") == "code":
            order = "all answer at once: helper functions from the first agents, the main "
            order += f"function `{data.get('entry_point')}` from {agents[-1]}"
        else:
            order = "all answer at once; the majority answer is the team's"
        turns = data.get("max_turns", getattr(self.env, "max_steps", "?"))
        head = (
            f"{trajectory.env_id}, task {data.get('task_id', '?')}: agents {', '.join(agents)}; "
            f"{order}; up to {plural(int(turns), 'turn') if isinstance(turns, int) else turns}."
        )
        lines = [head, f"Task: {shorten(str(data.get('problem', '')), TASK_CHARS)}"]
        judged = {
            "code": "tests passed k/n (hidden tests)",
            "math": "whether the final answer is correct",
        }.get(str(data.get("answer_format")), "the answer's F1 and exact match")
        lines.append(
            f"Each entry: a step, who answered what; judged steps show {judged} and the "
            "shared reward (the change in the team's quality)."
        )
        return lines

    def entry(self, steps: Sequence[Step], after: After) -> str:
        return "\n".join(self._step_text(step) for step in steps)

    def _step_text(self, step: Step) -> str:
        acting = _acting(step)
        turn = _turn(step)
        lines = [f"step {step.t} (turn {turn}):"]
        for agent in acting:
            info = step.infos.get(agent, {})
            role = _role(step, agent)
            if info.get("invalid"):
                lines.append(f"  {agent} ({role}) gave no answer (invalid).")
                continue
            lines.append(f"  {agent} ({role}) answered:")
            lines.append(self._answer(step, agent))
        verdict = _verdict(step)
        if verdict:
            lines.append(f"  -> {verdict}; reward {_reward(step):+g}")
        lines += message_lines(step)
        return "\n".join(lines)

    def _answer(self, step: Step, agent: str) -> str:
        decision = step.decisions.get(agent)
        answer = decision.action if decision is not None else ""
        if _format(step) == "code":
            return _code_block(answer)
        return f"    {shorten(answer, ANSWER_CHARS)}"

    def step_summary(self, step: Step, agent: str, after: After = None) -> str:
        turn = _turn(step)
        role = _role(step, agent)
        info = step.infos.get(agent, {})
        if agent not in _acting(step):
            text = f"turn {turn}: {agent} ({role}) waited"
        elif info.get("invalid"):
            text = f"turn {turn}: {agent} ({role}) gave no answer (invalid)"
        else:
            decision = step.decisions.get(agent)
            answer = decision.action if decision is not None else ""
            text = f"turn {turn}: {agent} ({role}) answered '{shorten(answer, ANSWER_CHARS)}'"
        parts = [text]
        verdict = _verdict(step)
        if verdict:
            parts.append(f"{verdict}, reward {_reward(step):+g}")
        parts += said_by(step, agent)
        return "; ".join(parts)

    def agent_summary(self, trajectory: Trajectory, agent: str) -> list[str]:
        answered = invalid = 0
        for step in trajectory.steps:
            if agent not in _acting(step):
                continue
            if step.infos.get(agent, {}).get("invalid"):
                invalid += 1
            else:
                answered += 1
        return [
            f"{agent} totals: {plural(answered, 'answer')}, {plural(invalid, 'invalid answer')}."
        ]

    def summary(self, trajectory: Trajectory) -> list[str]:
        lines = [
            line
            for agent in agents_of(trajectory)
            for line in self.agent_summary(trajectory, agent)
        ]
        per_turn = [_verdict(step) for step in trajectory.steps if _judged(step)]
        if per_turn:
            lines.append("Judged turns: " + "; ".join(per_turn) + ".")
        return lines

    def outcome(self, trajectory: Trajectory) -> str:
        judged = [step for step in trajectory.steps if _judged(step)]
        last = _verdict(judged[-1]) if judged else "no turn was judged"
        turns = len(judged)
        if trajectory.success:
            head = f"success: solved on turn {turns} ({last})"
        else:
            head = f"failure: not solved after {plural(turns, 'judged turn')} (last: {last})"
        invalid = sum(
            bool(info.get("invalid")) for step in trajectory.steps for info in step.infos.values()
        )
        return (
            f"Outcome: {head}; team return {trajectory.team_return:.3g}; "
            f"{plural(trajectory.n_steps, self.step_noun)}; {plural(invalid, 'invalid answer')}."
        )


# ------------------------------------------------------------------------------ helpers


def _first_data(trajectory: Trajectory) -> Mapping[str, Any]:
    for step in trajectory.steps:
        for obs in step.observations.values():
            return obs.data
    for obs in trajectory.final_observations.values():
        return obs.data
    return {}


def _acting(step: Step) -> list[str]:
    acting = [agent for agent, obs in step.observations.items() if obs.data.get("acting")]
    if acting or step.observations:
        return acting
    return [agent for agent, info in step.infos.items() if info.get("acting")]


def _turn(step: Step) -> Any:
    for info in step.infos.values():
        if "turn" in info:
            return info["turn"]
    for obs in step.observations.values():
        return obs.data.get("turn", "?")
    return "?"


def _role(step: Step, agent: str) -> str:
    obs = step.observations.get(agent)
    if obs is not None and obs.data.get("role"):
        return str(obs.data["role"])
    return str(step.infos.get(agent, {}).get("role", "?"))


def _format(step: Step) -> str:
    for obs in step.observations.values():
        return str(obs.data.get("answer_format", "text"))
    return "text"


def _judged(step: Step) -> bool:
    return any(info.get("evaluated") for info in step.infos.values())


def _reward(step: Step) -> float:
    return sum(step.rewards.values()) / len(step.rewards) if step.rewards else 0.0


def _team_info(step: Step) -> Mapping[str, Any]:
    return next((i for i in step.infos.values() if i.get("evaluated")), {})


def _verdict(step: Step) -> str:
    """The judged outcome of a step in a few words ('' for an unjudged step)."""
    info = _team_info(step)
    if not info:
        return ""
    if "pass_rate" in info:
        text = f"tests {info.get('passed', 0)}/{info.get('total', 0)} passed"
        status = info.get("status")
        if status == "no_answer":
            text += " (no code)"
        elif status == "syntax_error":
            text += " (syntax error)"
        elif status not in (None, "ok"):
            report = info.get("report") or {}
            error = report.get("error_type") if isinstance(report, Mapping) else None
            text += f" (program {status}{': ' + str(error) if error else ''})"
        levelled = info.get("levelled_reward")
        if isinstance(levelled, Mapping):
            text += f", levelled reward {levelled.get('total', 0):g}/{levelled.get('max', 4):g}"
        return text
    answer = str(info.get("answer", ""))
    shown = f"answer '{shorten(answer, 80)}'" if answer.strip() else "no final answer"
    if "f1" in info:
        exact = "exact match" if info.get("exact_match") else "no exact match"
        return f"{shown}: F1 {float(info.get('f1', 0.0)):.2f}, {exact}"
    verdict = "correct" if info.get("correct") else "not correct"
    votes = f" ({plural(int(info['votes']), 'vote')})" if "votes" in info else ""
    return f"{shown}{votes}: {verdict}"


def _code_block(code: str) -> str:
    lines = [line.rstrip() for line in code.strip("\n").splitlines() if line.strip()]
    if not lines:
        return "    (empty)"
    shown: list[str] = []
    used = 0
    for line in lines:
        if len(shown) >= CODE_LINES or used + len(line) > CODE_CHARS:
            break
        shown.append(line)
        used += len(line)
    if not shown:
        shown = [lines[0][: CODE_CHARS - 3] + "..."]
    text = "\n".join(f"    {line}" for line in shown)
    left = len(lines) - len(shown)
    if left > 0:
        text += f"\n    ... ({plural(left, 'more line')})"
    return text
