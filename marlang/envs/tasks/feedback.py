"""Judging a cooperative team's answers: static checks of Python code, the levelled reward for
helper + main programs, and the feedback texts the next turn sees (``level_feedback``,
``level_passed``, ``passed``, ``plain``, ``expert_edits``). No text built here ever contains a
hidden test's source, a canonical solution or a reference answer.
"""

from __future__ import annotations

import ast
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

logger = logging.getLogger(__name__)

STRUCTURES: tuple[str, ...] = ("sequential", "joint")
FEEDBACK_MODES: tuple[str, ...] = (
    "level_feedback",
    "passed",
    "level_passed",
    "plain",
    "expert_edits",
)
MEMORY_MODES: tuple[str, ...] = ("full", "last")
REWARD_MODES: tuple[str, ...] = ("tests", "levelled")

DIAGNOSTIC_CHARS = 300
"""Longest error message or value shown for one test in feedback."""

LEVELLED_MAX = 4.0
"""Highest levelled reward: structure 1.0 + syntax 0.5 + tests 1.0 + cooperation 1.5."""

ABLATIONS: tuple[str, ...] = ("frozen", "passthrough")
"""The two ways the cooperation check takes the helpers' work away: each helper always returns
its first result (a constant, or a result nobody uses, then changes nothing), or returns its
first argument unchanged (a pass-through changes nothing)."""

_ABLATION_SOURCE = """
import types
def make(real, mode):
    first = []
    def helper(*args, **kwargs):
        if mode == "passthrough":
            return args[0] if args else None
        if not first:
            first.append(real(*args, **kwargs))
        return first[0]
    return helper
ablated = make(real, mode)
if type(real) is types.FunctionType:
    code = ablated.__code__.replace(
        co_name=real.__code__.co_name, co_qualname=real.__code__.co_qualname,
        co_filename=real.__code__.co_filename, co_firstlineno=real.__code__.co_firstlineno)
    ablated = types.FunctionType(code, real.__globals__, real.__name__, None,
                                 ablated.__closure__)
for name in ("__name__", "__qualname__", "__doc__", "__module__"):
    try:
        setattr(ablated, name, getattr(real, name))
    except (AttributeError, TypeError):
        pass
ablated.__dict__.update(getattr(real, "__dict__", {}))
"""


