"""``marlang view``: the page's data from real run directories (fake models, real envs and
sandbox), and the page itself opened in headless Chromium: the first episode shown on opening,
a chosen episode's steps, messages, sandbox verdicts, credits and policies, no browser error."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from marlang.cli import main
from marlang.config import build_config, load_config
from marlang.evaluation.compare import expand_grid, write_comparison
from marlang.run import Experiment
from marlang.view import collect
from marlang.view.page import _embedded_json
from tests.fakes import FakeRuleChatModel, babyai_rule, langmarl_rule
from tests.methods.langmarl.test_langmarl_tasks import CONFIG as HUMANEVAL_CONFIG
from tests.methods.langmarl.test_langmarl_tasks import coder_rule

HOSTILE = "</script><script>document.title='pwned'</script> <!-- I see a key"
"""A message that would end the page's data element early if it were embedded unescaped."""


def hostile_rule(messages):
    reply = babyai_rule(messages)
    return HOSTILE if reply.startswith("I see a key") else reply


def babyai_config(**sections):
    data = {"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 3}, "model": {"cache": False},
            "protocol": {"name": "none"}, "learning": {"method": "none"},
            "run": {"parallel": 2, "progress": False, "episodes": 2}}
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return data


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("view")
    langmarl = babyai_config(learning={"method": "langmarl", "rollouts": 2, "iterations": 2, "accept": "improved"})
    Experiment(build_config(langmarl), root / "langmarl", chat_model=FakeRuleChatModel(rule=langmarl_rule)).run()
    code = load_config(HUMANEVAL_CONFIG, overrides=[
        "learning.method=langmarl", "learning.iterations=1", "learning.rollouts=2", "run.parallel=2",
        "run.progress=false", "model.cache=false", "model.spec=openai:fake"])
    Experiment(code, root / "code", chat_model=FakeRuleChatModel(rule=coder_rule)).run()
    model = FakeRuleChatModel(rule=hostile_rule)
    for s in expand_grid(babyai_config(), [("protocol", ["none", "bidirectional"])], reference=False):
        Experiment(s.config, root / "compare" / s.name.split(",")[0], chat_model=model, label=s.name).run()
    write_comparison(root / "compare")
    return root


def test_collect_reads_runs_and_comparisons_in_table_order(runs):
    data = collect([runs / "compare", runs / "langmarl"])
    names = [r["name"] for r in data["runs"]]
    assert names[:2] == ["none, static", "bidirectional, static"] and len(names) == 3
    assert data["tables"] and "bidirectional" in data["tables"][0]["markdown"]
    langmarl = data["runs"][2]
    assert langmarl["learner"] == "langmarl" and len(langmarl["iterations"]) == 2
    first = langmarl["episodes"][0]
    # the critic's credit reaches the episode it was written for, per agent
    assert set(first["credit"]) == {"agent_0", "agent_1"}
    assert first["credit"]["agent_0"].startswith("CREDIT[agent_0]")
    bidi = data["runs"][1]
    assert any(m["content"] == HOSTILE for s in bidi["episodes"][0]["steps"] for m in s["messages"])
    # the comparison's score against cost: one point per setting, its Pareto front named
    (front,) = data["fronts"]
    assert set(front["points"]) == {"none, static", "bidirectional, static"} and front["frontier"]
    assert front["cost"] == "tokens per episode (every model call)"
    assert data["runs"][0]["summary"]["cost"]["tokens_in"] > 0


def test_collect_keeps_sandbox_verdicts_and_says_what_it_left_out(runs):
    data = collect([runs / "code"], max_episodes=1)
    run = data["runs"][0]
    assert run["episodes_total"] > 1 and len(run["episodes"]) == 1
    verdicts = [v for s in run["episodes"][0]["steps"] for v in s["verdicts"].values()]
    assert verdicts and verdicts[0]["status"] and verdicts[0]["total"] > 0 and verdicts[0]["passed"] == 0


