"""The local engine serving agents' LoRA adapters: mixed-adapter batches equal per-agent
calls, the response cache follows the weights and adapter of every call (never stale after
an update), and scoring agents sample from the softmax over legal-action scores."""

import asyncio
import math

import pytest
import torch
from langchain_core.messages import HumanMessage
from scipy.stats import chisquare

from marlang.methods.lora.team import TeamAdapters, ValueHeadOptions
from marlang.models import SQLiteResponseCache
from marlang.models.local_engine import GenerationRequest, SamplingParams, ScoreRequest
from marlang.testing import tiny_chat_model, tiny_local_lm

AGENTS = ["agent_0", "agent_1"]
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


def team_engine(seed: int = 0):
    engine = tiny_local_lm()
    team = TeamAdapters(engine.model, AGENTS, base_id="tiny", value_head=ValueHeadOptions(), seed=seed)
    with torch.no_grad():  # LoRA B starts at zero: make the agents' policies differ
        gen = torch.Generator().manual_seed(seed + 1)
        for name, p in team.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    engine.attach_adapters(team)
    return engine, team


def test_a_mixed_adapter_batch_scores_and_generates_as_each_agent_alone():
    engine, _ = team_engine()
    prompt = "<|im_start|>user\nMission: pick up the key.<|im_end|>\n<|im_start|>assistant\nAction:"
    cands = tuple(" " + a for a in ACTIONS)
    rows = [ScoreRequest(prompt, cands, a) for a in ["agent_0", "agent_1", None, "agent_1"]]
    together = engine.score_requests(rows)
    alone = [engine.score_requests([r])[0] for r in rows]
    for t, a in zip(together, alone, strict=True):
        assert t.scores == pytest.approx(a.scores, abs=1e-5)
        assert (t.value is None) == (a.value is None)
        if t.value is not None:
            assert t.value == pytest.approx(a.value, abs=1e-5)
    assert together[0].scores != pytest.approx(together[1].scores, abs=1e-3)  # adapters differ
    assert together[2].value is None and together[0].value is not None
    ids = engine.encode(prompt)
    sampling = SamplingParams(max_tokens=6)
    reqs = [GenerationRequest(ids, sampling, a) for a in ["agent_0", "agent_1", None]]
    batch = engine.generate(reqs)
    assert [o.token_ids for o in batch] == [engine.generate([r])[0].token_ids for r in reqs]


async def test_a_calibrated_agent_subtracts_the_base_models_content_free_prior():
    from marlang.agents.llm_agent import CallContext, LLMAgent
    from marlang.types import TextObservation

    engine, _ = team_engine()
    model = tiny_chat_model(engine)
    agent = LLMAgent("agent_0", model, policy="Reach the key.", chain_of_thought=False,
                     action_selection="score", calibration="content_free")
    agent.adapter = "agent_0"
    obs = TextObservation(text="You see a red key 2 steps forward", mission="go to the red key",
                          legal_actions=list(ACTIONS))
    decision = await agent.act(obs, [], CallContext())
    # The prior: the base model (no adapter) on the same prompt with the observation "N/A".
    neutral = TextObservation(text="N/A", mission=obs.mission, legal_actions=list(ACTIONS))
    plain = LLMAgent("agent_0", model, policy="Reach the key.", chain_of_thought=False,
                     action_selection="score", history=0)
    base = await plain.act(neutral, [], CallContext())
    assert decision.offsets == pytest.approx([-s for s in base.scores], abs=1e-5)
    logits = torch.tensor(decision.scores) + torch.tensor(decision.offsets)
    assert decision.action == ACTIONS[int(torch.argmax(logits))]
    assert decision.logprob == pytest.approx(
        float(torch.log_softmax(logits, -1)[ACTIONS.index(decision.action)]), abs=1e-5)
    # The adapter's own scores differ from the base model's: the prior is not the adapter's.
    agent.calibration = "none"
    adapted = await agent.act(neutral, [], CallContext())
    assert adapted.scores != pytest.approx(base.scores, abs=1e-3)
    with pytest.raises(ValueError, match="agents.calibration must be one of none, content_free"):
        LLMAgent("a", model, policy="", calibration="neutral")