def ablate(code: str, names: Sequence[str], mode: str) -> str:
    """``code`` (one helper agent's answer) with each top-level function in ``names`` taken
    away as ``mode`` says, right where it is defined. The rebinding runs in a namespace of its
    own, so the program's globals gain no name; the replacement keeps the helper's name,
    qualified name, module, globals and docstring, and the code after the definition (the
    main function included) never sees the helper itself, so a program cannot tell the
    checking runs from the judged one by a marker, a snapshot or a name."""
    if mode not in ABLATIONS:
        raise ValueError(f"mode must be one of {list(ABLATIONS)}, got {mode!r}")
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    after: dict[int, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names:
            rebind = (f"{node.name} = (lambda space: (exec({_ABLATION_SOURCE!r}, space), "
                      f"space['ablated'])[1])({{'real': {node.name}, 'mode': {mode!r}}})")
            after.setdefault(node.end_lineno, []).append(rebind)
    lines = code.splitlines()
    out: list[str] = []
    for number, line in enumerate(lines, start=1):
        out.append(line)
        out.extend(after.get(number, ()))
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ sandbox slice


def check_sandbox_slice(value: Any) -> int | None:
    """The window of hidden tests whose diagnostics feedback may show: ``k > 0`` the first k,
    ``k < 0`` the last |k|, ``0``/``None``/``"all"`` every test (returned as None)."""
    if value is None or value == "all":
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(  # noqa: TRY004 - a config value: every bad one is a ValueError
            f"sandbox_slice must be an integer (k > 0: first k tests, k < 0: last |k|), 0, None "
            f"or 'all', got {value!r}"
        )
    return None if value == 0 else int(value)


def sliced_indices(n_tests: int, sandbox_slice: int | None) -> list[int]:
    """Indices of the tests in the ``sandbox_slice`` window out of ``n_tests``."""
    if sandbox_slice is None:
        return list(range(n_tests))
    if sandbox_slice > 0:
        return list(range(min(sandbox_slice, n_tests)))
    return list(range(max(0, n_tests + sandbox_slice), n_tests))


def describe_slice(n_tests: int, sandbox_slice: int | None) -> str:
    """'the first hidden test', 'the last 2 of 7 hidden tests', 'all 7 hidden tests'."""
    k = len(sliced_indices(n_tests, sandbox_slice))
    if k == n_tests:
        return "the hidden test" if n_tests == 1 else f"all {n_tests} hidden tests"
    side = "first" if sandbox_slice is not None and sandbox_slice > 0 else "last"
    return f"the {side} hidden test" if k == 1 else f"the {side} {k} of {n_tests} hidden tests"


# ------------------------------------------------------------------------------ static facts


@dataclass(frozen=True)
class CodeFacts:
    """What parsing (never running) a Python answer shows."""

    compiles: bool
    syntax_error: str | None = None
    """'line 3: invalid syntax' when it does not compile."""
    functions: frozenset[str] = frozenset()
    """Names of the top-level functions it defines."""
    returning: frozenset[str] = frozenset()
    """Top-level functions with a ``return <value>`` (or ``yield``) in their body."""


def analyze_code(code: str) -> CodeFacts:
    """Parse ``code`` (a program or a fragment of one) without running it."""
    try:
        tree = ast.parse(code)
        compile(tree, "<answer>", "exec")
    except SyntaxError as error:
        where = f"line {error.lineno}: " if error.lineno else ""
        return CodeFacts(False, f"{where}{error.msg}")
    except (ValueError, RecursionError, MemoryError) as error:
        return CodeFacts(False, f"{type(error).__name__}: {error}"[:DIAGNOSTIC_CHARS])
    functions = _top_level_functions(tree)
    returning = {name for name, node in functions.items() if _returns_value(node)}
    return CodeFacts(True, None, frozenset(functions), frozenset(returning))


def _top_level_functions(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }


def _returns_value(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Return) and n.value is not None)
        or isinstance(n, (ast.Yield, ast.YieldFrom))
        for n in ast.walk(node)
    )


def _body_without_docstring(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(node.body)
    first = body[0] if body else None
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str):
        body = body[1:]
    return body


def _called_names(node: ast.AST) -> set[str]:
    return {
        n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


@dataclass(frozen=True)
class HelperUsage:
    """How the main function uses the helpers written by teammates (joint coding)."""

    called: tuple[str, ...] = ()
    """Helper names the main function calls."""
    thin_wrapper: bool = False
    """The main function only returns a helper's result (``return aux(x)`` or
    ``r = aux(x); return r``): the helper did all the work."""
    ignored_calls: int = 0
    """Helper calls whose result is thrown away (a bare ``aux(x)`` statement)."""


def helper_usage(main_code: str, entry_point: str, helper_names: Sequence[str]) -> HelperUsage:
    """Which of ``helper_names`` the function ``entry_point`` in ``main_code`` calls, and how."""
    try:
        tree = ast.parse(main_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return HelperUsage()
    main = _top_level_functions(tree).get(entry_point)
    if main is None:
        return HelperUsage()
    helpers = set(helper_names)
    called = tuple(sorted(_called_names(main) & helpers))
    if not called:
        return HelperUsage()
    ignored = sum(
        1
        for n in ast.walk(main)
        if isinstance(n, ast.Expr)
        and isinstance(n.value, ast.Call)
        and isinstance(n.value.func, ast.Name)
        and n.value.func.id in helpers
    )
    return HelperUsage(called, _is_thin_wrapper(main, helpers), ignored)


def _is_thin_wrapper(main: ast.FunctionDef | ast.AsyncFunctionDef, helpers: set[str]) -> bool:
    def helper_call(value: ast.AST | None) -> bool:
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in helpers
        )

    body = _body_without_docstring(main)
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return helper_call(body[0].value)
    if len(body) == 2 and isinstance(body[0], ast.Assign) and isinstance(body[1], ast.Return):
        targets = body[0].targets
        returned = body[1].value
        return (
            helper_call(body[0].value)
            and len(targets) == 1
            and isinstance(targets[0], ast.Name)
            and isinstance(returned, ast.Name)
            and returned.id == targets[0].id
        )
    return False


# ------------------------------------------------------------------------------ levelled reward


def _inert(node: ast.AST | None) -> bool:
    """A value computed by nothing: a constant, a bare name, or a literal of such."""
    if node is None or isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_inert(element) for element in node.elts)
    if isinstance(node, ast.Dict):
        return all(_inert(k) and _inert(v) for k, v in zip(node.keys, node.values, strict=True))
    return False


