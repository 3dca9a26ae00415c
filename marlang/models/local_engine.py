"""A local causal LM that serves many concurrent generation requests in batches.

`LocalLM` owns one model + tokenizer. Concurrent `agenerate` calls on an event loop are
collected into one left-padded, KV-cached decoding loop run off the loop's thread; every
request keeps its own sampling parameters and random generator inside the shared batch.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeoutError
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from marlang.models.batching import LoopBatcher, in_loop_batch
from marlang.models.generation import (
    GenerationOutput,
    GenerationRequest,
    RowCache,
    SamplingParams,
    ScoreOutput,
    ScoreRequest,
    choose_tokens,
    token_logprobs,
)
from marlang.models.local_weights import (
    load_hf_model,
    load_smollm2,
    prepare_tokenizer_for_generation,
)
from marlang.models.scoring import ignore_cache_rename_warning, left_padded_prefill, score_decisions
from marlang.models.weights_id import (
    FILE_HASHES_NAME,  # noqa: F401 (re-exported)
    MODEL_FILE_PATTERNS,  # noqa: F401 (re-exported)
    WEIGHTS_ID_LENGTH,  # noqa: F401 (re-exported)
    directory_weights_id,
    is_adapter_weight,
    source_dir,
    state_dict_weights_id,
)
from marlang.types import StopFlag

logger = logging.getLogger(__name__)

EMBEDDED_MODELS = ("smollm2",)
"""Names accepted after ``local:``."""

# Used only for tokenizers without a chat template (base models loaded with hf:PATH).
_PLAIN_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)


class ServedAdapters(Protocol):
    """What an engine serves a team's LoRA adapters through: the adapted model, the adapter
    that answers each agent, per-agent value heads and content hashes (for the cache key)."""

    model: Any
    """The PEFT model wrapping the engine's base model."""
    value_heads: torch.nn.ModuleDict
    """Per adapter name, its value head (an agent's adapter without one has none)."""

    def adapter_for(self, agent: str) -> str: ...

    def adapter_names(self, agents: Sequence[str | None]) -> list[str]: ...

    def value(self, agent: str, hidden: torch.Tensor) -> torch.Tensor: ...

    def parameters_of(self, agent: str) -> list[Any]: ...

    def adapter_hashes(self) -> dict[str, str]: ...


@dataclass
class EngineCounters:
    """How much work an engine's model has done, counted by the engine (read them, do not
    write them). Cache hits never reach the engine, so they never count."""

    generate_calls: int = 0
    """Batched decoding runs."""
    score_calls: int = 0
    """Batched scoring runs."""
    requests_served: int = 0
    """Requests the model answered, generated or scored."""


@dataclass
class _RowState:
    """Decoding state of one request inside a batch."""

    request: GenerationRequest
    generator: torch.Generator | None
    token_ids: list[int] = field(default_factory=list)
    text: str | None = None
    finish_reason: str | None = None
    logprobs: list[float] = field(default_factory=list)
    cache: RowCache | None = None
    constraint: Any = None
    """The row's `JsonConstraint` when its sampling has a grammar."""


