"""``marlang credit-check`` on a run of a user's LangGraph graph: the oracle forks each episode at
each marked prompt (recorded replies before it, fresh seeded samples from it on), credits the
prompt whose node decided the reward, grades LangMARL's critic against it, and refuses in one
line a step critic, an env's options, and a graph that does not replay from its record."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from itertools import count
from typing import Any, TypedDict

import pytest
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from pydantic import Field

import marlang
from marlang.cli import main
from marlang.config import build_config
from marlang.evaluation.creditcheck import check
from marlang.evaluation.creditcheck.graph_oracle import call_seed
from marlang.models.chat_reply import ChatReply, ReplyChatModel
from marlang.run.experiment import Experiment
from marlang.testing import ScriptedChatModel
from tests.fakes import role_of

APP = "tests.run.graph_app"
HERE = "tests.evaluation.creditcheck.test_graph_credit"


def run_config(build: str = f"{APP}:build_graph", episodes: int = 2) -> Any:
    return build_config({
        "graph": {"build": build, "input": "question", "output": "answer"},
        "task": {"data": f"{APP}:problems", "reward": f"{APP}:score"},
        "learning": {"method": "none"},
        "run": {"episodes": episodes, "parallel": 1, "progress": False},
    })


def recorded(messages: Sequence[BaseMessage]) -> str:
    """The recorded run: a weak plan, and a coder that happened to answer GOOD (reward 1)."""
    return "weak plan" if messages[0].text == "Plan the steps." else "GOOD code"


def lucky(seed: int) -> bool:
    return seed % 4 == 0


class SeededModel(ReplyChatModel):
    """The oracle's model: a sampled planner always writes a strong plan, on which the coder
    answers GOOD; on a weak plan the coder answers GOOD only for a lucky seed. So re-sampling
    the coder rarely keeps the reward and re-sampling the planner always does: the oracle credits
    the coder's prompt more. LangMARL's critic is asked too, and credits the coder."""

    seeds: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "seeded"

    def _reply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> ChatReply:
        if role_of(messages) == "critic":
            text = json.dumps({"coding": {"score": 2, "feedback": "won it"},
                               "planning": {"score": -1, "feedback": "weak"}})
        elif messages[0].text == "Plan the steps.":
            text = "strong plan"
        else:
            assert kwargs["temperature"] == 0.5
            self.seeds.append(kwargs["seed"])
            good = "strong plan" in messages[-1].text or lucky(kwargs["seed"])
            text = "GOOD code" if good else "bad code"
        return ChatReply(text, "seeded", 1, 1)


@pytest.fixture
def oracle_model(monkeypatch):
    model = SeededModel()
    monkeypatch.setattr(check, "_chat_model", lambda config, spec: model)
    return model


def record_run(path, build: str = f"{APP}:build_graph") -> Any:
    Experiment(run_config(build), path, chat_model=ScriptedChatModel(reply_fn=recorded)).run()
    return path


def test_the_oracle_credits_the_node_that_decided_the_reward_and_grades_langmarls_critic(tmp_path, oracle_model,
                                                                                           capsys):
    run = record_run(tmp_path / "run")
    assert main(["credit-check", str(run), "--samples", "3", "--temperature", "0.5", "--trust-imports"]) == 0
    result = json.loads((run / "credit_check.json").read_text())
    assert result["env_id"] == f"graph:{APP}:build_graph" and result["agents"] == ["planning", "coding"]
    for episode in result["episodes"]:
        # the planner's fork always wins again; the coder's wins only for its lucky seeds
        lucky_share = sum(lucky(call_seed(0, episode["episode"], s, 1)) for s in range(3)) / 3
        assert episode["reward"] == 1.0
        assert episode["values"] == {"planning": 1.0, "coding": lucky_share}
        assert episode["oracle"] == {"planning": 0.0, "coding": 1.0 - lucky_share}
        assert episode["oracle"]["coding"] > episode["oracle"]["planning"]
        assert episode["critics"]["langmarl"] == {"coding": 2.0, "planning": -1.0}
    (row,) = result["critics"]
    assert row["critic"] == "langmarl" and row["unit"] == "episode" and row["graded"] == 2
    assert row["top_agent"]["mean"] == 1.0 and row["spearman"]["mean"] == pytest.approx(1.0)
    oracle = result["oracle"]
    assert oracle["restore"].startswith("replay of the recorded replies up to the forked node's first call")
    # 2 episodes x 2 prompts x 3 samples; the planner's forks sample both calls, the coder's one
    assert oracle["cost"]["graph_runs"] == 12 and oracle["cost"]["model_calls"] == 6 * 2 + 6
    assert oracle["cost"]["replayed_calls"] == 6 and oracle["adapters"] is None
    # paired: each sample's coder call has one seed in the planner's fork and the coder's
    assert sorted(oracle_model.seeds) == sorted(2 * [call_seed(0, e, s, 1) for e in range(2) for s in range(3)])
    assert "Credit oracle of" in capsys.readouterr().out


def test_a_step_critic_and_an_envs_option_are_refused_on_a_graph_run(tmp_path, oracle_model, capsys):
    run = record_run(tmp_path / "run")
    assert main(["credit-check", str(run), "--critics", "langmarl,llm_mca", "--trust-imports"]) == 2
    err = capsys.readouterr().err.strip()
    assert "critic llm_mca credits an env's steps" in err and "--critics langmarl" in err and "\n" not in err
    assert main(["credit-check", str(run), "--rollout", "random", "--trust-imports"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--rollout is an option of an env's oracle" in err and "\n" not in err
    assert not (run / "credit_check.json").exists() and oracle_model.seeds == []


CALLS = count()


def counting_plan(state: dict[str, Any]) -> dict[str, Any]:
    """A planner whose message carries a process-wide counter: not a function of the record."""
    system = marlang.prompt("planning", "Plan the steps.")
    model = marlang.chat_model("planner", ScriptedChatModel(replies=["-"]))
    reply = model.invoke([SystemMessage(system), HumanMessage(f"{state['question']} (call {next(CALLS)})")])
    return {"plan": reply.text}


def build_counting_graph() -> Any:
    from tests.run.graph_app import State, code

    graph = StateGraph(State)
    graph.add_node("planner", counting_plan)
    graph.add_node("coder", code)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "coder")
    graph.add_edge("coder", END)
    return graph.compile()


def test_a_graph_that_does_not_replay_from_its_record_is_refused_in_one_line(tmp_path, oracle_model, capsys):
    run = record_run(tmp_path / "run", build=f"{HERE}:build_counting_graph")
    assert main(["credit-check", str(run), "--trust-imports"]) == 2
    err = capsys.readouterr().err.strip()
    assert "not deterministic given its model's replies" in err and "episode 0" in err and "\n" not in err
    assert not (run / "credit_check.json").exists()


def test_temperature_is_refused_on_an_env_run(tmp_path, capsys):
    from tests.evaluation.creditcheck.test_command import write_run

    run = write_run(tmp_path / "run")
    assert main(["credit-check", str(run), "--temperature", "0.5"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--temperature samples the forked calls of a run of a user's graph" in err and "\n" not in err


DELAYS = {"left": 0.0, "right": 0.0}
"""Seconds each parallel branch waits before its call: the record's order and the replay's differ."""


def ask(role: str, system: str, text: str) -> str:
    time.sleep(DELAYS.get(role, 0.0))
    model = marlang.chat_model(role, ScriptedChatModel(replies=["-"]))
    return model.invoke([SystemMessage(system), HumanMessage(text)]).text


def left(state: dict[str, Any]) -> dict[str, Any]:
    return {"left": ask("left", marlang.prompt("left", "Take the left view."), state["question"])}


def right(state: dict[str, Any]) -> dict[str, Any]:
    return {"right": ask("right", marlang.prompt("right", "Take the right view."), state["question"])}


def join(state: dict[str, Any]) -> dict[str, Any]:
    system = marlang.prompt("joining", "Join the views.")
    return {"answer": ask("joiner", system, f"{state['left']} | {state['right']}")}


class FanState(TypedDict, total=False):
    question: str
    left: str
    right: str
    answer: str


def build_fan_graph() -> Any:
    graph = StateGraph(FanState)
    for name, node in (("left", left), ("right", right)):
        graph.add_node(name, node)
        graph.add_edge(START, name)
    graph.add_node("join", join)
    graph.add_edge(["left", "right"], "join")
    graph.add_edge("join", END)
    return graph.compile()


def test_parallel_branches_replay_in_either_order(tmp_path, monkeypatch, capsys):
    """The record holds left's call before right's; the replay begins right's first. Forking at
    right replays left's recorded reply and samples right's, whatever order they begin in."""
    monkeypatch.setitem(DELAYS, "right", 0.2)
    cfg = run_config(f"{HERE}:build_fan_graph", episodes=1)
    Experiment(cfg, tmp_path / "run", chat_model=ScriptedChatModel(reply_fn=lambda m: f"GOOD {m[-1].text}")).run()
    monkeypatch.setitem(DELAYS, "right", 0.0)
    monkeypatch.setitem(DELAYS, "left", 0.2)
    critic = json.dumps({name: {"score": 1, "feedback": "-"} for name in ("left", "right", "joining")})
    model = ScriptedChatModel(reply_fn=lambda m: critic if role_of(m) == "critic" else "GOOD")
    monkeypatch.setattr(check, "_chat_model", lambda config, spec: model)
    assert main(["credit-check", str(tmp_path / "run"), "--samples", "1", "--trust-imports"]) == 0
    result = json.loads((tmp_path / "run" / "credit_check.json").read_text())
    (episode,) = result["episodes"]
    assert episode["values"] == {"left": 1.0, "right": 1.0, "joining": 1.0}
    # forks at left (first in the record), right and joining replay 0, 1 and 2 recorded calls
    assert result["oracle"]["cost"]["replayed_calls"] == 3 and result["oracle"]["cost"]["model_calls"] == 3 + 2 + 1
