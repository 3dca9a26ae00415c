"""A task env's turns: how the team's answer of a turn fared, the record later turns show,
and what agents read on their turn (who they are in the team, the earlier turns and this
turn's replies, or that they wait). ``CooperativeTaskEnv`` mixes ``TurnTexts`` in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from marlang.envs.tasks.feedback import AnswerCheck, CodeCheck


@dataclass
class TurnEvaluation:
    """How the team's answer of one turn fared (built by the task-specific env)."""

    team_answer: str
    """What was judged: the last agent's answer, the joined helper + main program, the vote."""
    score: float
    """Quality in [0, 1]: share of hidden tests passed, 1/0 correctness, or token F1."""
    basis: float
    """The quantity rewards are differences of (``score``, or the levelled reward)."""
    solved: bool
    check: CodeCheck | AnswerCheck
    info: dict[str, Any] = field(default_factory=dict)
    """Merged into every agent's ``infos`` on the evaluated step."""


@dataclass
class TurnRecord:
    """One finished turn, as later turns' observations (per ``memory``) show it."""

    turn: int
    answers: dict[str, str]
    """Each acting agent's answer, in the order they answered."""
    invalid: dict[str, bool]
    evaluation: TurnEvaluation
    feedback: dict[str, str]
    """What each agent is told about this turn (empty when the episode ended with it)."""


class TurnTexts:
    """The observation texts of a turn-based team env; the env supplies the state they read
    (its agents, structure, memory, turn, history and this turn's answers) and the wording
    of its problem, instruction and answers."""

    possible_agents: list[str]
    structure: str
    memory: str
    _max_turns: int
    _history: Sequence[TurnRecord]
    _current: Mapping[str, str]

    # What the env supplies (``CooperativeTaskEnv`` and its tasks define every one): declared
    # for the type checker, never given a body here.
    acting_agents: Callable[[], list[str]]
    role: Callable[[str], str]
    _problem_text: Callable[[], str]
    _instruction: Callable[[str], str]
    _render_answer: Callable[[str], str]

    @property
    def turn(self) -> int:
        raise NotImplementedError

    def _team_answer_note(self, record: TurnRecord) -> str | None:
        raise NotImplementedError

    def _intro(self, agent: str) -> str:
        names = ", ".join(self.possible_agents)
        n_agents = len(self.possible_agents)
        last = self.possible_agents[-1]
        where = f"This is turn {self.turn} of {self._max_turns}."
        if n_agents == 1:
            return f"You are {agent}, working alone. {where}"
        if self.structure == "sequential":
            return (
                f"You are {agent} in a team of {n_agents} ({names}) who answer one after "
                f"another in that order; {last}'s answer is the team's answer. {where}"
            )
        return (
            f"You are {agent} in a team of {n_agents} ({names}) who all answer at the "
            f"same time. {where}"
        )

    def _acting_text(self, agent: str) -> str:
        parts = [self._intro(agent), self._problem_text()]
        history = self._history_text(agent)
        if history:
            parts.append(history)
        if self.structure == "sequential" and self._current:
            replies = [
                f"{other} ({self.role(other)}) answered:\n{self._render_answer(answer)}"
                for other, answer in self._current.items()
            ]
            parts.append("Earlier replies in this turn:\n" + "\n".join(replies))
        parts.append(self._instruction(agent))
        return "\n\n".join(parts)

    def _waiting_text(self, agent: str) -> str:
        actor = ", ".join(self.acting_agents())
        return (
            f"Wait: {actor} is answering now (turn {self.turn} of {self._max_turns}); "
            f"you are {agent} ({self.role(agent)}) and answer when it is your turn."
        )

    def _history_text(self, agent: str) -> str:
        if not self._history:
            return ""
        records = self._history if self.memory == "full" else self._history[-1:]
        title = "Earlier turns:" if self.memory == "full" else "The previous turn:"
        lines = [title]
        for record in records:
            lines.append(f"Turn {record.turn}:")
            for other, answer in record.answers.items():
                lines.append(f"{other} ({self.role(other)}) answered:")
                lines.append(self._render_answer(answer))
            note = self._team_answer_note(record)
            if note:
                lines.append(note)
            feedback = record.feedback.get(agent)
            if feedback:
                lines.append(f"Feedback:\n{feedback}")
        return "\n".join(lines)
