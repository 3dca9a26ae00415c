"""PPO on the learner seam with a tiny random model: a real update writes adapters and
optimizer state, rollouts act (sampling) with the committed adapters, evaluations are greedy
on held-out seeds, and the pieces (GAE, clipping) do what they say."""

import json
import shutil

import pytest
import torch

from marlang.config import ConfigError, build_config
from marlang.methods.lora.distributed import clip_gradients
from marlang.methods.ppo.samples import gae
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from marlang.seeds import env_seeds
from marlang.testing import tiny_chat_model
from tests.fakes import assert_same_record


def ppo_config(**learning):
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 3},
        "agents": {"chain_of_thought": False, "action_selection": "score"},
        "model": {"cache": False},
        "learning": {"method": "ppo", "iterations": 2, "rollouts": 2, "epochs": 2, "minibatch_size": 4,
                     "eval_episodes": 2, "lr": 1e-3, "lora": {"r": 4, "alpha": 8}, **learning},
        "run": {"parallel": 2, "progress": False},
    })


def test_a_ppo_run_trains_each_agents_adapter_and_acts_with_it(tmp_path):
    # The hook pays every step, so the value heads (zero before training) must move.
    config = ppo_config(reward_hook="tests.methods.ppo.ppo_hooks:one_per_step", value_lr=1e-2)
    result = Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    rd = RunDirectory(result.run_dir)
    state = rd.read_json("learner_state.json")
    assert state["iteration"] == 2 and set(state["adapters"]) == {"agent_0", "agent_1"}
    assert state["versions"] == {"agent_0": 2, "agent_1": 2}
    for agent, ref in state["adapters"].items():
        assert ref["path"].endswith(f"adapters/1/{agent}")
        files = {p.name for p in (result.run_dir / "adapters" / "1" / agent).iterdir()}
        assert {"adapter_config.json", "adapter_model.safetensors", "value_head.safetensors"} <= files
    assert (result.run_dir / "adapters" / "1" / "ppo_state.pt").is_file()
    episodes = rd.load_episode_dicts()
    train = [d for d in episodes if d["phase"] == "train"]
    test = [d for d in episodes if d["phase"] == "test"]
    assert len(train) == 4
    # held-out evaluation: before training, after each update, on the same unseen seeds
    assert sorted(d["iteration"] for d in test) == [0, 0, 1, 1, 2, 2]
    assert {d["seed"] for d in test} == set(env_seeds(0, "test", range(2)))  # run.eval_seed's set
    assert [d["seed"] for d in sorted(train, key=lambda d: d["episode"])] == list(env_seeds(0, "train", range(4)))
    assert not {d["seed"] for d in test} & {d["seed"] for d in train}
    for d in train:
        for step in d["steps"]:
            for dec in step["decisions"].values():
                assert dec["sampled"] and dec["prompt"] and dec["logprob"] <= 0 and dec["value"] is not None
                assert len(dec["scores"]) == len(step["observations"]["agent_0"]["legal_actions"])
    for d in test:
        assert not any(dec["sampled"] for s in d["steps"] for dec in s["decisions"].values())
    # iteration 1's rollouts acted with iteration 0's heads: the untrained heads answer 0, the
    # trained ones (taught that every step pays 1) do not
    first_values = {d["iteration"]: d["steps"][0]["decisions"]["agent_0"]["value"] for d in train}
    assert first_values[0] == 0.0 and first_values[1] > 0.0
    rows = rd.read_iterations()
    assert [r["iteration"] for r in rows] == [0, 1]
    assert all(r["decisions"] > 0 and r["skipped_minibatches"] == 0 for r in rows)
    updates = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert {u["agent"] for u in updates} == {"agent_0", "agent_1"}
    assert all(u["policy_loss"] is not None and u["accepted"] for u in updates)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["evaluation"]["iteration"] == 2 and summary["evaluation"]["episodes"] == 2
    assert summary["evaluation_initial"]["iteration"] == 0
    # both evaluations played the same held-out seeds: their change is paired seed by seed
    change = summary["evaluation_change"]
    assert change["episodes"] == 2 and change["gained"] + change["lost"] <= 2


