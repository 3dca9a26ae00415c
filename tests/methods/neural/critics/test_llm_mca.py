"""LLM-MCA: the reply parser (JSON first, then the text), the normalisation, and MAPPO runs on
the climbing game with a rule-based fake critic: the credits the critic gives are what the
learner trains on, a reply it cannot read is counted and split evenly, the calls fit the
context and are accounted as role critic."""

from __future__ import annotations

import csv
import json
import math
import re

import pytest
from benchmarl.experiment.callback import Callback

import marlang.methods.neural.critics.critic as critic_module
from marlang.config import build_config
from marlang.methods.neural.critics.mca_parsing import normalize, parse_step_credits
from marlang.run import Experiment
from tests.fakes import FakeRuleChatModel

AGENTS = ["agent_0", "agent_1"]
LABELS = ["t1", "t2", "t3"]


# the parser ---------------------------------------------------------------------------------------
def test_json_reply_gives_every_credit_and_why():
    reply = ('{"t1": {"agent_0": 1.5, "agent_1": -0.5, "why": "agent_1 broke the agreement"}, '
             '"t2": {"agent_0": 0, "agent_1": 2}}')
    found = parse_step_credits(reply, LABELS, AGENTS)
    assert found == {"t1": {"credits": {"agent_0": 1.5, "agent_1": -0.5}, "why": "agent_1 broke the agreement",
                            "tasks": {}},
                     "t2": {"credits": {"agent_0": 0.0, "agent_1": 2.0}, "why": "", "tasks": {}}}


def test_reply_cut_off_by_its_token_limit_keeps_the_complete_steps():
    reply = '{"t1": {"agent_0": 1.5, "agent_1": -0.5}, "t2": {"agent_0": 2.5, "agent_1": 1'
    found = parse_step_credits(reply, LABELS, AGENTS)
    assert found["t1"]["credits"] == {"agent_0": 1.5, "agent_1": -0.5}
    # t2's last number may be cut short ("1" of "12"): only the complete one counts
    assert found["t2"]["credits"] == {"agent_0": 2.5}


def test_text_reply_is_read_by_the_regular_expression():
    reply = ("Here is my analysis.\nt1: Agent 0 = 3, agent_1: 2 (both played A)\n"
             "Step 2 - agent_1: 0.4, agent-0: .5\nt3 agent_0: nan, agent_1: 1e400")
    found = parse_step_credits(reply, LABELS, AGENTS)
    assert found["t1"]["credits"] == {"agent_0": 3.0, "agent_1": 2.0}
    assert found["t2"]["credits"] == {"agent_1": 0.4, "agent_0": 0.5}
    assert "t3" not in found  # not-a-number and infinity are no credit


def test_list_form_and_per_agent_objects_are_read():
    reply = ('```json\n{"credits": [{"t": 1, "agent_0": {"credit": 1, "why": "loaded"}, "agent_1": "2"}, '
             '{"step": 3, "agent_1": -1}]}\n```')
    found = parse_step_credits(reply, LABELS, AGENTS)
    assert found["t1"] == {"credits": {"agent_0": 1.0, "agent_1": 2.0}, "why": "loaded", "tasks": {}}
    assert found["t3"]["credits"] == {"agent_1": -1.0}


@pytest.mark.parametrize("reply", ["", "I cannot tell.", "{}", '{"t9": {"agent_0": 1}}', '{"t1": "good"}',
                                   '{"t1": {"agent_7": 1, "agent_0": true}}', "t1 t2 t3", "[1, 2, 3]", "{{{{"])
def test_unreadable_replies_give_nothing_and_never_raise(reply):
    assert parse_step_credits(reply, LABELS, AGENTS) == {}


def test_labels_outside_the_call_or_agents_outside_the_team_are_ignored():
    found = parse_step_credits('{"t1": {"agent_0": 1, "agent_2": 5}, "t4": {"agent_0": 9}}', LABELS, AGENTS)
    assert found == {"t1": {"credits": {"agent_0": 1.0}, "why": "", "tasks": {}}}


