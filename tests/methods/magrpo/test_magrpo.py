"""MAGRPO / GRPO: advantages and losses equal TRL's, the tree's returns and advantages equal
the MAGRPO paper's formula by hand, agents train independently, bad settings are one line."""

from __future__ import annotations

import pytest
import torch

from marlang.methods.magrpo.grpo_loss import (
    completion_logprobs,
    group_advantages,
    pack_completions,
    policy_loss,
    shared_prompt_logprobs,
)
from marlang.methods.magrpo.tree import (
    Completion,
    Node,
    backpropagate,
    joint_actions,
    should_expand,
    training_samples,
)
from marlang.testing import tiny_llama, tiny_tokenizer

# ------------------------------------------------------------------------------ advantages


def test_group_std_and_batch_std_advantages_equal_trls_formula():
    from trl.trainer.utils import nanstd

    rewards = torch.tensor([1.0, 0.0, 0.5, 0.25, 3.0, 3.0, 1.0, -2.0])
    G = 4
    mean = rewards.view(-1, G).mean(dim=1).repeat_interleave(G)
    group_std = nanstd(rewards.view(-1, G), dim=1).repeat_interleave(G)
    groups = rewards.view(-1, G).tolist()
    def flat(mode):
        return [a for g in group_advantages(groups, mode) for a in g]

    ours = torch.tensor(flat("group_std"))
    assert torch.allclose(ours, (rewards - mean) / (group_std + 1e-4), atol=1e-5)
    ours = torch.tensor(flat("batch_std"))
    assert torch.allclose(ours, (rewards - mean) / (nanstd(rewards) + 1e-4), atol=1e-5)
    assert torch.allclose(torch.tensor(flat("mean")), rewards - mean)
    # leave one out: the mean of the other three
    loo = flat("rloo")
    assert loo[0] == pytest.approx(1.0 - (0.0 + 0.5 + 0.25) / 3)


# ------------------------------------------------------------------------------ losses vs TRL


@pytest.fixture(scope="module")
def trl_trainer():
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = tiny_tokenizer()
    model = tiny_llama(len(tok), eos_token_id=tok.eos_token_id).train()

    def make(loss_type: str, beta: float = 0.0) -> GRPOTrainer:
        args = GRPOConfig(output_dir="/tmp/marlang-trl-parity", per_device_train_batch_size=4, num_generations=4,
                          max_completion_length=6, loss_type=loss_type, report_to="none", use_cpu=True,
                          beta=0.0, bf16=False, epsilon=0.2)
        trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **_: [0.0] * len(completions),
                              args=args, train_dataset=Dataset.from_dict({"prompt": ["a b"] * 4}),
                              processing_class=tok)
        trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which is not run
        # beta > 0 at construction would load a reference model from a hub; the loss reads the
        # reference log-probs from its inputs, which the test gives
        trainer.beta = beta
        return trainer

    return tok, make


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.05])
def test_loss_and_gradients_equal_trls_grpo_trainer(trl_trainer, loss_type, beta):
    tok, make = trl_trainer
    trainer = make(loss_type, beta)
    model = trainer.model
    eos = tok.eos_token_id
    prompts = [[5, 6, 7, 8]] * 4  # equal lengths: TRL gives left-padded rows no position ids
    completions = [[9, 10, 11, eos], [12, 13], [14, 15, 16, 17, 18, eos], [19]]
    batch = pack_completions(prompts, completions, tok.pad_token_id)
    advantages = torch.tensor([1.0, -0.5, 0.75, 0.25])
    gen = torch.Generator().manual_seed(0)
    width = batch["completion_ids"].size(1)
    with torch.no_grad():
        current = completion_logprobs(model, batch)
    # old log-probs off by up to 0.4 per token: some ratios leave [0.8, 1.2] and are clipped
    old = current + (torch.rand((4, width), generator=gen) - 0.5) * 0.8
    ref = current + (torch.rand((4, width), generator=gen) - 0.5) * 0.4
    inputs = {**batch, "advantages": advantages, "old_per_token_logps": old,
              "num_items_in_batch": batch["completion_mask"].sum().float()}
    if beta:
        inputs["ref_per_token_logps"] = ref

    model.zero_grad()
    theirs = trainer._compute_loss(model, inputs)
    theirs.backward()
    their_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ours = policy_loss(completion_logprobs(model, batch), batch["completion_mask"], advantages, loss=loss_type,
                       old_logps=old, ref_logps=ref if beta else None, beta=beta, max_completion_length=6)
    ours.backward()
    our_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), abs=1e-5)
    assert max(float((a - b).abs().max()) for a, b in zip(our_grads, their_grads, strict=True)) < 1e-5
    assert any(float(g.abs().max()) > 0 for g in our_grads)


