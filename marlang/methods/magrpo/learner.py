"""MAGRPO (``learning.method: magrpo``) and its one-agent case GRPO (``grpo``): group-relative
training of an LLM team on the coding and reasoning tasks, one LoRA adapter per agent.

Each problem of an iteration's rollout plan is played once, as the root of one tree
(``magrpo_tree``): at every node all agents' G completions are sampled in one batched generate
with per-row adapters (one per base model when slots are on several), the env judges each
joint answer from its saved episode state (``save_episode``/``restore_episode``: no copy of the
env or its sandbox), returns are backed up and advantages taken against the siblings. The
tree's first path (every agent's first completion at each turn) is recorded as the problem's
training episode in ``episodes.jsonl`` (the loop plays none itself: ``records_rollouts``).
Then each agent's adapter is trained on its completions with ``learning.loss`` (``reinforce``:
the MAGRPO paper's on-policy loss), one agent at a time; the adapters are saved under
``adapters/<iteration>/`` and the tree under
``trees/<iteration>.jsonl``.
With ``learning.rollout_server`` every rollout samples on a server that serves the adapters by
name instead (``rollout_server``); under ``accelerate`` each process grows its own trees and the
gradients are summed.
"""

from __future__ import annotations

import logging
import random
from typing import Any, ClassVar

from marlang.config import slot_player
from marlang.learners.base import LearnerOptions
from marlang.lora.template import SEED_OFFSET, AdapterLearner
from marlang.methods.magrpo.grpo_loss import policy_loss, shared_prompt_logprobs
from marlang.methods.magrpo.options import MAGRPOOptions
from marlang.methods.magrpo.tree import (
    Completion,
    Node,
    TrainingSample,
    backpropagate,
    drop_caches,
    first_path,
    grouped_order,
    iter_nodes,
    joint_actions,
    judge,
    should_expand,
    training_samples,
    tree_lines,
    tree_stats,
)
from marlang.models.chat_templates import continue_conversation, render_chat, turn_suffix
from marlang.rundir import atomic_write_text
from marlang.types import Candidate, PolicyState, RolloutPlan

logger = logging.getLogger(__name__)

TEXT_ENVS = ("code/", "math/", "qa/")
"""Env id prefixes whose agents answer in free text (MAGRPO's domain)."""

SEEDS_PER_NODE = 1_000_003
"""Spreads the sampling seeds of a tree's nodes apart."""