class LocalLM:
    """A causal LM and its tokenizer on this machine, serving batched generation.

    Several chat models (e.g. `LocalChatModel` copies with different sampling params) can
    share one `LocalLM`; generation is serialized by a lock, so it is safe to use from many
    threads and event loops. ``counters`` says how much work it has done (`EngineCounters`).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        model_id: str,
        *,
        max_batch_size: int = 16,
        batch_window_s: float = 0.01,
        max_batch_wait_s: float = 0.05,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.max_batch_size = max_batch_size
        self.batch_window_s = batch_window_s
        """Requests arriving within this long of each other are batched together."""
        self.max_batch_wait_s = max_batch_wait_s
        """Upper bound on how long the first request of a batch waits for company."""
        prepare_tokenizer_for_generation(tokenizer)
        ignore_cache_rename_warning()
        self._pad_id = int(tokenizer.pad_token_id)
        self._eos_ids = _eos_token_ids(model, tokenizer)
        self._ll_tokenizer: Any = None
        """llguidance's view of the tokenizer, built at the first constrained request."""
        self._max_positions = getattr(model.config, "max_position_embeddings", None)
        self._compute_lock = threading.Lock()
        # All of the model's work (batched decoding, scoring, a trainer's steps) runs on this
        # one thread: torch's CPU allocations then come from one malloc arena instead of one
        # per worker thread, which otherwise fragments into many GB over a training run.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="marlang-engine")
        self._stats_lock = threading.Lock()
        self.counters = EngineCounters()
        """Batched runs and requests served so far (shared by every chat model on the engine)."""
        # One batcher per event loop, created on first use; a closed loop's batcher goes with
        # it, so a process may call asyncio.run() many times.
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopBatcher] = (
            weakref.WeakKeyDictionary()
        )
        self._score_batchers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, LoopBatcher
        ] = weakref.WeakKeyDictionary()
        self._batchers_lock = threading.Lock()
        self._scorer: Any = None
        self._weights_id: str | None = None
        self._weights_signature: tuple[int, ...] | None = None
        self._weights_id_lock = threading.Lock()
        self.adapters: ServedAdapters | None = None
        """The agents' LoRA adapters on this model, once attached (`attach_adapters`)."""
        self._adapter_hashes: dict[str, tuple[tuple[int, ...], str]] = {}
        self._stop_flags: list[StopFlag] = []
        """The `StopFlag` of each run using the engine now (`watching`)."""

    @classmethod
    def from_spec(
        cls, spec: str, *, device: str | torch.device | None = None, **engine_kwargs: Any
    ) -> LocalLM:
        """Load ``local:smollm2`` or ``hf:PATH`` (local files only)."""
        backend, _, name = spec.partition(":")
        if backend == "local":
            if name not in EMBEDDED_MODELS:
                raise ValueError(
                    f"Unknown embedded model {spec!r}; available: "
                    + ", ".join(f"local:{n}" for n in EMBEDDED_MODELS)
                )
            model, tokenizer = load_smollm2(device=device)
        elif backend == "hf" and name:
            model, tokenizer = load_hf_model(name, device=device)
        else:
            raise ValueError(f"LocalLM loads local:NAME or hf:PATH specs, got {spec!r}")
        return cls(model, tokenizer, spec, **engine_kwargs)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def weights_id(self) -> str:
        """A content hash of the base weights, part of the response cache key and of the manifest.

        For a model loaded from a directory (``hf:PATH``, ``local:smollm2``, or a model in the
        local Hugging Face cache) and not changed since: SHA-256 over its weight, config and
        tokenizer files, each file's hash remembered by (path, size, mtime) in the marlang
        cache dir so a reload does not hash it again. For a model with no files (built in
        memory), or whose weights were changed in memory (an optimizer step, a load): SHA-256
        over its state_dict tensors. Every in-place change of a weight bumps that tensor's
        version counter, so the id is computed again after any change, never stale. Adapters
        attached with `attach_adapters` are not part of it: each call's cache key carries the
        hash of the adapter that answered it (`adapter_hash`).
        """
        with self._weights_id_lock:
            signature = self._base_signature()
            if self._weights_id is None or signature != self._weights_signature:
                first = self._weights_signature is None
                directory = source_dir(self.base_model) if first else None
                self._weights_id = (
                    directory_weights_id(directory) if directory is not None else None
                ) or state_dict_weights_id(self.base_model, skip=is_adapter_weight)
                self._weights_signature = signature
            return self._weights_id

    @property
    def base_id(self) -> str:
        """The base weights' identity, ``model_id@weights_id``: what saved adapters record as
        the base they were trained on (and are checked against when loaded)."""
        return f"{self.model_id}@{self.weights_id}"

    @property
    def pad_id(self) -> int:
        """The padding token's id (batched rows are padded with it)."""
        return self._pad_id

    @property
    def base_model(self) -> PreTrainedModel:
        """The transformers model under any attached adapters."""
        return self.adapters.model.get_base_model() if self.adapters is not None else self.model

    def _base_signature(self) -> tuple[int, ...]:
        # Tensor version counters move on every in-place change (optimizer steps, copy_).
        return tuple(p._version for name, p in self.base_model.named_parameters()
                     if not is_adapter_weight(name))

    def attach_adapters(self, adapters: ServedAdapters) -> None:
        """Serve requests with the agents' LoRA adapters (`ServedAdapters` over this engine's
        model): a request names its adapter, and a batch mixing agents runs in one forward."""
        with self._compute_lock:
            self.adapters = adapters
            self.model = adapters.model
            self.model.eval()

    def adapter_hash(self, adapter: str | None) -> str:
        """The content hash of the adapter an agent's calls go to (part of each call's cache
        key); ``"base"`` for None. Hashed again only after its weights changed."""
        if adapter is None:
            return "base"
        if self.adapters is None:
            raise ValueError(f"{self.model_id}: no adapters attached, so none for {adapter!r}")
        signature = tuple(p._version for p in self.adapters.parameters_of(adapter))
        with self._weights_id_lock:
            known = self._adapter_hashes.get(adapter)
            if known is None or known[0] != signature:
                known = self._adapter_hashes[adapter] = (signature, self.adapters.adapter_hashes()[adapter])
            return known[1]

    def _values(self, adapters: Sequence[str | None], hidden: torch.Tensor) -> list[float | None]:
        """Each row's value estimate by its agent's value head (None: base rows, no head)."""
        served = self.adapters
        out: list[float | None] = []
        for i, agent in enumerate(adapters):
            if served is None or agent is None or served.adapter_for(agent) not in served.value_heads:
                out.append(None)
            else:
                out.append(float(served.value(agent, hidden[i])))
        return out

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the engine's compute thread (where every batch runs), off the
        event loop: a trainer's update goes here too. A job that comes up once a watched run
        has stopped is not started (it raises `Stopped`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(self._unless_stopped, fn, *args))

    def _unless_stopped(self, fn: Callable[..., Any], *args: Any) -> Any:
        self.check_stop("before a job")
        return fn(*args)

    @contextmanager
    def watching(self, flag: StopFlag) -> Iterator[None]:
        """While inside, ``flag`` set stops the engine's work: decoding at its next step, scoring
        at its next batch, queued jobs before they start (each raises `Stopped`). A run watches
        its flag for as long as it uses the engine; its callers no longer wait for that work.
        A flag set when the run lets go stays until the work queued before is done."""
        with self._stats_lock:
            self._stop_flags.append(flag)
        try:
            yield
        finally:
            if flag.is_set():  # the compute thread lets go of it after the work it stops
                self._executor.submit(self._unwatch, flag)
            else:
                self._unwatch(flag)

    def _unwatch(self, flag: StopFlag) -> None:
        with self._stats_lock:
            self._stop_flags.remove(flag)

    def check_stop(self, where: str = "") -> None:
        """Raise `Stopped` if a run watching the engine has stopped."""
        for flag in tuple(self._stop_flags):
            flag.check(f"{self.model_id} {where}".rstrip())

    def wait_idle(self, timeout: float) -> bool:
        """Wait until the compute thread has finished what it runs now and what is queued
        (at most ``timeout`` seconds); whether it did."""
        try:
            self._executor.submit(lambda: None).result(timeout)
        except FuturesTimeoutError:
            return False
        return True

    @contextmanager
    def exclusive(self) -> Iterator[PreTrainedModel]:
        """Hold the model alone (no generation or scoring meanwhile), e.g. for a training
        step; it is back in eval mode afterwards."""
        with self._compute_lock:
            try:
                yield self.model
            finally:
                self.model.eval()

    def _forward_kwargs(self, adapters: Sequence[str | None]) -> dict[str, Any]:
        """Per-row adapter names for a mixed batch (PEFT: eval mode only)."""
        if self.adapters is None:
            if any(a is not None for a in adapters):
                raise ValueError(f"{self.model_id}: a request names an adapter but none is attached")
            return {}
        return {"adapter_names": self.adapters.adapter_names(list(adapters))}

    def format_chat(self, messages: Sequence[dict[str, str]]) -> str:
        """Render role/content messages with the tokenizer's chat template, ready to continue."""
        template = None if self.tokenizer.chat_template else _PLAIN_CHAT_TEMPLATE
        # tokenize=False: the rendered text
        return str(self.tokenizer.apply_chat_template(
            list(messages), chat_template=template, tokenize=False, add_generation_prompt=True
        ))

    def encode(self, text: str) -> tuple[int, ...]:
        """Token ids of already-formatted text (the chat template supplies special tokens)."""
        return tuple(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationOutput]:
        """Answer requests synchronously, in batches of at most `max_batch_size`."""
        for request in requests:
            self._check_fits(request)
        outputs: list[GenerationOutput] = []
        for start in range(0, len(requests), self.max_batch_size):
            outputs.extend(self._generate_batch(requests[start : start + self.max_batch_size]))
        return outputs

    def generate_one(self, request: GenerationRequest) -> GenerationOutput:
        """Answer one request from sync code: in a worker thread of an event loop that batches
        sync calls (`batching_sync_calls`), batched with that loop's pending requests;
        otherwise alone, on this thread."""
        self._check_fits(request)
        return in_loop_batch(lambda: self.agenerate(request), lambda: self.generate([request])[0])

    def score_one(self, request: ScoreRequest) -> ScoreOutput:
        """`score_requests` for one request from sync code, batched as `generate_one` is."""
        return in_loop_batch(lambda: self.ascore_request(request), lambda: self.score_requests([request])[0])

    def score(self, prompt: str, candidates: Sequence[str], adapter: str | None = None) -> list[float]:
        """log p(candidate | prompt) for each candidate: the prompt and all candidates in one
        packed pass (see `score_decisions`)."""
        return self.score_requests([ScoreRequest(prompt, tuple(candidates), adapter)])[0].scores

    def score_batch(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[list[float]]:
        """`score` for several (prompt, candidates) pairs in one batched pass."""
        requests = [ScoreRequest(p, tuple(c)) for p, c in items]
        return [out.scores for out in self.score_requests(requests)]

    def score_requests(self, requests: Sequence[ScoreRequest]) -> list[ScoreOutput]:
        """Score requests in batches of at most `max_batch_size`, each batch one forward with
        every row's own adapter; with value heads attached, each row's value too.

        Serialized with generation by the same lock; each request is one served request.
        """
        outputs: list[ScoreOutput] = []
        for start in range(0, len(requests), self.max_batch_size):
            self.check_stop("scoring")
            chunk = list(requests[start : start + self.max_batch_size])
            items = [(self.encode(r.prompt), [self.encode(c) for c in r.candidates]) for r in chunk]
            for r, (prompt_ids, cands) in zip(chunk, items, strict=True):
                if not prompt_ids or not cands or not all(cands):
                    raise ValueError(f"cannot score {list(r.candidates)!r} after {r.prompt[-40:]!r}: "
                                     "prompt and candidates need tokens")
            with self._compute_lock, torch.inference_mode():
                scored = score_decisions(self.model, items, self._pad_id,
                                         **self._forward_kwargs([r.adapter for r in chunk]))
                values: list[float | None] = [None] * len(chunk)
                if self.adapters is not None:
                    values = self._values([r.adapter for r in chunk], scored.prompt_hidden)
            outputs.extend(ScoreOutput(s.tolist(), v) for s, v in zip(scored.scores, values, strict=True))
            with self._stats_lock:
                self.counters.score_calls += 1
                self.counters.requests_served += len(chunk)
        return outputs

    async def ascore(self, prompt: str, candidates: Sequence[str], adapter: str | None = None) -> list[float]:
        """`score`, batched with the other scoring requests pending on this event loop."""
        return (await self.ascore_request(ScoreRequest(prompt, tuple(candidates), adapter))).scores

    async def ascore_request(self, request: ScoreRequest) -> ScoreOutput:
        """One scoring request, batched with the others pending on this event loop."""
        return await self._batcher(self._score_batchers, self.score_requests).submit(request)

    def _batcher(self, batchers: Any, run_batch: Any) -> LoopBatcher:
        loop = asyncio.get_running_loop()
        with self._batchers_lock:
            batcher = batchers.get(loop)
            if batcher is None:
                batcher = batchers[loop] = LoopBatcher(self, run_batch)
        return batcher

    async def agenerate(self, request: GenerationRequest) -> GenerationOutput:
        """Answer one request, batched with the other requests pending on this event loop."""
        self._check_fits(request)
        return await self._batcher(self._batchers, self._generate_batch).submit(request)

    def _check_fits(self, request: GenerationRequest) -> None:
        if not request.prompt_ids:
            raise ValueError("Cannot generate from an empty prompt")
        past = request.past
        if past is not None and (past.length >= len(request.prompt_ids)
                                 or tuple(request.prompt_ids[:past.length]) != past.token_ids):
            raise ValueError("A request's past must cover a proper prefix of its prompt_ids")
        needed = len(request.prompt_ids) + request.sampling.max_tokens
        if self._max_positions is not None and needed > self._max_positions:
            raise ValueError(
                f"{self.model_id}: prompt of {len(request.prompt_ids)} tokens + max_tokens "
                f"{request.sampling.max_tokens} exceeds the model's {self._max_positions} positions"
            )

    def _generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationOutput]:
        with self._compute_lock, torch.inference_mode():
            rows = [_RowState(r, self._make_generator(r.sampling), constraint=self._constraint(r.sampling))
                    for r in requests]
            self._decode(rows, self._forward_kwargs([r.adapter for r in requests]))
        with self._stats_lock:
            self.counters.generate_calls += 1
            self.counters.requests_served += len(rows)
        logger.debug("%s: generated %d requests in one batch", self.model_id, len(rows))
        return [
            GenerationOutput(
                text=row.text if row.text is not None else "",
                token_ids=tuple(row.token_ids),
                input_tokens=len(row.request.prompt_ids),
                finish_reason=row.finish_reason or "length",
                token_logprobs=tuple(row.logprobs) if row.request.sampling.logprobs else None,
                cache=row.cache,
            )
            for row in rows
        ]

    def _make_generator(self, sampling: SamplingParams) -> torch.Generator | None:
        if sampling.temperature == 0:
            return None
        generator = torch.Generator(device=self.device)
        if sampling.seed is None:
            generator.seed()
        else:
            generator.manual_seed(sampling.seed)
        return generator

    def _decode(self, rows: list[_RowState], forward_kwargs: dict[str, Any]) -> None:
        """Left-padded prefill, then one token per step for the rows still running.

        Finished rows are dropped from the batch and its KV cache, so a long answer does not
        make short ones pay for its steps. ``forward_kwargs`` may name each row's adapter.
        """
        names = forward_kwargs.get("adapter_names")
        pasts = [row.request.past for row in rows]
        logits, cache, attention_mask, position_ids = left_padded_prefill(
            self.model, [row.request.prompt_ids for row in rows], self._pad_id,
            pasts=pasts if any(p is not None for p in pasts) else None, **forward_kwargs
        )
        next_positions = position_ids[:, -1] + 1
        active = list(range(len(rows)))
        while True:
            self.check_stop("decoding")  # a stopped run's callers no longer wait for this batch
            tokens = self._choose_tokens(logits, [rows[i] for i in active])
            chosen = tokens.tolist()  # one read back to the host per step, not one per row
            running = [j for j, i in enumerate(active) if not self._push(rows[i], chosen[j])]
            for j, i in enumerate(active):
                if rows[i].request.sampling.keep_cache and j not in running:
                    rows[i].cache = _row_cache(cache, j, attention_mask[j], rows[i])
            if not running:
                return
            if len(running) < len(active):
                keep = torch.tensor(running, dtype=torch.long, device=attention_mask.device)
                cache.batch_select_indices(keep)
                attention_mask, next_positions, tokens = (
                    attention_mask[keep],
                    next_positions[keep],
                    tokens[keep],
                )
                active = [active[j] for j in running]
            step_kwargs = {"adapter_names": [names[i] for i in active]} if names is not None else {}
            attention_mask = torch.cat(
                [attention_mask, attention_mask.new_ones((len(active), 1))], dim=1
            )
            logits = self.model(
                input_ids=tokens[:, None],
                attention_mask=attention_mask,
                position_ids=next_positions[:, None],
                past_key_values=cache,
                use_cache=True,
                **step_kwargs,
            ).logits[:, -1, :]
            next_positions = next_positions + 1

    def _constraint(self, sampling: SamplingParams) -> Any:
        if sampling.grammar is None:
            return None
        from marlang.models.grammar import JsonConstraint, ll_tokenizer

        if self._ll_tokenizer is None:
            self._ll_tokenizer = ll_tokenizer(self.tokenizer)
        return JsonConstraint(self._ll_tokenizer, sampling.grammar)

    def _choose_tokens(self, logits: torch.Tensor, rows: Sequence[_RowState]) -> torch.Tensor:
        for i, row in enumerate(rows):
            if row.constraint is not None:
                row.constraint.mask(logits[i])
        samplings = [row.request.sampling for row in rows]
        tokens = choose_tokens(logits, samplings, [row.generator for row in rows])
        recorded = [i for i, sampling in enumerate(samplings) if sampling.logprobs]
        if recorded:
            logprobs = token_logprobs(logits[recorded], [samplings[i] for i in recorded], tokens[recorded])
            for i, logprob in zip(recorded, logprobs, strict=True):
                rows[i].logprobs.append(logprob)
        return tokens

    def _push(self, row: _RowState, token: int) -> bool:
        """Append a token to a row; return whether the row is finished."""
        row.token_ids.append(token)
        if row.constraint is not None and token not in self._eos_ids:
            row.constraint.consume(token)
        sampling = row.request.sampling
        if token in self._eos_ids and not sampling.ignore_eos:
            row.finish_reason = "stop"
            row.text = self._decode_text(row.token_ids[:-1])
            return True
        if sampling.stop and self._tail_has_stop(row.token_ids, sampling.stop):
            text = self._decode_text(row.token_ids)
            cut = min((text.find(s) for s in sampling.stop if s in text), default=-1)
            if cut >= 0:
                row.finish_reason, row.text = "stop", text[:cut]
                return True
        if len(row.token_ids) >= sampling.max_tokens:
            row.finish_reason = "length"
            row.text = self._decode_text(row.token_ids)
            return True
        return False

    def _decode_text(self, token_ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def _tail_has_stop(self, token_ids: Sequence[int], stops: Sequence[str]) -> bool:
        """Whether a stop string may have just appeared: one did not before this token (the
        check runs at every token), so a new one ends in the last token's text and starts at
        most ``longest`` characters before it. Decoding only that tail keeps the check's
        cost flat as the reply grows; a hit is confirmed on the whole text, which decides
        the cut exactly as before. Tokens that decode to nothing (skipped special tokens)
        widen the tail until it holds enough characters."""
        longest = max(len(s) for s in stops)
        n = longest + _STOP_TAIL_MARGIN
        tail = self._decode_text(token_ids[-n:])
        while len(tail) < longest + _STOP_TAIL_MARGIN and n < len(token_ids):
            n *= 2
            tail = self._decode_text(token_ids[-n:])
        return any(s in tail for s in stops)


_STOP_TAIL_MARGIN = 4
"""Tokens beyond the longest stop string's length in the decoded tail: a tokenizer may decode
the first tokens of a slice differently than inside the whole text (a dropped leading space,
half of a multi-byte character)."""


def _row_cache(cache: Any, row: int, mask: torch.Tensor, state: _RowState) -> RowCache:
    """Row ``row``'s keys and values at its real (unmasked) positions: its prompt and every
    generated token but the last."""
    keep = mask.bool()
    layers = cache.layers
    keys = tuple(layer.keys[row][:, keep, :].clone() for layer in layers)
    values = tuple(layer.values[row][:, keep, :].clone() for layer in layers)
    ids = tuple(state.request.prompt_ids) + tuple(state.token_ids[:-1])
    if keys[0].size(1) != len(ids):
        raise RuntimeError(f"a row's cache holds {keys[0].size(1)} positions for {len(ids)} tokens")
    return RowCache(ids, keys, values)


def _eos_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    ids: set[int] = set()
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured is not None:
        ids.update(int(i) for i in configured)
    if not ids:
        raise ValueError("Cannot tell when generation ends: no eos token id in tokenizer or model")
    return frozenset(ids)


