"""Sampling a MAGRPO tree's completions: G per (node, agent), on the slots' local models (one
batched generate per base model, each row under its agent's adapter, every token's log-prob
recorded) or on a rollout server that serves the adapters by name (``learning.rollout_server``).

The learner says what to sample (`TreeRequest`s, each with its prompt) and with which seeds;
this module turns them into engine or server requests and their replies into `Completion`s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from marlang.agents.answer_parsing import extract_answer
from marlang.methods.magrpo.tree import Completion, Node
from marlang.models.local_engine import GenerationRequest, SamplingParams

if TYPE_CHECKING:
    from marlang.methods.magrpo.options import MAGRPOOptions
    from marlang.methods.magrpo.rollout_server import RolloutServer
    from marlang.models.local_policy import LocalPolicy
    from marlang.types import StopFlag


@dataclass
class TreeRequest:
    """One agent's turn at one node of tree ``tree``: what it observes, its act prompt, and
    (memoryful) its previous reply, whose conversation and KV cache it continues."""

    node: Node
    tree: int
    agent: str
    observation: Any
    messages: list[Any]
    """The agent's act prompt for ``observation`` (``LearnerContext.act_messages``)."""
    prior: Completion | None = None

    @property
    def form(self) -> str:
        """The answer's format (code, math, text)."""
        return self.observation.data.get("answer_format", "text")

    @property
    def entry_point(self) -> str | None:
        return self.observation.data.get("entry_point") if self.form == "code" else None


Seeds = Callable[[int, int], int]
"""The sampling seed of request ``k``'s ``g``-th completion."""


def sample_local(requests: Sequence[TreeRequest], options: MAGRPOOptions, *, local_of: Callable[[str], LocalPolicy],
                 adapter_of: Callable[[str], str | None], seed: Seeds, cache_depth: int = 0) -> list[list[Completion]]:
    """G completions per request, in one batched generate per base model with per-row
    adapters (``adapter_of``), each token's log-prob recorded. A request with a ``prior``
    reply continues that reply's conversation from its KV cache; replies at nodes whose
    children sit above ``cache_depth`` keep theirs."""
    G = options.num_generations
    continues = any(r.prior is not None for r in requests)
    # per base model: its handle, its output rows, its requests, and its template's turn suffix
    batches: dict[int, tuple[LocalPolicy, list[int], list[GenerationRequest], str]] = {}
    prompts = []
    for k, r in enumerate(requests):
        local = local_of(r.agent)
        if id(local) not in batches:
            batches[id(local)] = (local, [], [], local.turn_suffix() if continues else "")
        _local, rows, batch, suffix = batches[id(local)]
        if r.prior is None:
            prompt_ids = local.encode(local.render(r.messages))
        else:
            prompt_ids = local.continue_conversation(r.prior.prompt_ids, r.prior.token_ids,
                                                    str(r.messages[-1].content), suffix)
        prompts.append(prompt_ids)
        for g in range(G):
            rows.append(k * G + g)
            batch.append(GenerationRequest(prompt_ids, SamplingParams(
                temperature=options.temperature, top_p=options.top_p, top_k=options.top_k,
                max_tokens=options.max_new_tokens, seed=seed(k, g) % (2 ** 63),
                logprobs=True, keep_cache=r.node.turn + 1 < cache_depth),
                adapter=adapter_of(r.agent),
                past=r.prior.past if r.prior is not None else None))
    outs: list[Any] = [None] * len(requests) * G
    for local, rows, batch, _suffix in batches.values():  # one in all unless slots are on several
        for row, out in zip(rows, local.generate(batch), strict=True):
            outs[row] = out
    return [[completion(r, prompt_ids, out.token_ids, out.text, logprobs=out.token_logprobs, past=out.cache)
             for out in outs[k * G:(k + 1) * G]]
            for k, (r, prompt_ids) in enumerate(zip(requests, prompts, strict=True))]


def sample_remote(requests: Sequence[TreeRequest], options: MAGRPOOptions, *, server: RolloutServer,
                  local: LocalPolicy, seed: Seeds, stop: StopFlag) -> list[list[Completion]]:
    """`sample_local` on the rollout server: each agent's G completions are G seeded requests
    to its served adapter, sent at once. The replies are tokenized here (chat template and
    tokenizer of the trained model, EOS after a reply that stopped); the ratio losses' old
    log-probs then come from the trainer's own adapters, which the served ones equal."""
    G = options.num_generations
    models = {agent: server.chat_model(agent, temperature=options.temperature, top_p=options.top_p,
                                       top_k=options.top_k, max_tokens=options.max_new_tokens)
              for agent in dict.fromkeys(r.agent for r in requests)}
    calls, prompts = [], []
    for k, r in enumerate(requests):
        prompts.append(local.encode(local.render(r.messages)))
        calls += [(models[r.agent], r.messages, seed(k, g) % (2 ** 31)) for g in range(G)]
    pool = ThreadPoolExecutor(max_workers=max(1, min(64, len(calls))))
    futures = [pool.submit(model.invoke, messages, seed=s) for model, messages, s in calls]
    try:
        while True:
            done, pending = wait(futures, timeout=0.2, return_when=FIRST_EXCEPTION)
            if not pending or any(f.exception() is not None for f in done):
                break
            stop.check("waiting for the rollout server")
        replies = [f.result() for f in futures]
    finally:  # stopped or failed: the calls not yet sent are never sent
        pool.shutdown(wait=False, cancel_futures=True)
    eos = local.eos_id
    result: list[list[Completion]] = []
    for k, r in enumerate(requests):
        group = []
        for reply in replies[k * G:(k + 1) * G]:
            text = str(reply.content)
            tokens = local.encode(text)[:options.max_new_tokens]
            if reply.response_metadata.get("finish_reason") == "stop" and len(tokens) < options.max_new_tokens:
                tokens = (*tokens, eos)
            group.append(completion(r, prompts[k], tokens, text))
        result.append(group)
    return result


def completion(request: TreeRequest, prompt_ids: Any, token_ids: Any, text: str, logprobs: Any = None,
               past: Any = None) -> Completion:
    """A sampled reply, with the answer in it in the request's format."""
    found = extract_answer(text, request.form, request.entry_point)
    return Completion(request.agent, tuple(prompt_ids), tuple(token_ids), text, found.answer or "",
                      logprobs=logprobs, thought=found.thought, valid=found.answer is not None, past=past)


def open_server(options: MAGRPOOptions, run_dir: Any) -> RolloutServer:
    """The `RolloutServer` of ``learning.rollout_server`` for the run directory ``run_dir``."""
    from marlang.methods.magrpo.rollout_server import RolloutServer, api_key_from

    assert options.rollout_server is not None
    return RolloutServer(options.rollout_server, run_dir, adapter_root=options.rollout_adapter_root,
                         api_key=api_key_from(options.rollout_api_key_env))