def test_training_only_fields_are_left_out_and_long_texts_shortened():
    from marlang.view.collect import TEXT_LIMIT, _step

    step = _step({"t": 0, "observations": {"a": {"text": "x" * (TEXT_LIMIT + 50), "data": {"grid": [1]}}},
                  "decisions": {"a": {"action": "go forward", "prompt": "P" * 9000, "scores": [0.1, 0.2],
                                      "logprob": -0.5}},
                  "infos": {"a": {"status": "ok", "passed": 3, "total": 4, "report": {"status": "ok", "stdout": "z"}}}})
    assert set(step["decisions"]["a"]) >= {"action", "logprob"} and "prompt" not in step["decisions"]["a"]
    assert "scores" not in step["decisions"]["a"]
    assert step["observations"]["a"].endswith("[50 more characters]")
    assert step["verdicts"]["a"]["passed"] == 3 and "stdout" not in step["verdicts"]["a"]["report"]


def test_embedded_data_cannot_close_its_script_element():
    text = _embedded_json({"m": HOSTILE, "n": float("nan")})
    assert "</" not in text and "<!--" not in text
    assert json.loads(text) == {"m": HOSTILE, "n": None}


def test_view_refuses_what_is_not_a_run(tmp_path, capsys):
    assert main(["view", str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["view", str(tmp_path / "empty")]) == 2
    assert "neither a run directory" in capsys.readouterr().err


# --- the page in a real browser -------------------------------------------------------------------
CHROMIUM = os.environ.get("MARLANG_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MARLANG_CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()) and not shutil.which("chromium"):
        pytest.fail("the browser test needs Chromium and ChromeDriver: `make test` installs them "
                    "(apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def _select(driver, element_id, value=None, text_contains=None):
    from selenium.webdriver.support.ui import Select

    select = Select(driver.find_element("id", element_id))
    if value is not None:
        select.select_by_value(str(value))
    else:
        select.select_by_visible_text(next(o.text for o in select.options if text_contains in o.text))


def test_the_page_opens_on_the_first_episode_and_shows_a_chosen_one(runs, browser, capsys):
    assert main(["view", str(runs / "compare"), str(runs / "langmarl"), str(runs / "code")]) == 0
    page = runs / "compare" / "view.html"
    assert "view.html" in capsys.readouterr().out
    browser.get(page.resolve().as_uri())
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    assert browser.title.startswith("marlang")  # the hostile message did not run as script

    data = collect([runs / "compare", runs / "langmarl", runs / "code"])
    first = data["runs"][0]["episodes"][0]
    steps = browser.find_elements("css selector", "#episode-view .step")
    assert len(steps) == len(first["steps"]) > 0
    head = browser.find_element("css selector", "#episode-view .episode-head").text
    assert f"Episode {first['episode']}" in head

    # the bidirectional setting: the message is shown as text, per step
    _select(browser, "pick-run", text_contains="bidirectional")
    chosen = data["runs"][1]["episodes"][-1]
    _select(browser, "pick-episode", text_contains=f"{chosen['episode']} (")
    view = browser.find_element("id", "episode-view")
    assert f"Episode {chosen['episode']}" in view.text
    assert len(view.find_elements("css selector", ".step")) == len(chosen["steps"])
    assert HOSTILE in view.find_element("css selector", ".messages").text
    actions = [d["action"] for d in chosen["steps"][0]["decisions"].values()]
    row = view.find_elements("css selector", ".step")[0].find_elements("css selector", "tr.agent-row")
    assert [r.text for r in row] and all(a in view.text for a in actions)

    # a coding episode: the sandbox's verdict and the critic's credit
    _select(browser, "pick-run", text_contains="/code")
    code_episode = data["runs"][3]["episodes"][1]
    _select(browser, "pick-episode", text_contains=f"{code_episode['episode']} (")
    view = browser.find_element("id", "episode-view")
    assert "tests passed" in view.find_element("css selector", ".verdict").text
    assert "Critic's credit" in view.text and "CREDIT[" in view.text
    assert "return None" in view.text  # the team's code

    # score against cost: the comparison's settings, with its Pareto front named
    cost = browser.find_element("id", "cost").text
    assert "score against cost" in cost and "Pareto front" in cost and "none, static" in cost

    # learning: credits, directions, policies before and after, the decision
    learning = browser.find_element("id", "learning").text
    assert "NEWPOLICY[agent_0] walk straight to the target." in learning
    assert "Aggregated direction" in learning and "decided by evaluation" in learning
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    if os.environ.get("MARLANG_VIEW_SCREENSHOT"):
        browser.save_screenshot(os.environ["MARLANG_VIEW_SCREENSHOT"])
