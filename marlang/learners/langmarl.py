"""LangMARL: language-policy training with a centralized critic that assigns credit per agent.

Each iteration: a critic reads every trajectory and writes each agent's credit; a gradient
call per (agent, trajectory) turns that agent's own credit and steps into an update
direction; an aggregator merges an agent's K directions; an optimizer rewrites its policy
text. The calls and their fan-out live in ``marlang/graphs/langmarl.py``; this module
holds the options, the prompts and the parsing of the critic's reply.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any, ClassVar, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import Field

from marlang.config import ModelConfig
from marlang.learners.base import Candidate, Learner, LearnerOptions, PolicyState, register_learner
from marlang.types import Trajectory

TEAM = "team"
"""The key of the one team critique under ``learning.credit: global``."""


class LangMARLOptions(LearnerOptions):
    credit: Literal["agent", "global"] = Field(
        "agent", description="agent: per-agent credit; global: one team critique for all (the ablation)."
    )
    accept: Literal["always", "improved"] = Field(
        "always", description="improved: keep new policies only if eval_rollouts fresh episodes do not lose return."
    )
    eval_rollouts: int = Field(3, ge=1, description="Episodes the candidate policies play when accept is improved.")
    review: bool = Field(False, description="Pause before each update for `marlang review RUN_DIR`.")
    model: ModelConfig | None = Field(None, description="Model of critic, gradient, aggregator and optimizer.")
    critic_max_tokens: int = Field(384, ge=16)
    update_max_tokens: int = Field(192, ge=16, description="Budget of a gradient, aggregate or optimize reply.")
    trajectory_tokens: int = Field(1500, ge=100, description="Budget of the trajectory shown to the critic.")
    steps_tokens: int = Field(600, ge=50, description="Budget of an agent's own steps in its gradient prompt.")
    policy_max_words: int = Field(120, ge=10)


class LangMARLLearner(Learner):
    name: ClassVar[str] = "langmarl"
    options_model: ClassVar[type[LearnerOptions]] = LangMARLOptions
    uses_policies: ClassVar[bool] = True
    roles: ClassVar[tuple[str, ...]] = ("critic", "gradient", "aggregator", "optimizer")

    @classmethod
    def label(cls, options: Any) -> str:
        return "langmarl w/o credit" if options.credit == "global" else "langmarl"

    def add_update_nodes(self, builder: Any, source: str, target: str) -> None:
        from marlang.graphs.langmarl import add_langmarl_nodes

        add_langmarl_nodes(builder, self, source, target)

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        """One update outside a run (notebooks, tests): the same nodes, compiled alone."""
        from marlang.graphs.langmarl import run_update

        return await run_update(self, state, trajectories)

    # prompts -------------------------------------------------------------------------------
    def _system(self) -> SystemMessage:
        return SystemMessage(self.context.prompts.get("learner_system").render(
            n_agents=len(self.context.agents), world=self._world()))

    def _world(self) -> str:
        env = self.context.env
        if env is None:
            return "a shared environment"
        from marlang.envs_text.narration import world_description

        return world_description(env)

    def critic_messages(self, state: PolicyState, traj: Trajectory) -> list[BaseMessage]:
        options: Any = self.options
        prompts = self.context.prompts
        agents = self.context.agents
        if options.credit == "global":
            instruction = prompts.get("critic_instruction_global").render()
        else:
            instruction = prompts.get("critic_instruction_agent").render(agent_keys=", ".join(agents))
        mission = ""
        if traj.steps and traj.steps[0].observations:
            mission = next(iter(traj.steps[0].observations.values())).mission
        user = prompts.get("critic").render(
            mission=mission,
            policies="\n".join(f"{a}: {state.policies.get(a, '')}" for a in agents),
            trajectory=self.render_trajectory(traj),
            outcome=outcome_text(traj),
            instruction=instruction,
        )
        return [self._system(), HumanMessage(user)]

    def critic_retry_messages(self, first: list[BaseMessage], reply: str, missing: list[str]) -> list[BaseMessage]:
        text = self.context.prompts.get("critic_missing").render(
            missing=", ".join(missing), missing_keys=", ".join(missing))
        return [*first, AIMessage(reply), HumanMessage(text)]

    def gradient_messages(self, state: PolicyState, agent: str, traj: Trajectory, credit: str) -> list[BaseMessage]:
        user = self.context.prompts.get("gradient").render(
            agent=agent,
            instructions=self.context.instructions.get(agent, ""),
            policy=state.policies.get(agent, ""),
            steps=self.render_steps(traj, agent),
            credit=credit,
        )
        return [self._system(), HumanMessage(user)]

    def aggregate_messages(self, state: PolicyState, agent: str, gradients: list[str]) -> list[BaseMessage]:
        listed = "\n".join(f"{i + 1}. {g}" for i, g in enumerate(gradients))
        user = self.context.prompts.get("aggregate").render(
            agent=agent, policy=state.policies.get(agent, ""), gradients=listed)
        return [self._system(), HumanMessage(user)]

    def optimize_messages(self, state: PolicyState, agent: str, gradient: str) -> list[BaseMessage]:
        options: Any = self.options
        user = self.context.prompts.get("optimize").render(
            agent=agent,
            instructions=self.context.instructions.get(agent, ""),
            policy=state.policies.get(agent, ""),
            gradient=gradient,
            max_words=options.policy_max_words,
        )
        return [self._system(), HumanMessage(user)]

    def render_trajectory(self, traj: Trajectory) -> str:
        options: Any = self.options
        env = self.context.env
        if env is None:
            return "\n".join(f"step {s.t}: " + "; ".join(f"{a} did '{d.action}'" for a, d in s.decisions.items())
                             for s in traj.steps)
        from marlang.envs_text.narration import format_trajectory

        return format_trajectory(env, traj, max_tokens=options.trajectory_tokens)

    def render_steps(self, traj: Trajectory, agent: str) -> str:
        options: Any = self.options
        env = self.context.env
        if env is None:
            return "\n".join(f"step {s.t}: did '{s.decisions[agent].action}'" for s in traj.steps
                             if agent in s.decisions)
        from marlang.envs_text.narration import agent_trajectory

        return agent_trajectory(env, traj, agent, max_tokens=options.steps_tokens)


def outcome_text(traj: Trajectory) -> str:
    verdict = "the mission was accomplished" if traj.success else "the mission was not accomplished"
    return f"{verdict} after {traj.n_steps} steps; team return {traj.team_return:g}"


# parsing the critic ---------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_AGENT_INDEX = re.compile(r"agent[\s_\-]*(\d+)\b", re.IGNORECASE)


def _objects(text: str) -> list[Any]:
    """Candidate JSON objects in a reply: fenced blocks first, then every balanced ``{...}``."""
    found: list[Any] = []
    chunks = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for chunk in chunks:
        depth, start, in_str, esc = 0, -1, False, False
        for i, ch in enumerate(chunk):
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch == "{":
                if depth == 0:
                    start = i
                depth += 1
            elif ch == "}" and depth > 0:
                depth -= 1
                if depth == 0:
                    obj = _loads_lenient(chunk[start: i + 1])
                    if isinstance(obj, dict):
                        found.append(obj)
        if found:
            break
    return found


def _loads_lenient(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    relaxed = re.sub(r",\s*([}\]])", r"\1", text)  # trailing commas
    try:
        return json.loads(relaxed)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(relaxed)  # single-quoted Python-style dicts
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def match_agent(key: str, agents: list[str]) -> str | None:
    """The agent a critic's key names (``agent_0``, ``Agent 0``, ``Credit for agent_0``)."""
    if key in agents:
        return key
    norm = re.sub(r"[^a-z0-9]", "", key.lower())
    for a in agents:
        if norm == re.sub(r"[^a-z0-9]", "", a.lower()):
            return a
    hits = {f"agent_{m}" for m in _AGENT_INDEX.findall(key)}
    hits &= set(agents)
    return hits.pop() if len(hits) == 1 else None


