"""LCA (``learning.critic: lca``): agent-specific rankings of consecutive states train one
Bradley-Terry scoring model per group of homogeneous agents, and each agent's training reward
becomes the team reward plus sigma(o') - sigma(o) over its own numeric ego observation.

Every ``critic_every`` batches the critic samples ``ranker_pairs`` steps of the batch, asks the
ranker ``queries`` times per step and agent whether the state after is better for that agent,
adds them to the ranking data (which grows over the run) and trains the scoring models further;
a quarter as many other steps, ranked by the env's heuristic, measure the models' accuracy.
Files under ``credit/`` in the run directory: ``rankings.jsonl`` (every ranked pair with its
answers, confidence and both observations), ``accuracy.jsonl`` (one line per critic call),
``bt_<group>.pt`` (the scoring models) and ``key_steps.txt`` (the LLM ranker's team goal).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from marlang.methods.neural.critics.bradley_terry import StateScorer, potential_rewards, train_scorer
from marlang.methods.neural.critics.difference import default_action, team_reward
from marlang.methods.neural.critics.rankers import Ranker, RankQuery, critic_usage, usage_rates
from marlang.methods.neural.critics.records import RecordingCritic, StepRecords
from marlang.rundir import appending, atomic_write_text
from marlang.rundir.tensors import load_tensors
from marlang.rundir.untrusted import read_regular

if TYPE_CHECKING:
    from tensordict import TensorDictBase

logger = logging.getLogger(__name__)

CREDIT_DIR = "credit"
HOLDOUT_SHARE = 0.25
"""Held-out steps per critic call, as a share of ``ranker_pairs`` (ranked by the heuristic only)."""
OBS_KEY = ("agents", "observation")
NEXT_OBS_KEY = ("next", "agents", "observation")
ACTION_KEY = ("agents", "action")
REWARD_KEY = ("next", "agents", "reward")
BT_BATCH = 64
"""Pairs per gradient step of the scoring models."""


def default_groups(env: Any) -> dict[str, list[str]]:
    """Agents with the same action names and observation size share one scoring model (the
    name of a group is its agents joined by ``+``)."""
    kinds: dict[tuple[Any, ...], list[str]] = {}
    for agent in env.possible_agents:
        kind = (tuple(env.action_names(agent)), tuple(env.numeric_observation_space(agent).shape))
        kinds.setdefault(kind, []).append(agent)
    return {"+".join(agents): agents for agents in kinds.values()}


def named_groups(groups: Sequence[Sequence[str]]) -> dict[str, list[str]]:
    return {"+".join(g): list(g) for g in groups}


def confidence(answers: Sequence[int | None]) -> float | None:
    """Share of the parsed answers saying the state after is better (a tie counts half)."""
    parsed = [a for a in answers if a is not None]
    if not parsed:
        return None
    return sum(1.0 if a > 0 else 0.5 if a == 0 else 0.0 for a in parsed) / len(parsed)


def key_steps(env: Any, seed: int, max_steps: int | None = None) -> list[str]:
    """LCA's team goal from the team reward: play the env's reference team for one episode
    (text mode) and describe, in order, the steps where the team reward (without the step
    penalty) is non-zero: the env's event sentences, or else the first agent's view then."""
    team = env.scripted_team()
    team.reset()
    observations, _ = env.reset(seed=seed)
    lines: list[str] = []
    for t in range(1, (max_steps or env.max_steps) + 1):
        if not env.agents:
            break
        observations, rewards, terminations, truncations, infos = env.step(team.act(observations))
        info: dict[str, Any] = next(iter(infos.values()), {})
        reward = info.get("team_reward")
        if reward is None:
            reward = team_reward(rewards) - float(info.get("step_penalty", 0.0) or 0.0)
        if abs(float(reward)) > 1e-9:
            events = info.get("events") or []
            what = "; ".join(str(e) for e in events) if events else env.ego_text(env.possible_agents[0]).splitlines()[0]
            lines.append(f"{len(lines) + 1}. step {t}: {what} (team reward {float(reward):+g})")
        if any(terminations.values()) or any(truncations.values()):
            break
    return lines or ["(no step of a sample episode earned a team reward)"]


def ranker_prompts(prompts: Any, env: Any, text_env: Any, groups: Mapping[str, Sequence[str]], *,
                   dependence: str = "auto", seed: int = 0) -> tuple[str, Any, str]:
    """What an LLM ranker is asked with: the preamble (``env``'s world and mission, and the key
    steps of one reference episode played in ``text_env`` from ``seed``), the question prompt
    and its dependence (``behaviour`` or ``task``; ``auto``: task when the agents form several
    ``groups``, i.e. have different actions)."""
    if dependence == "auto":
        dependence = "task" if len(groups) > 1 else "behaviour"
    preamble = prompts.get("lca_preamble").render(world=getattr(env, "world_description", "a shared environment"),
                                                  mission=env.mission, key_steps="\n".join(key_steps(text_env, seed)))
    return preamble, prompts.get(f"lca_rank_{dependence}"), dependence


class LCACritic(RecordingCritic):
    """``learning.critic: lca`` (see the module docstring). ``env`` is a numeric-mode env of the
    run's id (for action names, observation sizes and the heuristic); ``ranker`` answers the
    queries; ``groups`` maps a group name to its agents."""

    name = "lca"

    def __init__(self, env: Any, ranker: Ranker, groups: Mapping[str, Sequence[str]], out_dir: str | Path, *,
                 options: Any, seed: int, capacity: int, texts: bool, usage: Any = None,
                 resume: bool = False, notes: Mapping[str, str] | None = None) -> None:
        self.env = env
        self.ranker = ranker
        self.groups = {name: list(agents) for name, agents in groups.items()}
        self.group_of = {agent: name for name, agents in self.groups.items() for agent in agents}
        self.agents = list(env.possible_agents)
        self.options = options
        self.seed = seed
        self.dir = Path(out_dir) / CREDIT_DIR
        self.records = StepRecords(capacity, texts=texts)
        self.usage = usage
        self.llm_calls_file = Path(out_dir) / "llm_calls.csv"
        self.torch_rng = torch.Generator().manual_seed(seed)
        self.has_heuristic = callable(getattr(env, "rank_states", None))
        self.noop = {a: default_action(env, a) for a in self.agents}
        self.models: dict[str, StateScorer] = {}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        for name, agents in self.groups.items():
            dims = {int(np.prod(env.numeric_observation_space(a).shape)) for a in agents}
            if len(dims) != 1:
                raise ValueError(f"learning.ranker_groups: agents {agents} have observations of different "
                                 f"sizes {sorted(dims)} and cannot share a scoring model")
            self.models[name] = StateScorer(dims.pop(), options.bt_hidden)
            self.optimizers[name] = torch.optim.Adam(self.models[name].parameters(), lr=options.bt_lr)
        self.data: dict[str, list[tuple[list[float], list[float], float]]] = {name: [] for name in self.groups}
        self.notes = dict(notes or {})
        """Files written into ``credit/`` with the first ranking (the LLM ranker's preamble)."""
        self.batches = 0
        self.last: dict[str, Any] = {}
        self.annotated: dict[int, dict[str, Any]] = {}
        """The rankings of each position of the last batch that was ranked (``annotations``)."""
        self.last_accuracy: float | None = None
        if resume:
            self._restore()

    # the Critic interface -----------------------------------------------------------------------
    def __call__(self, batch: TensorDictBase) -> torch.Tensor:
        index = self.batches
        self.batches += 1
        self.annotated = {}
        frames = int(batch.numel())
        self.last = {"credit_accuracy": self.last_accuracy, **usage_rates(0, 0, frames)}
        if index % self.options.critic_every == 0:
            calls, tokens = self.update(batch, index)
            self.last.update({"credit_accuracy": self.last_accuracy, **usage_rates(calls, tokens, frames)})
        credit = self.credit(batch)
        self.last["credit_mean"] = float(credit.mean())
        reward = batch.get(REWARD_KEY)
        return reward + credit.unsqueeze(-1).to(reward)

    def manifest(self) -> dict[str, Any]:
        o = self.options
        return {"critic": "lca", "ranker": o.ranker, "queries": o.queries, "ranker_pairs": o.ranker_pairs,
                "groups": self.groups, "critic_every": o.critic_every,
                **({"ranker_accuracy": o.ranker_accuracy} if o.ranker == "synthetic" else {})}

    # rewards ------------------------------------------------------------------------------------
    def credit(self, batch: TensorDictBase) -> torch.Tensor:
        """``credit_scale * (sigma(o') - sigma(o))`` per agent, shaped ``[*batch, n_agents]``."""
        obs, next_obs = self._flat(batch, OBS_KEY), self._flat(batch, NEXT_OBS_KEY)
        credit = torch.zeros(obs.shape[:-1])
        for name, agents in self.groups.items():
            idx = [self.agents.index(a) for a in agents]
            credit[..., idx] = potential_rewards(self.models[name], obs[..., idx, :].cpu(), next_obs[..., idx, :].cpu())
        credit = credit * self.options.credit_scale
        if self.options.zero_credit_when_still:
            actions = batch.get(ACTION_KEY).cpu()
            for i, agent in enumerate(self.agents):
                if self.noop[agent] is not None:
                    credit[..., i] = torch.where(actions[..., i] == self.noop[agent], 0.0, credit[..., i])
        return credit

    # critic calls -------------------------------------------------------------------------------
    def update(self, batch: TensorDictBase, index: int) -> tuple[int, int]:
        """Rank new pairs from ``batch``, train the scoring models, measure them; returns the
        LLM calls and tokens this took."""
        before = self.records.lookup(batch, next_state=False)
        after = self.records.lookup(batch, next_state=True)
        valid = [k for k, (a, b) in enumerate(zip(before, after, strict=True)) if a is not None and b is not None]
        if not valid:
            logger.warning("LCA: no recorded steps in batch %d; nothing to rank", index)
            return 0, 0
        rng = np.random.default_rng([self.seed, index])
        n_train = min(self.options.ranker_pairs, len(valid))
        n_hold = min(max(1, math.ceil(HOLDOUT_SHARE * self.options.ranker_pairs)), len(valid) - n_train)
        chosen = rng.choice(len(valid), size=n_train + n_hold, replace=False)
        train_pos = [valid[k] for k in chosen[:n_train]]
        hold_pos = [valid[k] for k in chosen[n_train:]]
        obs = self._flat(batch, OBS_KEY).reshape(-1, len(self.agents), self._flat(batch, OBS_KEY).shape[-1])
        next_obs = self._flat(batch, NEXT_OBS_KEY).reshape(obs.shape)
        actions = batch.get(ACTION_KEY).reshape(-1, len(self.agents)).tolist()

        queries = [
            RankQuery(agent, before[p], after[p], self.env.action_names(agent)[int(actions[p][i])],
                      key=f"{index}:{p}:{agent}")
            for p in train_pos for i, agent in enumerate(self.agents)
        ]
        self.dir.mkdir(parents=True, exist_ok=True)
        for name, text in self.notes.items():
            atomic_write_text(self.dir / name, text)
        calls_before = self._usage()
        if hasattr(self.ranker, "iteration"):
            self.ranker.iteration = index
        answers = self.ranker.rank(queries, self.options.queries)
        calls, tokens = (a - b for a, b in zip(self._usage(), calls_before, strict=True))
        if self.usage is not None:
            self.usage.append_csv(self.llm_calls_file)

        agree = agree_n = 0
        new = dict.fromkeys(self.data, 0)
        with appending(self.dir / "rankings.jsonl") as fh:
            for query, answer in zip(queries, answers, strict=True):
                p, i = int(query.key.split(":")[1]), self.agents.index(query.agent)
                conf = confidence(answer)
                truth = self._heuristic(query.agent, query.before, query.after)
                if conf is not None and truth:
                    agree_n += 1
                    agree += int((conf > 0.5 and truth > 0) or (conf < 0.5 and truth < 0))
                group = self.group_of[query.agent]
                before_row = [round(x, 6) for x in obs[p, i].tolist()]
                after_row = [round(x, 6) for x in next_obs[p, i].tolist()]
                row = {"batch": index, "agent": query.agent, "group": group,
                       "action": query.action, "answers": answer, "confidence": conf, "heuristic": truth,
                       "obs": before_row, "next_obs": after_row}
                fh.write(json.dumps(row) + "\n")
                self.annotated.setdefault(p, {"rankings": {}})["rankings"][query.agent] = answer
                if conf is not None:
                    self.data[group].append((before_row, after_row, conf))
                    new[group] += 1
        losses = self.train(new)
        self.last_accuracy = self.accuracy([before[p] for p in hold_pos], [after[p] for p in hold_pos],
                                           obs[hold_pos], next_obs[hold_pos])
        summary = {"batch": index, "pairs": len(train_pos), "queries": len(queries) * self.options.queries,
                   "heldout_pairs": len(hold_pos), "credit_accuracy": self.last_accuracy,
                   "ranker_agreement": agree / agree_n if agree_n else None, "loss": losses,
                   "dataset": {name: len(rows) for name, rows in self.data.items()},
                   "llm_calls": calls, "llm_tokens": tokens}
        with appending(self.dir / "accuracy.jsonl") as fh:
            fh.write(json.dumps(summary) + "\n")
        self.save()
        return calls, tokens

    def train(self, new: Mapping[str, int]) -> dict[str, float]:
        """Train each group's model further: ``bt_epochs`` passes' worth of minibatch steps over
        its new rows, drawn from all its rows (so a call costs the same however long the run)."""
        losses = {}
        for name, rows in self.data.items():
            if not rows or not new.get(name):
                continue
            a = torch.tensor([r[0] for r in rows], dtype=torch.float32)
            b = torch.tensor([r[1] for r in rows], dtype=torch.float32)
            c = torch.tensor([r[2] for r in rows], dtype=torch.float32)
            steps = self.options.bt_epochs * -(-new[name] // BT_BATCH)
            losses[name] = round(train_scorer(self.models[name], a, b, c, steps=steps, lr=self.options.bt_lr,
                                              batch_size=BT_BATCH, generator=self.torch_rng,
                                              optimizer=self.optimizers[name]), 6)
        return losses

    def accuracy(self, before: Sequence[Any], after: Sequence[Any], obs: torch.Tensor,
                 next_obs: torch.Tensor) -> float | None:
        """Share of held-out (step, agent) pairs the heuristic does not tie on where the sign of
        sigma(o') - sigma(o) agrees with it; None without a heuristic or such pairs."""
        if not self.has_heuristic or not before:
            return None
        right = total = 0
        for i, agent in enumerate(self.agents):
            model = self.models[self.group_of[agent]]
            diff = potential_rewards(model, obs[:, i], next_obs[:, i]).tolist()
            for k, d in enumerate(diff):
                truth = self._heuristic(agent, before[k], after[k])
                if truth:
                    total += 1
                    right += int((d > 0) == (truth > 0) and d != 0)
        return round(right / total, 6) if total else None

    def _flat(self, batch: TensorDictBase, key: tuple[str, ...]) -> torch.Tensor:
        """Observations as ``[*batch, n_agents, obs_dim]`` float vectors on the CPU."""
        value = batch.get(key).float().cpu()
        return value.reshape(*batch.batch_size, len(self.agents), -1)

    def _heuristic(self, agent: str, before: Any, after: Any) -> int | None:
        if not self.has_heuristic:
            return None
        return int(self.env.rank_states(agent, before.snapshot, after.snapshot))

    def _usage(self) -> tuple[int, int]:
        return critic_usage(self.usage)

    # files --------------------------------------------------------------------------------------
    def save(self) -> None:
        for name, model in self.models.items():
            tmp = self.dir / f"bt_{name}.pt.tmp"
            torch.save({"state_dict": model.state_dict(), "obs_dim": model.obs_dim,
                        "hidden": list(self.options.bt_hidden), "agents": self.groups[name],
                        "batches": self.batches}, tmp)
            tmp.replace(self.dir / f"bt_{name}.pt")

    def _restore(self) -> None:
        """Continue an interrupted run: its ranking data and scoring models."""
        rankings = self.dir / "rankings.jsonl"
        if (text := read_regular(rankings)) is not None:
            for line in text.decode("utf-8").splitlines():
                row = json.loads(line)
                if row.get("confidence") is not None and row.get("group") in self.data:
                    self.data[row["group"]].append((row["obs"], row["next_obs"], row["confidence"]))
        for name, model in self.models.items():
            path = self.dir / f"bt_{name}.pt"
            if path.exists():
                saved = load_tensors(path)
                model.load_state_dict(saved["state_dict"])
                self.batches = max(self.batches, int(saved.get("batches", 0)))
