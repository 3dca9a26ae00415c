"""MATH final answers: boxed extraction, normalization, and equivalence (and non-equivalence)."""

from __future__ import annotations

import pytest

from marlang.envs.tasks.data import extract_boxed, math_answers_equal, normalize_math_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (r"so the answer is $\boxed{5}$.", "5"),
        (r"$\boxed{\frac{1}{2}}$", r"\frac{1}{2}"),
        (r"first \boxed{1}, then \boxed{x^{2}+\frac{1}{y}}", r"x^{2}+\frac{1}{y}"),
        (r"each is $\fbox{120^\circ}$", r"120^\circ"),
        (r"\boxed{1} and finally \fbox{2}", "2"),
        (r"\boxed 7$ is it", "7"),
        (r"\boxed{}", ""),
    ],
)
def test_extract_boxed_takes_the_last_box_with_nested_braces(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize("text", ["no box here", "", None, r"\boxed{unclosed {brace}", r"\boxedx"])
def test_extract_boxed_gives_none_without_a_complete_box(text):
    assert extract_boxed(text) is None


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        (r"$\dfrac{3}{4}$", r"\frac{3}{4}"),
        (r"\tfrac12", r"\frac{1}{2}"),
        (r"\frac1{2}", r"\frac{1}{2}"),
        ("3/4", r"\frac{3}{4}"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"x = 5", "5"),
        (r"5\text{ cm}", "5"),
        ("12 inches", "12"),
        (r"30^\circ", "30"),
        (r"10\%", "10"),
        ("1,000,000", "1000000"),
        ("7.", "7"),
        (".5", "0.5"),
        ("2.50", "2.5"),
        (r"\text{(C)}", "(C)"),
        (r"2\sqrt2", r"2\sqrt{2}"),
        (r"\$42", "42"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        ("", ""),
    ],
)
def test_normalize_math_answer(raw, normalized):
    assert normalize_math_answer(raw) == normalized


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        (r"\boxed{\frac{1}{2}}", "0.5"),
        (r"\dfrac12", "1/2"),
        (r"\frac {1} {2}", r"\tfrac{1}{2}"),
        (r"$ x^2 + 2x + 1 $", "x^2+2x+1"),
        (r"10\%", "10"),
        ("10%", r"10\%"),
        (r"45^\circ", "45"),
        (r"45^{\circ}", "45 degrees"),
        (r"45\text{ degrees}", "45"),
        ("x=3", "3"),
        (r"k = \frac{2}{3}", "2/3"),
        (".5", "0.5"),
        ("0.50", r"\frac{1}{2}"),
        ("1,000", "1000"),
        (r"1{,}000", "1000"),
        (r"\$1,000", "1000"),
        (r"-\frac{3}{4}", "-0.75"),
        (r"\frac{-3}{4}", "-3/4"),
        ("100.0", "100"),
        ("1e3", "1000"),
        (r"\left[ -1, 3 \right)", "[-1,3)"),
        (r"\frac{\sqrt3}{2}", r"\dfrac{\sqrt{3}}{2}"),
        (r"5\mbox{ cm}^2", "5"),
        (r"\text{(C)}", "(C)"),
        ("12.", "12"),
        (r"\displaystyle\frac12", "0.5"),
    ],
)
def test_equivalent_answers_match(predicted, reference):
    assert math_answers_equal(predicted, reference)
    assert math_answers_equal(reference, predicted)


@pytest.mark.parametrize(
    ("predicted", "reference"),
    [
        ("1/2", "2"),
        ("0.5", "0.51"),
        (r"\frac{1}{3}", "0.33"),
        ("10", "100"),
        ("-5", "5"),
        (r"\sqrt{2}", "2"),
        ("(1,2)", "(2,1)"),
        ("1, 234", "1234"),
        ("12", "1,2"),
        ("3.5", "35"),
        ("5 cm", "50"),
        ("2x", "2"),
        ("2m", "2"),
        ("x+1", "x-1"),
        (r"\text{(A)}", "(B)"),
        (r"2\text{ and }3", "23"),
        (r"\frac{1}{0}", "0"),
        ("", "0"),
        (None, "0"),
        ("0", ""),
        ("", ""),
    ],
)
def test_different_answers_do_not_match(predicted, reference):
    assert not math_answers_equal(predicted, reference)


def test_numeric_tolerance_is_relative_and_adjustable():
    assert math_answers_equal("0.3333333333", r"\frac{1}{3}")
    assert not math_answers_equal("0.3333", r"\frac{1}{3}")
    assert math_answers_equal("0.3333", r"\frac{1}{3}", rel_tol=1e-3)


@pytest.mark.parametrize("reply, expected", [
    ("The final answer is 5.", "5"),
    ("So the final answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
    ("Final Answer: The final answer is $x=2$. I hope it is correct.", "x=2"),
    ("Adding up, the answer is **7**.", "7"),
    ("Answer: 12", "12"),
    ("we get 3.5, so the final answer is 3.5.", "3.5"),
    ("The final answer is \\boxed{42}.", "42"),
    ("First \\boxed{3}, then corrected: \\boxed{4}", "4"),
])
def test_final_answer_phrasings_are_extracted(reply, expected):
    from marlang.envs.tasks.data.math_answers import extract_final_answer

    assert extract_final_answer(reply) == expected


@pytest.mark.parametrize("reply", ["\\boxed{<answer>}", "The final answer is \\boxed{<answer>}.",
                                   "The answer is <answer>.", "\\boxed{...}", "no answer given here"])
def test_a_copied_placeholder_is_no_answer(reply):
    from marlang.envs.tasks.data.math_answers import extract_final_answer

    assert extract_final_answer(reply) is None
