"""LLM-MCA (``learning.critic: llm_mca``): a centralised LLM critic reads the timesteps of a
collected batch (the team's state, the joint action, the team reward) and splits each step's
team reward between the agents; the agents train on those credits instead of the env's rewards.

As in the paper's batch training, the critic is called at policy updates (every
``critic_every``-th batch) on the whole batch; the batch is read in chunks of consecutive
timesteps sized so that each call's prompt and reply fit in ``critic_context`` tokens. Each
call's system prompt is the paper's four parts, one prompt file each, looked up for the env's
family first (``mca_env_lbf``, ``mca_definitions_matrix``, ...) and then generic: the rules and
objective (``mca_env``), what the data means (``mca_data``), under- and over-collaboration and
the agreement problem with an example (``mca_definitions``), and the critic's role and output
format (``mca_role``). The reply is read JSON first, then by regular expression
(``marlang.methods.neural.critics.mca_parsing``), and each timestep's credits are normalised
(``critic_normalize``). A timestep or agent the reply misses gets the team reward split evenly
and is counted in ``critic_failures``; a reply never stops the run.

Files under ``credit/`` in the run directory: ``llm_credit.jsonl`` (every timestep the critic
read: its batch, env row, episode, state, actions, team reward, the credit trained on, the
critic's raw numbers and explanation, and the agents it missed), ``critic_calls.jsonl`` (every
call's timesteps and reply) and ``mca_state.json`` (batches seen, for resume).

LLM-TACA (``learning.critic: llm_taca``, ``task_size`` > 0): the critic also assigns each agent
a task per timestep (a fifth prompt part, ``mca_tasks``), which is written into the last
``task_size`` inputs of that agent's observations in the training batch (zeros when acting),
for a share of the timesteps that falls over training (``task_anneal``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from marlang.methods.neural.critics.mca_parsing import normalize, parse_step_credits
from marlang.methods.neural.critics.rankers import critic_usage, usage_rates
from marlang.methods.neural.critics.records import RecordingCritic, StepRecords
from marlang.rundir import appending, atomic_write_text

if TYPE_CHECKING:
    from tensordict import TensorDictBase

logger = logging.getLogger(__name__)

CREDIT_DIR = "credit"
REWARD_KEY = ("next", "agents", "reward")
ACTION_KEY = ("agents", "action")
TRAJ_KEY = ("collector", "traj_ids")
PROMPT_PARTS = ("mca_env", "mca_data", "mca_definitions", "mca_role")
TACA_PROMPT_PARTS = ("mca_env", "mca_data", "mca_definitions", "mca_tasks", "mca_role")
OBS_KEY = ("agents", "observation")
NEXT_OBS_KEY = ("next", "agents", "observation")
WHY_MAX_CHARS = 80
"""A timestep's explanation in the reply's schema: a sentence, so that a model that would ramble
on in it (a small one, greedy) cannot spend the call's reply on one timestep."""
CHARS_PER_TOKEN = 3.0
"""Token estimate of a model without a local tokenizer (a cautious one: prompts of numbers and
punctuation run shorter than prose)."""


def reply_tokens_per_step(n_agents: int, task_size: int = 0) -> int:
    """What one timestep's entry of the reply costs, about: its label, a number per agent, a
    "why" of at most ``WHY_MAX_CHARS`` and (LLM-TACA) a task per agent."""
    return 16 + 10 * n_agents + WHY_MAX_CHARS // 3 + (6 + n_agents * (6 + 3 * task_size) if task_size else 0)


@dataclass(frozen=True)
class Chunk:
    """The timesteps (flat batch positions) one critic call reads, and their lines."""

    positions: list[int]
    lines: list[str]

    @property
    def labels(self) -> list[str]:
        return [f"t{k + 1}" for k in range(len(self.positions))]


def step_line(state: str, actions: Mapping[str, str], team_reward: float) -> str:
    """One timestep as the critic reads it: the team's state, the joint action, the team reward."""
    acts = ", ".join(f"{a}: {act}" for a, act in actions.items())
    return f"{state.replace(chr(10), '; ')} | {acts} | team reward {team_reward:g}"