def test_normalize_sum_scales_shares_and_shifts_the_rest():
    assert normalize({"a": 3.0, "b": 1.0}, 8.0, "sum") == {"a": 6.0, "b": 2.0}  # shares of the reward
    assert normalize({"a": 1.0, "b": -1.0}, 0.0, "sum") == {"a": 1.0, "b": -1.0}  # a zero-sum split stays
    assert normalize({"a": 1.0, "b": -3.0}, 4.0, "sum") == {"a": 4.0, "b": 0.0}  # shifted: differences kept
    assert normalize({"a": 0.0, "b": 0.0}, -30.0, "sum") == {"a": -15.0, "b": -15.0}
    assert normalize({"a": 5.0, "b": 2.0}, 0.0, "none") == {"a": 5.0, "b": 2.0}
    for credits, r in [({"a": 0.3, "b": 7.0}, 11.0), ({"a": -2.0, "b": 0.5}, -30.0), ({"a": 4.0}, 0.0)]:
        assert math.isclose(sum(normalize(credits, r, "sum").values()), r, abs_tol=1e-9)
    with pytest.raises(ValueError, match="critic_normalize"):
        normalize({"a": 1.0}, 1.0, "mean")


# runs with a fake critic --------------------------------------------------------------------------
_LINE = re.compile(r"^(t\d+): .*agent_0: action (\w), agent_1: action (\w) \| team reward (\S+)$", re.MULTILINE)


def credit_agent_0_for_a(messages):
    """A critic that gives agent_0 credit 2 when it chose A, 1 otherwise, and agent_1 credit 1."""
    out = {label: {"agent_0": 2.0 if a0 == "A" else 1.0, "agent_1": 1.0, "why": "rule"}
           for label, a0, _, _ in _LINE.findall(messages[-1].content)}
    return json.dumps(out)


class RewardProbe(Callback):
    """Keeps the per-agent rewards each collected batch trains on (after the critic)."""

    def __init__(self) -> None:
        super().__init__()
        self.rewards: list[list[list[float]]] = []

    def __getstate__(self):
        return {"experiment": None}

    def on_batch_collected(self, batch):
        self.rewards.append(batch.get(("next", "agents", "reward")).reshape(-1, 2).tolist())


def _config(**learning):
    return build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"}, "model": {"max_concurrency": 2},
        "learning": {"method": "mappo", "frames": 200, "frames_per_batch": 100, "n_envs": 2, "epochs": 1,
                     "minibatch_size": 50, "hidden": [8], "evaluation_episodes": 1, "critic": "llm_mca",
                     "critic_context": 2048, **learning},
    })


def _run(tmp_path, monkeypatch, rule, **learning):
    model = FakeRuleChatModel(rule=rule)
    monkeypatch.setattr(critic_module, "critic_chat_model", lambda config: model)
    probe = RewardProbe()
    trainer = Experiment(_config(**learning), tmp_path / "run", callbacks=[probe])
    trainer.run()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "credit" / "llm_credit.jsonl").read_text().splitlines()]
    with open(run / "iterations.csv", newline="") as fh:
        iterations = list(csv.DictReader(fh))
    return trainer, model, probe, rows, iterations, run


