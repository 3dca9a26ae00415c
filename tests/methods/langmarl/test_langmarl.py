"""LangMARL on the training graph with fake chat models, on the real BabyAI-Text env:
node order and fan-out, credit isolation, the global ablation, accept and roll back,
review, crash and resume, credit failures."""

import asyncio
import json
import re

import pytest

from marlang import make_env
from marlang.config import build_config
from marlang.methods.langmarl.parsing import parse_credits
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from marlang.seeds import env_seeds
from marlang.tables.report import policies_text
from tests.fakes import FakeRuleChatModel, langmarl_rule, role_of

AGENTS = ["agent_0", "agent_1", "agent_2"]


def make_config(**sections):
    data = {
        "env": {"id": "babyai/goto-obj", "n_agents": 3, "max_steps": 3},
        "model": {"cache": False},
        "protocol": {"name": "none"},
        "learning": {"method": "langmarl", "rollouts": 2, "iterations": 2},
        "run": {"parallel": 2, "progress": False},
    }
    for key, value in sections.items():
        data.setdefault(key, {}).update(value)
    return build_config(data)




def test_one_update_fans_out_k_critics_kn_gradients_n_aggregates_n_optimizers(tmp_path):
    model = FakeRuleChatModel(rule=langmarl_rule)
    result = Experiment(make_config(), tmp_path / "run", chat_model=model).run()
    roles = [role_of(m) for m in model.calls]
    learner_roles = [r for r in roles if r != "actor"]
    k, n = 2, 3
    per_iteration = ["critic"] * k + ["gradient"] * k * n + ["aggregator"] * n + ["optimizer"] * n
    # node order: every stage finishes before the next starts, in both iterations
    assert learner_roles == per_iteration * 2
    rows = RunDirectory(result.run_dir).read_iterations()
    assert [(r["critic_calls"], r["gradient_calls"], r["aggregator_calls"], r["optimizer_calls"]) for r in rows] \
        == [(k, k * n, n, n)] * 2
    assert all(r["credit_failures"] == 0 for r in rows)

    # agent i's gradient prompt holds its own credit and no other agent's
    for messages in (m for m in model.calls if role_of(m) == "gradient"):
        prompt = str(messages[-1].content)
        agent = re.search(r"^Agent: (\S+)", prompt, re.MULTILINE).group(1)
        assert f"CREDIT[{agent}]" in prompt
        assert not any(f"CREDIT[{other}]" in prompt for other in AGENTS if other != agent)

    rd = RunDirectory(result.run_dir)
    policies = rd.read_jsonl("policies.jsonl")
    assert [(p["iteration"], p["agent"], p["accepted"]) for p in policies] == \
        [(i, a, True) for i in (0, 1) for a in AGENTS]
    assert all(p["text"] == f"NEWPOLICY[{p['agent']}] walk straight to the target." for p in policies)
    assert policies[0]["previous"].startswith("Work with your teammates")  # the initial policy
    updates = rd.read_jsonl("updates.jsonl")
    assert len(updates) == 2 * n
    u = updates[0]
    assert [t["credit"] for t in u["trajectories"]] == [f"CREDIT[{u['agent']}] helped a little"] * k
    assert u["aggregated_gradient"].startswith(f"AGG[{u['agent']}]")
    # the second iteration acts with the new policies, version 1
    episodes = {d["episode"]: d for d in rd.load_episode_dicts()}
    assert episodes[0]["policy_versions"] == dict.fromkeys(AGENTS, 0)
    assert episodes[2]["policy_versions"] == dict.fromkeys(AGENTS, 1)
    second_actor_system = next(str(m[0].content) for m in model.calls[::-1] if role_of(m) == "actor")
    assert "NEWPOLICY[" in second_actor_system
    # the rewrite touched only the policy: the fixed instructions are still there
    assert "Possible actions:" in second_actor_system and "Team mission:" in second_actor_system
    summary = result.summary
    assert summary["setting"] == "none, langmarl" and summary["learner"] == "langmarl"
    assert summary["policies"]["agent_0"]["final"].startswith("NEWPOLICY[agent_0]")
    calls = (rd.path / "llm_calls.csv").read_text()
    for role in ("actor", "critic", "gradient", "aggregator", "optimizer"):
        assert f",{role}," in calls


