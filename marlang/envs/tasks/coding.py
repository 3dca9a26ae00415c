"""The cooperative coding env (HumanEval, MBPP, CoopHumanEval): a team writes a Python
function, the sandbox runs it against the problem's hidden tests, and the share of tests
passed is the team's quality; joint teams write helper functions plus the main function.
``judge_code`` gives that verdict for one answer outside an episode (an app's reward).
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from marlang.envs.tasks.cooperative import (
    CooperativeTaskEnv,
    Problems,
    TurnEvaluation,
    TurnRecord,
)
from marlang.envs.tasks.data import HELPER_FUNCTION_NAME, CodeProblem
from marlang.envs.tasks.feedback import (
    REWARD_MODES,
    CodeCheck,
    CodeFacts,
    code_feedback,
    code_from_answer,
    diagnose_tests,
    expert_prompt,
    fenced,
)
from marlang.envs.tasks.levelled import (
    HelperUsage,
    analyze_code,
    claims_cooperation,
    helper_does_work,
    helper_usage,
    levelled_reward,
    real_helpers,
)

if TYPE_CHECKING:
    from marlang.sandbox import HelperProbe, Sandbox, SandboxLimits, SandboxResult

logger = logging.getLogger(__name__)

RUN_SECONDS = 10.0
"""Wall-clock (and CPU) seconds for one whole run of a team's program and its hidden tests."""
TEST_SECONDS = 3.0
"""Seconds for one hidden test."""
DISK_MB = 64
"""Most MiB a team's program may write."""

NO_HELPER = "# no helper needed"
"""The reference team's helper answer when the canonical solution has nothing but the main
function."""

_IMPORT_LINE = re.compile(r"^(?:from\s+[\w.]+\s+import\s+.+|import\s+[\w.]+(?:\s*,\s*[\w.]+)*)$")


def helper_names(n_agents: int) -> tuple[str, ...]:
    """The helper function each non-last agent writes under ``structure="joint"``: ``aux``
    for a pair, ``aux_0``, ``aux_1``, ... (by agent index) for larger teams."""
    if n_agents == 2:
        return (HELPER_FUNCTION_NAME,)
    return tuple(f"{HELPER_FUNCTION_NAME}_{i}" for i in range(n_agents - 1))


def program_prefix(prompt: str) -> str:
    """What goes before the team's code: the whole prompt when it is Python (HumanEval-style
    signature and docstring, with the imports and given helpers), else its import lines."""
    if analyze_code(prompt).compiles:
        return prompt.rstrip()
    lines = [line.strip() for line in prompt.splitlines() if _IMPORT_LINE.match(line.strip())]
    return "\n".join(line for line in lines if analyze_code(line).compiles)


def split_reference(program: str, entry_point: str) -> tuple[str, str]:
    """(helper part, main part) of a complete program: the entry-point function, and every
    other top-level statement (imports, helpers) for the helper agent."""
    try:
        tree = ast.parse(program)
    except SyntaxError:
        return "", program
    helper: list[str] = []
    main: list[str] = []
    for node in tree.body:
        segment = _segment(program, node)
        is_main = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.name == entry_point
        )
        (main if is_main else helper).append(segment)
    if not main:
        return "", program
    return "\n\n".join(helper), "\n\n".join(main)


def _segment(source: str, node: ast.stmt) -> str:
    lines = source.splitlines()
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(lines[start - 1 : node.end_lineno])


def code_limits(
    timeout: float = RUN_SECONDS, test_timeout: float = TEST_SECONDS, disk_mb: int = DISK_MB
) -> SandboxLimits:
    """The sandbox limits a team's code is judged under (a test never outlasts the run)."""
    from marlang.sandbox import SandboxLimits

    return SandboxLimits(
        wall_seconds=timeout,
        cpu_seconds=timeout,
        test_timeout=min(test_timeout, timeout),
        disk_mb=disk_mb,
    )


def judge_code(problem: CodeProblem, answer: str, *, sandbox: Sandbox | None = None) -> CodeCheck:
    """Judge one answer to a coding problem as ``CodeTaskEnv`` judges a sequential team's final
    code: the code in the answer after the prompt's prefix, run against the hidden tests in
    ``sandbox`` (None: the shared pool under ``code_limits()``, the env's default).

    ``check.pass_rate`` is the share of hidden tests passed, the env's ``pass_rate`` info.
    """
    if sandbox is None:
        from marlang.sandbox import shared_sandbox

        sandbox = shared_sandbox(limits=code_limits())
    code = code_from_answer(answer)
    program = _program_layout(problem.prompt, [], code)[0]
    facts = _located_facts(program, [("", code)])
    check, _ = _check_program(
        problem, program, code, answered=bool(code.strip()), facts=facts, sandbox=sandbox
    )
    return check


