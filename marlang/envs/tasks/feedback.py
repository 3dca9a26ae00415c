"""Judging a cooperative team's answers: static checks of Python code, the levelled reward for
helper + main programs, and the feedback texts the next turn sees (``level_feedback``,
``level_passed``, ``passed``, ``plain``, ``expert_edits``). No text built here ever contains a
hidden test's source, a canonical solution or a reference answer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from marlang.envs.tasks.levelled import (
    DIAGNOSTIC_CHARS,
    CodeFacts,
    HelperUsage,
)

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


# ------------------------------------------------------------------------------ levelled reward


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

    @property
    def pass_rate(self) -> float:
        """The share of hidden tests passed (0 for a problem without tests)."""
        return self.passed / self.total if self.total else 0.0


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