def test_one_rollout_per_update_skips_the_aggregator(tmp_path):
    model = FakeRuleChatModel(rule=langmarl_rule)
    Experiment(make_config(learning={"rollouts": 1, "iterations": 1}), tmp_path / "run", chat_model=model).run()
    roles = [role_of(m) for m in model.calls if role_of(m) != "actor"]
    assert roles == ["critic"] + ["gradient"] * 3 + ["optimizer"] * 3


def test_global_credit_gives_every_agent_the_same_team_critique(tmp_path):
    model = FakeRuleChatModel(rule=langmarl_rule)
    result = Experiment(make_config(learning={"credit": "global", "iterations": 1}), tmp_path / "run",
                        chat_model=model).run()
    critic_prompts = [str(m[-1].content) for m in model.calls if role_of(m) == "critic"]
    assert len(critic_prompts) == 2 and all("keys are exactly" not in p for p in critic_prompts)
    gradients = [str(m[-1].content) for m in model.calls if role_of(m) == "gradient"]
    assert len(gradients) == 6 and all("TEAMCRITIQUE: the team wandered." in g for g in gradients)
    assert result.summary["setting"] == "none, langmarl w/o credit"


def test_credit_failures_are_asked_again_once_then_counted_never_filled_with_other_text(tmp_path):
    def rule(messages):
        prompt = str(messages[-1].content)
        if "gave no credit for" in prompt:
            return "Sorry, I cannot say."  # the retry fails too
        if "read a whole episode" in prompt and "keys are exactly" in prompt:
            # agent_2 is missing; the text mentions it inside agent_0's credit
            return json.dumps({"agent_0": "CREDIT[agent_0] also agent_2 idled", "Agent 1": "CREDIT[agent_1]"})
        return langmarl_rule(messages)

    model = FakeRuleChatModel(rule=rule)
    result = Experiment(make_config(learning={"iterations": 1}), tmp_path / "run", chat_model=model).run()
    roles = [role_of(m) for m in model.calls if role_of(m) != "actor"]
    assert roles.count("critic") == 4  # two trajectories, each asked again once
    gradient_agents = [re.search(r"^Agent: (\S+)", str(m[-1].content), re.MULTILINE).group(1)
                       for m in model.calls if role_of(m) == "gradient"]
    assert sorted(gradient_agents) == ["agent_0", "agent_0", "agent_1", "agent_1"]  # none for agent_2
    rd = RunDirectory(result.run_dir)
    assert rd.read_iterations()[0]["credit_failures"] == 2
    u2 = next(u for u in rd.read_jsonl("updates.jsonl") if u["agent"] == "agent_2")
    assert u2["credit_failures"] == 2 and not u2["rewritten"]
    assert all(t["credit"] == "" and t["credit_failed"] and t["gradient"] is None for t in u2["trajectories"])
    assert result.summary["credit_failures"] == 2
    assert result.summary["policies"]["agent_2"]["final"] == result.summary["policies"]["agent_2"]["initial"]


def test_parse_credits_is_lenient_but_never_gives_one_agent_anothers_text():
    agents = ["agent_0", "agent_1"]
    fenced = 'Here:\n```json\n{"agent_0": "good", "agent_1": {"credit": "bad", "score": -1}}\n```'
    assert parse_credits(fenced, agents) == {"agent_0": {"feedback": "good", "score": None},
                                             "agent_1": {"feedback": "bad", "score": -1.0}}
    bare = "Thinking... {'Agent 0': 'ok', 'agent1': 'late',} trailing"
    assert {a: c["feedback"] for a, c in parse_credits(bare, agents).items()} == {"agent_0": "ok", "agent_1": "late"}
    lines = "agent_0: fetched the key\nand opened the door\nAgent 1: blocked the way"
    assert {a: c["feedback"] for a, c in parse_credits(lines, agents).items()} == {
        "agent_0": "fetched the key and opened the door", "agent_1": "blocked the way"}
    assert parse_credits("The team did fine overall.", agents) == {}
    assert parse_credits('{"team": "fine", "agent_10": "x"}', agents) == {}


