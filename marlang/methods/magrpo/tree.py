"""MAGRPO's sampling tree: joint actions per node, returns, sibling advantages, termination.

A tree starts at a task's first turn (the root). Expanding a node samples G completions per
agent from the node's state; its children are the joint actions (``align``: the g-th
completions of every agent together, G children; ``cross``: every combination, G^N). Each
child is the env state after its joint answer, with the team's reward for it. A child is
expanded in turn unless the episode ended there (solved, or the last turn), or its sibling
set's mean reward exceeds ``termination_threshold`` (the set stops expanding at this turn).

A node's return is its reward plus the mean of its children's returns; its advantage is its
return against its siblings' (``grpo_loss.group_advantages``). An agent's completion is
trained with the advantage of every joint action it is part of (one under ``align``, G^(N-1)
under ``cross``).
"""

from __future__ import annotations

import itertools
import json
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marlang.methods.magrpo.grpo_loss import group_advantages
from marlang.rundir import atomic_write_text
from marlang.statistics.intervals import mean_interval
from marlang.types import Decision, Step, Trajectory

logger = logging.getLogger(__name__)

SANDBOX_FAILURES = ("timeout", "killed", "crashed")
"""Sandbox statuses of a run that was stopped before its tests could judge it."""

JOINT_MODES = ("align", "cross")


@dataclass
class Completion:
    """One sampled reply of one agent at one node."""

    agent: str
    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str = ""
    answer: str = ""
    logprobs: tuple[float, ...] | None = None
    """Per-token log-probabilities at sampling time (the ratio losses' old log-probs)."""
    thought: str = ""
    """The reply's text before its answer (what an episode records as the thought)."""
    valid: bool = True
    """Whether the reply held an answer in the asked format."""
    past: Any = field(default=None, repr=False, compare=False)
    """``learning.memory: memoryful``: this reply's KV cache, which the agent's next turn
    continues (a ``RowCache``; dropped with the tree)."""


@dataclass
class Node:
    """A joint action (``joint``: agent -> index into the parent's completions of that agent)
    and the state it led to; the root has no joint action."""

    turn: int
    joint: dict[str, int] = field(default_factory=dict)
    reward: float = 0.0
    done: bool = False
    state: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    outcome: dict[str, Any] = field(default_factory=dict, repr=False)
    """The env's step result for the joint answer (``observations`` after it, ``rewards``,
    ``terminations``, ``truncations``, ``infos``), what the episode of this path records."""
    observations: dict[str, Any] = field(default_factory=dict, repr=False)
    """What each agent saw at this node (its prompt's observation), once expanded."""
    completions: dict[str, list[Completion]] = field(default_factory=dict)
    """The G completions per agent sampled at this node (its children's joint actions)."""
    children: list[Node] = field(default_factory=list)
    terminated_early: bool = False
    """The children's mean reward passed the threshold: none of them was expanded."""
    ret: float = 0.0
    advantage: float = 0.0


def joint_actions(agents: Sequence[str], generations: int, mode: str) -> list[dict[str, int]]:
    """The joint actions of one node: G (``align``) or G^N (``cross``) maps agent -> index."""
    if mode not in JOINT_MODES:
        raise ValueError(f"unknown joint_mode {mode!r}; valid choices: {', '.join(JOINT_MODES)}")
    if mode == "align":
        return [dict.fromkeys(agents, g) for g in range(generations)]
    return [dict(zip(agents, combo, strict=True))
            for combo in itertools.product(range(generations), repeat=len(agents))]


def should_expand(children: Sequence[Node], threshold: float | None) -> bool:
    """Whether a sibling set goes on to the next turn: not when its mean reward exceeds the
    threshold (the rule of the MAGRPO paper)."""
    if threshold is None or not children:
        return True
    return sum(c.reward for c in children) / len(children) <= threshold


def backpropagate(roots: Sequence[Node], advantage: str = "mean") -> None:
    """Fill every node's return (reward + mean of its children's returns) and advantage
    (against its siblings; roots keep 0). ``batch_std`` divides by the standard deviation of
    every return of the batch (all ``roots``)."""

    def returns(node: Node) -> float:
        child = [returns(c) for c in node.children]
        node.ret = node.reward + (sum(child) / len(child) if child else 0.0)
        return node.ret

    for root in roots:
        returns(root)
    sets = [n.children for root in roots for n in iter_nodes(root) if n.children]
    advs = group_advantages([[c.ret for c in s] for s in sets], advantage)
    for siblings, values in zip(sets, advs, strict=True):
        for child, adv in zip(siblings, values, strict=True):
            child.advantage = adv