def test_ppo_trains_on_the_progress_reward_of_the_runs_own_episodes(tmp_path):
    """The built-in BabyAI progress hook through PPO: it gets the learner's gamma, and on the
    trajectories the runtime really records (terminations, final observations) each
    episode's discounted shaping is gamma^T Phi(s_T) - Phi(s_0)."""
    from marlang.envs.babyai.shaping import potential
    from tests.methods.ppo import ppo_hooks

    ppo_hooks.CALLS.clear()
    config = ppo_config(reward_hook="tests.methods.ppo.ppo_hooks:recorded_progress", gamma=0.9,
                        iterations=1, eval_episodes=1)
    Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    assert {c["agent"] for c in ppo_hooks.CALLS} == {"agent_0", "agent_1"}
    assert {c["gamma"] for c in ppo_hooks.CALLS} == {0.9}
    for call in ppo_hooks.CALLS:
        traj, agent, shaped = call["trajectory"], call["agent"], call["rewards"]
        env = [s.rewards.get(agent, 0.0) for s in traj.steps]
        last = traj.steps[-1]
        end = 0.0 if last.terminations.get(agent, last.terminated) else potential(traj.final_observations[agent])
        start = potential(traj.steps[0].observations[agent])
        gap = sum((r - e) * 0.9**t for t, (r, e) in enumerate(zip(shaped, env, strict=True)))
        assert gap == pytest.approx(0.9 ** len(traj.steps) * end - start, abs=1e-9)
        assert any(r != e for r, e in zip(shaped, env, strict=True))  # the shaping did reach PPO


def test_ppo_refuses_what_it_cannot_train_before_creating_anything(tmp_path):
    cfg = build_config({"model": {"spec": "openai:gpt-4o-mini"}, "learning": {"method": "ppo"}})
    with pytest.raises(ConfigError, match="trains local weights.*'openai:gpt-4o-mini'"):
        Experiment(cfg, tmp_path / "a").run()
    cfg = build_config({"agents": {"action_selection": "generate"}, "learning": {"method": "ppo"}})
    with pytest.raises(ConfigError, match="action_selection 'score'"):
        Experiment(cfg, tmp_path / "b").run()
    cfg = build_config({"env": {"id": "code/humaneval"}, "learning": {"method": "ppo"}})
    with pytest.raises(ConfigError, match="free text"):
        Experiment(cfg, tmp_path / "c").run()
    assert not any(tmp_path.iterdir())


def test_gae_matches_the_recursion_by_hand():
    adv, ret = gae([1.0, 0.0, 2.0], [0.5, 0.2, 0.1], last_value=0.3, gamma=0.9, gae_lambda=0.8)
    d2 = 2.0 + 0.9 * 0.3 - 0.1
    d1 = 0.0 + 0.9 * 0.1 - 0.2
    d0 = 1.0 + 0.9 * 0.2 - 0.5
    a2 = d2
    a1 = d1 + 0.9 * 0.8 * a2
    a0 = d0 + 0.9 * 0.8 * a1
    assert adv == pytest.approx([a0, a1, a2])
    assert ret == pytest.approx([a0 + 0.5, a1 + 0.2, a2 + 0.1])


def test_gradient_clipping_really_clips():
    params = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2))]
    params[0].grad = torch.tensor([3.0, 4.0, 0.0])
    params[1].grad = torch.tensor([0.0, 12.0])
    norm = clip_gradients(params, 0.5)
    assert norm == pytest.approx(13.0)
    after = torch.cat([p.grad for p in params]).norm()
    assert after == pytest.approx(0.5, rel=1e-4)