def test_accept_improved_rolls_back_a_worse_candidate_and_keeps_a_better_one(tmp_path):
    # Actors going forward reach the goal sooner; a policy that says "turn" makes them spin.
    def rule_for(new_policy):
        def rule(messages):
            system, prompt = str(messages[0].content), str(messages[-1].content)
            if "You improve the policies" in system and "Write the improved policy" in prompt:
                return new_policy
            if "You improve the policies" not in system and "Your policy: SPIN" in system:
                return "Action: turn left"
            return langmarl_rule(messages)
        return rule

    def team_return(seed, action):
        env = make_env("babyai/goto-obj", n_agents=3, max_steps=6)
        env.reset(seed=seed)
        total = 0.0
        while env.agents:
            total += sum(env.step({a: action for a in env.agents})[1].values())
        return total

    def forward_beats_spinning(run_seed):  # on the levels of the run seed's candidate check
        seeds = env_seeds(run_seed, "eval", range(2))
        return sum(team_return(s, "go forward") for s in seeds) > sum(team_return(s, "turn left") for s in seeds)

    run_seed = next(s for s in range(100) if forward_beats_spinning(s))
    cfg = make_config(env={"max_steps": 6}, learning={"iterations": 1, "accept": "improved", "eval_rollouts": 2},
                      agents={"policy": "Go forward."}, run={"seed": run_seed})
    worse = Experiment(cfg, tmp_path / "worse", chat_model=FakeRuleChatModel(rule=rule_for("SPIN in place"))).run()
    rd = RunDirectory(worse.run_dir)
    evaluation = rd.read_jsonl("updates.jsonl")[0]["evaluation"]
    assert evaluation["candidate_return"] < evaluation["baseline_return"]
    assert [p["accepted"] for p in rd.read_jsonl("policies.jsonl")] == [False] * 3
    assert rd.read_json("learner_state.json")["policies"]["agent_0"] == "Go forward."
    evals = [d for d in rd.load_episode_dicts() if d["phase"] == "eval"]
    candidate = [d for d in evals if d["policy_versions"]["agent_0"] == 1]
    current = [d for d in evals if d["policy_versions"]["agent_0"] == 0]
    # both policies play the check on the same seeds: the verdict is not the levels' luck
    assert len(candidate) == len(current) == 2
    assert sorted(d["seed"] for d in candidate) == sorted(d["seed"] for d in current)
    assert evaluation["baseline_episodes"] == sorted(d["episode"] for d in current)
    assert worse.summary["episodes"] == 2  # eval episodes are not training episodes
    # the report keeps the turned-down candidate next to the policy that stayed
    rejected = worse.summary["policies"]["agent_0"]["rejected"]
    assert [(r["iteration"], r["text"], r["decided_by"]) for r in rejected] == [(0, "SPIN in place", "evaluation")]
    text = policies_text(worse.summary["policies"])
    assert "- after: Go forward." in text and "- rejected at iteration 0 by evaluation: return" in text
    assert text.count("SPIN in place") == 3

    same = Experiment(cfg, tmp_path / "same", chat_model=FakeRuleChatModel(rule=rule_for("Go forward, fast."))).run()
    rd = RunDirectory(same.run_dir)
    assert [p["accepted"] for p in rd.read_jsonl("policies.jsonl")] == [True] * 3
    assert rd.read_json("learner_state.json")["policies"]["agent_0"] == "Go forward, fast."


