"""The LoRA trainer the weight-space methods (PPO, MAGRPO, GRPO) hold and call: the adapters of
the slots that learn on their base models, their optimizers, the committed state loaded back,
the guarded step on a minibatch with the method's loss function, and the saved candidate.

A method owns its update: it builds its samples, draws its minibatches and passes its loss to
`LoraTrainer.step`; the trainer never calls back into it. Files (``adapters/<i>/``, the
trainer state ``<state_name>.pt``) are those a resume and a played-back run read.
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from marlang.methods.lora.distributed import DataParallel
from marlang.methods.lora.options import AdapterOptions
from marlang.methods.lora.team import CENTRAL, TeamAdapters, ValueHeadOptions, check_lora_targets
from marlang.models.local_policy import LocalPolicy
from marlang.rundir import TEST_EPISODE_BASE, atomic_write
from marlang.rundir.tensors import load_tensors
from marlang.seeds import env_seeds
from marlang.types import Acting, Candidate, PolicyState, RolloutPlan

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from marlang.learners.context import LearnerContext

INITIAL_STATE = "initial"
"""The trainer's name for the adapters' initial weights (the state before any update)."""

SEED_OFFSET = 7919
"""Separates an update's random draws (minibatch order, dropout) from other uses of the run seed."""

SampleT = TypeVar("SampleT")
T = TypeVar("T")
KeyT = TypeVar("KeyT")
LossFn = Callable[[list[Any], float], dict[str, Any]]
"""A method's loss on part of a minibatch whose samples weigh ``total`` in all processes:
``"loss"`` (a tensor, the part's share of the minibatch's mean loss) and tensors to report
(summed over the minibatch)."""


@dataclass
class Base:
    """One base model the slots that learn act on: its handle (`LocalPolicy`), the adapters
    attached to it, and the keys of their tensors in the trainer's saved state."""

    local: LocalPolicy
    team: TeamAdapters
    keys: frozenset[str]


@dataclass
class EpochOrder:
    """The random streams of an update's minibatch order: each adapter's samples shuffled
    (``adapters``), the adapters' minibatches interleaved (``interleave``), and the central
    value head's own order (``central``, the same stream at every update)."""

    adapters: random.Random
    interleave: random.Random
    central: random.Random

    @classmethod
    def of(cls, seed: int, iteration: int) -> EpochOrder:
        return cls(random.Random(seed * SEED_OFFSET + iteration),
                   random.Random(seed * SEED_OFFSET + 2 * iteration + 1),
                   random.Random(seed * SEED_OFFSET + 1))


@dataclass
class StepLog:
    """An update's steps: per unit the summed results of the steps it took, the steps in all,
    and those skipped (a non-finite loss or gradient)."""

    totals: dict[str, dict[str, float]] = field(default_factory=dict)
    steps: int = 0
    skipped: int = 0

    def add(self, unit: str, result: dict[str, float] | None) -> None:
        self.steps += 1
        if result is None:
            self.skipped += 1
        elif result:  # empty: this process had no samples for the step
            acc = self.totals.setdefault(unit, {})
            for k, v in result.items():
                acc[k] = acc.get(k, 0.0) + v
            acc["steps"] = acc.get("steps", 0.0) + 1

    def means(self, unit: str, keys: Sequence[str]) -> dict[str, float | None]:
        """``unit``'s mean of each of ``keys`` over its steps (None: no step)."""
        acc = self.totals.get(unit, {})
        n = acc.get("steps", 0.0)
        return {k: (acc[k] / n if n and k in acc else None) for k in keys}


def check_local_model(method: str, model: object, options: AdapterOptions) -> None:
    """One-line errors for a chat model ``method`` cannot train: not a local model, or one
    without the LoRA targets."""
    local = LocalPolicy.of(model)
    if local is None:
        raise ValueError(f"learning.method '{method}' trains local weights; the agents' model "
                         f"{type(model).__name__} has none here (use local:smollm2 or hf:PATH)")
    check_lora_targets(local.model, options.lora.targets)


