"""The cooperative reasoning envs: MATH (a final answer compared with the hidden reference by
``math_answers_equal``) and HotPotQA (a short answer scored by token F1, exact match counts
as solved). Joint teams answer independently and the majority answer is the team's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

from marlang.envs.tasks.cooperative import CooperativeTaskEnv, TurnEvaluation, TurnRecord
from marlang.envs.tasks.feedback import AnswerCheck, answer_feedback, expert_prompt

logger = logging.getLogger(__name__)


def majority_answer(
    answers: list[tuple[str, str]], same: Callable[[str, str], bool]
) -> tuple[str, int]:
    """The team's answer by vote: (answer, votes). ``answers`` are (agent, answer) in agent
    order; empty answers do not vote; ``same`` groups equivalent answers. A tie goes to the
    group holding the last agent's answer, else to the group answered first."""
    groups: list[list[tuple[int, str]]] = []
    for position, (_, answer) in enumerate(answers):
        if not answer.strip():
            continue
        for group in groups:
            if same(group[0][1], answer):
                group.append((position, answer))
                break
        else:
            groups.append([(position, answer)])
    if not groups:
        return "", 0
    last = len(answers) - 1

    def rank(group: list[tuple[int, str]]) -> tuple[int, bool, int]:
        return (len(group), any(p == last for p, _ in group), -group[0][0])

    best = max(groups, key=rank)
    return best[0][1], len(best)


class _ReasoningTaskEnv(CooperativeTaskEnv):
    """What MATH and HotPotQA share: one final answer per turn, judged against a hidden
    reference; under ``structure="joint"`` every agent answers and the majority answer (ties
    to the last agent's) is judged."""

    default_turns: ClassVar[int] = 1

    def _same(self, a: str, b: str) -> bool:
        raise NotImplementedError

    def _check(self, answer: str) -> AnswerCheck:
        raise NotImplementedError

    def _evaluate(self, answers: dict[str, str]) -> TurnEvaluation:
        ordered = [(agent, answers.get(agent, "")) for agent in self.possible_agents if agent in answers]
        if self.structure == "joint":
            team, votes = majority_answer(ordered, self._same)
        else:
            team = answers.get(self.possible_agents[-1], "")
            votes = 1 if team.strip() else 0
        check = self._check(team)
        info: dict[str, Any] = {
            "answer": team,
            "answer_found": check.answered,
            "correct": check.correct,
        }
        if self.structure == "joint":
            info["votes"] = votes
        info.update(self._score_info(check))
        return TurnEvaluation(
            team_answer=team, score=check.score, basis=check.score, solved=check.correct,
            check=check, info=info,
        )

    def _score_info(self, check: AnswerCheck) -> dict[str, Any]:
        return {}

    def _feedback(self, evaluation: TurnEvaluation) -> dict[str, str]:
        check = evaluation.check
        assert isinstance(check, AnswerCheck)
        edits = None
        if self.feedback == "expert_edits" and self._expert is not None:
            verdict = "correct" if check.correct else "not correct"
            request = expert_prompt(
                self._problem_text(),
                check.answer,
                f"The answer was checked against a hidden reference: it is {verdict}.",
                kind=check.kind,
            )
            edits, error = self._expert.propose(request)
            if error:
                evaluation.info["expert_error"] = error
        text = answer_feedback(check, self.feedback, expert_edits=edits)
        return dict.fromkeys(self.possible_agents, text)

    def _team_answer_note(self, record: TurnRecord) -> str | None:
        if self.structure != "joint":
            return None
        answer = record.evaluation.team_answer
        return f"Team answer (majority vote): {answer}" if answer.strip() else None

    def _instruction(self, agent: str) -> str:
        index = self.possible_agents.index(agent)
        how = self._answer_how()
        if self.structure == "joint":
            return (
                f"{how} Every teammate answers at the same time; the majority answer is the "
                "team's."
            )
        if index == self.n_agents - 1:
            return f"{how} Your final answer is the team's answer."
        last = self.possible_agents[-1]
        return f"{how} The agents after you see your answer; {last} gives the team's answer."

    def _answer_how(self) -> str:
        raise NotImplementedError

    def _outcome_text(self, evaluation: TurnEvaluation, turn: int) -> str:
        check = evaluation.check
        assert isinstance(check, AnswerCheck)
        if evaluation.solved:
            return f"the team's answer was correct on turn {turn}."
        if not check.answered:
            return "no turns left; the team gave no final answer."
        return "no turns left; the team's last answer was not correct."


