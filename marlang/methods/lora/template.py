"""The weight-space trainer template (PPO, MAGRPO, GRPO): one LoRA adapter per agent that
learns (or one shared) on the base model its slot acts on (slots on different local base models
each train on theirs, every model loaded once), their optimizers, and one update shape: load
the committed state, build samples (the learner's own), epochs of minibatches with
micro-batching and a guarded step (non-finite skip, gradient clip), save the adapters, propose
them as the candidate.

A learner brings its options, its samples and its loss; everything else is here. Rollouts act
with the committed adapters (sampling in training, greedy in evaluation), and a state saved
under ``adapters/<iteration>/`` is loaded back after a resume or a candidate not committed.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import random
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from marlang.learners.base import Learner, LearnerOptions
from marlang.methods.lora.distributed import DataParallel
from marlang.methods.lora.options import AdapterOptions
from marlang.methods.lora.team import (
    CENTRAL,
    TeamAdapters,
    ValueHeadOptions,
    check_lora_targets,
)
from marlang.models.local_policy import LocalPolicy
from marlang.rundir import TEST_EPISODE_BASE, atomic_write
from marlang.rundir.tensors import load_tensors
from marlang.seeds import env_seeds
from marlang.types import Acting, Candidate, PolicyState, RolloutPlan

if TYPE_CHECKING:
    from marlang.learners.context import LearnerContext

logger = logging.getLogger(__name__)

INITIAL_STATE = "initial"
"""`AdapterLearner._load_state`'s name for the adapters' initial weights."""

SEED_OFFSET = 7919
"""Separates an update's random draws (minibatch order, dropout) from other uses of the run seed."""


@dataclass
class Base:
    """One base model the slots that learn act on: its handle (`LocalPolicy`), the adapters
    attached to it, and the keys of their tensors in the trainer's saved state."""

    local: LocalPolicy
    team: TeamAdapters
    keys: frozenset[str]


OptionsT = TypeVar("OptionsT", bound=AdapterOptions)
SampleT = TypeVar("SampleT")