def evaluation_plan(options: AdapterOptions, iteration: int, seed: int, final: bool = False) -> RolloutPlan | None:
    """``eval_episodes`` greedy episodes on the same held-out seeds at every evaluation
    (before training, every ``eval_every`` updates, and after the last)."""
    n = options.eval_episodes
    if n == 0 or (iteration % options.eval_every and not final):
        return None
    ids = tuple(TEST_EPISODE_BASE + iteration * n + j for j in range(n))
    seeds = env_seeds(seed, "test", range(n))  # seed: run.eval_seed
    return RolloutPlan(ids, seeds, tuple(None for _ in ids))


class LoraTrainer(Generic[SampleT]):
    """The adapters of one learner and their training (see the module docstring). Built on
    first use (``restore``, ``acting``): one `TeamAdapters` per base model the slots that
    learn act on, each model loaded once."""

    def __init__(self, method: str, options: AdapterOptions, context: LearnerContext, *, state_name: str,
                 value_heads: ValueHeadOptions | None = None, value_lr: float | None = None) -> None:
        self.method = method
        self.options = options
        self.context = context
        self.state_name = state_name
        """The saved state's file stem (``adapters/<i>/<state_name>.pt``) and its key in
        ``PolicyState.extra``."""
        self.value_heads = value_heads
        self.value_lr = options.lr if value_lr is None else value_lr
        # Absolute: the learner state records paths under it, and a run started from a
        # relative directory is resumed or played back from wherever the user stands then.
        self.run_path = (Path(context.run_dir) if context.run_dir is not None
                         else Path(tempfile.mkdtemp(prefix=f"marlang-{method}-"))).resolve()
        """Where the adapters are written (``adapters/<iteration>/``): the run directory, or a
        temporary folder chosen here for a learner used without a run (a notebook, a test)."""
        self.bases: list[Base] = []
        self._base_of: dict[str, Base] = {}
        self.optimizers: dict[str, Any] = {}
        self._parallel: DataParallel | None = None
        self._train_models: dict[str, Any] = {}
        self._loaded: str | None = None
        """The source of the weights in memory (``INITIAL_STATE`` or a saved state's path)."""

    @property
    def parallel(self) -> DataParallel:
        """The launched run's process group (made on first use: under a launcher, that joins it)."""
        if self._parallel is None:
            self._parallel = DataParallel()
        return self._parallel

    # the adapters ---------------------------------------------------------------------------
    def setup(self) -> TeamAdapters:
        """Build the adapters on the learning slots' local models and attach them (once).
        Returns the first learning slot's adapters."""
        if self.bases:
            return self.bases[0].team
        import torch

        options, method = self.options, self.method
        actors, local = self.context.actors, self.context.local
        if not actors:
            raise ValueError(f"learning.method '{method}' needs LLM agents (agents.kind: llm)")
        trained = [a for a in self.context.learning_agents if a in actors] or [next(iter(actors))]
        lacking = next((a for a in trained if a not in local), None)
        if lacking is not None:
            raise ValueError(
                f"learning.method '{method}' trains local weights; {lacking}'s model "
                f"{type(actors[lacking].model).__name__} has none")
        on_model: dict[int, list[str]] = {}
        for agent in trained:
            on_model.setdefault(id(local[agent]), []).append(agent)
        value_heads = self.value_heads
        if len(on_model) > 1 and options.sharing == "shared":
            raise ValueError("learning.sharing 'shared' shares one adapter between slots on one base model; the "
                             "slots that learn are on several (use learning.sharing: per_agent)")
        if len(on_model) > 1 and value_heads is not None and value_heads.central:
            raise ValueError("a central value head reads every agent's state on one base model; the slots that "
                             "learn are on several (use learning.value: agent)")
        device: str = options.device
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda" and self.parallel.active:
            device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
        dtype = getattr(torch, options.dtype)
        for agents in on_model.values():
            handle = local[agents[0]]
            team = TeamAdapters(handle.model, agents, base_id=handle.base_id,
                                sharing=options.sharing, lora=options.lora, value_head=value_heads,
                                dtype=dtype, device=device, seed=options.seed)
            if options.gradient_checkpointing:  # on the PreTrainedModel PEFT wraps
                wrapped = cast("PreTrainedModel", team.model.get_base_model())
                wrapped.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            handle.attach(team)
            base = Base(handle, team, frozenset(team.state_dict()))
            self.bases.append(base)
            for key in (*agents, *([CENTRAL] if CENTRAL in team.value_heads else [])):
                self._base_of[key] = base
        # copies: a state dict's tensors are views of the live weights, which training moves
        self._initial = {k: v.detach().clone() for k, v in self._state_dict().items()}
        self._loaded = INITIAL_STATE
        self.optimizers = {unit: torch.optim.AdamW(self._param_groups(unit)) for unit in self.units}
        self._initial_optimizers = {u: copy.deepcopy(o.state_dict()) for u, o in self.optimizers.items()}
        return self.bases[0].team

    @property
    def team(self) -> TeamAdapters:
        """The first learning slot's adapters (the central value head's, if any)."""
        return self.setup()

    @property
    def local(self) -> LocalPolicy:
        """The first learning slot's base model."""
        self.setup()
        return self.bases[0].local

    def team_of(self, unit: str) -> TeamAdapters:
        """The adapters that hold ``unit`` (an agent that learns, or the central head)."""
        return self._base_of[unit].team

    def local_of(self, agent: str) -> LocalPolicy:
        """The local model ``agent`` acts on (its slot's base model; the central head's: the
        first learning slot's)."""
        return self.context.local.get(agent) or self.local

    def trains(self, agent: str) -> bool:
        """Whether ``agent`` has an adapter here (a slot that learns)."""
        return agent in self._base_of

    def unit_of(self, agent: str) -> str:
        """The unit (adapter with its optimizer) that trains on ``agent``'s samples."""
        team = self.team_of(agent)
        return team.agents[0] if team.sharing == "shared" else agent

    def by_unit(self, samples: Iterable[tuple[str, SampleT]]) -> dict[str, list[SampleT]]:
        """``(agent, sample)`` pairs as each unit's samples, in the order given (a shared
        adapter trains on every agent's)."""
        out: dict[str, list[SampleT]] = {}
        for agent, sample in samples:
            out.setdefault(self.unit_of(agent), []).append(sample)
        return out

    @property
    def units(self) -> list[str]:
        """What has its own optimizer: each adapter (with its head), and the central head."""
        units = [u for base in self.bases
                 for u in ([base.team.agents[0]] if base.team.sharing == "shared" else base.team.agents)]
        return [*units, CENTRAL] if CENTRAL in self._base_of else units

    @property
    def adapter_units(self) -> list[str]:
        return [u for u in self.units if u != CENTRAL]

    @property
    def has_central(self) -> bool:
        """Whether the adapters carry a central value head."""
        return CENTRAL in self._base_of

    def _param_groups(self, unit: str) -> list[dict[str, Any]]:
        """``unit``'s parameters for its optimizer: LoRA weights at ``lr``, value heads at
        ``value_lr``."""
        heads = {id(p) for p in self.team_of(unit).value_heads.parameters()}
        params = self._unit_parameters(unit)
        groups = [{"params": [p for p in params if id(p) not in heads], "lr": self.options.lr},
                  {"params": [p for p in params if id(p) in heads], "lr": self.value_lr}]
        return [g for g in groups if g["params"]]

    def _unit_parameters(self, unit: str) -> list[Any]:
        team = self.team_of(unit)
        if unit == CENTRAL:
            return list(team.value_heads[CENTRAL].parameters())
        return team.parameters_of(unit)

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

    # rollouts -------------------------------------------------------------------------------
    async def acting(self, state: PolicyState, phase: str, *, scores_actions: bool, temperature: float,
                     sampling: Mapping[str, Any] | None = None) -> dict[str, Acting]:
        """Load ``state``'s committed adapters; each learning slot acts with its adapter,
        sampling in training rollouts (``temperature``, its chat model updated with
        ``sampling``, never answered from the cache) and greedily in evaluation. A frozen slot
        acts as configured."""
        await self.restore(state)
        selection = "score" if scores_actions else None
        acting: dict[str, Acting] = {}
        for name in self.context.learning_agents:
            handle = self.context.local.get(name)
            if handle is None or name not in self.context.actors:
                continue
            chat = handle.chat_models[name]
            if phase == "train":
                if name not in self._train_models:
                    self._train_models[name] = chat.model_copy(update={"cache": False, **(sampling or {})})
                acting[name] = Acting(self._train_models[name], name, selection, temperature)
            else:
                acting[name] = Acting(chat, name, selection, 0.0)
        return acting

    async def prompt_states(self, prompts: Mapping[KeyT, Mapping[str, str | None]]) -> dict[KeyT, Any]:
        """Per key, every learning agent's prompt state (the last prompt token's hidden state,
        under the agent's adapter, no gradient) stacked in team order: ``[n_agents, hidden]``
        (an agent without a prompt there: zeros). What a central value head reads."""
        return await self.local.run(self._prompt_states, prompts)

    def _prompt_states(self, prompts: Mapping[KeyT, Mapping[str, str | None]]) -> dict[KeyT, Any]:
        import torch

        local, agents = self.local, list(self.team.agents)
        keys = list(prompts)
        out: dict[KeyT, dict[str, Any]] = {}
        with local.exclusive(), torch.no_grad():
            rows = [(k, a, prompts[k].get(a)) for k in keys for a in agents]
            for start in range(0, len(rows), 16):
                chunk = rows[start:start + 16]
                items: list[tuple[tuple[int, ...], list[tuple[int, ...]]]] = [
                    (local.encode(p or " "), []) for _, _, p in chunk]  # no candidates: the prompt's state
                scored = local.score_tokens(items, agents=[a for _, a, _ in chunk])
                for (k, a, p), h in zip(chunk, scored.prompt_hidden, strict=True):
                    out.setdefault(k, {})[a] = h if p is not None else torch.zeros_like(h)
        return {k: torch.stack([v[a] for a in agents]).float() for k, v in out.items()}

    # the update -----------------------------------------------------------------------------
    async def restore(self, state: PolicyState) -> None:
        """Build the adapters (once) and bring them and their optimizers to ``state``."""
        self.setup()
        await self.local.run(self.load_state, state)

    def load_state(self, state: PolicyState) -> None:
        """Bring the in-memory adapters and optimizers to ``state`` (after a resume, or after a
        candidate that was not committed). What is loaded is known by its source: the initial
        weights, or the state file an update saved (and left in memory)."""
        path = state.extra.get(self.state_name) if state.adapters else None
        source = path or INITIAL_STATE
        if source == self._loaded:
            return
        if path is None:
            weights, optimizers = self._initial, self._initial_optimizers
        else:
            if not Path(path).is_file():
                raise FileNotFoundError(f"{self.method} state {path!r} of iteration {state.iteration} is missing")
            saved = load_tensors(path)
            weights, optimizers = saved["weights"], saved["optimizers"]
        expected: set[str] = set().union(*(base.keys for base in self.bases))
        if set(weights) != expected:  # checked before any base changes
            odd = sorted(set(weights) ^ expected)[:3]
            raise ValueError(f"{self.method} state {path!r} does not match this team's adapters (differs in "
                             f"{odd}); resume with the config that trained it")
        with self._all_exclusive():
            for base in self.bases:
                base.team.load_state_dict({k: v for k, v in weights.items() if k in base.keys})
            for unit, opt_state in optimizers.items():
                if unit in self.optimizers:
                    self.optimizers[unit].load_state_dict(opt_state)
        self._loaded = source

    @contextlib.contextmanager
    def seeded(self, iteration: int) -> Iterator[None]:
        """Torch's random state (LoRA dropout) seeded by the iteration while inside, so an
        update re-run after a crash gives the same adapters."""
        import torch

        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(self.options.seed * SEED_OFFSET + iteration)
            yield

    def minibatches(self, by_unit: Mapping[str, Sequence[T]], size: int, rng: random.Random, *,
                    units: Sequence[str] | None = None,
                    order: Callable[[list[T], random.Random], list[T]] | None = None,
                    ) -> list[tuple[str, list[T]]]:
        """One epoch's minibatches of ``size`` over each unit's samples (``units``: the
        adapters by default), unit after unit, each unit's samples in ``order`` (shuffled by
        ``rng`` by default). Under a launcher each process fills a step with its own samples
        (or none) and the gradients are summed: every unit takes as many steps as the process
        with the most minibatches of it, the same steps in the same order everywhere."""
        out: list[tuple[str, list[T]]] = []
        for unit in self.adapter_units if units is None else units:
            items: list[T] = list(by_unit.get(unit, []))
            if order is None:
                rng.shuffle(items)
            else:
                items = order(items, rng)
            local = [items[i:i + size] for i in range(0, len(items), size)]
            out += [(unit, local[j] if j < len(local) else []) for j in range(self.parallel.max_int(len(local)))]
        return out

    async def step(self, unit: str, batch: list[SampleT], loss_fn: LossFn, *,
                   weight: Callable[[SampleT], float] | None = None,
                   mean_terms: Sequence[str] = ()) -> dict[str, float] | None:
        """One gradient step of ``unit`` (an adapter, or the central value head) on ``batch``
        with ``loss_fn``, on the engine's thread: the minibatch's gradient accumulated over
        micro-batches (peak memory follows ``micro_batch_size``, the step is the same), summed
        over processes under a launcher, clipped, and taken unless not finite or its norm
        exceeds ``max_skip_norm``. Returns the summed loss terms (those in ``mean_terms`` per
        sample) and ``grad_norm``; None: the step was skipped, nothing changed; ``{}``: taken
        on other processes' samples only. ``weight``: a sample's weight in the mean (1)."""
        self.context.stop.check("between training steps")
        base = self._base_of[unit]
        return await base.local.run(self._step, base, unit, batch, loss_fn, weight, tuple(mean_terms))

    def _step(self, base: Base, unit: str, batch: list[SampleT], loss_fn: LossFn,
              weight: Callable[[SampleT], float] | None, mean_terms: tuple[str, ...]) -> dict[str, float] | None:
        import torch

        options, team, optimizer = self.options, base.team, self.optimizers[unit]
        # The central head reads states computed before the epochs (no activations of the
        # model to bound): its minibatch is one part, with no adapter to activate.
        part_size = len(batch) if unit == CENTRAL else options.micro_batch_size
        training = contextlib.nullcontext() if unit == CENTRAL else team.training(unit)
        # Losses are sums over this process's samples divided by the step's total weight in
        # all processes: with the gradients summed across processes, each step is the mean
        # over the whole minibatch, as one process would take it.
        total = self.parallel.sum_float(float(sum(weight(s) for s in batch) if weight else len(batch)))
        if total == 0:
            return None
        with base.local.exclusive():
            optimizer.zero_grad(set_to_none=True)
            sums: dict[str, float] = {}
            finite = True
            if batch:
                with training:
                    for start in range(0, len(batch), part_size):
                        terms = loss_fn(batch[start:start + part_size], total)
                        if not torch.isfinite(terms["loss"]):
                            finite = False
                            break
                        terms["loss"].backward()
                        for k, v in terms.items():
                            sums[k] = sums.get(k, 0.0) + float(v.detach())
            norm = self.parallel.guarded_step(optimizer, self._unit_parameters(unit), finite, options.max_grad_norm,
                                              options.max_skip_norm, f"{self.method}: {unit}")
            if norm is None:
                return None
            optimizer.zero_grad(set_to_none=True)
        if not batch:
            return {}
        return {**{k: v / len(batch) if k in mean_terms else v for k, v in sums.items()}, "grad_norm": norm}

    # the saved state ------------------------------------------------------------------------
    def adapters_dir(self, iteration: int) -> Path:
        return self.run_path / "adapters" / str(iteration)

    async def save(self, iteration: int, records: list[dict[str, Any]], counters: dict[str, Any]) -> Candidate:
        """Save the trained adapters under ``adapters/<iteration>/`` and propose them, with the
        update's ``records`` and ``counters`` for ``iterations.csv``."""
        directory = self.adapters_dir(iteration)
        hashes, path = await self.local.run(self._save, directory)
        refs = {a: {"path": str(directory / self.team_of(a).adapter_for(a)), "hash": hashes[a]}
                for a in self.context.learning_agents}
        return Candidate(adapters=refs, extra={self.state_name: str(path)}, records=records, counters=counters)

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
