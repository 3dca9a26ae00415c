"""MATH problems: rows to records, final-answer extraction and answer equivalence.

``extract_boxed`` finds the final ``\\boxed{...}`` answer, ``extract_final_answer`` also reads
"The final answer is 5." and refuses a copied ``<answer>`` placeholder, ``normalize_math_answer`` strips
LaTeX presentation (units, ``\\left``, ``dfrac``, ``x=`` ...), and ``math_answers_equal``
compares two answers as normalized strings, then as numbers.
"""

from __future__ import annotations

import logging
import math
import re
from fractions import Fraction

from marlang.envs.tasks.data.problems import MathProblem, RowTable, require_columns

logger = logging.getLogger(__name__)

MATH_SUBJECTS = (
    "algebra",
    "counting_and_probability",
    "geometry",
    "intermediate_algebra",
    "number_theory",
    "prealgebra",
    "precalculus",
)
"""The per-subject configs of the hendrycks MATH dataset on the Hugging Face hub."""

_BOX_COMMANDS = ("\\boxed", "\\fbox")

# Units and words that follow a number in MATH answers without changing its value.
_UNIT_WORDS = (
    "square units|sq units|units|unit|square feet|square inches|square meters|"
    "square centimeters|cubic feet|cubic inches|cubic centimeters|cubic meters|"
    "centimeters|centimeter|meters|meter|kilometers|kilometer|millimeters|inches|inch|"
    "feet|foot|miles|mile|yards|yard|cm|mm|km|m|ft|in|mph|"
    "degrees|degree|dollars|dollar|cents|cent|hours|hour|minutes|minute|seconds|second|"
    "days|day|weeks|week|years|year|pounds|pound|ounces|ounce|grams|gram|kg|g|"
    "people|students|ways|points|percent"
)
_TRAILING_UNIT = re.compile(rf"^(.*?\d)\s+(?:{_UNIT_WORDS})(?:\^\{{?[23]\}}?)?\s*$")
_TEXT_COMMAND = re.compile(r"\\(?:text|textbf|mbox|mathrm|textnormal)\s*\{([^{}]*)\}")
_FRAC_SHORTHAND = re.compile(r"\\frac\s*(\d|\{[^{}]*\})\s*(\d|\{[^{}]*\})")
_SQRT_SHORTHAND = re.compile(r"\\sqrt\s*(\w)")
_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")
_SIMPLE_VARIABLE_PREFIX = re.compile(r"^\s*\\?[a-zA-Z](?:_\{?\w+\}?)?\s*=(?!=)")
_PLAIN_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_INT_OVER_INT = re.compile(r"^([+-]?\d+)/([+-]?\d+)$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\frac\{([+-]?\d+(?:\.\d+)?)\}\{([+-]?\d+(?:\.\d+)?)\}$")


def extract_boxed(text: str | None) -> str | None:
    """The content of the last ``\\boxed{...}`` or ``\\fbox{...}`` in ``text`` (None if none).

    Nested braces are matched; the brace-less form ``\\boxed 5`` gives the next token.
    An unclosed brace gives None.
    """
    if not text:
        return None
    start = max(text.rfind(command) for command in _BOX_COMMANDS)
    if start < 0:
        return None
    command = next(c for c in _BOX_COMMANDS if text.startswith(c, start))
    rest = text[start + len(command) :]
    stripped = rest.lstrip()
    if not stripped.startswith("{"):
        if not rest[:1].isspace():
            return None  # e.g. `\boxedanswer`: another command, not a box
        token = re.match(r"[^\s$]+", stripped)
        return token.group(0) if token else None
    depth = 0
    for position, char in enumerate(stripped):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return stripped[1:position]
    return None


# "The final answer is 5.", "Final Answer: $x=2$", "so the answer is **7**", "Answer: 12"
_FINAL_ANSWER_PHRASE = re.compile(
    r"(?:\bfinal\s+answer|\bthe\s+answer|^\s*\**answer)\**\s*(?:is\s*[:：]?|[:：=])\s*(?:\$\s*)?",
    re.IGNORECASE | re.MULTILINE,
)
_PLACEHOLDER = re.compile(r"^\s*(?:<[^<>]*>|\.\.\.|…|answer|your answer|final answer|\?+)\s*$", re.IGNORECASE)


