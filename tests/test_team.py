"""Teams slot by slot (``team:``): each slot's settings resolved over the top-level ones,
one-line errors, role instructions in prompts (and a protocol giving one speaker its own),
mixed LLM + scripted teams under every protocol, frozen slots under every learner, and two
different local base models in one team."""

from __future__ import annotations

import json
import re

import pytest

from marlang.config import ConfigError, build_config, slot_player
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from tests.fakes import FakeRuleChatModel, babyai_rule, langmarl_rule


def config(**sections):
    data = {
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 3},
        "model": {"cache": False},
        "learning": {"method": "none"},
        "run": {"episodes": 2, "parallel": 2, "progress": False},
    }
    for key, value in sections.items():
        if isinstance(value, dict):
            data.setdefault(key, {}).update(value)
        else:
            data[key] = value
    return build_config(data)


# ------------------------------------------------------------------------------ the config


def test_a_slot_takes_the_top_level_settings_it_does_not_name():
    c = config(agents={"policy": "team policy", "policies": {"agent_1": "own policy"}, "history": 3},
               team={"agent_0": {"model": {"temperature": 0.7}, "role": "You lead.", "history": 1, "learn": False},
                     "agent_1": {"kind": "scripted"}})
    first, second = c.slot("agent_0"), c.slot("agent_1")
    assert (first.kind, first.model.temperature, first.model.spec, first.role, first.learn) == \
        ("llm", 0.7, "local:smollm2", "You lead.", False)
    assert (first.agents.history, first.agents.policy) == (1, "team policy")
    assert (second.kind, slot_player(second), second.agents.policy, second.agents.history) == \
        ("scripted", "scripted", "own policy", 3)
    assert c.team_label == "agent_0: local:smollm2 (role), agent_1: scripted" and not c.all_scripted
    # a config without team: every slot is the top-level settings, as before
    plain = config()
    assert not plain.team_label and all(s.model == plain.model and s.kind == "llm" for s in plain.slots().values())