def test_mappo_trains_on_the_critics_credits(tmp_path, monkeypatch):
    trainer, model, probe, rows, iterations, run = _run(tmp_path, monkeypatch, credit_agent_0_for_a)
    assert len(probe.rewards) == 2 and len(rows) == 2 * 100  # every timestep of both batches was read
    for row in rows:
        trained = probe.rewards[row["batch"]][row["position"]]
        assert trained == pytest.approx([row["credit"]["agent_0"], row["credit"]["agent_1"]], abs=1e-5)
        assert sum(row["credit"].values()) == pytest.approx(row["team_reward"], abs=1e-5)  # critic_normalize: sum
        assert not row["missed"] and row["why"] == "rule"
        r, a0 = row["team_reward"], row["actions"]["agent_0"]
        if r > 0:  # shares of the reward, in the critic's proportions
            assert row["credit"]["agent_0"] == pytest.approx(r * (2 / 3 if a0 == "action A" else 1 / 2), abs=1e-5)
    assert any(r["credit"]["agent_0"] != r["credit"]["agent_1"] for r in rows)
    assert [int(i["critic_failures"]) for i in iterations] == [0, 0]
    assert [int(i["critic_steps_read"]) for i in iterations] == [100, 100]
    # Every call fits the context: prompt (counted as the critic counts) plus the reply budget.
    critic = trainer.learner.critic
    for call in model.calls:
        text = "\n".join(str(m.content) for m in call)
        assert critic.count_tokens(text) + 768 <= 2048
    assert len(model.calls) > 2  # so the batch was read in several chunks
    with open(run / "llm_calls.csv", newline="") as fh:
        accounted = list(csv.DictReader(fh))
    assert len(accounted) == len(model.calls) and {r["role"] for r in accounted} == {"critic"}
    calls_per_kframe = [float(i["critic_calls_per_kframe"]) for i in iterations]
    assert sum(calls_per_kframe) * 100 / 1000 == pytest.approx(len(model.calls))
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["critic"]["critic"] == "llm_mca"
    assert manifest["critic"]["prompts"] == {"mca_env": "mca_env_matrix", "mca_data": "mca_data",
                                             "mca_definitions": "mca_definitions_matrix", "mca_role": "mca_role"}
    system = model.calls[0][0].content
    assert "Under-collaboration" in system and "action A" in system and '"t1"' in system


def test_unreadable_replies_are_counted_and_split_evenly(tmp_path, monkeypatch):
    calls = {"n": 0}

    def every_other_reply_is_prose(messages):
        calls["n"] += 1
        if calls["n"] % 2:
            return "Both agents did fine, I think."
        return credit_agent_0_for_a(messages)

    _, model, probe, rows, iterations, run = _run(tmp_path, monkeypatch, every_other_reply_is_prose)
    missed = [r for r in rows if r["missed"]]
    assert missed and len(missed) < len(rows)
    for row in missed:
        assert row["missed"] == AGENTS
        half = row["team_reward"] / 2
        assert row["credit"] == {"agent_0": pytest.approx(half), "agent_1": pytest.approx(half)}
        assert probe.rewards[row["batch"]][row["position"]] == pytest.approx([half, half], abs=1e-5)
    assert sum(int(i["critic_failures"]) for i in iterations) == 2 * len(missed)
    replies = [json.loads(line) for line in (run / "credit" / "critic_calls.jsonl").read_text().splitlines()]
    assert len(replies) == len(model.calls) and any(r["reply"].startswith("Both agents") for r in replies)


def test_critic_every_and_critic_steps_bound_the_calls(tmp_path, monkeypatch):
    _, _, probe, rows, iterations, _ = _run(tmp_path, monkeypatch, credit_agent_0_for_a,
                                            critic_every=2, critic_steps=20)
    assert {r["batch"] for r in rows} == {0}  # batch 1 is between critic calls
    assert 20 <= len(rows) < 100  # whole chunks, until 20 steps are read
    assert [int(i["critic_steps_read"]) for i in iterations] == [len(rows), 0]
    read = {r["position"] for r in rows}
    unread_rewards = [probe.rewards[0][p] for p in range(100) if p not in read]
    assert all(a == pytest.approx(b) for a, b in unread_rewards)  # the even split
    assert float(iterations[1]["critic_calls_per_kframe"]) == 0.0
    # between critic calls: the even split, as for the unread steps (climbing: every agent gets the team reward)
    assert float(iterations[1]["train_reward_mean"]) == pytest.approx(float(iterations[1]["env_reward_mean"]) / 2)
    assert all(a == pytest.approx(b) for a, b in probe.rewards[1])


def test_a_context_too_small_for_the_prompt_is_a_one_line_error(tmp_path, monkeypatch):
    model = FakeRuleChatModel(rule=credit_agent_0_for_a)
    monkeypatch.setattr(critic_module, "critic_chat_model", lambda config: model)
    config = _config(critic_context=1024, critic_max_tokens=700)
    with pytest.raises(ValueError, match="learning.critic_context 1024 leaves no room"):
        Experiment(config, tmp_path / "run").run()