class AdapterLearner(Learner, Generic[OptionsT, SampleT]):
    """The template of a weight-space learner: the adapters' lifecycle and the update's
    training loop. A subclass's ``update`` reads as its steps: ``restore`` the committed
    state, build its samples, ``train`` on them (its ``fit``, which runs ``epochs`` with its
    ``loss``), ``save_candidate``."""

    options: OptionsT
    uses_adapters: ClassVar[bool] = True
    state_name: ClassVar[str] = "adapter_state"
    """The saved state's file stem (``adapters/<i>/<state_name>.pt``) and its key in
    ``PolicyState.extra``."""

    def __init__(self, options: OptionsT, context: LearnerContext) -> None:
        super().__init__(options, context)
        # Absolute: the learner state records paths under it, and a run started from a
        # relative directory is resumed or played back from wherever the user stands then.
        self.run_path = (Path(context.run_dir) if context.run_dir is not None
                         else Path(tempfile.mkdtemp(prefix=f"marlang-{self.name}-"))).resolve()
        """Where the adapters are written (``adapters/<iteration>/``): the run directory, or a
        temporary folder chosen here for a learner used without a run (a notebook, a test)."""
        self.team: TeamAdapters | None = None
        self.local: LocalPolicy | None = None
        """The first learning slot's base model (where the update's work runs)."""
        self.bases: list[Base] = []
        self._base_of: dict[str, Base] = {}
        self.optimizers: dict[str, Any] = {}
        self._train_models: dict[str, Any] = {}
        self.parallel: DataParallel | None = None

    def value_heads(self) -> ValueHeadOptions | None:
        """The value heads the adapters carry (None: none)."""
        return None

    @classmethod
    def check_model(cls, model: Any, options: LearnerOptions) -> None:
        engine = getattr(model, "engine", None)
        if engine is None:
            raise ValueError(f"learning.method '{cls.name}' trains local weights; the agents' model "
                             f"{type(model).__name__} has none here (use local:smollm2 or hf:PATH)")
        assert isinstance(options, AdapterOptions)
        check_lora_targets(engine.model, options.lora.targets)

    # the adapters ---------------------------------------------------------------------------
    def setup(self) -> TeamAdapters:
        """Build the adapters on the learning slots' local models (``context.local``) and
        attach them: one `TeamAdapters` per base model the slots that learn act on (each model
        loaded once, whatever the number of slots on it). ``team``/``local`` are the first
        learning slot's."""
        if self.team is not None:
            return self.team
        import torch

        options = self.options
        actors, local = self.context.actors, self.context.local
        if not actors:
            raise ValueError(f"learning.method '{self.name}' needs LLM agents (agents.kind: llm)")
        trained = [a for a in self.context.learning_agents if a in actors] or [next(iter(actors))]
        lacking = next((a for a in trained if a not in local), None)
        if lacking is not None:
            raise ValueError(
                f"learning.method '{self.name}' trains local weights; {lacking}'s model "
                f"{type(actors[lacking].model).__name__} has none")
        on_engine: dict[int, list[str]] = {}
        for agent in trained:
            on_engine.setdefault(id(local[agent]), []).append(agent)
        value_heads = self.value_heads()
        if len(on_engine) > 1 and options.sharing == "shared":
            raise ValueError("learning.sharing 'shared' shares one adapter between slots on one base model; the "
                             "slots that learn are on several (use learning.sharing: per_agent)")
        if len(on_engine) > 1 and value_heads is not None and value_heads.central:
            raise ValueError("a central value head reads every agent's state on one base model; the slots that "
                             "learn are on several (use learning.value: agent)")
        self.parallel = DataParallel()
        device = options.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and self.parallel.active:
            device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        dtype = getattr(torch, options.dtype)
        for agents in on_engine.values():
            handle = local[agents[0]]
            engine = handle.engine
            team = TeamAdapters(engine.model, agents, base_id=engine.base_id,
                                sharing=options.sharing, lora=options.lora, value_head=value_heads,
                                dtype=dtype, device=device, seed=options.seed)
            if options.gradient_checkpointing:
                team.model.get_base_model().gradient_checkpointing_enable(
                    gradient_checkpointing_kwargs={"use_reentrant": False})
            handle.attach(team)
            base = Base(handle, team, frozenset(team.state_dict()))
            self.bases.append(base)
            for key in (*agents, *([CENTRAL] if CENTRAL in team.value_heads else [])):
                self._base_of[key] = base
        self.team, self.local = self.bases[0].team, self.bases[0].local
        # copies: a state dict's tensors are views of the live weights, which training moves
        self._initial = {k: v.detach().clone() for k, v in self._state_dict().items()}
        self._loaded = INITIAL_STATE
        self.optimizers = {unit: torch.optim.AdamW(self._param_groups(unit)) for unit in self._units()}
        self._initial_optimizers = {u: copy.deepcopy(o.state_dict()) for u, o in self.optimizers.items()}
        return self.team

    def team_of(self, unit: str) -> TeamAdapters:
        """The adapters that hold ``unit`` (an agent that learns, or the central head)."""
        return self._base_of[unit].team

    def local_of(self, agent: str) -> LocalPolicy:
        """The local model ``agent`` acts on (its slot's base model; the central head's: the
        first learning slot's)."""
        found = self.context.local.get(agent) or self.local
        assert found is not None, "setup() first"
        return found

    @contextlib.contextmanager
    def _all_exclusive(self) -> Iterator[None]:
        """Every base model held alone (in the order of ``bases``, the same everywhere)."""
        with contextlib.ExitStack() as stack:
            for base in self.bases:
                stack.enter_context(base.local.exclusive())
            yield

    def _state_dict(self) -> dict[str, Any]:
        """Every base's trainable tensors in one dict (their keys name the agents, so never
        clash): what ``<state_name>.pt`` saves and a resume loads."""
        return {k: v for base in self.bases for k, v in base.team.state_dict().items()}

    def _units(self) -> list[str]:
        """What has its own optimizer: each adapter (with its head), and the central head."""
        units = [u for base in self.bases
                 for u in ([base.team.agents[0]] if base.team.sharing == "shared" else base.team.agents)]
        return [*units, CENTRAL] if CENTRAL in self._base_of else units

    def _param_groups(self, unit: str) -> list[dict[str, Any]]:
        """``unit``'s parameters for its optimizer: LoRA weights at ``lr``, value heads at
        ``value_lr``."""
        options = self.options
        heads = {id(p) for p in self.team_of(unit).value_heads.parameters()}
        params = self._unit_parameters(unit)
        groups = [{"params": [p for p in params if id(p) not in heads], "lr": options.lr},
                  {"params": [p for p in params if id(p) in heads], "lr": getattr(options, "value_lr", options.lr)}]
        return [g for g in groups if g["params"]]

    def _unit_parameters(self, unit: str) -> list[Any]:
        team = self.team_of(unit)
        if unit == CENTRAL:
            return list(team.value_heads[CENTRAL].parameters())
        return team.parameters_of(unit)

    async def prepare_rollout(self, state: PolicyState, phase: str) -> dict[str, Acting]:
        """Load ``state``'s committed adapters; each learning slot acts with its adapter,
        sampling in training rollouts (a chat model never answered from the cache) and greedily
        in evaluation. A frozen slot acts as configured."""
        self.setup()
        assert self.local is not None
        await self.local.run(self._load_state, state)
        options = self.options
        selection = "score" if self.scores_actions else None
        acting: dict[str, Acting] = {}
        for name in self.context.learning_agents:
            handle = self.context.local.get(name)
            if handle is None or name not in self.context.actors:
                continue
            chat = handle.chat_models[name]
            if phase == "train":
                if name not in self._train_models:
                    self._train_models[name] = chat.model_copy(update=self.sampling_update())
                acting[name] = Acting(self._train_models[name], name, selection, options.temperature)
            else:
                acting[name] = Acting(chat, name, selection, 0.0)
        return acting

    scores_actions: ClassVar[bool] = False
    """Whether the policy is the softmax over the legal actions' scores (PPO) rather than the
    model's generated reply (MAGRPO)."""

    def sampling_update(self) -> dict[str, Any]:
        """How training rollouts' chat model differs from the agents' own: never answered from
        the cache (each rollout samples afresh)."""
        return {"cache": False}

    def _load_state(self, state: PolicyState) -> None:
        """Bring the in-memory adapters and optimizers to ``state`` (after a resume, or after a
        candidate that was not committed). What is loaded is known by its source: the initial
        weights, or the ``ppo_state.pt`` an update saved (and left in memory)."""

        assert self.team is not None
        path = state.extra.get(self.state_name) if state.adapters else None
        source = path or INITIAL_STATE
        if source == self._loaded:
            return
        if path is None:
            weights, optimizers = self._initial, self._initial_optimizers
        else:
            if not Path(path).is_file():
                raise FileNotFoundError(f"{self.name} state {path!r} of iteration {state.iteration} is missing")
            saved = load_tensors(path)
            weights, optimizers = saved["weights"], saved["optimizers"]
        expected = set().union(*(base.keys for base in self.bases))
        if set(weights) != expected:  # checked before any base changes
            odd = sorted(set(weights) ^ expected)[:3]
            raise ValueError(f"{self.name} state {path!r} does not match this team's adapters (differs in {odd}); "
                             "resume with the config that trained it")
        with self._all_exclusive():
            for base in self.bases:
                base.team.load_state_dict({k: v for k, v in weights.items() if k in base.keys})
            for unit, opt_state in optimizers.items():
                if unit in self.optimizers:
                    self.optimizers[unit].load_state_dict(opt_state)
        self._loaded = source

    _loaded: str | None = None
    """The source of the weights in memory (``INITIAL_STATE`` or a saved state's path)."""

    def evaluation_plan(self, iteration: int, seed: int, final: bool = False) -> RolloutPlan | None:
        """``eval_episodes`` greedy episodes on the same held-out seeds at every evaluation
        (before training, every ``eval_every`` updates, and after the last)."""
        options = self.options
        n = options.eval_episodes
        if n == 0 or (iteration % options.eval_every and not final):
            return None
        ids = tuple(TEST_EPISODE_BASE + iteration * n + j for j in range(n))
        seeds = env_seeds(seed, "test", range(n))  # seed: run.eval_seed
        return RolloutPlan(ids, seeds, tuple(None for _ in ids))

    def _adapters_dir(self, iteration: int) -> Path:
        return self.run_path / "adapters" / str(iteration)

    # the update's steps ---------------------------------------------------------------------
    async def restore(self, state: PolicyState) -> None:
        """Build the adapters (once) and bring them and their optimizers to ``state``."""
        self.setup()
        assert self.local is not None
        await self.local.run(self._load_state, state)

    async def train(self, samples: Any, iteration: int) -> dict[str, Any]:
        """The learner's ``fit`` on ``samples``, on the engine's thread: ``{"records": [...],
        "counters": {...}}`` for ``iterations.csv``."""
        assert self.local is not None
        return await self.local.run(self._seeded_train, samples, iteration)

    async def save_candidate(self, iteration: int, stats: dict[str, Any],
                             counters: dict[str, Any] | None = None) -> Candidate:
        """Save the trained adapters under ``adapters/<iteration>/`` and propose them."""
        directory = self._adapters_dir(iteration)
        assert self.local is not None
        hashes, path = await self.local.run(self._save, directory)
        refs = {a: {"path": str(directory / self.team_of(a).adapter_for(a)), "hash": hashes[a]}
                for a in self.context.learning_agents}
        return Candidate(adapters=refs, extra={self.state_name: str(path)}, records=stats["records"],
                         counters={**(counters or {}), **stats["counters"]})

    # training --------------------------------------------------------------------------------
    def fit(self, samples: Any, iteration: int) -> dict[str, Any]:
        """One update's training on ``samples`` (the learner's: usually ``epochs`` over them,
        grouped by unit, and its records)."""
        raise NotImplementedError

    def loss(self, unit: str, part: list[SampleT], total: float) -> dict[str, Any]:
        """The loss terms of ``part`` (a micro-batch of a minibatch whose samples weigh
        ``total`` in all processes): ``"loss"`` (a tensor, the part's share of the
        minibatch's mean loss, to backpropagate) and tensors to report (summed over the
        minibatch; those in ``mean_terms`` divided by its size)."""
        raise NotImplementedError

    mean_terms: ClassVar[tuple[str, ...]] = ()
    """Terms of ``loss`` reported per sample rather than summed."""
    interleave_units: ClassVar[bool] = False
    """Whether an epoch's minibatches of all units are shuffled together (PPO) rather than
    taken unit by unit."""

    def sample_weight(self, sample: SampleT) -> float:
        """How much a sample counts in its minibatch's mean (1: every sample alike)."""
        return 1.0

    def minibatch_order(self, items: list[SampleT], rng: random.Random) -> list[SampleT]:
        """An epoch's order of one unit's samples, cut into minibatches in this order."""
        order = items[:]
        rng.shuffle(order)
        return order

    def unit_of(self, agent: str) -> str:
        """The unit (adapter with its optimizer) that trains on ``agent``'s samples."""
        team = self.team_of(agent)
        return team.agents[0] if team.sharing == "shared" else agent

    def group_by_unit(self, samples: Iterable[tuple[str, SampleT]]) -> dict[str, list[SampleT]]:
        """``(agent, sample)`` pairs as each unit's samples, in the order given."""
        by_unit: dict[str, list[SampleT]] = {}
        for agent, sample in samples:
            by_unit.setdefault(self.unit_of(agent), []).append(sample)
        return by_unit

    def _seeded_train(self, samples: Any, iteration: int) -> dict[str, Any]:
        """`fit` with torch's random state (LoRA dropout) seeded by the iteration, so an
        update re-run after a crash gives the same adapters."""
        import torch

        options = self.options
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(options.seed * SEED_OFFSET + iteration)
            return self.fit(samples, iteration)

    def epochs(self, by_unit: dict[str, list[SampleT]], iteration: int
               ) -> tuple[dict[str, dict[str, float]], int, int]:
        """``epochs`` passes of minibatches over each unit's samples, one unit at a time:
        per unit the summed step results (``"steps"``: how many), the steps taken in all,
        and how many of them were skipped (a non-finite loss or gradient).

        The central value head (a unit where the adapters carry one) trains on states
        read before the epochs, which no adapter step changes: its minibatch order is a
        stream of its own and its steps follow the adapters' in each epoch, so the adapters'
        order, and their weights, are what they would be without it."""
        options = self.options
        rng = random.Random(options.seed * SEED_OFFSET + iteration)
        order_rng = random.Random(options.seed * SEED_OFFSET + 2 * iteration + 1)
        central_rng = random.Random(options.seed * SEED_OFFSET + 1)
        parallel = self.parallel or DataParallel()
        adapters = [u for u in self._units() if u != CENTRAL]
        size = options.minibatch_size
        totals: dict[str, dict[str, float]] = {}
        steps = skipped = 0
        stop = getattr(self.context, "stop", None)

        def minibatches(unit: str, order_of: random.Random) -> list[tuple[str, list[SampleT]]]:
            # Under a launcher each process fills a step with its own samples (or none) and
            # the gradients are summed: every unit takes as many steps as the process with
            # the most minibatches of it, the same steps in the same order everywhere.
            order = self.minibatch_order(by_unit.get(unit, []), order_of)
            local = [order[i:i + size] for i in range(0, len(order), size)]
            return [(unit, local[j] if j < len(local) else []) for j in range(parallel.max_int(len(local)))]

        for _epoch in range(options.epochs):
            batches = [b for unit in adapters for b in minibatches(unit, rng)]
            if self.interleave_units:
                order_rng.shuffle(batches)
            if CENTRAL in self._base_of:
                batches += minibatches(CENTRAL, central_rng)
            for unit, batch in batches:
                if stop is not None:
                    stop.check("between training steps")
                with self._base_of[unit].local.exclusive():
                    result = self._step(unit, batch)
                steps += 1
                if result is None:
                    skipped += 1
                    continue
                if not result:  # this process had no samples for the step
                    continue
                acc = totals.setdefault(unit, {})
                for k, v in result.items():
                    acc[k] = acc.get(k, 0.0) + v
                acc["steps"] = acc.get("steps", 0.0) + 1
        return totals, steps, skipped

    def _step(self, unit: str, batch: list[SampleT]) -> dict[str, float] | None:
        """One gradient step of ``unit`` (an adapter, or the central value head) on ``batch``
        (with every process's samples of the step under a launcher), the minibatch's gradient
        accumulated over micro-batches (peak memory follows ``micro_batch_size``, the step is
        the same).
        None when the loss or the gradient is not finite or its norm exceeds
        ``max_skip_norm``: nothing changed. ``{}``: the step was taken on other processes'
        samples only."""
        import torch

        options, team = self.options, self.team_of(unit)
        optimizer = self.optimizers[unit]
        # The central head reads states computed before the epochs (no activations of the
        # model to bound): its minibatch is one part, with no adapter to activate.
        part_size = len(batch) if unit == CENTRAL else options.micro_batch_size
        training = contextlib.nullcontext() if unit == CENTRAL else team.training(unit)
        parallel = self.parallel or DataParallel()
        # Losses are sums over this process's samples divided by the step's total weight in
        # all processes: with the gradients summed across processes, each step is the mean
        # over the whole minibatch, as one process would take it.
        total = parallel.sum_float(float(sum(self.sample_weight(s) for s in batch)))
        if total == 0:
            return None
        optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        finite = True
        if batch:
            with training:
                for start in range(0, len(batch), part_size):
                    terms = self.loss(unit, batch[start:start + part_size], total)
                    if not torch.isfinite(terms["loss"]):
                        finite = False
                        break
                    terms["loss"].backward()
                    for k, v in terms.items():
                        sums[k] = sums.get(k, 0.0) + float(v.detach())
        norm = parallel.guarded_step(optimizer, self._unit_parameters(unit), finite, options.max_grad_norm,
                                     options.max_skip_norm, f"{self.name}: {unit}")
        if norm is None:
            return None
        optimizer.zero_grad(set_to_none=True)
        if not batch:
            return {}
        return {**{k: v / len(batch) if k in self.mean_terms else v for k, v in sums.items()},
                "grad_norm": norm}


    # the saved state -------------------------------------------------------------------------
    def _save(self, directory: Path) -> tuple[dict[str, str], Path]:
        """Adapters (PEFT format, value heads beside them) and the trainer's state (weights and
        optimizers, for resuming: ``<state_name>.pt``), each written atomically."""
        import torch

        hashes: dict[str, str] = {}
        with self._all_exclusive():
            for base in self.bases:
                hashes |= base.team.save(directory)
            state = {"weights": self._state_dict(),
                     "optimizers": {u: o.state_dict() for u, o in self.optimizers.items()}}
            path = directory / f"{self.state_name}.pt"
            atomic_write(path, lambda fh: torch.save(state, fh))
        self._loaded = str(path)
        return hashes, path