def test_the_cache_is_never_stale_after_the_weights_change(tmp_path):
    engine = tiny_local_lm()
    cache = SQLiteResponseCache(tmp_path / "r.sqlite")
    model = tiny_chat_model(engine, cache=cache, max_tokens=8)
    msgs = [HumanMessage("Say something about keys.")]
    first = model.invoke(msgs).content
    model.invoke(msgs)
    assert (cache.hits, cache.misses) == (1, 1)
    with torch.no_grad():  # an optimizer step, in place
        engine.model.lm_head.weight.mul_(-1.0)
    again = model.invoke(msgs)
    assert cache.misses == 2 and not again.response_metadata.get("cached")
    assert again.content != first


def test_the_cache_is_keyed_by_the_adapter_that_answers(tmp_path):
    engine, team = team_engine()
    cache = SQLiteResponseCache(tmp_path / "r.sqlite")
    model = tiny_chat_model(engine, cache=cache, max_tokens=8)
    msgs = [HumanMessage("Say something about keys.")]
    a0 = model.invoke(msgs, adapter="agent_0").content
    a1 = model.invoke(msgs, adapter="agent_1").content
    assert cache.misses == 2 and a0 != a1
    model.invoke(msgs, adapter="agent_0")
    assert cache.hits == 1
    with torch.no_grad():  # agent_0's update: its calls miss, agent_1's still hit
        for p in team.parameters_of("agent_0"):
            p.add_(0.3)
    model.invoke(msgs, adapter="agent_0")
    assert (cache.hits, cache.misses) == (1, 3)
    model.invoke(msgs, adapter="agent_1")
    assert cache.hits == 2


def test_choosing_samples_from_the_softmax_over_scores():
    """A chi-square test: sampled choices follow softmax(scores / T) on a fixed prompt."""
    engine = tiny_local_lm()
    model = tiny_chat_model(engine)
    msgs = [HumanMessage("Mission: pick up the key. Which action?")]
    temperature = 2.0
    counts = {a: 0 for a in ACTIONS}
    n = 600

    async def sample_all():
        # concurrent calls are scored together in batches by the engine
        return await asyncio.gather(*(model.ainvoke(msgs, choices=ACTIONS, choice_prefix="Action: ",
                                                    temperature=temperature, seed=seed) for seed in range(n)))

    replies = asyncio.run(sample_all())
    for reply in replies:
        counts[reply.content] += 1
    reply = replies[-1]
    meta = reply.response_metadata
    scores = torch.tensor([meta["choice_logprobs"][a] for a in ACTIONS], dtype=torch.float64)
    probs = torch.softmax(scores / temperature, -1)
    assert meta["sampled"] and meta["choice_lead"] == " "
    last = ACTIONS.index(reply.content)
    assert meta["policy_logprob"] == pytest.approx(float(torch.log_softmax(scores / temperature, -1)[last]))
    observed = [counts[a] for a in ACTIONS]
    expected = (probs * n).tolist()
    assert min(expected) > 5, "the fixed prompt should leave every action a fair chance"
    assert chisquare(observed, expected).pvalue > 0.001
    # greedy: the argmax, log pi normalised at temperature 1
    greedy = model.invoke(msgs, choices=ACTIONS, choice_prefix="Action: ")
    best = max(ACTIONS, key=lambda a: greedy.response_metadata["choice_logprobs"][a])
    assert greedy.content == best and not greedy.response_metadata["sampled"]
    logz = math.log(sum(math.exp(v) for v in greedy.response_metadata["choice_logprobs"].values()))
    assert greedy.response_metadata["policy_logprob"] == pytest.approx(
        greedy.response_metadata["choice_logprobs"][best] - logz)