def _program_layout(
    prompt: str, helper_codes: Sequence[str], main: str
) -> tuple[str, list[tuple[int, int] | None]]:
    """The program the sandbox runs: the prompt's prefix, then the helpers' code, then the main
    function's, each answer that is not blank; and the (first, last) line of each helper
    answer in it (None for a blank one)."""
    prefix = program_prefix(prompt)
    chunks = [prefix] if prefix else []
    lines: list[tuple[int, int] | None] = []
    for code in [*helper_codes, main]:
        if not code.strip():
            lines.append(None)
            continue
        first = 1 + sum(chunk.count("\n") + 3 for chunk in chunks)
        lines.append((first, first + code.count("\n")))
        chunks.append(code)
    return "\n\n\n".join(chunks), lines[: len(helper_codes)]


def _located_facts(program: str, writers: Sequence[tuple[str, str]]) -> CodeFacts:
    """The program's static facts; a syntax error is placed in the code of the writer (a
    label, "" for none, and their code) that made it, with line numbers of that code."""
    facts = analyze_code(program)
    if facts.compiles:
        return facts
    for label, code in writers:
        own = analyze_code(code)
        if code.strip() and not own.compiles and not _continues_stub(code):
            where = f"{label}'s code, " if label else ""
            return CodeFacts(False, f"{where}{own.syntax_error}", facts.functions)
    return facts


def _check_program(
    problem: CodeProblem,
    program: str,
    main: str,
    *,
    answered: bool,
    facts: CodeFacts,
    sandbox: Sandbox,
    usage: HelperUsage | None = None,
    helper_names: tuple[str, ...] = (),
    probe: HelperProbe | None = None,
) -> tuple[CodeCheck, SandboxResult | None]:
    """Run ``program`` against the problem's hidden tests (nothing runs for an unanswered
    one) and the check built from the run, with the sandbox's result."""
    tests = tuple(problem.tests)
    if not answered:
        check = CodeCheck(
            answered=False, entry_point=problem.entry_point, facts=facts, status="no_answer",
            passed=0, total=len(tests), usage=usage, helper_names=helper_names,
        )
        return check, None
    extra = {"probe": probe} if probe is not None else {}
    result = sandbox.run_tests(program, tests, setup=problem.test_setup or "", **extra)
    diagnostics = diagnose_tests(result, tests)
    status = str(result.status)
    check = CodeCheck(
        answered=True,
        entry_point=problem.entry_point,
        facts=facts,
        status=status,
        passed=sum(t.passed for t in diagnostics),
        total=len(tests),
        entry_defined=_defines(main, problem.entry_point),
        error_type=result.error_type if status != "ok" else None,
        message=_hide(result.message, tests) if status != "ok" else None,
        tests=diagnostics,
        usage=usage,
        helper_names=helper_names,
    )
    return check, result