def test_a_resumed_critic_counts_batches_on(tmp_path, monkeypatch):
    from marlang.methods.neural.critics.critic import build_critic

    monkeypatch.setattr(critic_module, "critic_chat_model", lambda config: FakeRuleChatModel(rule=credit_agent_0_for_a))
    (tmp_path / "credit").mkdir()
    (tmp_path / "credit" / "mca_state.json").write_text('{"batches": 3}')
    assert build_critic(_config(), tmp_path, resume=True).batches == 3
    assert build_critic(_config(), tmp_path, resume=False).batches == 0


# LLM-TACA -----------------------------------------------------------------------------------------
def test_tasks_are_read_from_json_and_text():
    reply = ('{"t1": {"agent_0": 1, "agent_1": 0, "tasks": {"agent_0": [2, 3], "agent_1": [-1, -1]}}, '
             '"t2": {"agent_0": {"credit": 1, "task": [1.2, 0]}, "agent_1": 2}}')
    found = parse_step_credits(reply, LABELS, AGENTS)
    assert found["t1"]["tasks"] == {"agent_0": [2, 3], "agent_1": [-1, -1]}
    assert found["t2"]["tasks"] == {"agent_0": [1, 0]}
    text = parse_step_credits("t1: agent_0: 1, agent_1: 2; tasks agent_0: [1, 2], agent_1: [3,4]", LABELS, AGENTS)
    assert text["t1"]["tasks"] == {"agent_0": [1, 2], "agent_1": [3, 4]}
    not_numbers = parse_step_credits('{"t1": {"agent_0": 1, "tasks": {"agent_0": ["x"]}}}', LABELS, AGENTS)
    assert not_numbers["t1"]["tasks"] == {}


def test_the_acting_env_ends_each_observation_with_zero_task_inputs():
    from marlang.methods.neural.benchmarl_task import NumericParallelEnv, build_numeric_env

    plain = NumericParallelEnv(build_numeric_env("lbf/8x8-2p-2f-coop"))
    tasked = NumericParallelEnv(build_numeric_env("lbf/8x8-2p-2f-coop"), task_size=3)
    size = plain.observation_space("agent_0").shape[0]
    assert tasked.observation_space("agent_0").shape == (size + 3,)
    a, _ = plain.reset(seed=4)
    b, _ = tasked.reset(seed=4)
    for agent in a:
        assert b[agent].tolist() == [*a[agent].tolist(), 0.0, 0.0, 0.0]
        assert tasked.observation_space(agent).contains(b[agent])


def assign_tasks(messages):
    """Credits 1/1; agent_0's task is [1], agent_1's [2, k] at line t<k>."""
    return json.dumps({label: {"agent_0": 1.0, "agent_1": 1.0,
                               "tasks": {"agent_0": [1], "agent_1": [2, int(label[1:])]}}
                       for label, _, _, _ in _LINE.findall(messages[-1].content)})


class ObservationProbe(RewardProbe):
    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[list[list[float]]] = []

    def on_batch_collected(self, batch):
        super().on_batch_collected(batch)
        self.tasks.append(batch.get(("agents", "observation"))[..., -2:].reshape(-1, 2, 2).tolist())


