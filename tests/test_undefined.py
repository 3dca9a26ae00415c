"""An undefined value is written one way everywhere (``marlang.statistics.intervals.UNDEFINED``): the
command line's tables, the credit check's and ``marlang view``'s page."""

from __future__ import annotations

import re
from pathlib import Path

from marlang.evaluation.creditcheck import credit_table
from marlang.statistics.intervals import UNDEFINED, show
from marlang.tables.cost import CACHED, cost_columns
from marlang.tables.report import markdown_table, summarize_episodes

PAGE = Path(__file__).resolve().parents[1] / "marlang" / "view" / "page.js"


def test_tables_write_an_undefined_value_as_the_one_constant():
    assert show(None) == UNDEFINED and show({"mean": None, "n": 0}) == UNDEFINED
    rows = [{"episode": 0, "success": False, "steps": 2, "return": 0.0, "llm_calls": 0, "tokens_in": 0,
             "tokens_out": 0, "decisions": 1, "invalid_actions": 0, "seed": 0}]
    table = markdown_table({"a": summarize_episodes(rows)})
    steps_when_solved = table.splitlines()[2].split("|")[5].strip()
    assert steps_when_solved == UNDEFINED  # none solved
    # a column that does not apply to a row (a scripted team calls no model)
    assert cost_columns({"llm": {"cost": {"llm_calls": 2, "episodes": 1, "per_episode": {"model_seconds": [1.0]}}},
                         "scripted": {"cost": {}}})[1][1] == [UNDEFINED]
    result = {"run": "r", "env_id": "e", "counts": {"episodes": 1, "steps": 1, "levels": 1},
              "oracle": {"cost": {"env_steps": 1, "seconds": 0}, "rollout": "recorded", "graded_against": "difference"},
              "critics": [{"critic": "difference", "model": None, "unit": "step", "spearman": {"mean": None, "n": 0},
                           "top_agent": None, "top_agent_chance": None, "graded": 0, "oracle_ties": 1,
                           "malformed": 0, "asked": 2, "cost": {"calls": 0, "seconds": 0}}]}
    cells = [c.strip() for c in credit_table(result).splitlines()[-1].split("|")[1:-1]]
    assert cells[1] == cells[4] == cells[5] == UNDEFINED and cells[3] == f"{UNDEFINED} n=0"


def test_the_view_writes_undefined_and_cached_as_marlang_does():
    script = PAGE.read_text(encoding="utf-8")
    assert re.search(r'^const UNDEFINED = "([^"]*)";', script, re.MULTILINE).group(1) == UNDEFINED
    assert re.search(r'^const CACHED = "([^"]*)";', script, re.MULTILINE).group(1) == CACHED
    # no other spelling of an undefined value (an en dash, n/a) is left in the page's script
    assert "\u2013" not in script and '"n/a"' not in script
