"""Cooperative coding and reasoning tasks (HumanEval, MBPP, CoopHumanEval, MATH, HotPotQA) as
PettingZoo ``ParallelEnv``s: a team of LLM agents answers in free text over several turns,
in sequence (each builds on the earlier replies) or jointly (helper + main code, or a vote).

``make("code/humaneval", n_agents=2)`` builds one; see ``CooperativeTaskEnv`` for the turn
structure, feedback modes, memory, rewards and infos.
"""

from __future__ import annotations

import logging
import random
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from gymnasium.spaces import Text

from marlang.envs.core.base import (
    MultiAgentEnv,
    ScriptedTeam,
    check_optional_max_steps,
    env_metadata,
)
from marlang.envs.core.spaces import (
    StepResult,
    check_joint_action,
    is_integer,
)
from marlang.envs.tasks.feedback import (
    FEEDBACK_MODES,
    MEMORY_MODES,
    STRUCTURES,
    ExpertEditor,
    check_sandbox_slice,
)
from marlang.envs.tasks.narration import CooperativeTaskNarrator
from marlang.envs.tasks.turns import TurnEvaluation, TurnRecord, TurnTexts
from marlang.types import TextObservation

logger = logging.getLogger(__name__)

WAIT = "wait"
"""The one legal action of an agent whose turn it is not (the agent layer skips its model)."""

MAX_AGENTS = 16
SAMPLED_ANSWER_CHARS = 2000
"""Longest answer the action space samples (longer answers are accepted all the same)."""


Problems = Sequence[Any] | Callable[[], Sequence[Any]]


# ------------------------------------------------------------------------------ the env