def test_llm_taca_trains_with_the_critics_tasks_and_fewer_of_them_over_time(tmp_path, monkeypatch):
    model = FakeRuleChatModel(rule=assign_tasks)
    monkeypatch.setattr(critic_module, "critic_chat_model", lambda config: model)
    probe = ObservationProbe()
    config = _config(method="ippo", critic="llm_taca", frames=400)
    Experiment(config, tmp_path / "run", callbacks=[probe]).run()
    assert "Task assignment" in model.calls[0][0].content and '"tasks"' in model.calls[0][0].content
    rows = [json.loads(line) for line in (tmp_path / "run" / "credit" / "llm_credit.jsonl").read_text().splitlines()]
    with open(tmp_path / "run" / "iterations.csv", newline="") as fh:
        iterations = list(csv.DictReader(fh))
    kept = []
    for batch, seen in enumerate(probe.tasks):
        steps = {r["position"]: r for r in rows if r["batch"] == batch}
        assert len(steps) == 100
        with_task = 0
        for position, (task_0, task_1) in enumerate(seen):
            if task_0 == [0.0, 0.0] and task_1 == [0.0, 0.0]:
                continue  # dropped by the annealing: the zeros the agents act with
            label = steps[position]["tasks"]
            assert label == {"agent_0": [1, 0], "agent_1": [2, label["agent_1"][1]]}  # padded to task_size
            assert task_0 == [1.0, 0.0] and task_1 == [2.0, float(label["agent_1"][1])]
            with_task += 1
        kept.append(with_task)
        assert int(iterations[batch]["task_inputs"]) == 2 * with_task
        assert int(iterations[batch]["task_missing"]) == 0
    assert kept[0] == 100 and kept[0] > kept[2] > kept[3] and kept[3] < 50  # shares 1, 0.75, 0.5, 0.25
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["critic"]["critic"] == "llm_taca"
    assert manifest["critic"]["prompts"]["mca_tasks"] == "mca_tasks_matrix"


def test_a_timestep_too_long_for_one_call_is_shortened_to_fit(tmp_path, monkeypatch):
    from marlang.methods.neural.critics.critic import build_critic

    monkeypatch.setattr(critic_module, "critic_chat_model", lambda config: FakeRuleChatModel(rule=credit_agent_0_for_a))
    critic = build_critic(_config(), tmp_path)
    budget = 2048 - 768 - critic.count_tokens(critic.system) - 32
    lines = ["x" * 8000, "short line", "y " * 3000]
    chunks = critic.chunks(lines, [0, 0, 1])
    assert [p for c in chunks for p in c.positions] == [0, 1, 2] and len(chunks) >= 2
    assert chunks[0].lines[1].endswith(" ...")  # the long state, cut
    for chunk in chunks:
        assert critic.count_tokens("\n".join(chunk.lines)) <= budget


def test_an_unreachable_critic_model_stops_the_run_resumably_with_what_to_check(tmp_path):
    from marlang.models import ModelUnreachableError

    config = build_config({
        "env": {"id": "matrix/climbing"}, "agents": {"kind": "neural"},
        "model": {"base_url": "http://127.0.0.1:9/v1", "max_retries": 1, "timeout": 2, "cache": False},
        "learning": {"method": "mappo", "frames": 100, "frames_per_batch": 100, "n_envs": 2, "epochs": 1,
                     "minibatch_size": 100, "hidden": [8], "evaluation_episodes": 1, "critic": "llm_mca",
                     "critic_model": "openai:some-model", "critic_steps": 10},
    })
    with pytest.raises(ModelUnreachableError) as err:
        Experiment(config, tmp_path / "run").run()
    assert "LLM-MCA critic's model (learning.critic_model)" in str(err.value) and "127.0.0.1:9" in str(err.value)
    assert json.loads((tmp_path / "run" / "neural_state.json").read_text())["status"] == "training"
    assert not (tmp_path / "run" / "credit" / "llm_credit.jsonl").exists()  # nothing credited


def test_a_wild_credit_is_clipped_to_the_batchs_reward_scale(tmp_path, monkeypatch):
    def huge(messages):
        return json.dumps({label: {"agent_0": 1e9, "agent_1": -1e9}
                           for label, _, _, _ in _LINE.findall(messages[-1].content)})

    _, _, probe, rows, _, _ = _run(tmp_path, monkeypatch, huge, critic_normalize="none", frames=100)
    bound = 2 * max(1.0, max(abs(r["team_reward"]) for r in rows))  # n_agents x the batch's largest |team reward|
    assert rows and all(r["credit"] == {"agent_0": bound, "agent_1": -bound} for r in rows)
    assert max(abs(x) for step in probe.rewards[0] for x in step) == pytest.approx(bound)