def credit_schema(labels: Sequence[str], agents: Sequence[str], task_size: int = 0) -> dict[str, Any]:
    """The JSON schema of one call's reply: per label, a number per agent, an optional why and
    (LLM-TACA, ``task_size`` > 0) the agents' tasks."""
    properties: dict[str, Any] = {**{a: {"type": "number"} for a in agents},
                                  "why": {"type": "string", "maxLength": WHY_MAX_CHARS}}
    required = list(agents)
    if task_size:
        vector = {"type": "array", "items": {"type": "integer"}, "minItems": task_size, "maxItems": task_size}
        properties["tasks"] = {"type": "object", "properties": dict.fromkeys(agents, vector),
                               "required": list(agents), "additionalProperties": False}
        required.append("tasks")
    step = {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
    return {"type": "object", "properties": dict.fromkeys(labels, step), "required": list(labels),
            "additionalProperties": False}


def prompt_family(env_id: str) -> str:
    """The prompt-file suffix of an env id: what comes before its ``/`` (``lbf/8x8-...`` -> lbf)."""
    return env_id.split("/", 1)[0].replace("-", "_")


class TokenCounter:
    """Tokens of a text for one model: exact with a local tokenizer, estimated otherwise."""

    def __init__(self, model: Any) -> None:
        from marlang.models.capabilities import CountsTokens

        self.exact = model.count_tokens if isinstance(model, CountsTokens) else None

    def __call__(self, text: str) -> int:
        if self.exact is not None:
            return self.exact(text)
        return math.ceil(len(text) / CHARS_PER_TOKEN)


class LLMCreditCritic(RecordingCritic):
    """``learning.critic: llm_mca`` (see the module docstring), or ``llm_taca`` with
    ``task_size`` > 0. ``env`` is an env of the run's id (for action names and prompts);
    ``model`` the critic's chat model; ``usage`` the ``UsageRecorder`` its calls report to."""

    def __init__(self, env: Any, model: Any, prompts: Any, out_dir: str | Path, *, options: Any, seed: int,
                 capacity: int, usage: Any, structured: Any, max_concurrency: int = 4,
                 resume: bool = False, task_size: int = 0) -> None:
        self.task_size = task_size
        self.name = "llm_taca" if task_size else "llm_mca"
        self.parts = TACA_PROMPT_PARTS if task_size else PROMPT_PARTS
        self.env = env
        self.model = model
        self.options = options
        self.seed = seed
        self.agents = list(env.possible_agents)
        self.dir = Path(out_dir) / CREDIT_DIR
        self.records = StepRecords(capacity, states=True)
        self.usage = usage
        self.structured = structured
        self.max_concurrency = max_concurrency
        self.llm_calls_file = Path(out_dir) / "llm_calls.csv"
        self.count_tokens = TokenCounter(model)
        templates = [self._prompt(prompts, part, env) for part in self.parts]
        self.prompt_files = {part: t.name for part, t in zip(self.parts, templates, strict=True)}
        self.system = self._system_prompt(env, templates)
        self.batches = 0
        self.last: dict[str, Any] = {}
        self.annotated: dict[int, dict[str, Any]] = {}
        """What the critic said about each position of the last batch it read (its ``why``
        and the agents it missed; ``annotations``)."""
        self.tasks: dict[int, dict[str, list[int]]] = {}
        """LLM-TACA: the tasks of each position of the last batch the critic read."""
        if resume:
            state = self.dir / "mca_state.json"
            if state.exists():
                self.batches = int(json.loads(state.read_text()).get("batches", 0))

    # prompts --------------------------------------------------------------------------------------
    @staticmethod
    def _prompt(prompts: Any, part: str, env: Any) -> Any:
        try:
            return prompts.get(f"{part}_{prompt_family(env.env_id)}")
        except KeyError:
            return prompts.get(part)

    def _system_prompt(self, env: Any, templates: Sequence[Any]) -> str:
        actions = {tuple(env.action_names(a)) for a in self.agents}
        if len(actions) == 1:
            action_text = ", ".join(next(iter(actions)))
        else:
            action_text = "; ".join(f"{a}: {', '.join(env.action_names(a))}" for a in self.agents)
        env.reset(seed=self.seed)
        example: dict[str, Any] = {"t1": {**{a: 0.0 for a in self.agents}, "why": "..."},
                                   "t2": {**{a: 1.0 for a in self.agents}, "why": "..."}}
        if self.task_size:
            for k, entry in enumerate(example.values()):
                entry["tasks"] = {a: [k + 1] + [0] * (self.task_size - 1) for a in self.agents}
        values = {"task_size": self.task_size, "n_agents": len(self.agents), "agents": ", ".join(self.agents),
                  "first_agent": self.agents[0], "world": getattr(env, "world_description", "a shared environment"),
                  "mission": env.mission, "actions": action_text, "example_view": env.ego_text(self.agents[0]),
                  "example_json": json.dumps(example)}
        return "\n\n".join(t.render(**values) for t in templates)

    def messages(self, chunk: Chunk) -> list[Any]:
        from langchain_core.messages import HumanMessage, SystemMessage

        return [SystemMessage(self.system), HumanMessage("\n".join(chunk.lines))]

    # the Critic interface -----------------------------------------------------------------------
    def __call__(self, batch: TensorDictBase) -> torch.Tensor:
        index = self.batches
        self.batches += 1
        self.annotated = {}
        reward = batch.get(REWARD_KEY)
        frames = int(batch.numel())
        self.last = {"critic_failures": 0, "critic_steps_read": 0, **usage_rates(0, 0, frames)}
        if self.task_size:
            self.last.update({"task_missing": 0, "task_inputs": 0})
        if index % self.options.critic_every != 0:  # between critic calls: the even split
            credit, calls, tokens = self.even_split(self.team_rewards(batch)), 0, 0
        else:
            credit, calls, tokens = self.annotate(batch, index)
            if self.task_size:
                self.assign_tasks(batch, index)
        self.last.update({**usage_rates(calls, tokens, frames), "credit_mean": float(credit.mean())})
        self._save_state()
        return credit.reshape(reward.shape).to(reward)

    def manifest(self) -> dict[str, Any]:
        o = self.options
        tasks = {"task_size": self.task_size, "task_anneal": o.task_anneal} if self.task_size else {}
        return {"critic": self.name, **tasks, "critic_every": o.critic_every, "critic_context": o.critic_context,
                "critic_max_tokens": o.critic_max_tokens, "critic_normalize": o.critic_normalize,
                "critic_steps": o.critic_steps, "prompts": self.prompt_files,
                "structured": getattr(self.structured, "mode", None)}

    # one batch ------------------------------------------------------------------------------------
    def even_split(self, team: torch.Tensor) -> torch.Tensor:
        """Each position's team reward shared equally, ``[positions, n_agents]``."""
        return (team / len(self.agents)).unsqueeze(-1).repeat(1, len(self.agents))

    def team_rewards(self, batch: TensorDictBase) -> torch.Tensor:
        """Each position's team reward (the mean of the agents' rewards), flat."""
        return batch.get(REWARD_KEY).float().reshape(-1, len(self.agents)).mean(-1).cpu()

    def lines(self, batch: TensorDictBase) -> tuple[list[str], list[Any]]:
        """Every flat position's timestep line (no label) and its episode id."""
        records = self.records.lookup(batch, next_state=False)
        actions = batch.get(ACTION_KEY).reshape(-1, len(self.agents)).tolist()
        team = self.team_rewards(batch).tolist()
        episodes: list[Any] = (batch.get(TRAJ_KEY).reshape(-1).tolist() if TRAJ_KEY in batch.keys(True)
                               else [None] * len(team))
        out = []
        for p, record in enumerate(records):
            state = record.state if record is not None else "(not recorded)"
            acts = {a: self.env.action_names(a)[int(actions[p][i])] for i, a in enumerate(self.agents)}
            out.append(step_line(state, acts, team[p]))
        return out, episodes

    def chunks(self, lines: Sequence[str], episodes: Sequence[Any]) -> list[Chunk]:
        """Consecutive positions, as many per call as the context and the reply budget allow."""
        o = self.options
        budget = o.critic_context - o.critic_max_tokens - self.count_tokens(self.system) - 32
        per_reply = max(1, (o.critic_max_tokens - 8) // reply_tokens_per_step(len(self.agents), self.task_size))
        if budget < 64:
            raise ValueError(f"learning.critic_context {o.critic_context} leaves no room for timesteps after "
                             f"the critic's prompt ({self.count_tokens(self.system)} tokens) and reply "
                             f"({o.critic_max_tokens}); raise critic_context or lower critic_max_tokens")
        out: list[Chunk] = []
        positions: list[int] = []
        text: list[str] = []
        used = 0

        def entry(p: int, line: str) -> tuple[list[str], int]:
            """The lines position ``p`` adds to the current call (an episode header where a new
            episode starts, or the call does) and their tokens."""
            new_episode = not positions or episodes[p] != episodes[positions[-1]]
            head = [f"Episode {episodes[p]}:" if episodes[p] is not None else "Episode:"] if new_episode else []
            body = [*head, f"t{len(positions) + 1}: {line}"]
            return body, self.count_tokens("\n".join(body)) + 1

        for p, line in enumerate(lines):
            while self.count_tokens(line) > budget - 16 and len(line) > 40:  # one state too long for a call
                line = line[: int(len(line) * 0.8)] + " ..."
            body, cost = entry(p, line)
            if positions and (used + cost > budget or len(positions) >= per_reply):
                out.append(Chunk(positions, text))
                positions, text, used = [], [], 0
                body, cost = entry(p, line)
            positions.append(p)
            text += body
            used += cost
        if positions:
            out.append(Chunk(positions, text))
        return out

    def annotate(self, batch: TensorDictBase, index: int) -> tuple[torch.Tensor, int, int]:
        """The per-agent credits of every position (``[positions, n_agents]``) and the LLM calls
        and tokens it took."""
        o, n = self.options, len(self.agents)
        team = self.team_rewards(batch)
        credit = self.even_split(team)  # unread or missed: the even split
        lines, episodes = self.lines(batch)
        chunks = self.chunks(lines, episodes)
        if o.critic_steps is not None and sum(len(c.positions) for c in chunks) > o.critic_steps:
            order = np.random.default_rng([self.seed, index]).permutation(len(chunks))
            chosen, read = [], 0
            for k in order:
                if read >= o.critic_steps:
                    break
                chosen.append(int(k))
                read += len(chunks[k].positions)
            chunks = [chunks[k] for k in sorted(chosen)]
        before = self._usage()
        replies = self.ask(chunks, index)
        calls, tokens = (a - b for a, b in zip(self._usage(), before, strict=True))
        if self.usage is not None:
            self.usage.append_csv(self.llm_calls_file)
        failures = read_steps = task_missing = 0
        self.tasks = {}
        self.dir.mkdir(parents=True, exist_ok=True)
        actions = batch.get(ACTION_KEY).reshape(-1, n).tolist()
        with (appending(self.dir / "llm_credit.jsonl") as steps_fh,
              appending(self.dir / "critic_calls.jsonl") as calls_fh):
            for k, (chunk, reply) in enumerate(zip(chunks, replies, strict=True)):
                calls_fh.write(json.dumps({"batch": index, "call": k, "positions": chunk.positions,
                                           "reply": reply}) + "\n")
                found = parse_step_credits(reply or "", chunk.labels, self.agents)
                for label, p in zip(chunk.labels, chunk.positions, strict=True):
                    read_steps += 1
                    entry = found.get(label, {"credits": {}, "why": "", "tasks": {}})
                    raw = entry["credits"]
                    missed = [a for a in self.agents if a not in raw]
                    failures += len(missed)
                    r = float(team[p])
                    given = self.credits_of(raw, r, team)
                    for i, a in enumerate(self.agents):
                        credit[p, i] = given[a]
                    row = {"batch": index, "position": p, "episode": episodes[p], "team_reward": r,
                           "actions": {a: self.env.action_names(a)[int(actions[p][i])]
                                       for i, a in enumerate(self.agents)},
                           "state": lines[p].split(" | ")[0], "credit": {a: round(given[a], 6) for a in self.agents},
                           "raw": raw, "why": entry["why"], "missed": missed}
                    note: dict[str, Any] = {"why": entry["why"], "missed": missed}
                    if self.task_size:
                        tasks = {a: self._task(entry["tasks"].get(a)) for a in self.agents}
                        task_missing += sum(a not in entry["tasks"] for a in self.agents)
                        self.tasks[p] = tasks
                        row["tasks"] = note["tasks"] = tasks
                    steps_fh.write(json.dumps(row) + "\n")
                    self.annotated[p] = note
        if failures:
            logger.info("LLM-MCA batch %d: the critic missed %d of %d timestep credits (even split instead)",
                        index, failures, read_steps * n)
        self.last.update({"critic_failures": failures, "critic_steps_read": read_steps})
        if self.task_size:
            self.last["task_missing"] = task_missing
        return credit, calls, tokens

    # LLM-TACA -------------------------------------------------------------------------------------
    def _task(self, vector: list[int] | None) -> list[int]:
        """A task input of ``task_size`` integers (cut or padded with 0; none: zeros)."""
        vector = list(vector or [])[: self.task_size]
        return vector + [0] * (self.task_size - len(vector))

    def keep_share(self, index: int) -> float:
        """The share of the critic's task inputs batch ``index`` trains with (``task_anneal``)."""
        o = self.options
        if not o.task_anneal:
            return 1.0
        total = max(1, int(getattr(o, "batches", 0) or -(-int(o.frames) // int(o.frames_per_batch))))
        return max(0.0, 1.0 - index / total)

    def assign_tasks(self, batch: TensorDictBase, index: int) -> None:
        """Write the tasks of the timesteps the critic read into the last ``task_size`` entries of
        their observations (before and after the step), for a ``keep_share`` of them; the rest
        keep zeros, the input the agents act with."""
        n, k = len(self.agents), self.task_size
        keep = np.random.default_rng([self.seed, index, 1]).random(len(self.tasks)) < self.keep_share(index)
        kept = [(p, tasks) for (p, tasks), kept in zip(sorted(self.tasks.items()), keep, strict=True) if kept]
        for key in (OBS_KEY, NEXT_OBS_KEY):
            obs = batch.get(key)
            flat = obs.reshape(-1, n, obs.shape[-1]).clone()
            for p, tasks in kept:
                for i, a in enumerate(self.agents):
                    flat[p, i, -k:] = torch.tensor(tasks[a], dtype=flat.dtype)
            batch.set(key, flat.reshape(obs.shape))
        self.last["task_inputs"] = n * len(kept)

    def credits_of(self, raw: Mapping[str, float], r: float, team: torch.Tensor) -> dict[str, float]:
        """One timestep's credits from the critic's numbers ``raw`` (team reward ``r``; ``team``:
        the batch's team rewards, which bound a wild number): a missed agent gets the even split
        r/n, the named ones share the rest (``critic_normalize``, which keeps their order)."""
        n = len(self.agents)
        missed = [a for a in self.agents if a not in raw]
        named = {a: self._clip(raw[a], team) for a in self.agents if a in raw}
        given = normalize(named, r * len(named) / n, self.options.critic_normalize) if named else {}
        given.update(dict.fromkeys(missed, r / n))
        return given

    def _clip(self, value: float, team: torch.Tensor) -> float:
        """A credit within n_agents times the batch's largest team reward (at least 1) either
        way: one wild number does not swamp the batch's rewards."""
        bound = len(self.agents) * max(1.0, float(team.abs().max()) if team.numel() else 1.0)
        return max(-bound, min(bound, float(value)))

    # calls ----------------------------------------------------------------------------------------
    def ask(self, chunks: Sequence[Chunk], index: int) -> list[str]:
        """The critic's reply to each chunk (concurrent calls; ``index``: the batch, for seeds)."""
        from marlang.models.errors import ModelServerError

        try:
            return asyncio.run(self._gather(chunks, index))
        except ModelServerError as err:
            raise type(err)(f"the LLM-MCA critic's model (learning.critic_model): {err}",
                            url=err.url, attempts=err.attempts) from err

    async def _gather(self, chunks: Sequence[Chunk], index: int) -> list[str]:
        from marlang.methods.neural.critics.rankers import LLMCallContext

        callbacks = [self.usage] if self.usage is not None else []
        ctx = LLMCallContext(callbacks, asyncio.Semaphore(self.max_concurrency), iteration=index)
        return list(await asyncio.gather(*(self._ask(chunk, k, index, ctx) for k, chunk in enumerate(chunks))))

    async def _ask(self, chunk: Chunk, k: int, index: int, ctx: Any) -> str:
        from marlang.agents.calls import call_model_json, call_seed

        kwargs: dict[str, Any] = {}
        if float(getattr(self.model, "temperature", 0) or 0) > 0:
            kwargs["seed"] = call_seed(self.seed, "llm_mca", index, k)
        return await call_model_json(self.model, self.messages(chunk), ctx, structured=self.structured,
                                     schema=credit_schema(chunk.labels, self.agents, self.task_size),
                                     name="credit", prefill='{"t1": {"', role="critic", agent="",
                                     max_tokens=self.options.critic_max_tokens, **kwargs)

    def _usage(self) -> tuple[int, int]:
        return critic_usage(self.usage)

    def _save_state(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.dir / "mca_state.json", json.dumps({"batches": self.batches}))