def test_review_pauses_before_the_update_and_applies_the_reviewers_decisions(tmp_path):
    cfg = make_config(learning={"review": True, "iterations": 2})
    model = FakeRuleChatModel(rule=langmarl_rule)
    first = Experiment(cfg, tmp_path / "run", chat_model=model).run()
    assert first.paused
    rd = RunDirectory(tmp_path / "run")
    assert not rd.read_jsonl("policies.jsonl")  # nothing applied yet
    exp = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model)
    pending = exp.pending_review()
    assert pending["iteration"] == 0 and set(pending["agents"]) == set(AGENTS)
    assert pending["agents"]["agent_1"]["credits"] == ["CREDIT[agent_1] helped a little"] * 2
    # resuming without a decision stays paused and plays nothing
    calls = len(model.calls)
    again = exp.run()
    assert again.paused and again.episodes_run == 0 and len(model.calls) == calls

    decisions = {"agent_0": {"action": "accept"}, "agent_1": {"action": "reject"},
                 "agent_2": {"action": "edit", "text": "Stay near agent_0."}}
    second = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model).review(decisions)
    assert second.paused  # the next iteration's update waits too
    rows = rd.read_jsonl("policies.jsonl")
    assert [(r["agent"], r["accepted"], r["decided_by"]) for r in rows] == [
        ("agent_0", True, "review"), ("agent_1", False, "review"), ("agent_2", True, "review")]
    state = rd.read_json("learner_state.json")
    assert state["policies"]["agent_0"].startswith("NEWPOLICY[agent_0]")
    assert state["policies"]["agent_1"].startswith("Work with your teammates")
    assert state["policies"]["agent_2"] == "Stay near agent_0."
    assert state["versions"] == {"agent_0": 1, "agent_1": 0, "agent_2": 1}
    assert {d["episode"] for d in rd.load_episode_dicts()} == {0, 1, 2, 3}
    last = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model).review(
        {a: {"action": "accept"} for a in AGENTS})
    assert not last.paused and len(last.summary["iterations"]) == 2


class Crash(RuntimeError):
    pass


def test_a_crash_mid_update_resumes_without_repeating_a_finished_call(tmp_path):
    cfg = make_config(learning={"iterations": 1})
    seen = []

    class Crashing(FakeRuleChatModel):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            if role_of(messages) == "gradient" and "Agent: agent_2" in str(messages[-1].content):
                await asyncio.sleep(0.2)  # the server dies while the other gradients are answered
                raise Crash("server went away")
            seen.append(str(messages[-1].content))
            return self._generate(messages, stop, **kwargs)

    with pytest.raises(Crash):
        Experiment(cfg, tmp_path / "run", chat_model=Crashing(rule=langmarl_rule)).run()
    before = list(seen)
    assert sum(1 for p in before if "read a whole episode" in p) == 2  # the critics finished

    model = FakeRuleChatModel(rule=langmarl_rule)
    result = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model).run()
    prompts = [str(m[-1].content) for m in model.calls]
    assert not any(p in before for p in prompts)  # no finished call is made again
    assert not any(role_of(m) in ("actor", "critic") for m in model.calls)
    # the gradient stage runs only its unfinished calls: those of agent_2
    assert sum(1 for m in model.calls if role_of(m) == "gradient") == 2
    assert [r["optimizer_calls"] for r in RunDirectory(result.run_dir).read_iterations()] == [3]
    assert len(RunDirectory(result.run_dir).read_jsonl("policies.jsonl")) == 3


def test_rerunning_a_finished_run_makes_no_call(tmp_path):
    cfg = make_config(learning={"iterations": 1})
    Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=langmarl_rule)).run()
    model = FakeRuleChatModel(rule=langmarl_rule)
    again = Experiment(cfg, tmp_path / "run", resume=True, chat_model=model).run()
    assert model.calls == [] and again.episodes_run == 0
    # more iterations on resume: the run goes on from its last commit
    longer = make_config(learning={"iterations": 2})
    more = Experiment(longer, tmp_path / "run", resume=True, chat_model=model).run()
    assert more.episodes_run == 2 and len(more.summary["iterations"]) == 2


def test_an_optimizer_reply_that_echoes_the_outcome_is_no_policy_and_is_counted(tmp_path):
    from marlang.methods.langmarl.parsing import malformed_policy

    echo = "The mission was not completed after 5 steps; team return 0.1\n\nThe policy to correct:"
    assert malformed_policy(echo) == "restates an episode's outcome"
    assert malformed_policy("   ") == "empty"
    assert malformed_policy("The policy to correct:\n" * 6) == "repeats itself"  # a small model's loop
    assert malformed_policy("Plan first.\nThen code.\nTest the edge cases.\nKeep it short.") is None
    # real policies, even ones that count steps, pass
    for fine in ("If you do not see the target after 3 steps, turn around.", "Go forward, fast.",
                 "Pick up the key, then open the door; your teammate fetches the box."):
        assert malformed_policy(fine) is None

    def rule(messages):
        system, prompt = str(messages[0].content), str(messages[-1].content)
        if "You improve the policies" in system and "Write the improved policy" in prompt:
            return echo if "agent_0" in prompt else "Go to the target by the shortest path."
        return langmarl_rule(messages)

    result = Experiment(make_config(learning={"iterations": 1}), tmp_path / "run",
                        chat_model=FakeRuleChatModel(rule=rule)).run()
    rd = RunDirectory(result.run_dir)
    updates = {u["agent"]: u for u in rd.read_jsonl("updates.jsonl")}
    assert updates["agent_0"]["malformed"] and updates["agent_0"]["new_policy"] == updates["agent_0"]["old_policy"]
    assert updates["agent_0"]["optimizer_reply"] == echo
    assert updates["agent_1"]["new_policy"] == "Go to the target by the shortest path."
    assert rd.read_iterations()[0]["malformed_policies"] == 1
    assert rd.read_json("learner_state.json")["policies"]["agent_0"].startswith("Work with your teammates")
    # the report shows the reply that was turned down, and why
    rejected = result.summary["policies"]["agent_0"]["rejected"]
    assert rejected == [{"iteration": 0, "text": echo, "decided_by": "the parser (restates an episode's outcome)"}]
    assert "rejected at iteration 0 by the parser" in policies_text(result.summary["policies"])