def is_placeholder_answer(answer: str | None) -> bool:
    """Whether ``answer`` is a template's placeholder copied from the prompt (``<answer>``,
    ``...``, ``your answer``) rather than an answer."""
    return answer is not None and bool(_PLACEHOLDER.match(answer))


def _answer_after_phrase(text: str) -> str | None:
    found = list(_FINAL_ANSWER_PHRASE.finditer(text))
    for match in reversed(found):
        rest = text[match.end():].lstrip()
        boxed = extract_boxed(rest)
        if boxed is not None and rest.lstrip("$ ").startswith(_BOX_COMMANDS):
            line = boxed
        else:
            line = rest.splitlines()[0] if rest else ""
            # The answer ends at the sentence's end: a period followed by a space or the line's end.
            line = re.split(r"(?<!\d)\.(?:\s|$)|\.\s", line, maxsplit=1)[0]
        line = line.strip().strip("*").strip().rstrip(".").strip().strip("$").strip()
        if line:
            return line
    return None


def extract_final_answer(text: str | None) -> str | None:
    """The final answer a solution gives: the last ``\\boxed{...}``, else what follows the last
    "final answer is", "the answer is" or "Answer:" (to the sentence's end); None when there
    is none, or when it is a placeholder copied from the prompt (``\\boxed{<answer>}``)."""
    if not text:
        return None
    boxed = extract_boxed(text)
    answer = boxed.strip() if boxed is not None and boxed.strip() else _answer_after_phrase(text)
    if answer is None or is_placeholder_answer(answer):
        return None
    return answer


def team_answer(text: str) -> str:
    """What a reply answers, as the math env judges it: its final answer (``extract_final_answer``),
    else the whole reply stripped; a placeholder copied from the prompt (``\\boxed{<answer>}``) is
    no answer (""). The one reduction the env and any reward built on it use."""
    final = extract_final_answer(text)
    if final is not None:
        return final
    boxed = extract_boxed(text)
    if is_placeholder_answer(text) or (boxed is not None and is_placeholder_answer(boxed)):
        return ""  # the prompt's template copied back: no answer
    return text.strip()


def _strip_outer_braces(s: str) -> str:
    while s.startswith("{") and s.endswith("}"):
        depth = 0
        for position, char in enumerate(s):
            depth += {"{": 1, "}": -1}.get(char, 0)
            if depth == 0 and position < len(s) - 1:
                return s  # the first brace closes before the end: `{a}+{b}`
        s = s[1:-1]
    return s


def _fraction_argument(token: str) -> str:
    return token if token.startswith("{") else "{" + token + "}"


def normalize_math_answer(answer: str | None) -> str:
    """A canonical string form of a final answer, for comparing answers written differently.

    Takes the last ``\\boxed{}`` if there is one; drops ``$``, spaces, ``\\left``/``\\right``,
    LaTeX spacing, units (``\\text{ cm}``, ``cm``), degrees, percent signs, ``x =`` prefixes,
    thousands separators and a trailing period; writes ``dfrac``/``tfrac`` as ``frac``,
    ``\\frac12`` as ``\\frac{1}{2}``, ``a/b`` of integers as ``\\frac{a}{b}`` and ``.5`` as
    ``0.5``.
    """
    if answer is None:
        return ""
    s = str(answer).strip()
    boxed = extract_boxed(s)
    if boxed is not None:
        s = boxed.strip()
    s = s.replace("\n", " ").replace("\\$", "").replace("$", "")
    s = re.sub(r"\\(?:displaystyle|left|right)(?![a-zA-Z])", "", s)  # keeps \rightarrow
    for spacing in ("\\!", "\\,", "\\;", "\\:"):
        s = s.replace(spacing, "")
    s = s.replace("\\ ", " ").replace("~", " ").replace("{,}", ",")
    s = re.sub(r"\\[dt]frac", r"\\frac", s)
    # Units after a number: `5\text{ cm}`, `5 \mbox{inches}^2` -> `5`; a lone `\text{(C)}` -> `(C)`.
    s = re.sub(
        r"(?<=[\d}])\s*\\(?:text|mbox|mathrm)\s*\{\s*[a-zA-Z][a-zA-Z ]*\}(\^\{?\d\}?)?\s*$", "", s
    )
    s = _TEXT_COMMAND.sub(r"\1", s)
    s = re.sub(r"\^\s*\{?\\circ\}?|\\circ|°", "", s)
    s = s.replace("\\%", "").replace("%", "")
    s = s.strip()
    match = _TRAILING_UNIT.match(s)
    if match:
        s = match.group(1)
    if _THOUSANDS.match(s):  # before spaces go: `1, 234` is a list, `1,234` a number
        s = s.replace(",", "")
    if _SIMPLE_VARIABLE_PREFIX.match(s) and s.count("=") == 1:
        s = s.split("=", 1)[1]
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    s = _strip_outer_braces(s)
    s = _FRAC_SHORTHAND.sub(
        lambda m: "\\frac" + _fraction_argument(m.group(1)) + _fraction_argument(m.group(2)), s
    )
    s = _SQRT_SHORTHAND.sub(r"\\sqrt{\1}", s)
    fraction = _INT_OVER_INT.match(s)
    if fraction:
        s = f"\\frac{{{fraction.group(1)}}}{{{fraction.group(2)}}}"
    s = re.sub(r"(?<![\w.}])\.(\d)", r"0.\1", s)  # `.5` -> `0.5`, also inside `(.5,1)`
    if _PLAIN_NUMBER.match(s) and "." in s and "e" not in s.lower():
        s = s.rstrip("0").rstrip(".") or "0"  # `2.50` -> `2.5`, `3.0` -> `3`
    return s