def iter_nodes(root: Node) -> list[Node]:
    """Every node, parents before children."""
    out, todo = [], [root]
    while todo:
        node = todo.pop(0)
        out.append(node)
        todo.extend(node.children)
    return out


@dataclass(eq=False)
class TrainingSample:
    """One agent's completion with the advantage it is trained with: the mean advantage of
    the joint actions containing it, standing for ``weight`` of them."""

    completion: Completion
    advantage: float
    weight: int
    turn: int
    old_logprobs: Any = field(default=None, repr=False)
    """Its token log-probs under the policy that sampled it (the ratio losses' old policy);
    set by the update."""
    ref_logprobs: Any = field(default=None, repr=False)
    """Its token log-probs under the base model (the KL's reference); set by the update."""


def training_samples(root: Node) -> dict[str, list[TrainingSample]]:
    """Per agent, every completion of every expanded node with its advantage and weight."""
    out: dict[str, list[TrainingSample]] = {}
    for node in iter_nodes(root):
        if not node.children:
            continue
        for agent, completions in node.completions.items():
            for g, completion in enumerate(completions):
                advs = [c.advantage for c in node.children if c.joint.get(agent) == g]
                if advs:
                    out.setdefault(agent, []).append(
                        TrainingSample(completion, sum(advs) / len(advs), len(advs), node.turn + 1))
    return out


def tree_stats(roots: Sequence[Node]) -> dict[str, Any]:
    """Counters of a batch of trees: nodes expanded, joint actions evaluated, branches
    terminated by the threshold, the first turn's rewards (mean and 95% interval) and share
    solved, the completions and completion tokens sampled with the prompt tokens they read
    (each completion's prompt: the cost columns count them), and the joint answers the sandbox could not judge
    (timeout, killed, crashed) or the env failed to judge at all (``unjudged``)."""
    expanded = evaluated = terminated = solved_first = first = tokens = not_judged = unjudged = 0
    sampled = prompt_tokens = 0
    rewards: list[float] = []
    for root in roots:
        for node in iter_nodes(root):
            if node is not root:
                evaluated += 1
                status = node.info.get("status")
                not_judged += status in SANDBOX_FAILURES
                unjudged += status == "unjudged"
            if node.children:
                expanded += 1
            terminated += node.terminated_early
            tokens += sum(len(c.token_ids) for group in node.completions.values() for c in group)
            prompt_tokens += sum(len(c.prompt_ids) for group in node.completions.values() for c in group)
            sampled += sum(len(group) for group in node.completions.values())
        for child in root.children:
            first += 1
            rewards.append(child.reward)
            solved_first += bool(child.info.get("success"))
    stat = mean_interval(rewards)
    return {"nodes_expanded": expanded, "joint_actions": evaluated, "branches_terminated": terminated,
            "first_turn_reward_mean": stat["mean"], "first_turn_reward_low": stat["low"],
            "first_turn_reward_high": stat["high"],
            "first_turn_pass_rate": solved_first / first if first else None, "tokens_sampled": tokens,
            "completions_sampled": sampled, "tokens_prompt": prompt_tokens,
            "sandbox_failures": not_judged, "unjudged": unjudged}


def judge(env: Any, node: Node, joint: dict[str, int], answers: dict[str, str], first: str) -> Node:
    """The child of ``node`` (whose saved episode ``env`` was restored to) for one joint answer.
    An answer the sandbox could not judge (a timeout, a killed or crashed run) gets what the
    env gives it (no test passed) and keeps the sandbox's status and message as the reason; an
    env that raises gives reward 0, ends the branch, and its error is the reason: the training
    step never crashes on an answer."""
    try:
        _obs, rewards, terms, truncs, infos = env.step(answers)
    except Exception as error:  # noqa: BLE001 - the judge's failure is recorded, not raised
        logger.warning("the env could not judge a joint answer (%s: %s); reward 0", type(error).__name__, error)
        info = {"status": "unjudged", "reason": f"{type(error).__name__}: {error}"[:300]}
        return Node(turn=node.turn + 1, joint=joint, reward=0.0, done=True, state=node.state, info=info,
                    outcome={"observations": {}, "rewards": dict.fromkeys(joint, 0.0),
                             "terminations": dict.fromkeys(joint, True), "truncations": dict.fromkeys(joint, False),
                             "infos": {a: dict(info) for a in joint}})
    info = infos[first]
    kept = {k: info[k] for k in ("success", "score", "pass_rate", "status") if k in info}
    report = info.get("report") or {}
    if kept.get("status") not in (None, "ok"):
        reason = " ".join(str(x) for x in (report.get("error_type"), report.get("message")) if x)
        kept["reason"] = (reason or str(kept["status"]))[:300]
    return Node(turn=node.turn + 1, joint=joint, reward=float(rewards[first]),
                done=bool(terms[first] or truncs[first]), state=env.save_episode(), info=kept,
                outcome={"observations": dict(_obs), "rewards": {a: float(r) for a, r in rewards.items()},
                         "terminations": {a: bool(v) for a, v in terms.items()},
                         "truncations": {a: bool(v) for a, v in truncs.items()},
                         "infos": {a: dict(i) for a, i in infos.items()}})