def is_trivial_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function that does no work: an empty body, or only ``return`` of a constant, of one
    of its arguments unchanged, or of a literal built from those."""
    body = [
        stmt
        for stmt in _body_without_docstring(node)
        if not isinstance(stmt, ast.Pass)
        and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))
    ]
    if not body:
        return True
    return len(body) == 1 and isinstance(body[0], ast.Return) and _inert(body[0].value)


def real_helpers(helpers: Sequence[tuple[str, str]]) -> list[str]:
    """The helper names whose code defines them with a return value and some real work."""
    names = []
    for name, code in helpers:
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        node = _top_level_functions(tree).get(name)
        if node is not None and _returns_value(node) and not is_trivial_function(node):
            names.append(name)
    return names


@dataclass(frozen=True)
class LevelledReward:
    """The levelled reward of a helper + main program (max ``LEVELLED_MAX`` = 4.0).

    Nothing is paid until something real is earned: the combined program loads and at least
    one hidden test passes (``earned``); until then every level is 0. Then:

    - structure: +0.4 x the share of helpers that are real (defined with a return value and
      more than an empty body or a ``return`` of a constant or an argument unchanged), +0.6 if
      the main answer defines the entry point with a return value; without the entry point
      the levels stop here.
    - syntax: +0.5 (the combined program compiles and loads).
    - tests: + the share of hidden tests passed (0..1).
    - cooperation (only with a real helper the main function calls, and only when the tests
      show its work matters, ``helpers_needed``): +0.5, then +1.0 if the main function is not
      a thin wrapper around it, and -0.5 if it throws a helper's result away.
    """

    structure: float = 0.0
    syntax: float = 0.0
    tests: float = 0.0
    cooperation: float = 0.0
    helper_defined: bool = False
    """A real helper is defined (see above)."""
    main_defined: bool = False
    loads: bool = False
    earned: bool = False
    """The program loaded and at least one hidden test passed."""
    helper_called: bool = False
    helpers_needed: bool = False
    """The passing tests depend on the helpers' work (see ``CodeTaskEnv``'s check)."""
    thin_wrapper: bool = False
    ignored_helper_call: bool = False

    @property
    def total(self) -> float:
        return round(self.structure + self.syntax + self.tests + self.cooperation, 6)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "total": self.total, "max": LEVELLED_MAX}


def levelled_reward(
    helpers: Sequence[tuple[str, str]],
    main_code: str,
    entry_point: str,
    *,
    loads: bool,
    passed: int,
    total: int,
    helpers_needed: bool = False,
) -> LevelledReward:
    """Score one joint answer. ``helpers`` are (helper function name, that agent's code);
    ``loads`` says whether the combined program compiled and loaded in the sandbox;
    ``helpers_needed`` whether the passing tests fail once the helpers' work is taken away
    (the env runs that check)."""
    real = real_helpers(helpers)
    helper_defined = bool(real)
    main_defined = entry_point in analyze_code(main_code).returning
    earned = loads and passed > 0
    flags = {"helper_defined": helper_defined, "main_defined": main_defined, "loads": loads,
             "earned": earned}
    if not earned:
        return LevelledReward(**flags)
    structure = 0.4 * (len(real) / len(helpers)) if helpers else 0.0
    if not main_defined:
        return LevelledReward(structure=round(structure, 6), **flags)
    structure += 0.6
    cooperation = 0.0
    usage = helper_usage(main_code, entry_point, real) if real else HelperUsage()
    needed = bool(usage.called) and helpers_needed
    if needed:
        cooperation += 0.5
        if not usage.thin_wrapper:
            cooperation += 1.0
        if usage.ignored_calls:
            cooperation -= 0.5
    return LevelledReward(
        structure=round(structure, 6),
        syntax=0.5,
        tests=round(passed / total if total else 0.0, 6),
        cooperation=cooperation,
        helper_called=bool(usage.called),
        helpers_needed=needed,
        thin_wrapper=usage.thin_wrapper,
        ignored_helper_call=usage.ignored_calls > 0,
        **flags,
    )


# ------------------------------------------------------------------------------ checks


@dataclass(frozen=True)
class CheckedTest:
    """One hidden test's result as feedback may show it: never the test's source."""

    index: int
    passed: bool
    ran: bool = True
    error_type: str | None = None
    message: str | None = None
    timed_out: bool = False
    expected: str | None = None
    got: str | None = None


@dataclass(frozen=True)
class CodeCheck:
    """A team's code answer after the sandbox ran it: what feedback and infos are built from."""

    answered: bool
    """False when the answer was empty (nothing was run)."""
    entry_point: str
    facts: CodeFacts
    status: str
    """The sandbox's status, or ``"no_answer"``."""
    passed: int
    total: int
    entry_defined: bool = False
    error_type: str | None = None
    message: str | None = None
    """Why the program did not load (status ``error``/``timeout``/``killed``/``crashed``)."""
    tests: tuple[CheckedTest, ...] = ()
    """Every hidden test in order (``ran`` False where the run stopped before it)."""
    usage: HelperUsage | None = None
    """How the main function uses the helpers (joint coding only)."""
    helper_names: tuple[str, ...] = ()

    @property
    def loads(self) -> bool:
        """The program ran to the end of its top level (a run stopped by a time or memory
        limit loaded if any test ran)."""
        if not self.answered or self.status in ("syntax_error", "error", "crashed", "no_answer"):
            return False
        return self.status == "ok" or any(t.ran for t in self.tests)

    @property
    def solved(self) -> bool:
        return self.total > 0 and self.passed == self.total


def diagnose_tests(
    report: Any, tests: Sequence[str], *, hidden_sources: Sequence[str] = ()
) -> tuple[CheckedTest, ...]:
    """One ``CheckedTest`` per hidden test from a sandbox report (a ``SandboxResult``);
    messages lose any hidden test source they quote."""
    by_index = {int(o.index): o for o in (getattr(report, "tests", None) or [])}
    sources = [s for s in (*tests, *hidden_sources) if s and s.strip()]
    out = []
    for index in range(len(tests)):
        outcome = by_index.get(index)
        if outcome is None:
            out.append(CheckedTest(index, passed=False, ran=False))
            continue
        out.append(
            CheckedTest(
                index,
                passed=bool(outcome.passed),
                error_type=outcome.error_type,
                message=_scrub(outcome.message, sources),
                timed_out=bool(outcome.timed_out),
                expected=_clip(outcome.expected),
                got=_clip(outcome.got),
            )
        )
    return tuple(out)


def _scrub(text: str | None, sources: Sequence[str]) -> str | None:
    if not text:
        return None
    for source in sources:
        for variant in {source, source.strip()}:
            if len(variant) >= 4:
                text = text.replace(variant, "<hidden test>")
    return _clip(text)


def _clip(text: str | None, limit: int = DIAGNOSTIC_CHARS) -> str | None:
    if text is None:
        return None
    text = str(text).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class AnswerCheck:
    """A team's math or QA answer against the hidden reference (which is not kept here)."""

    answered: bool
    answer: str
    """The team's final answer as evaluated."""
    correct: bool
    score: float
    """1/0 for math; token F1 for QA."""
    kind: str
    """``"math"`` or ``"qa"``."""


# ------------------------------------------------------------------------------ feedback texts


def code_feedback(
    check: CodeCheck,
    mode: str,
    sandbox_slice: int | None,
    *,
    for_main: bool = True,
    expert_edits: str | None = None,
) -> str:
    """What the team hears about its code answer before the next turn (``mode`` one of
    ``FEEDBACK_MODES``). ``for_main`` adds how the main function used the helpers."""
    if mode == "plain":
        return (
            "Revise the team's previous answer (shown above): check it against the problem "
            "statement and improve it."
        )
    if mode == "expert_edits":
        edits = (expert_edits or "").strip()
        if not edits:
            return "The expert proposed no edits. Revise the team's previous answer if needed."
        return f"An expert reviewed the team's previous answer and proposes these edits:\n{edits}"
    window = sliced_indices(check.total, sandbox_slice)
    checked = [check.tests[i] for i in window if i < len(check.tests)]
    n_passed = sum(t.passed for t in checked)
    scope = describe_slice(check.total, sandbox_slice)
    all_checked = bool(checked) and n_passed == len(checked)
    # The episode goes on only when some hidden test fails, so saying so reveals nothing.
    not_yet = all_checked and not check.solved
    if mode == "passed":
        if not check.answered:
            return "The team gave no answer, so it did not pass."
        verdict = "PASSED" if all_checked else "did NOT pass"
        more = ", but not every hidden test passes yet" if not_yet else ""
        return f"The team's answer {verdict} {scope}{more}."
    if not check.answered:
        return "The team gave no answer: write the complete function next turn."
    lines = _code_levels(check, detailed=mode == "level_feedback")
    if check.facts.compiles and check.loads:
        lines.append(f"- Tests: {n_passed} of {len(checked)} passed ({scope} checked).")
        if mode == "level_feedback":
            lines += [_test_line(t) for t in checked if not t.passed]
        if not_yet:
            lines.append("- Not every hidden test passes yet (the checked ones do).")
    if for_main and check.usage is not None and check.helper_names:
        lines.append(_usage_line(check))
    return "\n".join(["Checks of the team's answer:", *lines])


def _code_levels(check: CodeCheck, *, detailed: bool) -> list[str]:
    if not check.facts.compiles:
        detail = f" ({check.facts.syntax_error})" if detailed and check.facts.syntax_error else ""
        return [f"- Syntax: ERROR{detail}; nothing was run."]
    lines = ["- Syntax: OK."]
    entry = f"`{check.entry_point}`"
    lines.append(
        f"- Function {entry}: {'defined' if check.entry_defined else 'NOT defined at top level'}."
    )
    reason = ""
    if detailed and (check.error_type or check.message):
        joiner = ": " if check.error_type and check.message else ""
        reason = f": {check.error_type or ''}{joiner}{check.message or ''}"
    stopped = {
        "timeout": "the program ran out of time",
        "killed": "the program was killed (a memory, process or file limit)",
        "crashed": "the sandbox could not run it",
    }
    if not check.loads:
        what = stopped.get(check.status, "the program raised while loading")
        lines.append(f"- Loading: FAILED, {what}{_clip(reason) or ''}.")
    else:
        lines.append("- Loading: OK.")
        if check.status in stopped:
            lines.append(f"- The run was stopped: {stopped[check.status]}{_clip(reason) or ''}.")
    return lines


def _test_line(test: CheckedTest) -> str:
    label = f"  - test {test.index + 1}"
    if not test.ran:
        return f"{label}: not run (the whole run stopped first)."
    if test.timed_out:
        return f"{label}: timed out (an endless loop or far too slow)."
    if test.expected is not None or test.got is not None:
        what = test.error_type or "AssertionError"
        return f"{label}: {what}: expected {test.expected}, got {test.got}."
    kind = test.error_type or "failed"
    message = (test.message or "").strip()
    if message.startswith(kind):  # "AssertionError (test line 1)" says its type already
        message = message[len(kind) :].lstrip(":").strip()
    if not message:
        return f"{label}: {kind}."
    return f"{label}: {kind}{' ' if message.startswith('(') else ': '}{message}."


def _usage_line(check: CodeCheck) -> str:
    usage = check.usage or HelperUsage()
    names = ", ".join(f"`{n}`" for n in check.helper_names)
    if not usage.called:
        return f"- Helpers: `{check.entry_point}` does not call {names}."
    note = f"- Helpers: `{check.entry_point}` calls " + ", ".join(f"`{n}`" for n in usage.called)
    if usage.thin_wrapper:
        note += ", but only returns its result (a thin wrapper)"
    if usage.ignored_calls:
        note += ", but throws a result away"
    return note + "."


def answer_feedback(
    check: AnswerCheck, mode: str, *, expert_edits: str | None = None
) -> str:
    """Feedback on a math or QA answer; the reference answer itself is never shown."""
    if mode == "plain":
        return "Revise the team's previous answer (shown above): re-check the reasoning."
    if mode == "expert_edits":
        edits = (expert_edits or "").strip()
        if not edits:
            return "The expert proposed no edits. Revise the team's previous answer if needed."
        return f"An expert reviewed the team's previous answer and suggests:\n{edits}"
    verdict = "correct" if check.correct else "NOT correct"
    if mode == "passed":
        return f"The team's answer is {verdict}." if check.answered else "The team gave no answer."
    found = f"yes ({_clip(check.answer, 120)})" if check.answered else "no"
    lines = [f"- Final answer found: {found}.", f"- Correct: {'yes' if check.correct else 'no'}."]
    if mode == "level_feedback":
        if check.kind == "qa" and check.answered and not check.correct:
            lines.append(f"- Word overlap with the reference answer (F1): {check.score:.2f}.")
        lines.append("- Format: " + _format_hint(check.kind))
    return "\n".join(["Checks of the team's answer:", *lines])


def _format_hint(kind: str) -> str:
    if kind == "math":
        return (
            "give only the final result, simplified, as \\boxed{...} (exact fractions such "
            "as \\frac{1}{2}, radicals as \\sqrt{2}; no units)."
        )
    return "answer with the shortest span that answers the question (a name, date, number, or yes/no)."


# ------------------------------------------------------------------------------ expert edits


ModelFactory = Callable[[str], "BaseChatModel"]


@dataclass
class ExpertEditor:
    """Asks an expert chat model for edits to the team's previous answer (``expert_edits``).

    ``model`` is a model spec (built with ``marlang.models.load_chat_model`` on first use) or
    a LangChain chat model. The expert sees the problem, the answer and the sliced tests'
    diagnostics (coding) or whether the answer was correct (math, QA); never a hidden test's
    source, a canonical solution or a reference answer.
    """

    model: Any
    max_tokens: int = 512
    _built: Any = field(default=None, init=False, repr=False)

    def chat_model(self) -> BaseChatModel:
        if self._built is None:
            if isinstance(self.model, str):
                from marlang.models import load_chat_model

                self._built = load_chat_model(self.model, max_tokens=self.max_tokens)
            else:
                self._built = self.model
        return self._built

    def propose(self, prompt: str) -> tuple[str, str | None]:
        """(edits, error): the expert's reply, or "" and why it could not be had."""
        from langchain_core.messages import HumanMessage

        try:
            reply = self.chat_model().invoke([HumanMessage(prompt)])
        except Exception as error:  # noqa: BLE001 - an expert may fail; the episode goes on
            logger.warning("expert_edits: the expert model failed: %s", error)
            return "", f"{type(error).__name__}: {error}"[:DIAGNOSTIC_CHARS]
        content = reply.content if hasattr(reply, "content") else reply
        if isinstance(content, list):
            content = "".join(
                part.get("text", "") if isinstance(part, dict) else str(part) for part in content
            )
        return str(content).strip(), None

    def close(self) -> None:
        self._built = None


def expert_prompt(problem: str, answer_block: str, diagnostics: str, *, kind: str) -> str:
    """The request sent to the expert for one previous answer."""
    what = {
        "code": "Python code written by a team of programmers",
        "math": "a competition math solution written by a team",
        "qa": "an answer to a question about Wikipedia paragraphs written by a team",
    }[kind]
    return "\n".join(
        [
            f"You are an expert reviewer. Below is {what}.",
            (
                "Propose concise, concrete edits that would make the answer correct. Do not "
                "rewrite it from scratch unless it is missing; if it is already right, say "
                '"No changes needed."'
            ),
            "",
            "Problem:",
            problem.strip(),
            "",
            "The team's answer:",
            answer_block.strip() or "(no answer)",
            "",
            "What checking it showed:",
            diagnostics.strip(),
        ]
    )


def fenced(code: str, language: str = "python") -> str:
    """``code`` in a Markdown fence (inner fences are broken up so they cannot close it)."""
    return f"```{language}\n{code.replace('```', '` ` `').rstrip()}\n```"


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def code_from_answer(text: str) -> str:
    """The code in an answer: the fenced blocks joined (python or untagged ones preferred),
    else the text as it is."""
    blocks = _FENCE.findall(text)
    if not blocks:
        return text.strip("\n")
    python = [body for tag, body in blocks if tag.lower() in ("", "python", "py", "python3")]
    return "\n\n".join(body.strip("\n") for body in (python or [b for _, b in blocks]))