def test_the_central_value_head_is_one_more_unit_of_the_updates_epochs(tmp_path):
    """With ``value: central`` the head trains in the update's epochs on the samples PPO's
    sample step returns: its steps are counted with the adapters', and its weights are those
    of its own loop of clipped value loss (mean over each minibatch of ``minibatch_size``, the
    order drawn from ``seed * SEED_OFFSET + 1``, a clipped and guarded step)."""
    import asyncio
    import math
    import random
    from types import SimpleNamespace

    from marlang.learners.context import LearnerContext
    from marlang.methods.lora.team import CENTRAL
    from marlang.methods.lora.trainer import SEED_OFFSET
    from marlang.methods.ppo.learner import PPOLearner, PPOOptions
    from marlang.methods.ppo.samples import CentralSample, DecisionSample, PPOSamples
    from marlang.models.local_policy import local_policies
    from marlang.types import PolicyState

    agents = ["agent_0", "agent_1"]
    options = PPOOptions(epochs=2, minibatch_size=4, micro_batch_size=2, eval_episodes=0, lr=1e-2, value_lr=1e-2,
                         device="cpu", value="central", lora={"r": 4, "alpha": 8, "dropout": 0.0})

    def learner():
        model = tiny_chat_model()
        context = LearnerContext(actors={a: SimpleNamespace(model=model) for a in agents}, agents=agents,
                                 local=local_policies({a: model for a in agents}),
                                 run_dir=tmp_path)
        out = PPOLearner(options, context)
        out.trainer.setup()
        return out

    actions = [" turn left", " turn right", " go forward"]
    decisions = [DecisionSample(agent=agents[i % 2], episode=i // 2, t=0, prompt=f"Step {i}. Action:",
                                candidates=actions, action_index=i % 3, old_logprob=-1.1, old_value=0.0,
                                advantage=0.3 * (-1) ** i, ret=0.1 * i) for i in range(6)]
    trained = learner()
    hidden = trained.trainer.team.hidden_size
    generator = torch.Generator().manual_seed(0)
    central = [CentralSample(torch.randn(2, hidden, generator=generator), 0.05 * i, 1.0 - 0.2 * i)
               for i in range(6)]
    async def given_samples(trajectories):
        return PPOSamples(decisions, central)

    trained._samples = given_samples
    candidate = asyncio.run(trained.update(PolicyState(iteration=0), []))
    # adapters: 3 decisions each, one minibatch per epoch; the head: 6 samples, 2 per epoch
    assert candidate.counters["minibatches"] == 2 * (1 + 1 + 2)

    reference = learner()
    head, optimizer = reference.trainer.team.value_heads[CENTRAL], reference.trainer.optimizers[CENTRAL]
    params = list(head.parameters())
    rng = random.Random(options.seed * SEED_OFFSET + 1)
    for _ in range(options.epochs):
        order = central[:]
        rng.shuffle(order)
        for i in range(0, len(order), options.minibatch_size):
            batch = order[i:i + options.minibatch_size]
            values = reference.trainer.team.value(CENTRAL, torch.stack([s.state for s in batch]))
            old_v = torch.tensor([s.old_value for s in batch])
            ret = torch.tensor([s.ret for s in batch])
            clipped = old_v + (values - old_v).clamp(-options.clip_coef, options.clip_coef)
            loss = 0.5 * torch.max((values - ret) ** 2, (clipped - ret) ** 2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            norm = clip_gradients(params, options.max_grad_norm)
            assert math.isfinite(norm) and norm <= options.max_skip_norm
            optimizer.step()
    for mine, theirs in zip(trained.trainer.team.value_heads[CENTRAL].parameters(), params, strict=True):
        assert torch.equal(mine, theirs)
    assert not torch.equal(params[-1], torch.zeros_like(params[-1]))  # the head did move


def test_a_trained_team_plays_back_from_its_run_directory(tmp_path):
    from marlang.testing import tiny_local_lm

    trained = Experiment(ppo_config(iterations=1, eval_episodes=0), tmp_path / "train",
                         chat_model=tiny_chat_model(max_tokens=8)).run()
    state = RunDirectory(trained.run_dir).read_json("learner_state.json")
    play = build_config({"env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 3},
                         "agents": {"chain_of_thought": False, "action_selection": "score"},
                         "model": {"cache": False, "adapters": str(trained.run_dir)},
                         "learning": {"method": "none"}, "run": {"episodes": 1, "progress": False}})
    result = Experiment(play, tmp_path / "play", chat_model=tiny_chat_model(tiny_local_lm(), max_tokens=8)).run()
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert set(manifest["adapters"]) == {"agent_0", "agent_1"}
    assert manifest["weights_id"]
    # the played-back agents score as the trained ones did: values come from trained heads
    step = RunDirectory(result.run_dir).load_episode_dicts()[0]["steps"][0]
    assert all(d["value"] is not None for d in step["decisions"].values())
    assert state["adapters"]["agent_0"]["path"].endswith("adapters/0/agent_0")
    # one iteration's directory works too; a team without those agents is refused in one line
    again = play.model_copy(deep=True)
    again.model.adapters = str(trained.run_dir / "adapters" / "0")
    Experiment(again, tmp_path / "play2", chat_model=tiny_chat_model(tiny_local_lm(), max_tokens=8)).run()
    # a team may mix trained and untrained agents: agent_2 acts with the base model
    trio = build_config({**play.model_dump(mode="json"), "env": {"id": "babyai/goto-obj", "n_agents": 3,
                                                                "max_steps": 2}})
    mixed = Experiment(trio, tmp_path / "trio", chat_model=tiny_chat_model(tiny_local_lm(), max_tokens=8)).run()
    first = RunDirectory(mixed.run_dir).load_episode_dicts()[0]["steps"][0]["decisions"]
    assert first["agent_0"]["value"] is not None and first["agent_2"]["value"] is None
    players = RunDirectory(mixed.run_dir).read_json("manifest.json")["team"]  # no team: section
    assert players["agent_0"].endswith(f"+ adapters {play.model.adapters}") and "adapters" not in players["agent_2"]
    stranger = tmp_path / "stranger"
    shutil.copytree(trained.run_dir / "adapters" / "0", stranger)
    (stranger / "agent_1").rename(stranger / "agent_7")
    odd = play.model_copy(deep=True)
    odd.model.adapters = str(stranger)
    with pytest.raises(ConfigError, match="agent_7, which this team does not have"):
        Experiment(odd, tmp_path / "odd", chat_model=tiny_chat_model(tiny_local_lm())).run()
    assert not (tmp_path / "odd").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = play.model_copy(deep=True)
    nothing.model.adapters = str(empty)
    with pytest.raises(ConfigError, match="holds no adapters"):
        Experiment(nothing, tmp_path / "none", chat_model=tiny_chat_model(tiny_local_lm())).run()
    other = play.model_copy(deep=True)
    with pytest.raises(ConfigError, match="trained on base model"):
        Experiment(other, tmp_path / "other", chat_model=tiny_chat_model(tiny_local_lm(seed=5))).run()
    # the config that trained the team plays it back as it is (`--set model.adapters=RUN`):
    # greedily, for run.episodes, the trainer's keys set aside
    data = ppo_config().model_dump(mode="json")
    data["model"]["adapters"] = str(trained.run_dir)
    data["run"]["episodes"] = 1
    same = build_config(data)
    # the config keeps its method: the run decides to play back, and its row says so
    assert same.plays_back and same.learning.method == "ppo" and same.run.episodes == 1
    again_played = Experiment(same, tmp_path / "same", chat_model=tiny_chat_model(tiny_local_lm(), max_tokens=8)).run()
    assert set(json.loads((again_played.run_dir / "manifest.json").read_text())["adapters"]) == {"agent_0", "agent_1"}
    replayed = RunDirectory(again_played.run_dir).load_episode_dicts()
    assert len(replayed) == 1 and not any(d["sampled"] for s in replayed[0]["steps"] for d in s["decisions"].values())
    assert again_played.summary["setting"] == "none, ppo (played back)"
    assert again_played.summary["learner"] == "none"
    assert json.loads((again_played.run_dir / "manifest.json").read_text())["played_back"] == "ppo"


def test_a_run_killed_during_an_update_resumes_to_the_same_adapters(tmp_path, monkeypatch):
    """The update is re-run from the committed adapters and optimizer state on the same
    rollouts: the result equals an uninterrupted run's, and no rollout is played twice."""
    cfg = ppo_config(eval_episodes=0)
    whole = Experiment(cfg, tmp_path / "whole", chat_model=tiny_chat_model(max_tokens=8)).run()
    expected = RunDirectory(whole.run_dir).read_json("learner_state.json")["adapters"]

    from marlang.methods.lora.trainer import LoraTrainer

    original = LoraTrainer.save
    calls = {"n": 0}

    async def dies_in_second_update(self, iteration, records, counters):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # as a kill would, mid-update (its steps taken, nothing saved)
        return await original(self, iteration, records, counters)

    monkeypatch.setattr(LoraTrainer, "save", dies_in_second_update)
    with pytest.raises(KeyboardInterrupt):
        Experiment(cfg, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    monkeypatch.setattr(LoraTrainer, "save", original)
    played = len(RunDirectory(tmp_path / "run").load_episode_dicts())
    resumed = Experiment(cfg, tmp_path / "run", resume=True, chat_model=tiny_chat_model(max_tokens=8)).run()
    assert resumed.episodes_run == 0 and played == 4
    got = RunDirectory(resumed.run_dir).read_json("learner_state.json")["adapters"]
    from safetensors.torch import load_file

    # Equal up to float rounding: rollout batches may group requests differently in time.
    for agent in ("agent_0", "agent_1"):
        a = load_file(f"{got[agent]['path']}/adapter_model.safetensors")
        b = load_file(f"{expected[agent]['path']}/adapter_model.safetensors")
        assert a.keys() == b.keys()
        assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-4
        assert max(float(b[k].abs().max()) for k in b if "lora_B" in k) > 1e-3  # it did train


def test_a_non_finite_loss_skips_the_minibatch_and_never_writes_a_broken_adapter(tmp_path, monkeypatch):
    from marlang.methods.ppo import samples as ppo_samples

    original = ppo_samples.build_samples

    def poisoned(*args, **kwargs):
        samples = original(*args, **kwargs)
        for s in samples:
            s.advantage = float("nan")
        return samples

    monkeypatch.setattr("marlang.methods.ppo.learner.build_samples", poisoned)
    cfg = ppo_config(iterations=1, eval_episodes=0)
    result = Experiment(cfg, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    (row,) = RunDirectory(result.run_dir).read_iterations()
    assert row["skipped_minibatches"] == row["minibatches"] > 0
    from safetensors.torch import load_file

    for agent in ("agent_0", "agent_1"):
        weights = load_file(str(result.run_dir / "adapters" / "0" / agent / "adapter_model.safetensors"))
        assert all(torch.isfinite(t).all() for t in weights.values())
        # LoRA B starts at zero and no step was taken: the adapter is still the initial one
        assert all(float(t.abs().max()) == 0.0 for k, t in weights.items() if "lora_B" in k)


def test_messages_are_spoken_with_the_speakers_adapter_and_trained_with_reinforce(tmp_path):
    # the hook's rewards give the steps non-zero advantages, which weight the message terms
    cfg = build_config({**ppo_config(iterations=1, eval_episodes=0, train_messages="reinforce",
                                     reward_hook="tests.methods.ppo.ppo_hooks:one_per_step").model_dump(
        mode="json"), "protocol": {"name": "bidirectional"}, "model": {"cache": False, "temperature": 1.0}})
    result = Experiment(cfg, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=6, temperature=1.0)).run()
    step = RunDirectory(result.run_dir).load_episode_dicts()[0]["steps"][0]
    assert [m["sender"] for m in step["messages"]] == ["agent_0", "agent_1"]
    assert all(m["prompt"] and m["prompt"].rstrip().endswith("assistant") for m in step["messages"])
    updates = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert all(u["message_loss"] not in (None, 0.0) for u in updates)
    quiet = build_config({**cfg.model_dump(mode="json"), "learning": {
        **cfg.model_dump(mode="json")["learning"], "train_messages": False}})
    silent = Experiment(quiet, tmp_path / "quiet", chat_model=tiny_chat_model(max_tokens=6, temperature=1.0)).run()
    updates = [json.loads(line) for line in (silent.run_dir / "updates.jsonl").read_text().splitlines()]
    assert all(u["message_loss"] == 0.0 for u in updates)


def test_a_lora_target_the_model_lacks_is_refused_before_anything_is_created(tmp_path):
    cfg = ppo_config(lora={"r": 4, "alpha": 8, "targets": ["q_proj", "qkv_proj"]})
    with pytest.raises(ConfigError, match="qkv_proj.*q_proj"):
        Experiment(cfg, tmp_path / "run", chat_model=tiny_chat_model()).run()
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="needs a local model"):
        Experiment(ppo_config(), tmp_path / "fake", chat_model=__import__("tests.fakes").fakes.FakeRuleChatModel(
            rule=lambda m: "Action: go forward")).run()
    assert not (tmp_path / "fake").exists()


def test_a_calibrated_policy_trains_on_the_logits_it_sampled_from(tmp_path, monkeypatch):
    # agents.calibration content_free: the rollouts sample from softmax(scores - prior); the
    # update's first minibatch, before any step, must give back exactly the logged log pi
    # (ratio 1), which it does only if training adds the same offsets.
    from marlang.methods.ppo.learner import PPOLearner

    config = ppo_config(iterations=1, epochs=1, eval_episodes=0)
    config = config.model_copy(update={"agents": config.agents.model_copy(update={"calibration": "content_free"})})
    first: list[dict] = []
    original = PPOLearner._loss

    def recording(self, unit, batch, total):
        terms = original(self, unit, batch, total)
        if not first:
            first.append({"kl": float(terms["approx_kl"]), "n": len(batch),
                          "offsets": [s.offsets for s in batch]})
        return terms

    monkeypatch.setattr(PPOLearner, "_loss", recording)
    result = Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    decisions = [dec for d in RunDirectory(result.run_dir).load_episode_dicts() if d["phase"] == "train"
                 for s in d["steps"] for dec in s["decisions"].values()]
    assert decisions and all(dec["offsets"] and len(dec["offsets"]) == len(dec["scores"]) for dec in decisions)
    assert any(abs(o) > 1.0 for dec in decisions for o in dec["offsets"])  # a real shift, not zeros
    assert first and all(first[0]["offsets"])
    assert abs(first[0]["kl"]) / first[0]["n"] < 1e-4


def test_a_team_trained_in_a_relative_directory_plays_back_from_anywhere(tmp_path, monkeypatch):
    # The learner state records where the committed adapters are; a run started as
    # `--out runs/x` must play back (and resume) from another working directory or after the
    # run directory moved.
    from marlang.testing import tiny_local_lm

    monkeypatch.chdir(tmp_path)
    engine = tiny_local_lm()
    Experiment(ppo_config(iterations=1, eval_episodes=0), "runs/train",
               chat_model=tiny_chat_model(engine, max_tokens=8)).run()
    shutil.move(str(tmp_path / "runs" / "train"), str(tmp_path / "moved"))
    monkeypatch.chdir(tmp_path / "moved")
    data = ppo_config().model_dump(mode="json")
    data["model"]["adapters"] = str(tmp_path / "moved")
    data["run"]["episodes"] = 1
    played = Experiment(build_config(data), tmp_path / "play",
                        chat_model=tiny_chat_model(tiny_local_lm(), max_tokens=8)).run()
    manifest = json.loads((played.run_dir / "manifest.json").read_text())
    recorded = json.loads((tmp_path / "moved" / "learner_state.json").read_text())["adapters"]
    assert manifest["adapters"] == {a: ref["hash"] for a, ref in recorded.items()}  # the same adapters, named alike


class RunsCode:
    """A pickled object that runs code when loaded (it touches ``path``)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        from pathlib import Path

        return (Path.touch, (Path(self.path),))


def test_the_summary_names_each_agents_adapter_and_a_resume_loads_tensors_only(tmp_path):
    config = ppo_config(iterations=1, eval_episodes=0)
    result = Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    expected = {a: {"hash": ref["hash"], "path": ref["path"], "update": 0} for a, ref in state["adapters"].items()}
    assert set(expected) == {"agent_0", "agent_1"} and all(ref["hash"] for ref in expected.values())
    assert result.summary["adapters"] == expected
    assert json.loads((result.run_dir / "summary.json").read_text())["adapters"] == expected

    # Someone else's run directory: its trainer state would run code if unpickled.
    ran = tmp_path / "ran"
    torch.save({"weights": {}, "optimizers": {}, "payload": RunsCode(ran)}, state["extra"]["ppo_state"])
    with pytest.raises(ConfigError, match=r"refused to load .*ppo_state\.pt: it holds more than tensors"):
        Experiment(ppo_config(iterations=2, eval_episodes=0), tmp_path / "run", resume=True,
                   chat_model=tiny_chat_model(max_tokens=8)).run()
    assert not ran.exists()


def test_a_damaged_held_out_episode_is_played_again_with_the_adapters_it_was_played_with(tmp_path):
    config = ppo_config(iterations=1, eval_episodes=2)
    Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=8)).run()
    rd = RunDirectory(tmp_path / "run")
    lines = rd.episodes_file.read_bytes().splitlines(keepends=True)
    # one held-out episode before the update, one after it (played with the trained adapters)
    hit = [i for i, line in enumerate(lines) if json.loads(line)["phase"] == "test"]
    chosen = [hit[0], hit[-1]]
    lost = {(d["iteration"], d["episode"]): d for d in (json.loads(lines[i]) for i in chosen)}
    assert {it for it, _ in lost} == {0, 1}
    for i in chosen:
        lines[i] = lines[i][: len(lines[i]) // 2] + b"\n"  # half of each record lost
    rd.episodes_file.write_bytes(b"".join(lines))

    said = []
    result = Experiment(config, tmp_path / "run", resume=True, chat_model=tiny_chat_model(max_tokens=8),
                        notify=said.append).run()
    assert result.episodes_run == 2 and len(said) == 1 and said[0].startswith("replayed episode(s)")
    again = {(d["iteration"], d["episode"]): d for d in rd.load_episode_dicts() if d["phase"] == "test"}
    for key, before in lost.items():
        # the same actions exactly; scores and log-probs within float tolerance (the replay batches
        # its requests differently, and float32 sums of a different batch differ in the last bit)
        assert_same_record([s["decisions"] for s in again[key]["steps"]], [s["decisions"] for s in before["steps"]])
    assert len(rd.load_episode_dicts()) == len(lines)