def _credit_text(value: Any) -> tuple[str, float | None]:
    if isinstance(value, str):
        return value.strip(), None
    if isinstance(value, dict):
        score = value.get("score")
        score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None
        for k in ("credit", "feedback", "critique", "assessment", "text", "contribution"):
            if isinstance(value.get(k), str) and value[k].strip():
                return value[k].strip(), score
        rest = {k: v for k, v in value.items() if k != "score"}
        return (json.dumps(rest) if rest else ""), score
    if isinstance(value, list):
        return " ".join(str(v) for v in value).strip(), None
    if value is None:
        return "", None
    return str(value).strip(), None


def parse_credits(reply: str, agents: list[str]) -> dict[str, dict[str, Any]]:
    """Per-agent credit from a critic's reply: ``{agent: {"feedback", "score"}}`` for the
    agents it covers. Lenient: a fenced or bare JSON object (the first that parses), keys
    naming agents loosely; with no JSON, lines that start with an agent's name. An agent
    never receives text the critic addressed to another agent, nor the whole reply."""
    out: dict[str, dict[str, Any]] = {}
    for obj in _objects(reply):
        for key, value in obj.items():
            agent = match_agent(str(key), agents)
            if agent is None or agent in out:
                continue
            text, score = _credit_text(value)
            if text:
                out[agent] = {"feedback": text, "score": score}
        if out:
            return out
    # No usable JSON: "agent_0: ..." paragraphs, each up to the next agent's line.
    current: str | None = None
    pieces: dict[str, list[str]] = {}
    for line in reply.splitlines():
        head, sep, rest = line.partition(":")
        agent = match_agent(head.strip(" -*#[]"), agents) if sep and len(head) < 60 else None
        if agent is not None:
            current = agent
            pieces.setdefault(agent, []).append(rest.strip())
        elif current is not None and line.strip():
            pieces[current].append(line.strip())
    for agent, parts in pieces.items():
        text = " ".join(p for p in parts if p).strip()
        if text:
            out[agent] = {"feedback": text, "score": None}
    return out


def clean_policy(reply: str) -> str:
    """The policy text of an optimizer reply, without labels, fences or quotes."""
    text = reply.strip()
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    text = re.sub(r"^\W*(updated|improved|new)?\s*policy( for [\w ]+)?\s*[:\-]\s*", "", text, flags=re.IGNORECASE)
    return text.strip().strip('"').strip()


register_learner("langmarl", LangMARLLearner,
                 "centralized language critic, per-agent credit, language gradients, policy rewrites")