def first_path(root: Node, agents: Sequence[str], episode: int, seed: int) -> Trajectory:
    """The episode a tree played: from the root, every agent's first completion at each turn
    (joint action 0, the first child), as the trajectory of ``episode`` (env seed ``seed``).
    A path the tree did not grow to the episode's end (a sibling set past the threshold,
    ``learning.num_turns``) ends truncated."""
    traj = Trajectory(episode=episode, seed=seed, env_id="", protocol="", agents=list(agents))
    node = root
    while node.children:
        child = node.children[0]
        out = child.outcome
        decisions = {}
        for agent, g in child.joint.items():
            c = node.completions[agent][g]
            decisions[agent] = Decision(c.answer, thought=c.thought, raw=c.text, valid=c.valid)
        cut = not child.children and not child.done  # the threshold or learning.num_turns
        stopped = cut and node.terminated_early
        success = any(bool(i.get("success")) for i in out["infos"].values())
        truncations = {a: v or cut for a, v in out["truncations"].items()}
        traj.steps.append(Step(
            t=node.turn, observations=dict(node.observations), messages=[], decisions=decisions,
            rewards=dict(out["rewards"]), terminated=any(out["terminations"].values()),
            truncated=any(truncations.values()),
            info={"success": success, **({"terminated_early": True} if stopped else {})},
            infos={a: dict(i) for a, i in out["infos"].items()}, terminations=dict(out["terminations"]),
            truncations=truncations))
        traj.success = traj.success or success
        traj.final_observations = dict(out["observations"])
        node = child
    return traj


def drop_caches(node: Node) -> None:
    """Let go of the KV caches ``node``'s completions kept (``memoryful``)."""
    for group in node.completions.values():
        for c in group:
            c.past = None


def grouped_order(items: list[TrainingSample], rng: random.Random) -> list[int]:
    """A shuffled order of ``items`` that keeps completions of one prompt (a node's G samples
    of an agent) next to each other, so a minibatch runs each shared prompt once."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(items):
        groups.setdefault(tuple(s.completion.prompt_ids), []).append(i)
    blocks = list(groups.values())
    rng.shuffle(blocks)
    return [i for block in blocks for i in block]


def tree_lines(roots: Sequence[Node], seeds: Sequence[int]) -> list[str]:
    """The JSON lines of ``trees/<iteration>.jsonl``: one per joint action (tree, seed, turn,
    joint, reward, return, advantage, done, the judge's info and each agent's answer)."""
    lines = []
    for t, (root, seed) in enumerate(zip(roots, seeds, strict=True)):
        parents = {id(c): n for n in iter_nodes(root) for c in n.children}
        for node in iter_nodes(root):
            if node is root:
                continue
            parent = parents[id(node)]
            lines.append(json.dumps({
                "tree": t, "seed": seed, "turn": node.turn, "joint": node.joint, "reward": node.reward,
                "return": node.ret, "advantage": node.advantage, "done": node.done,
                "terminated_early": node.terminated_early, **node.info,
                "answers": {a: parent.completions[a][g].answer for a, g in node.joint.items()},
            }))
    return lines


def write_trees(run_dir: str | Path, iteration: int, roots: Sequence[Node], seeds: Sequence[int]) -> None:
    """``trees/<iteration>.jsonl`` of the run directory: one line per joint action (`tree_lines`)."""
    atomic_write_text(Path(run_dir) / "trees" / f"{iteration}.jsonl", "\n".join(tree_lines(roots, seeds)) + "\n")
