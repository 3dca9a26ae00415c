"""LangMARL: language-policy training with a centralized critic that assigns credit per agent.

Each iteration: a critic reads every trajectory and writes each agent's credit; a gradient
call per (agent, trajectory) turns that agent's own credit and steps into an update
direction; an aggregator merges an agent's K directions; an optimizer rewrites its policy
text. The calls and their fan-out live in ``marlang/methods/langmarl/graph.py``; this module
holds the options, the prompts and the parsing of the critic's reply.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import Field

from marlang.config import ModelConfig
from marlang.learners.base import Candidate, Learner, LearnerOptions, PolicyState
from marlang.methods.langmarl.graph import build_langmarl_update, run_update
from marlang.methods.langmarl.parsing import TEAM, clean_policy, match_agent, parse_credits
from marlang.types import Trajectory

__all__ = ["TEAM", "LangMARLLearner", "LangMARLOptions", "clean_policy", "match_agent", "outcome_text",
           "parse_credits"]



class LangMARLOptions(LearnerOptions):
    credit: Literal["agent", "global"] = Field(
        "agent", description="agent: per-agent credit; global: one team critique for all (the ablation)."
    )
    model: ModelConfig | None = Field(None, description="Model of critic, gradient, aggregator and optimizer.")
    critic_max_tokens: int = Field(384, ge=16)
    update_max_tokens: int = Field(192, ge=16, description="Budget of a gradient, aggregate or optimize reply.")
    trajectory_tokens: int = Field(1500, ge=100, description="Budget of the trajectory shown to the critic.")
    steps_tokens: int = Field(600, ge=50, description="Budget of an agent's own steps in its gradient prompt.")
    policy_max_words: int = Field(120, ge=10)

    @property
    def learning_model(self) -> ModelConfig | None:
        return self.model


class LangMARLLearner(Learner):
    name: ClassVar[str] = "langmarl"
    options_model: ClassVar[type[LearnerOptions]] = LangMARLOptions
    uses_policies: ClassVar[bool] = True
    roles: ClassVar[tuple[str, ...]] = ("critic", "gradient", "aggregator", "optimizer")

    @classmethod
    def label(cls, options: Any) -> str:
        return "langmarl w/o credit" if options.credit == "global" else "langmarl"

    @classmethod
    def graph_learner(cls) -> type[Learner]:
        """A user's graph trains as a team does: its marked prompts are the agents' policies."""
        return cls

    def update_graph(self) -> Any:
        return build_langmarl_update(self)

    async def update(self, state: PolicyState, trajectories: list[Trajectory]) -> Candidate:
        """One update outside a run (notebooks, tests): the same subgraph, run alone."""

        return await run_update(self, state, trajectories)

    # prompts -------------------------------------------------------------------------------
    def _system(self) -> SystemMessage:
        return SystemMessage(self.context.prompts.get("learner_system").render(
            n_agents=len(self.context.agents), world=self._world()))

    def _world(self) -> str:
        env = self.context.env
        if env is None:
            return "a shared environment"
        from marlang.envs.core.narration import world_description

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
        from marlang.envs.core.narration import format_trajectory

        return format_trajectory(env, traj, max_tokens=options.trajectory_tokens)

    def render_steps(self, traj: Trajectory, agent: str) -> str:
        options: Any = self.options
        env = self.context.env
        if env is None:
            return "\n".join(f"step {s.t}: did '{s.decisions[agent].action}'" for s in traj.steps
                             if agent in s.decisions)
        from marlang.envs.core.narration import agent_trajectory

        return agent_trajectory(env, traj, agent, max_tokens=options.steps_tokens)


def outcome_text(traj: Trajectory) -> str:
    verdict = "the mission was accomplished" if traj.success else "the mission was not accomplished"
    return f"{verdict} after {traj.n_steps} steps; team return {traj.team_return:g}"

