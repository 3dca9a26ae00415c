import pytest

from marlang.agents.answer_parsing import (
    extract_answer,
    extract_code,
    extract_math_answer,
    last_boxed,
)


def test_code_from_the_fenced_block_that_defines_the_entry_point():
    text = (
        "First a helper:\n```python\ndef helper(x):\n    return x\n```\n"
        "Then the function:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    )
    found = extract_code(text, "add")
    assert found.how == "fenced" and found.answer == "def add(a, b):\n    return a + b"
    assert found.thought.startswith("First a helper")


def test_code_from_an_unterminated_fence_and_from_other_language_tags():
    assert extract_code("```python\ndef f():\n    return 1\n", "f").answer == "def f():\n    return 1"
    assert extract_code("```py\nimport math\n```", None).answer == "import math"
    assert extract_code("```text\nnot code\n```", None).answer is None


def test_bare_code_is_cut_where_the_prose_starts():
    text = "Here it is.\ndef add(a, b):\n    return a + b\nThis adds the two numbers together."
    found = extract_code(text, "add")
    assert found.how == "bare" and found.answer == "def add(a, b):\n    return a + b"
    assert found.thought == "Here it is."


def test_code_that_never_parses_is_still_the_answer_when_it_names_the_function():
    found = extract_code("def add(a, b)\n    return a + b", "add")
    assert found.answer == "def add(a, b)\n    return a + b"
    assert extract_code("I cannot write this function.", "add").answer is None
    assert extract_code("def other(x):\n    return x", "add").answer is None


def test_math_answers():
    assert last_boxed(r"so \boxed{\frac{1}{2}} and then \boxed{3}") == "3"
    assert last_boxed(r"x = \boxed{\frac{\sqrt{2}}{2}}") == r"\frac{\sqrt{2}}{2}"
    assert last_boxed(r"\boxed{unclosed") is None
    found = extract_math_answer("2 + 2 = 4.\nFinal answer: $4$.")
    assert (found.answer, found.how) == ("4", "marker")
    assert extract_math_answer("I think it is large.").answer is None
    # the common phrasing needs no re-prompt; a copied placeholder is no answer
    found = extract_math_answer("Adding them up, the final answer is 5.")
    assert (found.answer, found.how) == ("5", "phrase")
    assert extract_math_answer(r"So \boxed{<answer>}").answer is None
    assert extract_math_answer("Answer: <answer>").answer is None


def test_text_answers():
    assert extract_answer("The film came first.\nAnswer: Casablanca.", "text").answer == "Casablanca"
    assert extract_answer("Paris", "text").how == "whole"
    long = "It is hard to say which of these two came first because both were released in the same year"
    assert extract_answer(long, "text").answer is None


def test_unknown_format_is_a_clear_error():
    with pytest.raises(ValueError, match="answer_format must be one of code, math, text"):
        extract_answer("x", "json")