class MathTaskEnv(_ReasoningTaskEnv):
    """Competition math (``MathProblem``s): the team's final answer is correct when
    ``math_answers_equal(answer, reference)``; reward 1/0 (as an improvement over the previous
    turn), correct ends the episode. An answer is reduced to its final answer
    (``extract_final_answer``: the boxed part, or what follows "the final answer is"); a
    placeholder copied from the prompt (``\\boxed{<answer>}``) is no answer.

    Judged steps' infos: ``answer`` (the team's), ``answer_found``, ``correct``, ``solved``,
    ``votes`` (joint), ``invalid``, ``invalid_count``, ``turn``; never the reference.
    """

    world_description: ClassVar[str] = "a team solving competition math problems"
    answer_format: ClassVar[str] = "math"
    kind: ClassVar[str] = "math"

    def _normalize_answer(self, text: str) -> str:
        from marlang.envs.tasks.data.math_answers import team_answer

        return team_answer(text)

    def _same(self, a: str, b: str) -> bool:
        from marlang.envs.tasks.data import math_answers_equal

        return bool(math_answers_equal(a, b))

    def _check(self, answer: str) -> AnswerCheck:
        from marlang.envs.tasks.data import math_answers_equal

        answered = bool(answer.strip())
        correct = answered and bool(math_answers_equal(answer, self.current_problem.answer))
        return AnswerCheck(answered, answer, correct, float(correct), "math")

    def _mission(self) -> str:
        return "Solve the math problem; the team's final answer is checked against a hidden one."

    def _problem_statement(self) -> str:
        return self.current_problem.problem

    def _problem_text(self) -> str:
        problem = self.current_problem
        extra = ", ".join(x for x in (problem.subject, problem.level) if x)
        return f"Problem{f' ({extra})' if extra else ''}:\n{problem.problem.strip()}"

    def _answer_how(self) -> str:
        return "Solve the problem step by step and give the final answer as \\boxed{...}."

    def reference_answer(self, agent: str) -> str:
        return str(self.current_problem.answer)


class QATaskEnv(_ReasoningTaskEnv):
    """Multi-hop questions over Wikipedia paragraphs (``QAProblem``s): quality is the token
    F1 of the team's answer against the hidden reference (the reward is its improvement over
    the previous turn); an exact match (SQuAD normalization) solves the task.

    Judged steps' infos: ``answer``, ``answer_found``, ``correct`` (exact match),
    ``exact_match``, ``f1``, ``solved``, ``votes`` (joint), ``invalid``, ``invalid_count``,
    ``turn``; never the reference.
    """

    world_description: ClassVar[str] = "a team answering questions from Wikipedia paragraphs"
    answer_format: ClassVar[str] = "text"
    kind: ClassVar[str] = "qa"

    def _normalize_answer(self, text: str) -> str:
        answer = text.strip()
        if answer.lower().startswith("answer:"):
            answer = answer[len("answer:") :].strip()
        return answer

    def _same(self, a: str, b: str) -> bool:
        from marlang.envs.tasks.data import normalize_qa_answer

        return normalize_qa_answer(a) == normalize_qa_answer(b)

    def _check(self, answer: str) -> AnswerCheck:
        from marlang.envs.tasks.data import qa_exact_match, qa_f1

        answered = bool(answer.strip())
        reference = self.current_problem.answer
        exact = answered and bool(qa_exact_match(answer, reference))
        f1 = float(qa_f1(answer, reference)) if answered else 0.0
        return AnswerCheck(answered, answer, exact, f1, "qa")

    def _score_info(self, check: AnswerCheck) -> dict[str, Any]:
        return {"exact_match": check.correct, "f1": round(check.score, 6)}

    def _mission(self) -> str:
        return (
            "Answer the question from the paragraphs; the team's answer is scored against a "
            "hidden one (word-overlap F1; an exact match solves it)."
        )

    def _problem_statement(self) -> str:
        return self.current_problem.question

    def _problem_text(self) -> str:
        problem = self.current_problem
        return f"Question: {problem.question.strip()}\n\nParagraphs:\n{problem.context.strip()}"

    def _answer_how(self) -> str:
        return (
            "Answer with the shortest span that answers the question (a name, date, number, "
            "or yes/no), using the paragraphs."
        )

    def reference_answer(self, agent: str) -> str:
        return str(self.current_problem.answer)