def test_a_row_continued_from_its_kept_cache_equals_the_whole_prompt_run_afresh():
    """memoryful: turn 2 continues each agent's turn-1 KV cache; its tokens and their
    log-probs are those of the whole conversation as a prompt (mixed adapters, rows of
    different cache lengths, one row without a past)."""
    engine, _ = team_engine()
    firsts = [engine.encode("<|im_start|>user\nMission: pick up the key.<|im_end|>\n<|im_start|>assistant\n"),
              engine.encode("<|im_start|>user\nGo to the red ball, then open the door.<|im_end|>\n"
                            "<|im_start|>assistant\n")]
    turn1 = engine.generate([
        GenerationRequest(ids, SamplingParams(temperature=1.0, max_tokens=5 + 3 * k, seed=k, keep_cache=True), a)
        for k, (ids, a) in enumerate(zip(firsts, AGENTS, strict=True))])
    for out, ids in zip(turn1, firsts, strict=True):
        assert out.cache is not None and out.cache.token_ids == tuple(ids) + out.token_ids[:-1]
    feedback = engine.encode("<|im_end|>\n<|im_start|>user\nThe door is locked.<|im_end|>\n<|im_start|>assistant\n")
    full = [tuple(ids) + out.token_ids + tuple(feedback) for ids, out in zip(firsts, turn1, strict=True)]
    sampling = SamplingParams(temperature=0.7, max_tokens=6, seed=9, logprobs=True)
    continued = engine.generate([GenerationRequest(full[0], sampling, "agent_0", past=turn1[0].cache),
                                 GenerationRequest(full[1], sampling, "agent_1", past=turn1[1].cache),
                                 GenerationRequest(firsts[0], sampling, "agent_1")])
    afresh = engine.generate([GenerationRequest(full[0], sampling, "agent_0"),
                              GenerationRequest(full[1], sampling, "agent_1"),
                              GenerationRequest(firsts[0], sampling, "agent_1")])
    for c, f in zip(continued, afresh, strict=True):
        assert c.token_ids == f.token_ids
        assert c.token_logprobs == pytest.approx(f.token_logprobs, abs=1e-4)
        assert all(lp <= 0 for lp in c.token_logprobs) and len(c.token_logprobs) == len(c.token_ids)
    # the recorded log-probs are the temperature-scaled policy's, as training scores them
    from marlang.methods.magrpo.grpo_loss import completion_logprobs, pack_completions

    batch = pack_completions([full[1]], [afresh[1].token_ids], engine._pad_id)
    with torch.no_grad():
        engine.adapters.model.set_adapter("agent_1")
        scored = completion_logprobs(engine.adapters.model, batch, 0.7)[0]
    assert scored.tolist() == pytest.approx(list(afresh[1].token_logprobs), abs=1e-4)
    with pytest.raises(ValueError, match="proper prefix"):
        engine.generate([GenerationRequest(firsts[1], sampling, "agent_0", past=turn1[0].cache)])


@pytest.mark.real_model
async def test_calibration_lifts_go_forward_on_the_embedded_model(smollm2_engine):
    # SmolLM2-135M gives "go forward" a tiny share whatever it sees; the content-free prior
    # removes that preference, so calibrated, the move gets a real share of the policy.
    from marlang.agents.llm_agent import CallContext, LLMAgent
    from marlang.models import LocalChatModel
    from marlang.types import TextObservation

    model = LocalChatModel(engine=smollm2_engine)
    obs = TextObservation(text="You are at (1, 1) facing east\nYou see a red ball 2 steps forward",
                          mission="go to the red ball", legal_actions=list(ACTIONS))
    plain, calibrated = (LLMAgent("agent_0", model, policy="Reach the goal.", chain_of_thought=False,
                                  action_selection="score", calibration=c) for c in ("none", "content_free"))
    raw = await plain.act(obs, [], CallContext())
    cal = await calibrated.act(obs, [], CallContext())
    assert raw.offsets is None and cal.offsets and any(o != 0 for o in cal.offsets)
    assert cal.scores == pytest.approx(raw.scores, abs=1e-4)
    forward = ACTIONS.index("go forward")
    share = lambda logits: float(torch.softmax(torch.tensor(logits), -1)[forward])
    assert share(raw.scores) < 0.05
    assert share([s + o for s, o in zip(cal.scores, cal.offsets, strict=True)]) > 3 * share(raw.scores)