@pytest.mark.parametrize("sections, message", [
    ({"team": {"agent_7": {}}}, ("team: unknown slot 'agent_7'; env 'babyai/goto-obj' with env.n_agents 2 has "
                                 "agent_0, agent_1")),
    ({"team": {"agent_0": {"colour": "red"}}}, "unknown config key 'team.agent_0.colour'"),
    ({"team": {"agent_0": {"model": {"spce": "x"}}}}, "unknown config key 'team.agent_0.model.spce'"),
    ({"team": {"agent_0": {"model": {"spec": "nope"}}}}, "invalid value for 'team.agent_0.model.spec'"),
    ({"team": {"agent_1": {"kind": "scripted", "role": "lead"}}}, "team.agent_1: a scripted slot acts as the env's"),
    ({"learning": {"method": "reflexion"}, "team": {"agent_0": {"learn": False}, "agent_1": {"learn": False}}},
     "learning.method 'reflexion' has no slot to update"),
    ({"learning": {"method": "reflexion"}, "team": {"agent_0": {"kind": "scripted"}, "agent_1": {"learn": False}}},
     "learning.method 'reflexion' has no slot to update"),
    ({"learning": {"method": "ppo"}, "team": {"agent_1": {"model": {"spec": "openai:gpt-4o-mini"}}}},
     "team.agent_1: learning.method 'ppo' trains local weights and its model.spec 'openai:gpt-4o-mini' has none"),
    ({"learning": {"method": "ppo", "sharing": "shared"}, "team": {"agent_1": {"model": {"spec": "hf:/m/other"}}}},
     ("learning.sharing 'shared' shares one adapter between slots on one base model, and the slots that learn are "
     "on several (agent_0 on local:smollm2, agent_1 on hf:/m/other)")),
    ({"learning": {"method": "ppo", "value": "central"}, "team": {"agent_1": {"model": {"spec": "hf:/m/other"}}}},
     "learning.value 'central' reads every agent's state on one base model"),
    ({"env": {"id": "code/humaneval"}, "learning": {"method": "magrpo", "rollout_server": "http://h:8000/v1"},
      "team": {"agent_1": {"model": {"spec": "hf:/m/other"}}}},
     "learning.rollout_server serves one base model's adapters"),
    ({"protocol": {"name": "unidirectional", "speakers": ["agent_1"]}, "team": {"agent_1": {"kind": "scripted"}}},
     "protocol.speakers: 'agent_1' is a scripted slot, which says nothing"),
])
def test_a_team_the_env_or_the_learner_cannot_play_is_one_line(sections, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config(**sections)


def test_a_bad_team_creates_nothing(tmp_path):
    from marlang.cli import main

    path = tmp_path / "c.yaml"
    path.write_text("env: {id: babyai/goto-obj}\nteam: {agent_9: {kind: scripted}}\n")
    assert main(["run", str(path), "--out", str(tmp_path / "run")]) == 2
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------------------------ roles


def test_a_slots_role_is_in_its_prompts_and_a_protocol_can_give_one_speaker_its_own(tmp_path):
    from marlang.graphs.protocols import _join, register_protocol
    from marlang.registry import PROTOCOLS

    def build_leader(agents, protocol_config=None):
        """agent_0 speaks as the leader, whatever its slot's role; then everyone acts."""
        from langchain_core.runnables import RunnableConfig
        from langgraph.graph import END, START, StateGraph

        from marlang.graphs.protocols import ProtocolState, call_context

        async def lead(state: ProtocolState, config: RunnableConfig):
            name = next(iter(agents))
            msg = await agents[name].speak(state["observations"][name], [], call_context(config), role="LEADER-ROLE")
            return {"transcript": [msg]}

        async def act(state: ProtocolState, config: RunnableConfig):
            decisions = {a: await agents[a].act(o, list(state["transcript"]), call_context(config))
                         for a, o in state["observations"].items()}
            return {"decisions": decisions}

        g = StateGraph(ProtocolState)
        g.add_node("lead", lead)
        g.add_node("join", _join)
        g.add_node("act", act)
        g.add_edge(START, "lead")
        g.add_edge("lead", "join")
        g.add_edge("join", "act")
        g.add_edge("act", END)
        return g.compile()

    register_protocol("test-leader", build_leader)
    try:
        model = FakeRuleChatModel(rule=babyai_rule)
        c = config(protocol={"name": "test-leader"}, run={"episodes": 1, "parallel": 1},
                   team={"agent_0": {"role": "SCOUT-ROLE"}, "agent_1": {"role": "CARRIER-ROLE"}})
        Experiment(c, tmp_path / "run", chat_model=model).run()
    finally:
        PROTOCOLS._entries.pop("test-leader", None)
    systems = [(str(m[0].content), str(m[-1].content)) for m in model.calls]
    spoken = [s for s, user in systems if "Write a short message" in user]
    assert spoken and all("Your role: LEADER-ROLE" in s and "SCOUT-ROLE" not in s for s in spoken)
    acted = [s for s, user in systems if "Write a short message" not in user]
    assert any(s.startswith("You are agent_0") and "Your role: SCOUT-ROLE" in s for s in acted)
    assert any(s.startswith("You are agent_1") and "Your role: CARRIER-ROLE" in s for s in acted)


def test_without_a_role_the_system_prompt_is_unchanged():
    from marlang.agents.llm_agent import LLMAgent
    from marlang.types import TextObservation

    agent = LLMAgent("agent_0", FakeRuleChatModel(), policy="P", world="a grid")
    obs = TextObservation(text="You see a wall.", mission="go to the ball", legal_actions=["go forward", "turn left"])
    assert agent.system_prompt(obs) == ("You are agent_0, one of 2 agents acting together in a grid.\n"
                                        "Team mission: go to the ball\nPossible actions: go forward, turn left.\n"
                                        "Your policy: P")
    assert agent.system_prompt(obs, role="Lead.").startswith(
        "You are agent_0, one of 2 agents acting together in a grid. Your role: Lead.\n")


# ------------------------------------------------------------------------------ mixed teams


@pytest.mark.parametrize("protocol", ["none", "bidirectional", "unidirectional", "alternating-2"])
def test_a_scripted_slot_says_nothing_and_acts_as_the_scripted_team_under_every_protocol(tmp_path, protocol):
    model = FakeRuleChatModel(rule=babyai_rule)
    c = config(protocol=protocol, team={"agent_1": {"kind": "scripted"}})
    result = Experiment(c, tmp_path / "run", chat_model=model).run()
    assert all(str(m[0].content).startswith("You are agent_0") for m in model.calls)  # no call for agent_1
    rd = RunDirectory(result.run_dir)
    episodes = rd.load_episode_dicts()
    assert len(episodes) == 2
    for d in episodes:
        for step in d["steps"]:
            assert step["decisions"]["agent_1"]["raw"] == "(scripted)"
            assert step["decisions"]["agent_1"]["action"] in step["observations"]["agent_1"]["legal_actions"]
            assert all(m["sender"] == "agent_0" for m in step["messages"])
            assert step["messages"] or protocol == "none"
    manifest = rd.read_json("manifest.json")
    assert manifest["team"] == {"agent_0": "fake:rule", "agent_1": "scripted"}
    summary = rd.read_json("summary.json")
    assert summary["setting"].endswith("; agent_1: scripted")
    from marlang.view.collect import collect_run

    assert collect_run(result.run_dir)["team"] == manifest["team"]  # marlang view shows each slot's player


def test_the_scripted_slot_plays_what_the_scripted_team_it_drives_would(tmp_path):
    """The same seed: the scripted slot's first action equals that of the scripted team it drives."""
    import marlang

    model = FakeRuleChatModel(rule=babyai_rule)
    result = Experiment(config(team={"agent_1": {"kind": "scripted"}}), tmp_path / "run", chat_model=model).run()
    first = RunDirectory(result.run_dir).load_episode_dicts()[0]
    env = marlang.make_env("babyai/goto-obj", n_agents=2, max_steps=3)
    observations, _ = env.reset(seed=first["seed"])
    team = env.scripted_team(driver="agent_1")
    team.reset()
    assert team.act(observations)["agent_1"] == first["steps"][0]["decisions"]["agent_1"]["action"]


def test_a_scripted_babyai_slot_other_than_agent_0_does_the_mission_beside_an_llm_that_waits(tmp_path):
    """The scripted team is driven by agent_0; a scripted agent_1 drives a team of its own, so it
    reaches the goal while the LLM slot only ever drops with empty hands."""
    model = FakeRuleChatModel(rule=lambda messages: "Nothing to do.\nAction: drop")
    c = config(env={"max_steps": 64}, team={"agent_1": {"kind": "scripted"}}, run={"episodes": 3, "parallel": 3})
    result = Experiment(c, tmp_path / "run", chat_model=model).run()
    episodes = RunDirectory(result.run_dir).load_episode_dicts()
    assert all(step["decisions"]["agent_0"]["action"] == "drop" for d in episodes for step in d["steps"])
    # agent_1 heads for the mission; it succeeds wherever the LLM slot, which never moves, does
    # not stand in its way (a slot that only made way for agent_0 solved none)
    assert sum(d["success"] for d in episodes) >= 2


def test_a_play_back_without_a_team_section_names_the_adapters_each_slot_plays(tmp_path):
    """``model.adapters`` and no ``team:``: the manifest's ``team`` names each slot's player,
    the base model for a slot the adapters directory holds nothing for."""
    from marlang.prompts import PromptLibrary
    from marlang.run import build

    c = config(env={"n_agents": 3}, model={"adapters": str(tmp_path / "RUN")})
    played = build.manifest(c, setting="s", model_id="local:smollm2", prompts=PromptLibrary(),
                            adapters={"agent_0": "h0", "agent_1": "h1"})
    with_adapters = f"local:smollm2 + adapters {tmp_path / 'RUN'}"
    assert played["team"] == {"agent_0": with_adapters, "agent_1": with_adapters, "agent_2": "local:smollm2"}
    assert played["adapters"] == {"agent_0": "h0", "agent_1": "h1"}
    assert "team" not in build.manifest(config(), setting="s", model_id="local:smollm2", prompts=PromptLibrary())


# ------------------------------------------------------------------------------ frozen slots


def test_langmarl_credits_a_frozen_slot_but_rewrites_only_the_slots_that_learn(tmp_path):
    model = FakeRuleChatModel(rule=langmarl_rule)
    c = config(env={"n_agents": 3}, learning={"method": "langmarl", "rollouts": 2, "iterations": 1},
               team={"agent_1": {"learn": False}})
    result = Experiment(c, tmp_path / "run", chat_model=model).run()
    prompts = [str(m[-1].content) for m in model.calls]
    critic = [p for p in prompts if "read a whole episode" in p]
    assert critic and all("agent_1" in p for p in critic)  # the critic reads and credits every slot
    gradients = [p for p in prompts if "Turn this assessment" in p]
    assert len(gradients) == 2 * 2 and not any("CREDIT[agent_1]" in p for p in gradients)
    rows = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    by_agent = {r["agent"]: r for r in rows}
    assert by_agent["agent_1"]["trajectories"][0]["credit"].startswith("CREDIT[agent_1]")
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    assert state["policies"]["agent_1"] == c.slot("agent_1").agents.policy  # frozen: unchanged
    assert "NEWPOLICY[agent_0]" in state["policies"]["agent_0"] and "NEWPOLICY[agent_2]" in state["policies"]["agent_2"]


def test_reflexion_writes_memories_only_for_the_slots_that_learn(tmp_path):
    model = FakeRuleChatModel(rule=babyai_rule)
    c = config(learning={"method": "reflexion", "rollouts": 2, "iterations": 1}, team={"agent_0": {"learn": False}})
    result = Experiment(c, tmp_path / "run", chat_model=model).run()
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    assert state["memories"]["agent_0"] == [] and len(state["memories"]["agent_1"]) == 2


def test_ppo_trains_only_the_adapters_of_the_slots_that_learn(tmp_path):
    from marlang.testing import tiny_chat_model

    c = config(agents={"chain_of_thought": False, "action_selection": "score"},
               learning={"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                         "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}},
               team={"agent_1": {"learn": False}})
    result = Experiment(c, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    adapters = sorted(p.name for p in (result.run_dir / "adapters" / "0").iterdir() if p.is_dir())
    assert adapters == ["agent_0"]
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    assert set(state["adapters"]) == {"agent_0"}
    rows = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert [r["agent"] for r in rows] == ["agent_0"] and rows[0]["decisions"] > 0
    # the frozen slot still acted (greedily, with the base model) in every rollout
    first = RunDirectory(result.run_dir).load_episode_dicts()[0]
    assert first["steps"][0]["decisions"]["agent_1"]["sampled"] is False
    assert first["steps"][0]["decisions"]["agent_0"]["sampled"] is True


# ------------------------------------------------------------------------------ two base models


@pytest.mark.real_model
def test_two_local_base_models_each_play_their_slot_loaded_once(tmp_path, tiny_dir):
    """configs/team_two_models.yaml with a third agent: agent_0 on the embedded SmolLM2,
    agent_1 and agent_2 on a tiny random model (loaded once for both); Reflexion learns on
    agent_0 only."""
    from marlang.config import load_config

    c = load_config("configs/team_two_models.yaml", overrides=[
        "env.n_agents=3", "env.max_steps=2", "model.cache=false", "learning.rollouts=1", "learning.iterations=1",
        "run.parallel=1", "run.progress=false", f"team.agent_1.model.spec=hf:{tiny_dir}",
        f"team.agent_2={{model: {{spec: 'hf:{tiny_dir}'}}, learn: false}}"])
    experiment = Experiment(c, tmp_path / "run")
    result = experiment.run()
    models = experiment.slot_models
    assert models["agent_1"] is models["agent_2"] and models["agent_0"] is not models["agent_1"]
    rd = RunDirectory(result.run_dir)
    calls = rd.read_llm_calls()
    by_agent = {(r["agent"], r["model"]) for r in calls if r["role"] == "actor"}
    assert ("agent_0", "local:smollm2") in by_agent and all(
        m != "local:smollm2" for a, m in by_agent if a in ("agent_1", "agent_2"))
    assert rd.read_json("manifest.json")["team"]["agent_1"] == f"hf:{tiny_dir} (frozen)"
    state = rd.read_json("learner_state.json")
    assert state["memories"]["agent_1"] == [] and len(state["memories"]["agent_0"]) == 1


def test_magrpo_trains_only_the_slots_that_learn_and_refuses_a_scripted_slot(tmp_path):
    from marlang.testing import tiny_chat_model

    data = {"env": {"id": "code/humaneval", "n_agents": 2, "max_steps": 1,
                    "kwargs": {"structure": "joint", "task_ids": ["HumanEval/0"]}},
            "agents": {"chain_of_thought": False, "history": 0},
            "learning": {"method": "magrpo", "iterations": 1, "rollouts": 1, "num_generations": 2,
                         "max_new_tokens": 6, "epochs": 1, "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}},
            "run": {"parallel": 1, "progress": False}}
    c = config(**{**data, "team": {"agent_1": {"learn": False}}})
    result = Experiment(c, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=6, temperature=1.0)).run()
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    assert set(state["adapters"]) == {"agent_0"}
    tree = [json.loads(line) for line in (result.run_dir / "trees" / "0.jsonl").read_text().splitlines()]
    assert len(tree) == 2 and all(set(t["answers"]) == {"agent_0", "agent_1"} for t in tree)  # both answered
    rows = RunDirectory(result.run_dir).read_iterations()
    assert rows[0]["completions"] == 2  # agent_0's two completions only
    from marlang.learners import learner_entry

    scripted = config(**{**data, "team": {"agent_1": {"kind": "scripted"}}})
    with pytest.raises(ValueError, match="team.agent_1: learning.method 'magrpo' samples every slot's answers"):
        learner_entry("magrpo").check_config(scripted)


def test_a_slot_on_a_served_model_sends_its_calls_there_beside_the_local_model(tmp_path):
    """agent_0 on an OpenAI-compatible server (over HTTP), agent_1 on the top-level model:
    only agent_0's prompts reach the server, and the manifest names each slot's model."""
    from marlang.testing import FakeOpenAIServer

    local = FakeRuleChatModel(rule=babyai_rule)
    with FakeOpenAIServer(reply="Action: turn left") as server:
        c = config(run={"episodes": 1, "parallel": 1},
                   team={"agent_0": {"model": {"spec": "openai:served-model", "base_url": server.base_url,
                                               "cache": False, "max_retries": 0}}})
        result = Experiment(c, tmp_path / "run", chat_model=local).run()
    assert server.requests and all("You are agent_0" in r["messages"][0]["content"] for r in server.requests)
    assert local.calls and all(str(m[0].content).startswith("You are agent_1") for m in local.calls)
    first = RunDirectory(result.run_dir).load_episode_dicts()[0]["steps"][0]["decisions"]
    assert first["agent_0"]["action"] == "turn left"
    manifest = RunDirectory(result.run_dir).read_json("manifest.json")
    assert manifest["team"] == {"agent_0": "openai:served-model", "agent_1": "fake:rule"}


def test_ppo_trains_a_local_slot_beside_a_frozen_teammate_on_a_served_model(tmp_path):
    from marlang.testing import FakeOpenAIServer, tiny_chat_model

    with FakeOpenAIServer(reply="Action: turn left") as server:
        c = config(agents={"chain_of_thought": False, "action_selection": "score"},
                   learning={"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                             "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}},
                   team={"agent_1": {"model": {"spec": "openai:served-model", "base_url": server.base_url,
                                               "cache": False, "max_retries": 0},
                                     "action_selection": "generate", "learn": False}})
        result = Experiment(c, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    assert server.requests and all("You are agent_1" in r["messages"][0]["content"] for r in server.requests)
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    assert set(state["adapters"]) == {"agent_0"}
    steps = [s for d in RunDirectory(result.run_dir).load_episode_dicts() for s in d["steps"]]
    assert all(s["decisions"]["agent_1"]["action"] == "turn left" for s in steps)


# ------------------------------------------------------------------------------ training on two base models


@pytest.fixture(scope="module")
def two_bases(tmp_path_factory):
    """Two tiny random models on disk (different weights, the same shapes): hf:A and hf:B."""
    from marlang.testing import tiny_llama, tiny_tokenizer

    paths = []
    for seed in (0, 1):
        path = tmp_path_factory.mktemp(f"base{seed}")
        tok = tiny_tokenizer()
        tiny_llama(len(tok), seed=seed, eos_token_id=tok.eos_token_id).save_pretrained(path)
        tok.save_pretrained(path)
        paths.append(f"hf:{path}")
    return paths


def _adapter_bases(directory):
    return {p.name: json.loads((p / "marlang_adapter.json").read_text())["base_id"].split("@")[0]
            for p in sorted(directory.iterdir()) if (p / "marlang_adapter.json").is_file()}


def test_ppo_trains_slots_on_two_base_models_each_on_its_own_and_resumes_and_plays_them_back(tmp_path, two_bases):
    """agent_0 on base A and agent_1 on base B both learn: one adapter each, on its slot's
    model (loaded once); the saved state resumes; a play-back puts each adapter on its base."""
    a, b = two_bases
    learning = {"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}}
    sections = {"model": {"spec": a, "cache": False, "max_tokens": 8},
                    "agents": {"chain_of_thought": False, "action_selection": "score"},
                    "team": {"agent_1": {"model": {"spec": b}}}}
    c = config(learning=learning, **sections)
    assert c.team_label == f"agent_1: {b}"
    experiment = Experiment(c, tmp_path / "run")
    result = experiment.run()
    models = experiment.slot_models
    engine_a, engine_b = models["agent_0"].engine, models["agent_1"].engine
    assert engine_a is not engine_b
    assert engine_a.adapters.agents == ("agent_0",) and engine_b.adapters.agents == ("agent_1",)
    rd = RunDirectory(result.run_dir)
    assert _adapter_bases(result.run_dir / "adapters" / "0") == {"agent_0": a, "agent_1": b}
    rows = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert {r["agent"] for r in rows} == {"agent_0", "agent_1"}
    assert all(r["decisions"] > 0 and r["loss"] is not None for r in rows)
    first = rd.load_episode_dicts()[0]["steps"][0]["decisions"]
    assert first["agent_0"]["sampled"] and first["agent_1"]["sampled"]
    state = rd.read_json("learner_state.json")
    assert set(state["adapters"]) == {"agent_0", "agent_1"}

    # one more iteration resumes from the saved state of both bases
    longer = config(learning={**learning, "iterations": 2}, **sections)
    resumed = Experiment(longer, tmp_path / "run", resume=True).run()
    after = RunDirectory(resumed.run_dir).read_json("learner_state.json")
    assert after["iteration"] == 2 and set(after["adapters"]) == {"agent_0", "agent_1"}
    assert _adapter_bases(resumed.run_dir / "adapters" / "1") == {"agent_0": a, "agent_1": b}

    # played back: each slot acts with its own trained adapter, on its own base model
    back = config(model={"spec": a, "cache": False, "max_tokens": 8, "adapters": str(resumed.run_dir)},
                  agents={"chain_of_thought": False, "action_selection": "score"},
                  team={"agent_1": {"model": {"spec": b}}}, run={"episodes": 1, "parallel": 1})
    played = Experiment(back, tmp_path / "back").run()
    manifest = RunDirectory(played.run_dir).read_json("manifest.json")
    assert manifest["adapters"] == {k: v["hash"] for k, v in after["adapters"].items()}
    steps = RunDirectory(played.run_dir).load_episode_dicts()[0]["steps"]
    assert steps and all(not d["sampled"] for s in steps for d in s["decisions"].values())


@pytest.mark.real_model
def test_ppo_trains_the_embedded_model_and_a_second_local_model_side_by_side(tmp_path, two_bases):
    """agent_0 on the embedded SmolLM2 and agent_1 on another local model both learn with PPO:
    each adapter is trained and saved on its own base."""
    c = config(env={"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
               model={"spec": "local:smollm2", "cache": False, "max_tokens": 8},
               agents={"chain_of_thought": False, "action_selection": "score"},
               learning={"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                         "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}},
               team={"agent_1": {"model": {"spec": two_bases[1]}}})
    result = Experiment(c, tmp_path / "run").run()
    assert _adapter_bases(result.run_dir / "adapters" / "0") == {"agent_0": "local:smollm2", "agent_1": two_bases[1]}
    rows = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert {r["agent"] for r in rows} == {"agent_0", "agent_1"} and all(r["decisions"] > 0 for r in rows)


def test_magrpo_samples_and_trains_each_slot_on_its_own_base_model(tmp_path, two_bases):
    a, b = two_bases
    c = config(env={"id": "code/humaneval", "n_agents": 2, "max_steps": 1,
                    "kwargs": {"structure": "joint", "task_ids": ["HumanEval/0"]}},
               model={"spec": a, "cache": False, "max_tokens": 6, "temperature": 1.0},
               agents={"chain_of_thought": False, "history": 0},
               learning={"method": "magrpo", "iterations": 1, "rollouts": 1, "num_generations": 2,
                         "max_new_tokens": 6, "epochs": 1, "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}},
               run={"parallel": 1, "progress": False}, team={"agent_1": {"model": {"spec": b}}})
    experiment = Experiment(c, tmp_path / "run")
    result = experiment.run()
    engine_a, engine_b = (experiment.slot_models[x].engine for x in ("agent_0", "agent_1"))
    # each slot sampled on its own model
    assert engine_a.counters.generate_calls >= 1 and engine_b.counters.generate_calls >= 1
    assert _adapter_bases(result.run_dir / "adapters" / "0") == {"agent_0": a, "agent_1": b}
    rows = RunDirectory(result.run_dir).read_iterations()
    assert rows[0]["completions"] == 4  # two completions of each agent, each trained on its base
    records = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert {r["agent"] for r in records} == {"agent_0", "agent_1"} and all(r["loss"] is not None for r in records)


# ------------------------------------------------------------------------------ a trained neural policy in a slot

LBF = "lbf/8x8-2p-2f-coop"


@pytest.fixture(scope="module")
def mappo_run(tmp_path_factory):
    """A MAPPO team trained briefly on level-based foraging (its run directory)."""
    out = tmp_path_factory.mktemp("mappo") / "run"
    c = build_config({"env": {"id": LBF}, "agents": {"kind": "neural"},
                      "learning": {"method": "mappo", "frames": 400, "frames_per_batch": 200, "n_envs": 2,
                                   "hidden": [16], "evaluation_episodes": 1, "epochs": 1, "minibatch_size": 200},
                      "run": {"seed": 1, "progress": False}})
    Experiment(c, out).run()
    return out


def test_a_trained_neural_policy_plays_its_slot_beside_an_llm(tmp_path, mappo_run):
    """agent_1 is the MAPPO run's greedy policy, agent_0 an LLM: at every step agent_1's
    action is what that policy chooses in the env's state, by its own restore of the
    checkpoint; the records say what played each slot."""
    from marlang.envs import make
    from marlang.methods.neural.slot_policy import NeuralPolicy
    from tests.fakes import FakeRuleChatModel

    c = config(env={"id": LBF, "n_agents": 2, "max_steps": None}, agents={"chain_of_thought": False},
               team={"agent_1": {"kind": "neural", "checkpoint": str(mappo_run)}},
               run={"episodes": 2, "parallel": 2})
    assert c.team_label == f"agent_1: neural {mappo_run}" and c.learning_slots() == ["agent_0"]
    llm = FakeRuleChatModel(rule=lambda messages: "Action: stay")
    result = Experiment(c, tmp_path / "run", chat_model=llm).run()
    rd = RunDirectory(result.run_dir)
    assert rd.read_json("manifest.json")["team"] == {"agent_0": "fake:rule", "agent_1": f"neural {mappo_run}"}
    assert llm.calls and all(str(m[0].content).startswith("You are agent_0") for m in llm.calls)
    policy = NeuralPolicy.load(str(mappo_run), c, "check")
    for episode in rd.load_episode_dicts():
        env = make(LBF, n_agents=2)
        env.reset(seed=episode["seed"])
        for step in episode["steps"]:
            decisions = step["decisions"]
            assert decisions["agent_1"]["raw"] == "(neural)" and decisions["agent_0"]["action"] == "stay"
            assert decisions["agent_1"]["action"] == policy.actions(env)["agent_1"]
            env.step({a: d["action"] for a, d in decisions.items()})


@pytest.mark.parametrize("slot, message", [
    ({"kind": "neural"}, ("team.agent_1: a neural slot plays the policy of a trained neural run: set "
                         "team.agent_1.checkpoint")),
    ({"checkpoint": "runs/x"}, "team.agent_1: checkpoint names the neural run that plays a slot of kind: neural"),
    ({"kind": "neural", "checkpoint": "runs/x", "role": "lead"}, "team.agent_1: a neural slot acts as its trained"),
])
def test_a_neural_slot_that_cannot_play_is_one_line(slot, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config(env={"id": LBF}, team={"agent_1": slot})
    with pytest.raises(ConfigError, match="a team of neural and scripted slots has no LLM to run"):
        config(env={"id": LBF}, team={"agent_0": {"kind": "scripted"},
                                      "agent_1": {"kind": "neural", "checkpoint": "runs/x"}})


def test_a_neural_slot_on_another_env_or_without_a_run_is_refused_creating_nothing(tmp_path, mappo_run):
    from tests.fakes import FakeRuleChatModel

    llm = FakeRuleChatModel(rule=lambda messages: "Action: stay")
    cases = [
        ({"id": "matrix/climbing", "n_agents": 2}, str(mappo_run),
         (f"team.agent_1.checkpoint: {mappo_run} trained on env '{LBF}' with 2 agents, and this run plays "
         "'matrix/climbing' with 2")),
        ({"id": LBF}, str(tmp_path), "holds no trained neural policy"),
        ({"id": "rware/tiny-2ag"}, str(mappo_run), "trained on env"),
        ({"id": LBF, "max_steps": 6}, str(mappo_run), "trained with env.max_steps None, and this run has 6"),
    ]
    for env, checkpoint, message in cases:
        c = config(env=env, agents={"chain_of_thought": False},
                   team={"agent_1": {"kind": "neural", "checkpoint": checkpoint}})
        with pytest.raises(ConfigError, match=re.escape(message)):
            Experiment(c, tmp_path / "run", chat_model=llm).run()
        assert not (tmp_path / "run").exists()
    c = config(env={"id": "babyai/goto-obj"}, team={"agent_1": {"kind": "neural", "checkpoint": "x"}})
    with pytest.raises(ConfigError, match="env 'babyai/goto-obj' has none"):
        Experiment(c, tmp_path / "run", chat_model=llm).run()
    assert not (tmp_path / "run").exists()


def test_restoring_a_neural_policy_leaves_the_random_generators_as_they_were(mappo_run):
    import random

    import numpy as np
    import torch

    from marlang.methods.neural.slot_policy import NeuralPolicy

    c = config(env={"id": LBF, "max_steps": None}, team={"agent_1": {"kind": "neural", "checkpoint": str(mappo_run)}})
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    expected = random.random(), float(np.random.rand()), float(torch.rand(1))
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    NeuralPolicy.load(str(mappo_run), c, "check")
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == expected


def test_going_back_to_the_initial_adapters_after_training_restores_them_and_fresh_optimizers(tmp_path, two_bases):
    """After an update, a state with no adapters (a first candidate not committed) brings every
    base's adapters back to their initial weights (LoRA's B starts at zero) and the
    optimizers back to empty; a saved state that does not fit the team changes nothing."""
    import torch

    from marlang.types import PolicyState

    a, b = two_bases
    c = config(model={"spec": a, "cache": False, "max_tokens": 8},
               agents={"chain_of_thought": False, "action_selection": "score"},
               learning={"method": "ppo", "iterations": 1, "rollouts": 2, "epochs": 1, "minibatch_size": 4,
                         "eval_episodes": 0, "lora": {"r": 4, "alpha": 8}},
               team={"agent_1": {"model": {"spec": b}}})
    experiment = Experiment(c, tmp_path / "run")
    experiment.run()
    learner = experiment.learner.trainer

    def lora_b():
        return {k: v.clone() for base in learner.bases for k, v in base.team.state_dict().items() if "lora_B" in k}

    trained = lora_b()
    assert trained and any(bool(v.abs().sum() > 0) for v in trained.values())
    assert any(len(o.state) for o in learner.optimizers.values())
    learner.load_state(PolicyState(iteration=0))
    assert all(bool((v == 0).all()) for v in lora_b().values())
    assert all(not o.state for o in learner.optimizers.values())

    state = learner.adapters_dir(0) / "ppo_state.pt"
    saved = torch.load(state, weights_only=True)
    torch.save({**saved, "weights": {k: v for k, v in saved["weights"].items() if "agent_1" not in k}},
               tmp_path / "odd.pt")
    odd = PolicyState(iteration=1, adapters={"agent_0": {"path": "x", "hash": "y"}},
                      extra={"ppo_state": str(tmp_path / "odd.pt")})
    with pytest.raises(ValueError, match="does not match this team's adapters"):
        learner.load_state(odd)
    assert all(bool((v == 0).all()) for v in lora_b().values())  # nothing was loaded