def test_reinforce_is_the_sum_of_token_logprobs_times_the_advantage_averaged_over_completions():
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([2.0, -1.0])
    loss = policy_loss(logps, mask, adv, loss="reinforce")
    assert float(loss.detach()) == pytest.approx((3.0 * 2 + 0.5 * -1) / 2)
    # the masked token gets no gradient; the EOS (last real token) does
    loss.backward()
    assert logps.grad[0, 2] == 0 and logps.grad[0, 1] != 0
    # a shared completion (cross) weighs as many samples as it stands for
    weighted = policy_loss(logps.detach(), mask, adv, loss="reinforce", weights=torch.tensor([3.0, 1.0]))
    assert float(weighted) == pytest.approx((6.0 * 3 + -0.5) / 4)


# ------------------------------------------------------------------------------ the tree


def _completion(agent: str, g: int) -> Completion:
    return Completion(agent, (1,), (2 + g,), answer=f"{agent}-{g}")


def _node(turn, joint, reward, agents=("a", "b"), G=2, children=()):
    node = Node(turn=turn, joint=joint, reward=reward, children=list(children))
    if children:
        node.completions = {a: [_completion(a, g) for g in range(G)] for a in agents}
    return node


def test_align_tree_returns_and_advantages_follow_seed_003_by_hand():
    # turn 1: two joint actions (rewards 0.2 and 0.6); the first is expanded once more into
    # two (rewards 1.0 and 0.0), the second ended
    grand = [_node(2, {"a": 0, "b": 0}, 1.0), _node(2, {"a": 1, "b": 1}, 0.0)]
    first = [_node(1, {"a": 0, "b": 0}, 0.2, children=grand), _node(1, {"a": 1, "b": 1}, 0.6)]
    root = _node(0, {}, 0.0, children=first)
    backpropagate([root], "mean")
    # return = reward + mean of the children's returns
    assert first[0].ret == pytest.approx(0.2 + (1.0 + 0.0) / 2) and first[1].ret == pytest.approx(0.6)
    # advantage = return - mean over siblings
    assert first[0].advantage == pytest.approx(0.7 - (0.7 + 0.6) / 2)
    assert first[1].advantage == pytest.approx(0.6 - 0.65)
    assert grand[0].advantage == pytest.approx(0.5) and grand[1].advantage == pytest.approx(-0.5)
    samples = training_samples(root)
    # align: each agent's g-th completion is trained with the g-th joint action's advantage
    assert [(s.turn, s.advantage, s.weight) for s in samples["a"]] == [
        (1, pytest.approx(0.05), 1), (1, pytest.approx(-0.05), 1), (2, pytest.approx(0.5), 1),
        (2, pytest.approx(-0.5), 1)]
    # and the loss is the MAGRPO paper's: -(sum of log-probs) x advantage, averaged over samples
    logps = torch.tensor([[-1.0], [-2.0], [-3.0], [-4.0]])
    adv = torch.tensor([s.advantage for s in samples["a"]])
    loss = policy_loss(logps, torch.ones(4, 1), adv, weights=torch.tensor([float(s.weight) for s in samples["a"]]))
    by_hand = (1.0 * 0.05 + 2.0 * -0.05 + 3.0 * 0.5 + 4.0 * -0.5) / 4
    assert float(loss) == pytest.approx(by_hand)


def test_cross_tree_trains_each_completion_with_the_mean_advantage_of_its_joint_actions():
    joints = joint_actions(["a", "b"], 2, "cross")
    assert joints == [{"a": 0, "b": 0}, {"a": 0, "b": 1}, {"a": 1, "b": 0}, {"a": 1, "b": 1}]
    rewards = [1.0, 0.0, 0.0, 0.0]
    root = _node(0, {}, 0.0, children=[_node(1, j, r) for j, r in zip(joints, rewards, strict=True)])
    backpropagate([root])
    samples = training_samples(root)
    # a's completion 0 is in joint actions 0 and 1: advantages 0.75 and -0.25
    assert samples["a"][0].advantage == pytest.approx(0.25) and samples["a"][0].weight == 2
    assert samples["a"][1].advantage == pytest.approx(-0.25) and samples["b"][0].advantage == pytest.approx(0.25)