def _as_number(normalized: str) -> float | None:
    """The value of a plain number, ``a/b`` or ``\\frac{a}{b}`` (None for anything else)."""
    if _PLAIN_NUMBER.match(normalized):
        return float(normalized)
    fraction = _LATEX_FRACTION.match(normalized)
    if fraction:
        sign, numerator, denominator = fraction.groups()
        try:
            value = Fraction(numerator) / Fraction(denominator)
        except ZeroDivisionError:
            return None
        return float(-value if sign == "-" else value)
    fraction = _INT_OVER_INT.match(normalized)
    if fraction and int(fraction.group(2)) != 0:
        return int(fraction.group(1)) / int(fraction.group(2))
    return None


def math_answers_equal(
    predicted: str | None, reference: str | None, *, rel_tol: float = 1e-6
) -> bool:
    """Whether two final answers agree: equal normalized strings, or equal numbers.

    Numbers are plain decimals, ``a/b`` and ``\\frac{a}{b}`` (after normalization, so
    ``\\boxed{\\frac12}``, ``1/2`` and ``0.5`` agree), compared within ``rel_tol``.
    An empty or missing answer never agrees with anything.
    """
    left = normalize_math_answer(predicted)
    right = normalize_math_answer(reference)
    if not left or not right:
        return False
    if left == right:
        return True
    left_value, right_value = _as_number(left), _as_number(right)
    if left_value is None or right_value is None:
        return False
    return math.isclose(left_value, right_value, rel_tol=rel_tol, abs_tol=1e-12)


def math_problems_from_rows(table: RowTable) -> list[MathProblem]:
    """Convert MATH rows (``problem, solution`` plus optional ``answer, level, type|subject,
    unique_id``) to records; rows whose solution has no boxed answer are skipped."""
    rows, columns, source, id_prefix = table
    require_columns(columns, ["problem"], source=source, schema="MATH")
    if "answer" not in columns and "solution" not in columns:
        raise ValueError(
            f"{source}: MATH rows need an 'answer' or a 'solution' column; "
            f"columns found: {sorted(columns)}"
        )
    problems: list[MathProblem] = []
    skipped: list[str] = []
    for index, row in rows:
        task_id = str(row.get("unique_id") or f"{id_prefix}{index}")
        solution = str(row.get("solution") or "")
        answer = row.get("answer")
        answer = str(answer).strip() if answer not in (None, "") else extract_boxed(solution)
        if not answer:
            skipped.append(task_id)
            continue
        level = row.get("level")
        level = f"Level {level}" if isinstance(level, int) else str(level or "")
        problems.append(
            MathProblem(
                task_id=task_id,
                problem=str(row["problem"]),
                answer=answer,
                solution=solution,
                level=level,
                subject=str(row.get("type") or row.get("subject") or ""),
                source=source,
            )
        )
    if skipped:
        logger.warning(
            "%s: skipped %d MATH row(s) with no final answer (no 'answer' and no \\boxed{} "
            "in the solution): %s",
            source,
            len(skipped),
            ", ".join(skipped[:5]),
        )
    return problems
