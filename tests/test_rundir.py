"""The run directory's JSON files: strict JSON, undefined numbers written as null."""

import json

import numpy as np
import pytest

from marlang.report import summarize_episodes
from marlang.rundir import RunDirectory, dumps_json, json_safe


def strict_loads(text):
    def refuse(token):
        raise ValueError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def test_strict_parser_refuses_nan():
    with pytest.raises(ValueError, match="NaN"):
        strict_loads(json.dumps({"x": float("nan")}))


def test_written_json_has_null_where_numbers_are_undefined(tmp_path):
    run = RunDirectory(tmp_path)
    unsolved = [{"episode": 0, "success": False, "steps": 5, "return": 0.0, "decisions": 10,
                 "invalid_actions": 0, "invalid_rate": 0.0, "llm_calls": 2, "tokens_in": 9,
                 "tokens_out": 1}]
    summary = summarize_episodes(unsolved)
    summary["extra"] = [float("inf"), -float("inf"), float("nan"), np.float32("nan"), 1.5, 2, True]
    run.write_json("summary.json", summary)
    data = strict_loads(run.summary_file.read_text())
    assert data["steps_when_solved"]["mean"] is None
    assert data["steps"]["mean"] == 5
    assert data["extra"] == [None, None, None, None, 1.5, 2, True]


def test_json_safe_walks_nested_containers():
    assert json_safe({"a": (1.0, {"b": float("nan")})}) == {"a": [1.0, {"b": None}]}
    assert strict_loads(dumps_json({"p": tmp_dir_like()}, default=str)) == {"p": "somewhere"}


class tmp_dir_like:  # an object only default=str can write
    def __str__(self):
        return "somewhere"