def test_a_sibling_set_whose_mean_reward_passes_the_threshold_is_not_expanded():
    siblings = [_node(1, {"a": g}, r) for g, r in enumerate([0.0, -0.1])]
    assert should_expand(siblings, None) and should_expand(siblings, -0.06) is False
    assert should_expand(siblings, -0.05)  # a mean equal to the threshold does not exceed it
    assert should_expand(siblings, 0.0)
    assert joint_actions(["a"], 3, "align") == [{"a": 0}, {"a": 1}, {"a": 2}]
    with pytest.raises(ValueError, match="align, cross"):
        joint_actions(["a"], 3, "mix")


# ------------------------------------------------------------------------------ shared prompts


def test_shared_prompt_logprobs_equal_one_row_per_completion_with_their_gradients():
    """Training runs each prompt once with its G completions packed after it; the log-probs
    and gradients are those of the plain prompt + completion rows (fp32, 1e-5)."""
    tok = tiny_tokenizer()
    torch.manual_seed(0)
    model = tiny_llama(len(tok), eos_token_id=tok.eos_token_id)
    eos = tok.eos_token_id
    prompts = [[5, 6, 7, 8], [5, 6, 7, 8], [9, 10], [5, 6, 7, 8], [11, 12, 13]]
    completions = [[20, 21, eos], [22], [23, 24, 25, 26], [], [27, 28]]
    adv = torch.tensor([0.5, -1.0, 2.0, 0.3, -0.7])
    results = []
    for packed in (False, True):
        model.zero_grad(set_to_none=True)
        if packed:
            lp, mask = shared_prompt_logprobs(model, prompts, completions, tok.pad_token_id, temperature=0.7)
        else:
            batch = pack_completions(prompts, completions, tok.pad_token_id)
            lp, mask = completion_logprobs(model, batch, 0.7), batch["completion_mask"]
        loss = policy_loss(lp, mask, adv)
        loss.backward()
        results.append(((lp * mask).detach(), mask, loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (lp_a, mask_a, loss_a, grad_a), (lp_b, mask_b, loss_b, grad_b) = results
    assert torch.equal(mask_a, mask_b) and mask_b[3].sum() == 0  # the empty completion is masked
    assert float((lp_a - lp_b).abs().max()) < 1e-5 and float(lp_b.abs().sum()) > 0
    assert float((loss_a - loss_b).abs()) < 1e-5
    assert max(float((a - b).abs().max()) for a, b in zip(grad_a, grad_b, strict=True)) < 1e-5


# ------------------------------------------------------------------------------ agents apart


def test_two_agents_trained_together_get_the_gradients_each_gets_alone():
    from marlang.methods.lora.team import LoraOptions, TeamAdapters

    tok = tiny_tokenizer()
    lora = LoraOptions(r=4, alpha=8, targets=["q_proj", "v_proj"], dropout=0.0)
    team = TeamAdapters(tiny_llama(len(tok), eos_token_id=tok.eos_token_id), ["agent_0", "agent_1"],
                        base_id="tiny", lora=lora, value_head=None, seed=3)
    alone = TeamAdapters(tiny_llama(len(tok), eos_token_id=tok.eos_token_id), ["agent_1"], base_id="tiny",
                         lora=lora, value_head=None, seed=4)
    # the lone agent starts from the team member's weights
    alone.load_state_dict({k: v for k, v in team.state_dict().items() if "agent_1" in k})
    for p in team.parameters_of("agent_1"):  # LoRA B starts at zero: move it so A gets gradient too
        p.data.add_(0.05)
    for p in alone.parameters_of("agent_1"):
        p.data.add_(0.05)
    batch = pack_completions([[5, 6, 7], [5, 8]], [[9, 10], [11, 12, tok.eos_token_id]], tok.pad_token_id)
    adv = torch.tensor([0.5, -1.0])

    def grads(t: TeamAdapters) -> list[torch.Tensor]:
        with t.training("agent_1"):
            loss = policy_loss(completion_logprobs(t.model, batch), batch["completion_mask"], adv)
            loss.backward()
        out = [p.grad.clone() for p in t.parameters_of("agent_1")]
        for p in t.parameters_of("agent_1"):
            p.grad = None
        return out

    together = grads(team)
    assert all(p.grad is None for p in team.parameters_of("agent_0"))  # the other adapter untouched
    apart = grads(alone)
    assert max(float((a - b).abs().max()) for a, b in zip(together, apart, strict=True)) < 1e-6
    assert any(float(g.abs().max()) > 0 for g in together)


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("override", "message"), [
    ({"num_generations": 1}, "learning.num_generations"),
    ({"joint_mode": "cross", "num_generations": 9}, "makes 81 joint actions per node"),
])
def test_bad_settings_are_one_line(override, message):
    from marlang.config import ConfigError, build_config

    config = {"env": {"id": "code/humaneval", "n_agents": 2, "kwargs": {"structure": "joint"}},
              "model": {"spec": "local:smollm2"}, "learning": {"method": "magrpo", **override}}
    with pytest.raises((ConfigError, ValueError), match=message):
        build_config(config)
        from marlang.learners.base import learner_entry

        learner_entry("magrpo").check_config(build_config(config))


def test_magrpo_refuses_legal_action_envs_and_grpo_refuses_teams():
    from marlang.config import build_config
    from marlang.learners.base import learner_entry

    babyai = build_config({"env": {"id": "babyai/goto-obj", "n_agents": 2}, "model": {"spec": "local:smollm2"},
                           "learning": {"method": "magrpo"}})
    with pytest.raises(ValueError, match="use learning.method ppo there"):
        learner_entry("magrpo").check_config(babyai)
    team = build_config({"env": {"id": "math/math", "n_agents": 2}, "model": {"spec": "local:smollm2"},
                         "learning": {"method": "grpo"}})
    with pytest.raises(ValueError, match="'grpo' trains one agent"):
        learner_entry("grpo").check_config(team)
    joint = build_config({"env": {"id": "code/humaneval", "n_agents": 2, "kwargs": {"structure": "joint"}},
                          "model": {"spec": "local:smollm2"}, "learning": {"method": "grpo"}})
    with pytest.raises(ValueError, match=r"set env.n_agents 1 \(it is 2\) and env.kwargs.structure sequential"):
        learner_entry("grpo").check_config(joint)  # both keys in one message, not one error at a time
    from pathlib import Path

    import yaml

    shipped = Path(__file__).resolve().parents[3] / "configs" / "grpo_humaneval_cpu.yaml"
    learner_entry("grpo").check_config(build_config(yaml.safe_load(shipped.read_text())))  # GRPO's own config


# ------------------------------------------------------------------------------ env branching


def test_a_task_env_restored_from_a_saved_episode_steps_as_before():
    from marlang import make_env

    env = make_env("code/humaneval", n_agents=1, max_steps=2)
    env.reset(seed=0)
    inner = env.unwrapped
    start = inner.save_episode()
    answer = "def has_close_elements(numbers, threshold):\n    return False\n"
    first = env.step({"agent_0": answer})
    after_first = inner.save_episode()
    inner.restore_episode(start)
    again = env.step({"agent_0": answer})
    assert first[1] == again[1] and first[0]["agent_0"].text == again[0]["agent_0"].text
    assert 0 < first[1]["agent_0"] < 1  # some hidden tests pass, not all
    inner.restore_episode(after_first)
    assert inner.turn == 2 and len(inner.history) == 1
    inner.restore_episode(start)
    assert inner.turn == 1 and inner.history == ()


def test_an_answer_the_sandbox_cannot_judge_is_reward_zero_with_its_reason_and_a_failing_env_too():
    from marlang import make_env
    from marlang.methods.magrpo.tree import judge, tree_stats

    env = make_env("code/humaneval", n_agents=1, max_steps=1, timeout=2.0, test_timeout=0.5)
    inner = env.unwrapped
    inner.reset(seed=0)
    root = Node(turn=0, state=inner.save_episode())
    answers = {
        "spin": "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n",
        "memory": "def has_close_elements(numbers, threshold):\n    return bytearray(1 << 40)\n",
        "exit": "import os\nos._exit(0)\n",
        "killed": "import ctypes\nctypes.string_at(0)\n",
        "right": "def has_close_elements(numbers, threshold):\n    return any(abs(a - b) < threshold "
                 "for i, a in enumerate(numbers) for b in numbers[i + 1:])\n",
    }
    children = {}
    for g, (name, code) in enumerate(answers.items()):
        inner.restore_episode(root.state)
        children[name] = judge(inner, root, {"agent_0": g}, {"agent_0": code}, "agent_0")
    for name in ("spin", "memory", "exit", "killed"):
        assert children[name].reward == 0.0 and not children[name].info["success"], name
    for name in ("spin", "exit", "killed"):  # stopped before any test could judge it
        assert children[name].info["status"] != "ok" and children[name].info["reason"], (name, children[name].info)
    assert children["spin"].info["status"] == "timeout" and children["killed"].info["status"] == "killed"
    assert children["right"].reward == 1.0 and children["right"].info["status"] == "ok"
    assert "reason" not in children["right"].info

    def broken(actions):
        raise RuntimeError("the sandbox pool is gone")

    inner.restore_episode(root.state)
    inner.step = broken
    failed = judge(inner, root, {"agent_0": 0}, {"agent_0": answers["right"]}, "agent_0")
    assert failed.reward == 0.0 and failed.done and failed.info == {
        "status": "unjudged", "reason": "RuntimeError: the sandbox pool is gone"}
    root.children = [*children.values(), failed]
    stats = tree_stats([root])
    assert stats["unjudged"] == 1 and stats["sandbox_failures"] >= 1
    assert stats["first_turn_reward_mean"] == pytest.approx(1.0 / 6)
    assert stats["first_turn_reward_low"] < stats["first_turn_reward_high"]


# ------------------------------------------------------------------------------ memoryful


def test_memoryful_turns_continue_the_kv_cache_and_score_as_the_full_prompt(tmp_path, monkeypatch):
    """learning.memory: memoryful: a turn-2 reply is sampled from its agent's turn-1 KV cache,
    its prompt is the turn-1 prompt, reply and the new observation, and its sampling-time
    log-probs equal the training pass's on that full prompt (which also serve as the ratio
    losses' old log-probs)."""
    from marlang.config import build_config
    from marlang.methods.magrpo.learner import MAGRPOLearner
    from marlang.run import Experiment
    from marlang.testing import tiny_chat_model

    seen: dict = {}
    original = MAGRPOLearner._old_and_reference_logprobs

    def spy(self, by_unit):
        seen["samples"] = by_unit["agent_0"]
        seen["scored"] = self._logprobs("agent_0", by_unit["agent_0"])
        return original(self, by_unit)

    monkeypatch.setattr(MAGRPOLearner, "_old_and_reference_logprobs", spy)
    from marlang.models import local_engine

    prefill = local_engine.left_padded_prefill
    continued: list[int] = []

    def counting(model, prompts, pad_id, *, pasts=None, **kwargs):
        continued.append(sum(p is not None for p in pasts or []))
        return prefill(model, prompts, pad_id, pasts=pasts, **kwargs)

    monkeypatch.setattr(local_engine, "left_padded_prefill", counting)
    config = build_config({
        "env": {"id": "code/humaneval", "n_agents": 1, "max_steps": 2,
                "kwargs": {"memory": "last", "task_ids": ["HumanEval/0"]}},
        "model": {"spec": "local:smollm2", "cache": False, "max_tokens": 6},
        "agents": {"chain_of_thought": False, "history": 0},
        "learning": {"method": "grpo", "iterations": 1, "rollouts": 1, "num_generations": 2, "max_new_tokens": 6,
                     "memory": "memoryful", "loss": "grpo", "epochs": 2, "eval_episodes": 0,
                     "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        "run": {"parallel": 1, "progress": False, "seed": 0}})
    Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=6, temperature=1.0)).run()
    samples, scored = seen["samples"], seen["scored"]
    firsts = [s.completion for s in samples if len(s.completion.prompt_ids) == min(
        len(x.completion.prompt_ids) for x in samples)]
    seconds = [s.completion for s in samples if s.completion not in firsts]
    assert len(firsts) == 2 and len(seconds) == 4  # G = 2 at the root, then G = 2 under each child
    assert 4 in continued  # turn 2's four rows ran from their turn-1 caches
    for c in seconds:
        assert any(c.prompt_ids[:len(f.prompt_ids) + len(f.token_ids)] == f.prompt_ids + f.token_ids
                   for f in firsts)
        assert c.past is None  # no cache outlives the sampling
    for sample, lp in zip(samples, scored, strict=True):
        assert sample.completion.logprobs == pytest.approx(lp.tolist(), abs=1e-4)


def test_memoryful_on_a_remote_model_is_one_line():
    from marlang.config import build_config
    from marlang.learners.base import learner_entry

    config = build_config({"env": {"id": "code/humaneval", "n_agents": 2, "kwargs": {"structure": "joint"}},
                           "model": {"spec": "openai:gpt-4o-mini"},
                           "learning": {"method": "magrpo", "memory": "memoryful"}})
    with pytest.raises(ValueError, match="learning.memory 'memoryful' carries each agent's KV cache"):
        learner_entry("magrpo").check_config(config)


# ------------------------------------------------------------------------------ Ctrl-C


def test_ctrl_c_stops_magrpo_at_its_next_tree_step_and_the_resume_trains_that_iteration(tmp_path, monkeypatch):
    """The first Ctrl-C during a tree's first turn: no second turn is sampled, nothing is
    trained and no episode is written (the tree is the episode); the resume grows the tree
    afresh, writes its episode and trains once."""
    import os
    import signal
    import time

    from marlang.config import build_config
    from marlang.methods.magrpo.learner import MAGRPOLearner
    from marlang.run import Experiment
    from marlang.rundir import RunDirectory
    from marlang.testing import tiny_chat_model

    sampled, trained = [], []
    sample, fit = MAGRPOLearner._sample, MAGRPOLearner._fit

    def pressing_sample(self, requests, iteration, cache_depth=0):
        sampled.append(len(requests))
        out = sample(self, requests, iteration, cache_depth=cache_depth)
        if len(sampled) == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the first turn's answers are in
            stop = getattr(self.context, "stop", None)
            for _ in range(200):  # the main thread runs the handler
                if stop is not None and stop.is_set():
                    break
                time.sleep(0.01)
        return out

    async def counting_fit(self, samples, iteration):
        trained.append(iteration)
        return await fit(self, samples, iteration)

    monkeypatch.setattr(MAGRPOLearner, "_sample", pressing_sample)
    monkeypatch.setattr(MAGRPOLearner, "_fit", counting_fit)
    config = build_config({
        "env": {"id": "code/humaneval", "n_agents": 1, "max_steps": 2,
                "kwargs": {"memory": "last", "task_ids": ["HumanEval/0"]}},
        "model": {"spec": "local:smollm2", "cache": False, "max_tokens": 6},
        "agents": {"chain_of_thought": False, "history": 0},
        "learning": {"method": "grpo", "iterations": 1, "rollouts": 1, "num_generations": 2, "max_new_tokens": 6,
                     "epochs": 1, "eval_episodes": 0, "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        "run": {"parallel": 1, "progress": False, "seed": 0}})
    model = tiny_chat_model(max_tokens=6, temperature=1.0)
    with pytest.raises(KeyboardInterrupt):
        Experiment(config, tmp_path / "run", chat_model=model).run()
    model.engine._executor.submit(lambda: None).result(timeout=60)  # whatever the engine still ran
    assert sampled == [1] and trained == []
    rd = RunDirectory(tmp_path / "run")
    assert not rd.load_episode_dicts() and not rd.read_iterations()

    result = Experiment(config, tmp_path / "run", resume=True, chat_model=model).run()
    assert result.episodes_run == 1 and len(rd.load_episode_dicts()) == 1
    assert sampled[:2] == [1, 1] and len(sampled) >= 2 and trained == [0]
    assert len(rd.read_iterations()) == 1 and (tmp_path / "run" / "trees" / "0.jsonl").is_file()


# ------------------------------------------------------------------------------ one play per problem


def _team_config(iterations: int = 2) -> object:
    from marlang.config import build_config

    return build_config({
        "env": {"id": "code/humaneval", "n_agents": 2, "max_steps": 1,
                "kwargs": {"structure": "joint", "task_ids": ["HumanEval/0", "HumanEval/2"]}},
        "model": {"cache": False, "max_tokens": 6},
        "agents": {"chain_of_thought": False, "history": 0},
        "learning": {"method": "magrpo", "iterations": iterations, "rollouts": 2, "num_generations": 2,
                     "max_new_tokens": 6, "epochs": 1, "eval_episodes": 1,
                     "lora": {"r": 4, "alpha": 8, "dropout": 0.0}},
        "run": {"parallel": 1, "progress": False, "seed": 0}})


def test_each_problem_is_played_once_and_its_episode_is_the_trees_first_path(tmp_path, monkeypatch):
    """A training problem's env is reset once (its tree's root), no LLM episode is played for
    it, and its recorded episode is the tree's first joint answer: the same answers, reward and
    observation as ``trees/<iteration>.jsonl`` and the env give."""
    import json
    from collections import Counter

    from marlang import make_env
    from marlang.envs.tasks.coding import CodeTaskEnv
    from marlang.run import Experiment
    from marlang.rundir import RunDirectory
    from marlang.seeds import env_seeds
    from marlang.testing import tiny_chat_model

    resets: Counter[int] = Counter()
    reset = CodeTaskEnv.reset

    def counting_reset(self, seed=None, options=None):
        resets[seed] += 1
        return reset(self, seed=seed, options=options)

    monkeypatch.setattr(CodeTaskEnv, "reset", counting_reset)
    config = _team_config()
    result = Experiment(config, tmp_path / "run", chat_model=tiny_chat_model(max_tokens=6, temperature=1.0)).run()
    held_out = set(env_seeds(0, "test", range(8)))
    train = {s: n for s, n in resets.items() if s not in held_out}
    # the run seed's training stream: 2 iterations x 2 problems; seed 0: the config's check of the env
    s0, s1, s2, s3 = env_seeds(0, "train", range(4))
    assert train == {0: 1, s0: 1, s1: 1, s2: 1, s3: 1}
    rd = RunDirectory(result.run_dir)
    episodes = [d for d in rd.load_episode_dicts() if d["phase"] == "train"]
    assert [(d["episode"], d["iteration"], d["seed"]) for d in episodes] == [(0, 0, s0), (1, 0, s1), (2, 1, s2),
                                                                            (3, 1, s3)]
    # consecutive seeds of a stream cover the problems once per iteration
    assert {s0 % 2, s1 % 2} == {s2 % 2, s3 % 2} == {0, 1}
    env = make_env("code/humaneval", n_agents=2, structure="joint", task_ids=["HumanEval/0", "HumanEval/2"],
                   max_steps=1)  # an env outside the run, for the observations
    for iteration in (0, 1):
        trees = [json.loads(line) for line in (rd.path / "trees" / f"{iteration}.jsonl").read_text().splitlines()]
        for t, d in enumerate(e for e in episodes if e["iteration"] == iteration):
            first = next(x for x in trees if x["tree"] == t and x["turn"] == 1 and set(x["joint"].values()) == {0})
            (step,) = d["steps"]
            assert {a: dec["action"] for a, dec in step["decisions"].items()} == first["answers"]
            assert step["rewards"]["agent_0"] == first["reward"]
            assert step["terminated"] or step["truncated"]
            observations, _ = env.reset(seed=d["seed"])
            assert step["observations"]["agent_0"]["text"] == observations["agent_0"].text
    env.close()
    rows = rd.read_iterations()
    assert len(rows) == 2 and all(r["episodes"] == 2 for r in rows)


def test_a_lost_episode_of_a_finished_update_is_reported_not_replayed(tmp_path):
    """The tree that played a training episode is gone once its update finished: a resume
    that finds the episode's record lost says so in one line and plays nothing."""
    from marlang.run import Experiment
    from marlang.rundir import RunDirectory
    from marlang.testing import tiny_chat_model

    config = _team_config(iterations=1)
    model = tiny_chat_model(max_tokens=6, temperature=1.0)
    Experiment(config, tmp_path / "run", chat_model=model).run()
    rd = RunDirectory(tmp_path / "run")
    lines = rd.episodes_file.read_text().splitlines(keepends=True)
    kept = [line for line in lines if '"episode": 1,' not in line]
    assert len(kept) == len(lines) - 1
    rd.episodes_file.write_text("".join(kept))
    said: list[str] = []
    result = Experiment(config, tmp_path / "run", resume=True, chat_model=model, notify=said.append).run()
    assert result.episodes_run == 0
    assert any("episode(s) 1 were lost" in s and "cannot be played again" in s for s in said)
