"""The whole experiment config: its sections, the cross-section checks and what the run
derives from them (iterations, the team's slots, labels)."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import Field, model_validator

from marlang.config.graph import GraphSpec, TaskSpec
from marlang.config.sections import (
    AgentsConfig,
    EnvConfig,
    LearningConfig,
    ModelConfig,
    ProtocolConfig,
    RunConfig,
    SandboxConfig,
    _Section,
    trains_weights,
)
from marlang.config.team import Slot, SlotConfig, check_team, resolve_slot, team_label
from marlang.registry import CONFIG_CHECKS, EntryPointError

GRAPH_METHODS = ("none", "reflexion", "langmarl", "grpo", "magrpo")
"""The ``learning.method`` values a run of a user's graph (``graph:``) takes."""

_NOT_FOR_A_GRAPH = ("env", "protocol", "agents", "team", "sandbox")
"""Sections of a run of marlang's own team that a run of a user's graph has no use for."""


class ExperimentConfig(_Section):
    """A whole experiment: env, model, protocol, agents, learning, run, sandbox; or, for a
    user's own LangGraph graph, graph and task in place of env, protocol, agents and team."""

    env: EnvConfig = Field(default_factory=EnvConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    protocol: ProtocolConfig = Field(default_factory=ProtocolConfig)
    agents: AgentsConfig = Field(default_factory=AgentsConfig)
    learning: LearningConfig = Field(default_factory=LearningConfig)
    run: RunConfig = Field(default_factory=RunConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="Settings `marlang compare` runs when no --grid is given, e.g. {protocol: [none, alternating-2]}.",
    )
    graph: GraphSpec | None = Field(
        None, description="A user's own LangGraph graph to play (and train) in place of env, protocol and agents: "
        "{build: my_app:build_graph, input: question, output: answer}.",
    )
    task: TaskSpec | None = Field(
        None, description="What a graph plays on: {data: my_app:problems, reward: my_app:score}.",
    )
    team: dict[str, SlotConfig] = Field(
        default_factory=dict,
        description="Per agent slot (agent_0, ...): what plays it, e.g. {agent_1: {kind: scripted}, agent_0: "
        "{model: {spec: openai:gpt-4o-mini}, role: 'You lead.', learn: false}}; slots not named take the "
        "top-level model and agents settings.",
    )

    @model_validator(mode="after")
    def _cross_checks(self) -> ExperimentConfig:
        if self.graph is not None or self.task is not None:
            self._graph_checks()
        else:
            self._team_checks()
        options = self.learning.options
        if "seed" in type(options).model_fields and "seed" not in options.model_fields_set:
            options.seed = self.run.seed  # a learner's own draws follow the run seed unless given
        fixed = self.fixed_iterations
        if fixed is not None:
            # The iterations decide the run's length: run.episodes follows them.
            total = fixed * self.rollouts_per_iteration
            if self.run.episodes != total:
                self.run.episodes = total
        return self

    def _team_checks(self) -> None:
        """A run of marlang's own team: the protocol's speakers, the registered config checks,
        the agents' policies and slots, and the levels it may train on."""
        names = [f"agent_{i}" for i in range(self.env.n_agents)]
        if self.protocol.name == "unidirectional":
            bad = [s for s in self.protocol.speakers if s not in names]
            if bad:
                raise ValueError(
                    f"protocol.speakers: unknown agent {bad[0]!r}; valid choices: {', '.join(names)}"
                )
        for name in CONFIG_CHECKS:  # e.g. neural agents <-> a neural learning.method
            try:
                check = CONFIG_CHECKS.load(name)
            except EntryPointError as err:
                raise ValueError(f"config check {name!r}: {err}") from None
            check(self)
        unknown = [a for a in self.agents.policies if a not in names]
        if unknown:
            raise ValueError(f"agents.policies: unknown agent {unknown[0]!r}; valid choices: {', '.join(names)}")
        check_team(self, names)
        if self.run.levels == "held_out" and self.learning.method != "none" and not self.plays_back \
                and not self.all_scripted:
            raise ValueError(f"run.levels 'held_out' plays the held-out levels, which no learner may train on; "
                             f"learning.method {self.learning.method!r} would (use learning.method: none, or "
                             "run.levels: train)")

    def _graph_checks(self) -> None:
        """A run of a user's graph: graph and task together, none of the sections of marlang's own
        team, and a method that trains a graph (``none`` when unset: play and record)."""
        if self.graph is None:
            raise ValueError("task: a task is played by a graph; give graph: {build: my_app:build_graph, "
                             "input: KEY, output: KEY} too")
        if self.task is None:
            raise ValueError("graph: give task: {data: my_app:inputs, reward: my_app:score} too (what the graph "
                             "plays on and how an answer is scored)")
        extra = [name for name in _NOT_FOR_A_GRAPH if name in self.model_fields_set]
        if extra:
            raise ValueError(f"{extra[0]}: a run of a graph plays graph.build over task.data; the {extra[0]} "
                             "section is for marlang's own teams (remove it)")
        if "method" not in self.learning.model_fields_set:
            self.learning.method = "none"
        if self.learning.method not in GRAPH_METHODS:
            raise ValueError(f"learning.method {self.learning.method!r} does not train a graph; valid choices "
                             f"for a graph: {', '.join(GRAPH_METHODS)}")
        if self.run.levels == "held_out":
            raise ValueError("run.levels 'held_out' plays an env's held-out levels; a graph plays task.data "
                             "(use run.levels: train)")

    @property
    def plays_graph(self) -> bool:
        """Whether the run plays a user's own graph (``graph:``) rather than a marlang env."""
        return self.graph is not None

    @property
    def played(self) -> str:
        """What the run plays, as tables and manifests name it: ``env.id``, or ``graph:`` and the
        graph's builder."""
        return self.graph.played if self.graph is not None else self.env.id

    @property
    def plays_back(self) -> bool:
        """Whether the run plays a trained team back rather than training: ``model.adapters``
        with the weight-space ``learning.method`` that trained it (``marlang run CONFIG --set
        model.adapters=RUN``). Such a run acts greedily for ``run.episodes``; the method's own
        keys (``learning.iterations``, ``learning.rollouts``, ...) stay in the config, unused."""
        return bool(self.model.adapters) and trains_weights(self.learning.method)

    @property
    def learning_label(self) -> str:
        """The learner's name in tables: a play-back is named after the method that trained
        the team (``ppo (played back)``), not like an untrained run."""
        return f"{self.learning.method} (played back)" if self.plays_back else self.learning.label

    @property
    def scripted_label(self) -> str:
        """The scripted team's name in tables: ``scripted``, or ``scripted, N steps`` under a
        step cap."""
        return "scripted" if self.env.max_steps is None else f"scripted, {self.env.max_steps} steps"

    @property
    def fixed_iterations(self) -> int | None:
        """``learning.iterations`` where it decides the run's length (None: unset, or a play-back)."""
        return None if self.plays_back else self.learning.iterations

    @property
    def iterations_set(self) -> bool:
        """Whether ``learning.iterations`` decides the run's length (not in a play-back)."""
        return self.fixed_iterations is not None

    @property
    def rollouts_per_iteration(self) -> int:
        """K: ``learning.rollouts``, or ``run.parallel`` when unset (or played back)."""
        if self.plays_back:
            return self.run.parallel
        return self.learning.rollouts or self.run.parallel

    @property
    def total_iterations(self) -> int:
        """``learning.iterations``, or ``run.episodes`` / K rounded up."""
        fixed = self.fixed_iterations
        if fixed is not None:
            return fixed
        return -(-self.run.episodes // self.rollouts_per_iteration)

    def agent_names(self) -> list[str]:
        return [f"agent_{i}" for i in range(self.env.n_agents)]

    # the team, slot by slot ------------------------------------------------------------
    def slot(self, agent: str) -> Slot:
        """``agent``'s slot: the top-level ``model``/``agents`` settings with its ``team:`` entry on top."""
        return resolve_slot(self, agent)

    def slots(self) -> dict[str, Slot]:
        """Every agent's slot, in agent order."""
        return {a: self.slot(a) for a in self.agent_names()}

    @property
    def all_scripted(self) -> bool:
        """Whether every slot is the env's scripted agent (a scripted reference team)."""
        return all(s.kind == "scripted" for s in self.slots().values())

    @property
    def team_label(self) -> str:
        """How the slots differ from the top-level settings, for row labels (see `team_label`)."""
        return team_label(self)

    def learning_slots(self) -> list[str]:
        """The LLM slots a learner updates (``learn`` not false)."""
        return [a for a, s in self.slots().items() if s.kind == "llm" and s.learn]

    def to_yaml(self) -> str:
        """The config as YAML, every key spelled out; a run of a graph leaves out the sections of
        marlang's own team (which it refuses), a run of a team the empty graph and task."""
        unused = set(_NOT_FOR_A_GRAPH) if self.plays_graph else {"graph", "task"}
        return yaml.safe_dump(self.model_dump(mode="json", exclude=unused), sort_keys=False)