class _Refused(RuntimeError):
    """What a server that does not know a response_format raises (llama-cpp-python: 500)."""

    status_code = 500


def test_structured_critic_calls_ask_for_the_credit_schema_and_fall_back_once_the_server_refuses(tmp_path):
    formats = []

    def rule(messages):
        return langmarl_rule(messages)

    class Server(FakeRuleChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            fmt = kwargs.pop("response_format", None)
            formats.append((role_of(messages), fmt))
            if fmt is not None and fmt["type"] == "json_schema":
                raise _Refused("response_format type must be 'text' or 'json_object'")
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    model = Server(rule=rule)
    result = Experiment(make_config(learning={"iterations": 1}), tmp_path / "run", chat_model=model).run()
    critic = [fmt for role, fmt in formats if role == "critic"]
    # the two concurrent first calls ask for json_schema and are refused; both are asked again,
    # and every critic call from then on, with json_object and the same schema
    assert [f["type"] for f in critic] == ["json_schema", "json_schema", "json_object", "json_object"]
    schema = critic[2]["schema"]
    assert schema["required"] == AGENTS and set(schema["properties"]) == set(AGENTS)
    assert schema["properties"]["agent_0"]["required"] == ["feedback", "score"]
    assert critic[0]["json_schema"]["schema"] == schema
    assert all(fmt is None for role, fmt in formats if role != "critic")  # only what wants JSON
    assert RunDirectory(result.run_dir).read_iterations()[0]["credit_failures"] == 0


@pytest.mark.parametrize(("structured", "expected"), [("none", None), ("json_object", "json_object")])
def test_structured_none_sends_no_response_format_and_a_fixed_mode_is_kept(tmp_path, structured, expected):
    seen = []

    class Server(FakeRuleChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            fmt = kwargs.pop("response_format", None)
            if role_of(messages) == "critic":
                seen.append(fmt and fmt["type"])
            return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)

    Experiment(make_config(learning={"iterations": 1}, model={"structured": structured}), tmp_path / "run",
               chat_model=Server(rule=langmarl_rule)).run()
    assert seen and set(seen) == {expected}


def test_the_local_engine_constrains_its_own_decoding_and_remote_auto_falls_back_once():
    from marlang.models.structured import StructuredReplies
    from marlang.testing import tiny_chat_model

    local = tiny_chat_model()
    sent = StructuredReplies("auto", local).call_kwargs({"type": "object"}, "critic")
    assert sent["response_format"]["type"] == "json_schema"  # constrained decoding (llguidance)
    assert not StructuredReplies("auto", local).fall_back(_Refused("refused"), sent)
    remote = StructuredReplies("auto", object())
    sent = remote.call_kwargs({"type": "object"}, "critic")
    assert sent["response_format"]["type"] == "json_schema"
    assert not remote.fall_back(RuntimeError("no status"), sent) and remote.mode == "json_schema"
    assert remote.fall_back(_Refused("refused"), sent) and remote.mode == "json_object"
    fixed = StructuredReplies("json_schema", object())  # chosen, not auto: a refusal is the user's to see
    assert not fixed.fall_back(_Refused("refused"), fixed.call_kwargs({"type": "object"}, "critic"))