class CodeTaskEnv(CooperativeTaskEnv):
    """A team writing one Python function per episode (``CodeProblem``s from
    ``marlang.envs.tasks.data``), judged by running the problem's hidden tests in the sandbox.

    The program run is the problem's prompt when it is Python (so its imports and given
    helper functions are defined; a full ``def`` of the entry point replaces the stub) or
    its import lines, then the team's code. ``structure="sequential"``: the last agent's
    code. ``structure="joint"``: every agent but the last writes a helper function (named
    ``aux``, or ``aux_<i>`` with more than two agents) and the last writes the entry point,
    which may call them; the program is prompt + helpers + main.

    Quality is the share of hidden tests passed; the reward is its improvement over the
    previous judged turn (``reward="tests"``) or, for joint teams with ``reward="levelled"``,
    the improvement of the levelled reward (0..4, see ``feedback.LevelledReward``),
    which joint teams always get in ``infos[agent]["levelled_reward"]``.

    The levelled reward's cooperation points need the team's code (the main function's
    returned value computed from a real helper's result) and, when it reads so, two more runs
    of the hidden tests with the helpers wrapped: one passing their results on, one passing on
    a different value of the same type (``marlang.sandbox.HelperProbe``). The helper must
    have run without raising while main ran, and main's results must match the judged run's
    in the first and change in the second (``levelled.helper_does_work``).

    Judged steps' infos: ``passed``, ``total``, ``pass_rate``, ``solved``, ``status``,
    ``report`` (the sandbox's full report: hidden test sources included, so narrators and
    critics must skip it), ``levelled_reward`` (joint), ``invalid``, ``invalid_count``,
    ``turn``.
    """

    world_description: ClassVar[str] = "a team of programmers writing Python functions"
    answer_format: ClassVar[str] = "code"
    kind: ClassVar[str] = "code"
    default_turns: ClassVar[int] = 2

    def __init__(
        self,
        problems: Problems,
        *,
        reward: str = "tests",
        sandbox: Any = None,
        sandbox_workers: int | None = None,
        timeout: float = RUN_SECONDS,
        test_timeout: float = TEST_SECONDS,
        isolation: str = "auto",
        disk_mb: int = DISK_MB,
        **kwargs: Any,
    ):
        """
        Args:
            problems: ``CodeProblem``s, or a callable returning them (called after the
                parameters are checked).
            reward: ``"tests"`` (share of tests passed) or ``"levelled"`` (joint only).
            sandbox: a ``marlang.sandbox.Sandbox`` to use; None shares the process-wide pool
                for (limits, ``sandbox_workers``).
            timeout: wall-clock seconds for one whole run (program and all tests).
            test_timeout: seconds for one test.
            isolation: the shared pool's isolation level (``sandbox.isolation`` in a config):
                ``"auto"``, the strongest that confines the program, or a level name;
                ``"rlimits"``, no security boundary, runs only when named.
            disk_mb: most MiB a program may write (``sandbox.disk_mb``).
            **kwargs: ``CooperativeTaskEnv``'s parameters.
        """
        if reward not in REWARD_MODES:
            raise ValueError(
                f"reward must be one of {', '.join(map(repr, REWARD_MODES))}; got {reward!r}"
            )
        for name, value in (("timeout", timeout), ("test_timeout", test_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if sandbox_workers is not None and (
            isinstance(sandbox_workers, bool)
            or not isinstance(sandbox_workers, int)
            or sandbox_workers < 1
        ):
            raise ValueError(
                f"sandbox_workers must be a positive integer or None, got {sandbox_workers!r}"
            )
        self.reward = reward
        self._sandbox = sandbox
        self._sandbox_workers = sandbox_workers
        self._timeout = float(timeout)
        self._test_timeout = float(test_timeout)
        from marlang.sandbox.isolation import check_isolation_name

        check_isolation_name(isolation)
        if isinstance(disk_mb, bool) or not isinstance(disk_mb, int) or disk_mb < 1:
            raise ValueError(f"disk_mb must be a positive integer, got {disk_mb!r}")
        self._isolation = isolation
        self._disk_mb = disk_mb
        super().__init__(problems, **kwargs)
        self.helper_names: tuple[str, ...] = (
            helper_names(self.n_agents) if self.structure == "joint" else ()
        )

    def _check_setup(self) -> None:
        if self.structure == "joint" and self.n_agents < 2:
            raise ValueError(
                "structure='joint' coding needs n_agents >= 2 (helper writers and the main "
                f"function's writer), got {self.n_agents}"
            )
        if self.reward == "levelled" and self.structure != "joint":
            raise ValueError(
                "reward='levelled' is only defined for structure='joint' coding; use "
                "reward='tests' with structure='sequential'"
            )

    # ----------------------------------------------------------------- sandbox

    @property
    def sandbox(self) -> Any:
        """The sandbox that runs the team's code (the shared pool unless one was given)."""
        if self._sandbox is None:
            from marlang.sandbox import shared_sandbox

            limits = code_limits(self._timeout, self._test_timeout, self._disk_mb)
            self._sandbox = shared_sandbox(
                limits=limits, workers=self._sandbox_workers, isolation=self._isolation
            )
        return self._sandbox

    # ----------------------------------------------------------------- task specifics

    def _entry_point(self) -> str:
        return self.current_problem.entry_point

    def _joint_role(self, index: int) -> str:
        return "main" if index == self.n_agents - 1 else "helper"

    def _extra_data(self, agent: str) -> dict[str, Any]:
        if self.structure != "joint":
            return {}
        index = self.possible_agents.index(agent)
        if index < self.n_agents - 1:
            return {"helper_name": self.helper_names[index]}
        return {"helper_names": list(self.helper_names)}

    def _normalize_answer(self, text: str) -> str:
        return code_from_answer(text)

    def _mission(self) -> str:
        return (
            f"Write the Python function `{self._entry_point()}` that solves the problem; the "
            "team's code is run against hidden unit tests."
        )

    def _problem_statement(self) -> str:
        return self.current_problem.prompt

    def _problem_text(self) -> str:
        problem = self.current_problem
        prompt = problem.prompt.strip("\n")
        body = fenced(prompt) if analyze_code(prompt).compiles else prompt
        return f"Problem {problem.task_id}:\n{body}"

    def _render_answer(self, answer: str) -> str:
        return fenced(answer) if answer.strip() else "(no answer)"

    def _instruction(self, agent: str) -> str:
        entry = f"`{self._entry_point()}`"
        index = self.possible_agents.index(agent)
        last = self.possible_agents[-1]
        if self.structure == "sequential":
            if index == self.n_agents - 1:
                return (
                    f"Write the team's final code: the complete Python function {entry}, with "
                    "the imports and helper functions it needs. It is run against hidden tests."
                )
            return (
                f"Write a complete Python solution: the function {entry} with the imports and "
                f"helpers it needs. The agents after you see it; {last} gives the final code."
            )
        names = ", ".join(f"`{n}`" for n in self.helper_names)
        if index < self.n_agents - 1:
            name = self.helper_names[index]
            task = (self.current_problem.helper_prompt or "").strip()
            if name != HELPER_FUNCTION_NAME:
                # The datasets' helper texts name the single helper of a pair.
                task = task.replace(f"`{HELPER_FUNCTION_NAME}`", f"`{name}`")
            task = task or (
                f"Write only the helper function `{name}` (with any imports it needs), "
                f"not {entry}."
            )
            return (
                f"{task}\n{last} writes {entry} at the same time and can call `{name}`; the "
                "team's code is joined into one program and run against hidden tests."
            )
        writers = self.possible_agents[:-1]
        who = (
            f"{writers[0]} writes the helper function {names}"
            if len(writers) == 1
            else f"{', '.join(writers)} write the helper functions {names}"
        )
        return (
            f"Write the function {entry}. {who} at the same time; call them from {entry} "
            "where they help, and do not define them yourself. The helpers and your function "
            "are joined into one program and run against hidden tests."
        )

    def reference_answer(self, agent: str) -> str:
        problem = self.current_problem
        canonical = problem.canonical_solution
        if self.structure == "sequential":
            return canonical
        index = self.possible_agents.index(agent)
        helper, main = split_reference(canonical, problem.entry_point)
        if index == self.n_agents - 1:
            return main
        return helper if index == 0 and helper.strip() else NO_HELPER

    # ----------------------------------------------------------------- judging

    def _evaluate(self, answers: dict[str, str]) -> TurnEvaluation:
        problem = self.current_problem
        last = self.possible_agents[-1]
        main = answers.get(last, "")
        helpers = [
            (name, answers.get(agent, ""))
            for name, agent in zip(self.helper_names, self.possible_agents[:-1], strict=False)
        ]
        answered = bool(main.strip()) or any(code.strip() for _, code in helpers)
        program = self._program([code for _, code in helpers], main)
        usage = (
            helper_usage(main, problem.entry_point, self.helper_names)
            if self.structure == "joint"
            else None
        )
        probe = None
        if answered and self.structure == "joint":
            from marlang.sandbox import HelperProbe

            # A joint team's judged run also records main's results, for the helper runs.
            probe = HelperProbe(problem.entry_point)
        check, result = _check_program(
            problem, program, main, answered=answered, facts=self._facts(program, answers),
            sandbox=self.sandbox, usage=usage, helper_names=self.helper_names, probe=probe,
        )
        report = result.to_dict() if result is not None else None
        pass_rate = check.pass_rate
        info: dict[str, Any] = {
            "passed": check.passed,
            "total": check.total,
            "pass_rate": round(pass_rate, 6),
            "status": check.status,
            "report": report,
        }
        basis = pass_rate
        if self.structure == "joint":
            works = report is not None and claims_cooperation(
                helpers, main, problem.entry_point, loads=check.loads, passed=check.passed
            ) and self._helper_works(helpers, main, result)
            levelled = levelled_reward(
                helpers, main, problem.entry_point, loads=check.loads,
                passed=check.passed, total=check.total, helper_works=works,
            )
            info["levelled_reward"] = levelled.to_dict()
            if self.reward == "levelled":
                basis = levelled.total
        return TurnEvaluation(
            team_answer=program, score=pass_rate, basis=basis, solved=check.solved,
            check=check, info=info,
        )

    def _program(self, helper_codes: list[str], main: str) -> str:
        """The program the sandbox runs: the prompt's prefix, then the helpers' code, then
        the main function's, each answer that is not blank."""
        return self._layout(helper_codes, main)[0]

    def _layout(
        self, helper_codes: list[str], main: str
    ) -> tuple[str, list[tuple[int, int] | None]]:
        """The program (see ``_program``) and the (first, last) line of each helper answer in
        it (None for a blank one)."""
        return _program_layout(self.current_problem.prompt, helper_codes, main)

    def _helper_works(self, helpers: list[tuple[str, str]], main: str, judged: Any) -> bool:
        """Run the hidden tests twice more with the real helpers wrapped, passing their
        results on and then changing them (``HelperProbe``), and judge the three runs."""
        from marlang.sandbox import HelperProbe

        program, lines = self._layout([code for _, code in helpers], main)
        real = set(real_helpers(helpers))
        names = {name: span for (name, _), span in zip(helpers, lines, strict=True)
                 if span is not None and name in real}
        if not names:
            return False
        problem = self.current_problem
        setup = problem.test_setup or ""
        control, perturbed = self.sandbox.run_many([
            (program, list(problem.tests), setup, HelperProbe(problem.entry_point, names)),
            (program, list(problem.tests), setup,
             HelperProbe(problem.entry_point, names, perturb=True)),
        ])
        return helper_does_work(judged, control, perturbed)

    def _facts(self, program: str, answers: dict[str, str]) -> CodeFacts:
        """The combined program's static facts; a syntax error is placed in the code of the
        agent that made it, with line numbers of that agent's answer."""
        if self.structure == "joint":
            writers = [(agent, answers.get(agent, "")) for agent in self.possible_agents]
        else:
            writers = [("", answers.get(self.possible_agents[-1], ""))]
        return _located_facts(program, writers)

    def _feedback(self, evaluation: TurnEvaluation) -> dict[str, str]:
        check = evaluation.check
        assert isinstance(check, CodeCheck)
        edits = None
        if self.feedback == "expert_edits" and self._expert is not None:
            diagnostics = code_feedback(check, "level_feedback", self.sandbox_slice)
            request = expert_prompt(
                self.current_problem.prompt,
                fenced(_team_code(evaluation.team_answer, self.current_problem.prompt)),
                diagnostics,
                kind="code",
            )
            edits, error = self._expert.propose(request)
            if error:
                evaluation.info["expert_error"] = error
        last = self.possible_agents[-1]
        return {
            agent: code_feedback(
                check, self.feedback, self.sandbox_slice, for_main=agent == last,
                expert_edits=edits,
            )
            for agent in self.possible_agents
        }

    def _team_answer_note(self, record: TurnRecord) -> str | None:
        return None

    def _outcome_text(self, evaluation: TurnEvaluation, turn: int) -> str:
        check = evaluation.check
        assert isinstance(check, CodeCheck)
        if evaluation.solved:
            every = "its hidden test" if check.total == 1 else f"all {check.total} hidden tests"
            return f"the team's code passed {every} on turn {turn}."
        return (
            f"no turns left; the team's last code passed {check.passed} of {check.total} "
            "hidden tests."
        )


def _defines(code: str, entry_point: str) -> bool:
    """Whether the answer defines the entry point (or continues the prompt's stub: an
    indented function body, as HumanEval completions are)."""
    return entry_point in analyze_code(code).functions or _continues_stub(code)


def _continues_stub(code: str) -> bool:
    """An indented first line: a function body meant to follow the prompt's signature."""
    first = next((line for line in code.splitlines() if line.strip()), "")
    return first[:1] in (" ", "\t")


def _hide(message: str | None, tests: tuple[str, ...]) -> str | None:
    if not message:
        return None
    for source in tests:
        if len(source.strip()) >= 4:
            message = message.replace(source.strip(), "<hidden test>")
    return message


def _team_code(program: str, prompt: str) -> str:
    """The program without the prompt prefix (what the team wrote)."""
    prefix = program_prefix(prompt)
    if prefix and program.startswith(prefix):
        return program[len(prefix) :].strip("\n")
    return program