class MAGRPOLearner(AdapterLearner[MAGRPOOptions, TrainingSample]):
    """MAGRPO on the learner seam (see the module docstring)."""

    name: ClassVar[str] = "magrpo"
    options_model: ClassVar[type[LearnerOptions]] = MAGRPOOptions
    options: MAGRPOOptions
    state_name: ClassVar[str] = "magrpo_state"

    @classmethod
    def check_config(cls, config: Any) -> None:
        """One-line errors for settings MAGRPO/GRPO cannot train, before anything is created."""
        options: MAGRPOOptions = config.learning.options
        method = cls.name
        spec = config.model.spec
        server = options.rollout_server
        if server is not None and not server.startswith(("http://", "https://")):
            raise ValueError(f"learning.rollout_server must be the server's base URL, e.g. http://HOST:8000/v1; "
                             f"got {server!r}")
        if options.memory == "memoryful" and server is not None:
            raise ValueError("learning.memory 'memoryful' continues each agent's KV cache on the local engine; "
                             "a rollout server keeps none for marlang (unset learning.rollout_server, or use "
                             "learning.memory: env)")
        if options.memory == "memoryful" and not spec.startswith(("local:", "hf:")):
            raise ValueError(f"learning.memory 'memoryful' carries each agent's KV cache across turns, which "
                             f"only the local engine keeps; model.spec {spec!r} has none (use local:smollm2 "
                             "or hf:PATH, or learning.memory: env)")
        if not spec.startswith(("local:", "hf:")):
            raise ValueError(f"learning.method '{method}' trains local weights, and model.spec {spec!r} "
                             "has none here; use local:smollm2 or hf:PATH")
        if not config.env.id.startswith(TEXT_ENVS):
            raise ValueError(
                f"learning.method '{method}' trains free-text answers, and env.id {config.env.id!r} acts "
                "from a legal-action list; use learning.method ppo there (or a code/, math/, qa/ env)")
        for agent, slot in config.slots().items():
            if slot.kind != "llm" or not slot.model.spec.startswith(("local:", "hf:")):
                raise ValueError(f"team.{agent}: learning.method '{method}' samples every slot's answers in one tree "
                                 f"on the slots' local models; {agent} is played by {slot_player(slot)}")
            if server is not None and not slot.learn:
                raise ValueError(f"team.{agent}: learning.rollout_server serves the adapters of the slots that learn; "
                                 f"a frozen slot ({agent}, learn: false) has none (unset learning.rollout_server)")
        n = config.env.n_agents
        if method == "grpo":
            # Every key a team config must change, in one message (a joint coding team needs two).
            changes = [f"env.n_agents 1 (it is {n})"] if n != 1 else []
            if config.env.kwargs.get("structure") == "joint":
                changes.append("env.kwargs.structure sequential (joint coding needs a helper writer)")
            if changes:
                raise ValueError(f"learning.method 'grpo' trains one agent; set {' and '.join(changes)}, "
                                 "or use learning.method magrpo for a team")
        if options.joint_mode == "cross" and options.num_generations ** n > options.max_joint_actions:
            raise ValueError(
                f"learning.joint_mode 'cross' with num_generations {options.num_generations} and {n} agents "
                f"makes {options.num_generations ** n} joint actions per node, over "
                f"learning.max_joint_actions {options.max_joint_actions}; use align or fewer generations")

    @classmethod
    def label(cls, options: LearnerOptions) -> str:
        return cls.name if getattr(options, "joint_mode", "align") == "align" else f"{cls.name} (cross)"

    def sampling_update(self) -> dict[str, Any]:
        options = self.options
        return {"cache": False, "temperature": options.temperature, "top_p": options.top_p,
                "top_k": options.top_k}

    # the rollout server --------------------------------------------------------------------
    _server: Any = None

    def rollout_server(self) -> Any:
        """The `RolloutServer` of ``learning.rollout_server`` (None when the local engine samples)."""
        options = self.options
        if options.rollout_server is None:
            return None
        if self._server is None:
            from marlang.methods.magrpo.rollout_server import RolloutServer, api_key_from

            self._server = RolloutServer(options.rollout_server, self.run_path,
                                         adapter_root=options.rollout_adapter_root,
                                         api_key=api_key_from(options.rollout_api_key_env))
        return self._server

    async def prepare_rollout(self, state: PolicyState, phase: str) -> None:
        """As every adapter learner; with a rollout server, the committed adapters are loaded
        there first and every agent's calls go to its adapter by name."""
        await super().prepare_rollout(state, phase)
        server = self.rollout_server()
        if server is None:
            return
        await self.engine.run(self._publish, state)
        options = self.options
        for name, actor in self.context.actors.items():
            if name not in self._chat_models:  # a frozen slot: no adapter to serve
                continue
            base = self._chat_models[name]
            params = {"temperature": options.temperature if phase == "train" else 0.0,
                      "max_tokens": base.max_tokens, "seed": base.seed, "stop": base.stop}
            if phase == "train":
                params.update(top_p=options.top_p, top_k=options.top_k)
            actor.adapter = None
            actor.model = server.chat_model(name, **params)

    def _publish(self, state: PolicyState) -> dict[str, str]:
        """Load ``state``'s adapters into the rollout server (the initial ones saved first under
        ``adapters/initial/``)."""
        server, team = self.rollout_server(), self.team
        assert server is not None and team is not None
        refs = state.adapters
        if not refs:
            if self._initial_refs is None:  # saved once: the initial weights never change
                directory = self._adapters_dir(0).parent / "initial"
                with self.engine.exclusive():  # the initial weights: prepare_rollout has loaded them
                    hashes = team.save(directory)
                self._initial_refs = {a: {"path": str(directory / team.adapter_for(a)), "hash": hashes[a]}
                                      for a in self.context.learning_agents}
            refs = self._initial_refs
        return server.publish({a: (team.adapter_for(a), ref["path"], ref["hash"]) for a, ref in refs.items()})

    _initial_refs: dict[str, dict[str, str]] | None = None

    def _tree_env(self) -> Any:
        env = self.context.env
        inner = getattr(env, "unwrapped", env)
        if not hasattr(inner, "save_episode"):
            raise ValueError(f"learning.method '{self.name}' needs an env that can save and restore "
                             f"its episode state; {type(inner).__name__} cannot")
        if len(self.context.agents) > 1 and getattr(inner, "structure", "joint") != "joint":
            raise ValueError(f"learning.method '{self.name}' has every agent answer at once: set "
                             "env.kwargs.structure: joint (got sequential)")
        return inner

    # the update ------------------------------------------------------------------------------
    records_rollouts: ClassVar[bool] = True  # the trees are the rollouts: each problem played once

    async def update_from_plan(self, state: PolicyState, plan: RolloutPlan) -> Candidate:
        await self.prepare_rollout(state, "train")   # the committed adapters (and the server's)
        seeds = list(plan.seeds)
        roots = await self.engine.run(self._grow, seeds, state.iteration)  # one tree per problem
        self._record_episodes(roots, plan, state)    # each tree's first path is the problem's episode
        backpropagate(roots, self.options.advantage)  # returns, and advantages against siblings
        samples: dict[str, list[TrainingSample]] = {}
        for root in roots:
            for agent, items in training_samples(root).items():
                if self.context.learns(agent):  # a frozen slot's answers are judged, not trained
                    samples.setdefault(agent, []).extend(items)
        stats = await self.train(samples, state.iteration)  # epochs of minibatches, with `loss`
        trees = {k: v for k, v in tree_stats(roots).items() if v is not None}
        candidate = await self.save_candidate(state.iteration, stats, counters=trees)
        self._write_trees(roots, seeds, state.iteration)
        return candidate

    def _record_episodes(self, roots: list[Node], plan: RolloutPlan, state: PolicyState) -> None:
        """Write each planned episode: its tree's first path (``magrpo_tree.first_path``)."""
        record = self.context.record_episode
        for root, episode, seed in zip(roots, plan.episodes, plan.seeds, strict=True):
            record(first_path(root, self.context.agents, episode, seed), state)

    # sampling the trees ------------------------------------------------------------------------
    def _grow(self, seeds: list[int], iteration: int) -> list[Node]:
        """One tree per seed, grown a turn at a time: every frontier node's agents sample in
        one batched generate."""
        options = self.options
        env = self._tree_env()
        agents = list(self.context.agents)
        depth = options.num_turns or env.max_steps
        roots = []
        for seed in seeds:
            observations, _infos = env.reset(seed=seed)
            roots.append(Node(turn=0, state=env.save_episode(), outcome={"observations": dict(observations)}))
        frontier = [(root, i) for i, root in enumerate(roots)]
        parents: dict[int, Node] = {}
        stop = self.context.stop
        while frontier:
            stop.check("at a tree step")  # a Ctrl-C keeps the run's finished work: the update starts afresh
            requests = []
            for node, tree in frontier:
                env.restore_episode(node.state)
                for agent in agents:
                    prior = parents[id(node)].completions[agent][node.joint[agent]] \
                        if options.memory == "memoryful" and node.turn > 0 else None
                    node.observations[agent] = env.observe(agent)
                    requests.append((node, tree, agent, node.observations[agent], prior))
            outs = self._sample(requests, iteration, cache_depth=depth if options.memory == "memoryful" else 0)
            for (node, _tree, agent, _obs, _prior), completions in zip(requests, outs, strict=True):
                node.completions[agent] = completions
            for node, _tree in frontier:  # the replies' caches are continued by the children only
                parent = parents.pop(id(node), None)
                if parent is not None:
                    drop_caches(parent)
            nxt = []
            for node, tree in frontier:
                for joint in joint_actions(agents, options.num_generations, options.joint_mode):
                    stop.check("judging a tree's answers")
                    env.restore_episode(node.state)
                    answers = {a: node.completions[a][g].answer for a, g in joint.items()}
                    node.children.append(judge(env, node, joint, answers, agents[0]))
                if not should_expand(node.children, options.termination_threshold):
                    node.terminated_early = True
                    continue
                for child in node.children:
                    if not child.done and child.turn < depth:
                        nxt.append((child, tree))
                        parents[id(child)] = node
            frontier = nxt
        for root in roots:  # no cache outlives the sampling
            for node in iter_nodes(root):
                drop_caches(node)
        return roots

    def _sample(self, requests: list[tuple[Node, int, str, Any, Completion | None]], iteration: int,
                cache_depth: int = 0) -> list[list[Completion]]:
        """G completions per (node, agent), in one batched generate per base model with per-row
        adapters, each token's log-prob recorded. A request with a ``prior`` reply (memoryful) continues
        that reply's conversation from its KV cache; replies at nodes whose children sit above
        ``cache_depth`` keep theirs."""
        from marlang.agents.answer_parsing import extract_answer
        from marlang.models.local_engine import GenerationRequest, SamplingParams
        if self.rollout_server() is not None:
            return self._sample_remote(requests, iteration)
        options = self.options
        continues = any(r[4] is not None for r in requests)
        # per engine (base model): its output rows, its requests, and its template's turn suffix
        batches: dict[int, tuple[Any, list[int], list[GenerationRequest], str]] = {}
        prompts = []
        for k, (node, tree, agent, obs, prior) in enumerate(requests):
            engine = self.engine_of(agent)
            # a frozen slot answers as it plays: the base model, or the adapters it plays back
            adapter = self.team_of(agent).adapter_for(agent) if agent in self._base_of \
                else self.context.actors[agent].adapter
            if id(engine) not in batches:
                batches[id(engine)] = (engine, [], [], turn_suffix(engine) if continues else "")
            _engine, rows, batch, suffix = batches[id(engine)]
            messages, form, entry = self._messages(agent, obs)
            if prior is None:
                prompt_ids = engine.encode(render_chat(engine, messages))
            else:
                prompt_ids = continue_conversation(engine, prior.prompt_ids, prior.token_ids,
                                                   str(messages[-1].content), suffix)
            prompts.append((prompt_ids, form, entry))
            for g in range(options.num_generations):
                rows.append(k * options.num_generations + g)
                batch.append(GenerationRequest(prompt_ids, SamplingParams(
                    temperature=options.temperature, top_p=options.top_p, top_k=options.top_k,
                    max_tokens=options.max_new_tokens, seed=self._seed(iteration, tree, node, k, g) % (2 ** 63),
                    logprobs=True, keep_cache=node.turn + 1 < cache_depth),
                    adapter=adapter,
                    past=prior.past if prior is not None else None))
        # one batched generate per base model (one in all unless slots are on several)
        outs: list[Any] = [None] * sum(len(rows) for _e, rows, _b, _s in batches.values())
        for engine, rows, batch, _suffix in batches.values():
            for row, out in zip(rows, engine.generate(batch), strict=True):
                outs[row] = out
        G = options.num_generations
        return [[_completion(agent, prompt_ids, out.token_ids, out.text, extract_answer(out.text, form, entry),
                             logprobs=out.token_logprobs, past=out.cache) for out in outs[k * G:(k + 1) * G]]
                for k, ((_n, _t, agent, _o, _p), (prompt_ids, form, entry)) in enumerate(zip(requests, prompts,
                                                                                              strict=True))]

    def _messages(self, agent: str, obs: Any) -> tuple[list[Any], str, str | None]:
        """``agent``'s act prompt for ``obs``, its answer format and the code's entry point."""
        from marlang.agents.llm_agent import CallContext

        form = obs.data.get("answer_format", "text")
        messages = self.context.actors[agent].act_messages(obs, [], CallContext(episode=-1),
                                                           instruction=f"act_instruction_{form}")
        return messages, form, obs.data.get("entry_point") if form == "code" else None

    def _seed(self, iteration: int, tree: int, node: Node, k: int, g: int) -> int:
        """The sampling seed of request ``k``'s ``g``-th completion (the same wherever it samples)."""
        options = self.options
        return (options.seed * SEED_OFFSET + iteration) * SEEDS_PER_NODE + tree * 997 + node.turn * 131 + k * 17 + g

    def _sample_remote(self, requests: list[tuple[Node, int, str, Any, Completion | None]],
                       iteration: int) -> list[list[Completion]]:
        """`_sample` on the rollout server: each agent's G completions are G seeded requests to
        its served adapter, sent at once. The replies are tokenized here (chat template and
        tokenizer of the trained model, EOS after a reply that stopped); the ratio losses' old
        log-probs then come from the trainer's own adapters, which the served ones equal."""
        from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait

        from marlang.agents.answer_parsing import extract_answer
        options = self.options
        engine, server = self.engine, self.rollout_server()
        assert engine is not None and server is not None
        models = {agent: server.chat_model(agent, temperature=options.temperature, top_p=options.top_p,
                                           top_k=options.top_k, max_tokens=options.max_new_tokens)
                  for agent in self.context.agents}
        calls, prompts = [], []
        for k, (node, tree, agent, obs, _prior) in enumerate(requests):
            messages, form, entry = self._messages(agent, obs)
            prompts.append((engine.encode(render_chat(engine, messages)), form, entry))
            calls += [(models[agent], messages, self._seed(iteration, tree, node, k, g) % (2 ** 31))
                      for g in range(options.num_generations)]
        pool = ThreadPoolExecutor(max_workers=max(1, min(64, len(calls))))
        futures = [pool.submit(model.invoke, messages, seed=seed) for model, messages, seed in calls]
        try:
            while True:
                done, pending = wait(futures, timeout=0.2, return_when=FIRST_EXCEPTION)
                if not pending or any(f.exception() is not None for f in done):
                    break
                self.context.stop.check("waiting for the rollout server")
            replies = [f.result() for f in futures]
        finally:  # stopped or failed: the calls not yet sent are never sent
            pool.shutdown(wait=False, cancel_futures=True)
        eos = engine.tokenizer.eos_token_id
        result: list[list[Completion]] = []
        G = options.num_generations
        for k, (_node, _tree, agent, _obs, _prior) in enumerate(requests):
            prompt_ids, form, entry = prompts[k]
            group = []
            for reply in replies[k * G:(k + 1) * G]:
                text = str(reply.content)
                tokens = engine.encode(text)[:options.max_new_tokens]
                if reply.response_metadata.get("finish_reason") == "stop" and len(tokens) < options.max_new_tokens:
                    tokens = (*tokens, eos)
                group.append(_completion(agent, prompt_ids, tokens, text, extract_answer(text, form, entry)))
            result.append(group)
        return result

    # training --------------------------------------------------------------------------------
    def fit(self, samples: dict[str, list[TrainingSample]], iteration: int) -> dict[str, Any]:
        """``epochs`` passes of minibatches over each agent's completions, one adapter at a
        time, and the update's records."""
        options = self.options
        by_unit = self.group_by_unit((agent, s) for agent, items in samples.items() for s in items)
        # the ratio losses' old policy: the log-probs recorded when the completions were sampled
        # (a rollout server records none: the adapters before this update, which it served)
        if options.loss != "reinforce":
            for unit, items in by_unit.items():
                sampled = all(s.completion.logprobs is not None for s in items)
                old = [_sampled_logprobs(s) for s in items] if sampled else self._logprobs(unit, items)
                for s, lp in zip(items, old, strict=True):
                    s.old_logprobs = lp
        if options.beta > 0:
            for unit, items in by_unit.items():
                for s, lp in zip(items, self._logprobs(unit, items, base=True), strict=True):
                    s.ref_logprobs = lp
        totals, steps, skipped = self.epochs(by_unit, iteration)
        records = []
        for agent in self.context.learning_agents:
            acc = totals.get(self.unit_of(agent), {})
            n = acc.get("steps", 0.0)
            mine = samples.get(agent, [])
            records.append({"agent": agent, "completions": len(mine),
                            "advantage_mean": (sum(s.advantage for s in mine) / len(mine)) if mine else None,
                            **{k: (acc[k] / n if n else None) for k in ("loss", "grad_norm")}})
        counters = {"completions": sum(len(v) for v in samples.values()), "steps": steps, "skipped_steps": skipped}
        return {"records": records, "counters": counters}

    def minibatch_order(self, items: list[TrainingSample], rng: random.Random) -> list[TrainingSample]:
        return [items[i] for i in grouped_order(items, rng)]

    def sample_weight(self, sample: TrainingSample) -> float:
        return float(sample.weight)

    def loss(self, unit: str, part: list[TrainingSample], total: float) -> dict[str, Any]:
        """``learning.loss`` of some completions of a minibatch weighing ``total``: their
        weighted mean loss times their share of the minibatch's weight."""
        import torch

        options = self.options
        lp, mask = self._completion_logprobs(unit, part)
        mask = mask.to(lp.device)
        old = _padded([s.old_logprobs for s in part], lp) if options.loss != "reinforce" else None
        ref = _padded([s.ref_logprobs for s in part], lp) if options.beta > 0 else None
        adv = torch.tensor([s.advantage for s in part], device=lp.device)
        w = torch.tensor([float(s.weight) for s in part], device=lp.device)
        loss = policy_loss(lp, mask, adv, loss=options.loss, old_logps=old, ref_logps=ref, beta=options.beta,
                           epsilon_low=options.clip_coef, epsilon_high=options.clip_coef_high or options.clip_coef,
                           max_completion_length=options.max_new_tokens, weights=w)
        return {"loss": loss * (w.sum() / total)}

    def _logprobs(self, unit: str, items: list[TrainingSample], base: bool = False) -> list[Any]:
        """Per completion, its token log-probs under ``unit``'s adapter (or the base model), no
        gradient: the old policy of the ratio losses, or the KL's reference."""
        import contextlib

        import torch

        options = self.options
        team = self.team_of(unit)
        out: list[Any] = []
        with team.training(unit, train_mode=False), torch.no_grad():
            ctx = team.model.disable_adapter() if base else contextlib.nullcontext()
            with ctx:
                for start in range(0, len(items), options.micro_batch_size):
                    part = items[start:start + options.micro_batch_size]
                    lp, _mask = self._completion_logprobs(unit, part)
                    lp = lp.cpu()
                    out += [lp[i, :len(s.completion.token_ids)] for i, s in enumerate(part)]
        return out

    def _completion_logprobs(self, unit: str, part: list[TrainingSample]) -> tuple[Any, Any]:
        """Token log-probs ``[B, T]`` of ``part``'s completions (``unit``'s) and their mask,
        each shared prompt run once (``shared_prompt_logprobs``)."""
        return shared_prompt_logprobs(self.team_of(unit).model, [s.completion.prompt_ids for s in part],
                                      [s.completion.token_ids for s in part], self.engine_of(unit)._pad_id,
                                      self.options.temperature)

    # records ---------------------------------------------------------------------------------
    def _write_trees(self, roots: list[Node], seeds: list[int], iteration: int) -> None:
        """``trees/<iteration>.jsonl``: one line per joint action (`magrpo_tree.tree_lines`)."""
        lines = tree_lines(roots, seeds)
        atomic_write_text(self.run_path / "trees" / f"{iteration}.jsonl", "\n".join(lines) + "\n")


def _completion(agent: str, prompt_ids: Any, token_ids: Any, text: str, found: Any, logprobs: Any = None,
                past: Any = None) -> Completion:
    """A sampled reply with the answer ``found`` in it (`extract_answer`'s result)."""
    return Completion(agent, tuple(prompt_ids), tuple(token_ids), text, found.answer or "", logprobs=logprobs,
                      thought=found.thought, valid=found.answer is not None, past=past)


def _sampled_logprobs(sample: TrainingSample) -> Any:
    import torch

    c = sample.completion
    if c.logprobs is None or len(c.logprobs) != len(c.token_ids):
        raise ValueError("a completion has no sampling-time log-probs; the ratio losses need them")
    return torch.tensor(c.logprobs, dtype=torch.float32)


def _padded(rows: list[Any], like: Any) -> Any:
    """Per-completion log-prob vectors zero-padded to ``like``'s width, on its device."""
    import torch

    out = torch.zeros((len(rows), like.size(1)), dtype=like.dtype)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out.to(like.device)


class GRPOLearner(MAGRPOLearner):
    """GRPO: MAGRPO with one agent (the single-agent baseline of the MAGRPO paper)."""

    name: ClassVar[str] = "grpo"