class CooperativeTaskEnv(TurnTexts, MultiAgentEnv):
    """A team of ``n_agents`` LLM agents answering one task per episode in free text.

    Problem choice: ``reset(seed=s)`` poses problem ``s % len(problems)``;
    ``options={"problem": i}`` (an index) or ``{"problem": "HumanEval/3"}`` (a task id) picks
    one; ``reset()`` without either draws one at random.

    Turns (``max_steps`` counts turns). ``structure="sequential"``: within a turn the agents
    answer one per env step, ``agent_0`` first; the acting agent's observation has
    ``legal_actions == []`` (answer in free text) and shows the task, the earlier replies of
    this turn and past turns (per ``memory``); the others get ``["wait"]`` and their actions
    are ignored. The last agent's answer is the team's answer: it is judged at the end of the
    turn, so an episode has up to ``max_steps * n_agents`` env steps. ``structure="joint"``:
    every agent answers at once and the env combines the answers (see the subclasses); one
    env step per turn.

    Answers: the action is the agent's extracted answer string; an empty or whitespace-only
    string, or a non-string, counts as no answer (``infos[agent]["invalid"]``, and
    ``invalid_count`` for the episode) and is judged as a wrong answer.

    Feedback after a judged turn goes into the next turn's observations (``feedback``:
    ``level_feedback``, ``level_passed``, ``passed``, ``plain``, ``expert_edits``; see
    ``feedback``); ``memory="full"`` shows every earlier turn, ``"last"`` only the
    previous one. Hidden tests and reference answers never appear in an observation.

    Rewards are shared and paid on judged steps only (0 on the others): the improvement of the
    judged quantity over the previous judged turn, so an episode's return is the final
    turn's quality. A solved task ends the episode (``terminations`` True,
    ``infos[agent]["success"]``); running out of turns truncates it.
    """

    metadata: ClassVar[dict[str, Any]] = env_metadata("cooperative_task_v0")
    world_description: ClassVar[str] = "a team solving tasks together"
    answer_format: ClassVar[str] = "text"
    kind: ClassVar[str] = "task"
    default_turns: ClassVar[int] = 1

    def __init__(
        self,
        problems: Problems,
        *,
        n_agents: int = 2,
        max_steps: int | None = None,
        structure: str = "sequential",
        feedback: str = "level_feedback",
        memory: str = "full",
        sandbox_slice: int | str | None = 1,
        expert_model: Any = None,
        render_mode: str | None = None,
        env_id: str | None = None,
    ):
        if not is_integer(n_agents) or not 1 <= n_agents <= MAX_AGENTS:
            raise ValueError(f"n_agents must be an integer in 1..{MAX_AGENTS}, got {n_agents!r}")
        max_steps = check_optional_max_steps(max_steps, "max_steps (the number of turns)")
        _check_choice("structure", structure, STRUCTURES)
        _check_choice("feedback", feedback, FEEDBACK_MODES)
        _check_choice("memory", memory, MEMORY_MODES)
        self.sandbox_slice = check_sandbox_slice(sandbox_slice)
        if feedback == "expert_edits" and expert_model is None:
            raise ValueError(
                "expert_model is required when feedback='expert_edits': a model spec such as "
                "'openai:gpt-4o-mini' or 'local:smollm2', or a LangChain chat model"
            )
        if isinstance(expert_model, str):
            from marlang.models.factory import parse_model_spec

            try:
                parse_model_spec(expert_model)
            except ValueError as error:
                raise ValueError(f"expert_model: {error}") from None
        if expert_model is not None and feedback != "expert_edits":
            logger.warning(
                "expert_model is only used with feedback='expert_edits' (feedback=%r)", feedback
            )
        super().__init__(n_agents, render_mode=render_mode, env_id=env_id or self.kind)
        self.structure = structure
        self.feedback = feedback
        self.memory = memory
        self._max_turns = self.default_turns if max_steps is None else max_steps
        self._check_setup()
        loaded = problems() if callable(problems) else problems
        self.problems: tuple[Any, ...] = tuple(loaded)
        if not self.problems:
            raise ValueError(f"{self.env_id}: no problems to pose (the problem list is empty)")
        self._by_task_id = {str(p.task_id): i for i, p in enumerate(self.problems)}
        self._set_action_spaces(
            lambda: Text(SAMPLED_ANSWER_CHARS, min_length=0, charset=string.printable)
        )
        self._expert = ExpertEditor(expert_model) if feedback == "expert_edits" else None
        self._rng = random.Random()
        self._index = 0
        self._turn = 0
        self._position = 0
        self._current: dict[str, str] = {}
        self._current_invalid: dict[str, bool] = {}
        self._history: list[TurnRecord] = []
        self._last_basis = 0.0
        self._done = False
        self._outcome = ""
        self.invalid_counts: dict[str, int] = dict.fromkeys(self.possible_agents, 0)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env_id={self.env_id!r}, n_agents={self.n_agents}, "
            f"structure={self.structure!r}, feedback={self.feedback!r}, "
            f"max_steps={self._max_turns}, problems={len(self.problems)})"
        )

    # ----------------------------------------------------------------- PettingZoo API

    def _start_episode(self, seed: int | None, options: dict[str, Any] | None) -> None:
        """Pose problem ``seed % len(problems)`` (or ``options["problem"]``) and start turn 1."""
        options = dict(options or {})
        choice = options.pop("problem", None)
        self._warn_unknown_options(options)
        if seed is not None:
            self._rng.seed(int(seed))
        if choice is not None:
            self._index = self._problem_index(choice)
        elif seed is not None:
            self._index = int(seed) % len(self.problems)
        else:
            self._index = self._rng.randrange(len(self.problems))
        self._turn = 0
        self._position = 0
        self._current = {}
        self._current_invalid = {}
        self._history = []
        self._last_basis = 0.0
        self._done = False
        self._outcome = ""
        self._started = True
        self.invalid_counts = dict.fromkeys(self.possible_agents, 0)
        self.agents = list(self.possible_agents)

    def _first_info(self, agent: str) -> dict[str, Any]:
        return {
            "success": False,
            "task_id": str(self.current_problem.task_id),
            "turn": 1,
            "max_turns": self._max_turns,
            "role": self.role(agent),
        }

    def step(self, actions: Mapping[str, Any]) -> StepResult:
        """One agent's answer (sequential) or every agent's (joint); judges the team's answer
        when the turn is complete."""
        check_joint_action(self.agents, actions)
        acting = self.acting_agents()
        for agent in acting:
            answer, invalid = self._read_answer(actions[agent])
            self._current[agent] = answer
            self._current_invalid[agent] = invalid
            self.invalid_counts[agent] += invalid
        turn = self._turn + 1
        agents = list(self.agents)
        if self.structure == "sequential" and self._position < self.n_agents - 1:
            self._position += 1
            infos = {agent: self._step_info(agent, acting, turn) for agent in agents}
            return self._step_result(agents, self._observe_all(agents), 0.0, False, False, infos)

        evaluation = self._evaluate(dict(self._current))
        reward = round(evaluation.basis - self._last_basis, 9)
        self._last_basis = evaluation.basis
        terminated = bool(evaluation.solved)
        truncated = not terminated and turn >= self._max_turns
        done = terminated or truncated
        feedback = {} if done else self._feedback(evaluation)
        self._history.append(
            TurnRecord(
                turn=turn,
                answers=dict(self._current),
                invalid=dict(self._current_invalid),
                evaluation=evaluation,
                feedback=feedback,
            )
        )
        infos = {
            agent: {
                **self._step_info(agent, acting, turn),
                **evaluation.info,
                "evaluated": True,
                "success": terminated,
                "solved": terminated,
                "score": round(evaluation.score, 6),
            }
            for agent in agents
        }
        self._current = {}
        self._current_invalid = {}
        self._position = 0
        if done:
            self._done = True
            self._outcome = self._outcome_text(evaluation, turn)
            self.agents = []
        else:
            self._turn += 1
        # Observations after the episode ends (``self.agents`` already empty) show the outcome.
        observations = self._observe_all(agents)
        return self._step_result(agents, observations, reward, terminated, truncated, infos)

    _EPISODE_FIELDS = ("_index", "_turn", "_position", "_last_basis", "_done", "_outcome", "_started")

    def save_episode(self) -> dict[str, Any]:
        """The episode's state as plain data: `restore_episode` brings the env back to it. Branching
        from one state (MAGRPO's tree) restores and steps the same env again and again; the
        sandbox pool and the problems are shared, never copied."""
        state: dict[str, Any] = {k: getattr(self, k) for k in self._EPISODE_FIELDS}
        state.update(current=dict(self._current), current_invalid=dict(self._current_invalid),
                     history=list(self._history), invalid_counts=dict(self.invalid_counts),
                     agents=list(self.agents))
        return state

    def restore_episode(self, state: Mapping[str, Any]) -> None:
        """Return to a `save_episode` of this env (turn records are never mutated, so sharing
        them between saved states is safe)."""
        for k in self._EPISODE_FIELDS:
            setattr(self, k, state[k])
        self._current = dict(state["current"])
        self._current_invalid = dict(state["current_invalid"])
        self._history = list(state["history"])
        self.invalid_counts = dict(state["invalid_counts"])
        self.agents = list(state["agents"])

    def render(self) -> None:
        """Text envs have nothing to draw; observations carry everything."""

    def close(self) -> None:
        """Drop the episode and the expert model this env built (the shared sandbox pool stays
        up for other envs and is closed at exit)."""
        super().close()
        if self._expert is not None:
            self._expert.close()

    # ----------------------------------------------------------------- marlang API

    @property
    def max_steps(self) -> int:
        """The number of turns of an episode."""
        return self._max_turns

    @property
    def max_env_steps(self) -> int:
        """Env steps of a full episode: turns x agents (sequential) or turns (joint)."""
        per_turn = self.n_agents if self.structure == "sequential" else 1
        return self._max_turns * per_turn

    @property
    def current_problem(self) -> Any:
        """The problem of the current episode (it holds the hidden tests and references:
        never show it to agents)."""
        return self.problems[self._index]

    @property
    def turn(self) -> int:
        """The current turn, 1-based."""
        return self._turn + 1

    @property
    def history(self) -> tuple[TurnRecord, ...]:
        return tuple(self._history)

    @property
    def mission(self) -> str:
        return self._mission()

    def acting_agents(self) -> list[str]:
        """Who answers at the next step."""
        if self._done or not self._started:
            return []
        if self.structure == "sequential":
            return [self.possible_agents[self._position]]
        return list(self.possible_agents)

    def role(self, agent: str) -> str:
        """``draft``/``final`` (sequential), ``helper``/``main`` (joint coding), ``solver``
        (joint math and QA)."""
        index = self.possible_agents.index(agent)
        if self.structure == "sequential":
            return "final" if index == self.n_agents - 1 else "draft"
        return self._joint_role(index)

    def observe(self, agent: str) -> TextObservation:
        """The agent's observation now (what ``reset``/``step`` return for it)."""
        self._require_started("observe")
        problem = self.current_problem
        acting = agent in self.acting_agents()
        data: dict[str, Any] = {
            "answer_format": self.answer_format,
            "entry_point": self._entry_point(),
            "role": self.role(agent),
            "turn": self.turn if not self._done else len(self._history),
            "max_turns": self._max_turns,
            "task_id": str(problem.task_id),
            "structure": self.structure,
            "acting": acting,
            "agent": agent,
            "problem": self._problem_statement(),
        }
        data.update(self._extra_data(agent))
        if self._done:
            text = f"The episode is over: {self._outcome}"
            legal = [WAIT]
        elif acting:
            text = self._acting_text(agent)
            legal = []
        else:
            text = self._waiting_text(agent)
            legal = [WAIT]
        return TextObservation(text=text, mission=self._mission(), legal_actions=legal, data=data)

    def narrator(self) -> CooperativeTaskNarrator:
        """Tells this env's episodes in words for learners (never hidden tests or references)."""
        return CooperativeTaskNarrator(self)

    def scripted_team(self) -> ReferenceTaskTeam:
        """A reference team answering with the canonical solution / reference answer."""
        return ReferenceTaskTeam(self)

    def reference_answer(self, agent: str) -> str:
        """What the reference team's ``agent`` answers now (hidden data: for scripted teams)."""
        raise NotImplementedError

    # ----------------------------------------------------------------- for subclasses

    def _check_setup(self) -> None:
        """Validate task-specific combinations of parameters (before problems are loaded)."""

    def _evaluate(self, answers: dict[str, str]) -> TurnEvaluation:
        raise NotImplementedError

    def _feedback(self, evaluation: TurnEvaluation) -> dict[str, str]:
        raise NotImplementedError

    def _normalize_answer(self, text: str) -> str:
        return text.strip()

    def _entry_point(self) -> str | None:
        return None

    def _extra_data(self, agent: str) -> dict[str, Any]:
        return {}

    def _joint_role(self, index: int) -> str:
        return "solver"

    def _mission(self) -> str:
        raise NotImplementedError

    def _problem_statement(self) -> str:
        raise NotImplementedError

    def _problem_text(self) -> str:
        return self._problem_statement()

    def _instruction(self, agent: str) -> str:
        raise NotImplementedError

    def _render_answer(self, answer: str) -> str:
        return answer if answer.strip() else "(no answer)"

    def _team_answer_note(self, record: TurnRecord) -> str | None:
        """A line on the judged answer where it is not simply one agent's (the vote)."""
        return None

    def _outcome_text(self, evaluation: TurnEvaluation, turn: int) -> str:
        raise NotImplementedError

    # ----------------------------------------------------------------- internals

    def _problem_index(self, choice: Any) -> int:
        if is_integer(choice) and 0 <= int(choice) < len(self.problems):
            return int(choice)
        if isinstance(choice, str) and choice in self._by_task_id:
            return self._by_task_id[choice]
        raise ValueError(
            f"options['problem'] must be an index in 0..{len(self.problems) - 1} or a task id "
            f"such as {str(self.problems[0].task_id)!r}, got {choice!r}"
        )

    def _read_answer(self, action: Any) -> tuple[str, bool]:
        if not isinstance(action, str):
            return "", True
        answer = self._normalize_answer(action)
        return (answer, False) if answer.strip() else ("", True)

    def _step_info(self, agent: str, acting: list[str], turn: int) -> dict[str, Any]:
        return {
            "success": False,
            "evaluated": False,
            "turn": turn,
            "role": self.role(agent),
            "acting": agent in acting,
            "invalid": bool(agent in acting and self._current_invalid.get(agent)),
            "invalid_count": sum(self.invalid_counts.values()),
        }


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")


# ------------------------------------------------------------------------------ reference team


class ReferenceTaskTeam(ScriptedTeam):
    """The reference team: every acting agent answers with the canonical solution (coding;
    split into helper and main parts under ``structure="joint"``) or the reference answer
    (math, QA), and waiting agents wait. It solves every problem whose reference is right.

    Usage: ``team = env.scripted_team(); obs, _ = env.reset(seed=0); team.reset()``, then
    ``env.step(team.act(obs))`` until the episode ends.
    """

    env: CooperativeTaskEnv

    def choose(self, agent: str, observation: TextObservation) -> str:
        if observation.legal_actions:
            return observation.legal_actions[0]
        return self.env.reference_answer(agent)
