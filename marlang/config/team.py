"""Teams slot by slot: the ``team:`` section's slots, resolved over the top-level ``model``
and ``agents`` sections, and the checks of a team against the env and the learner."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from marlang.config.sections import (
    AgentsConfig,
    ModelConfig,
    _Section,
    did_you_mean,
    trains_weights,
)

# The functions take the whole config (an `ExperimentConfig`, which holds ``team:`` and so
# imports this module): ``config`` is typed Any.

class SlotConfig(_Section):
    """One agent slot of ``team:``: what plays it. Keys left out take the top-level ``agents:``
    (and ``model:``) settings; ``model`` holds only the model keys this slot changes."""

    kind: Literal["llm", "scripted", "neural"] | None = Field(
        None, description="llm (a language model) | scripted (the env's reference agent) | neural (a trained "
        "neural policy: set checkpoint); None: agents.kind")
    checkpoint: str | None = Field(
        None, description="kind neural: the neural run (agents.kind: neural, on this env) whose greedy policy "
        "plays this slot: its directory (latest checkpoint) or one of its checkpoint_<frames>.pt files.")
    model: dict[str, Any] = Field(
        default_factory=dict, description="Model keys this slot changes (spec, base_url, temperature, ...); "
        "the others are the top-level model section's.")
    adapters: str | None = Field(
        None, description="Play this slot with trained adapters: a run directory or RUN_DIR/adapters/<iteration> "
        "(as model.adapters, for this slot only).")
    policy: str | None = Field(
        None, description="This slot's initial policy text; None: agents.policies / agents.policy.")
    memory: list[str] | None = Field(
        None, description="This slot's memory to start from (Reflexion's reflections, oldest first), e.g. a "
        "Reflexion run's, as marlang crossplay plays it; None: empty.")
    role: str | None = Field(
        None, description="Role instructions for this slot, shown in its prompts to speak and act; learners never "
        "rewrite them.")
    learn: bool = Field(True, description="false freezes the slot: it acts, talks and is credited, but no learner "
                        "updates its policy, memory or adapter.")
    chain_of_thought: bool | None = None
    action_selection: Literal["auto", "generate", "score"] | None = None
    calibration: Literal["none", "content_free"] | None = None
    reprompt: bool | None = None
    fallback_action: str | None = None
    history: int | None = Field(None, ge=0)


SLOT_AGENT_KEYS = ("chain_of_thought", "action_selection", "calibration", "reprompt", "fallback_action", "history")
"""The ``agents:`` keys a team slot may set for itself (besides ``kind`` and ``policy``)."""


class Slot(BaseModel):
    """One agent slot resolved: the top-level settings with the slot's own on top."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["llm", "scripted", "neural"]
    model: ModelConfig
    agents: AgentsConfig
    """The slot's agent settings (``kind`` and ``policy`` resolved)."""
    role: str | None = None
    learn: bool = True
    checkpoint: str | None = None
    """A neural slot's trained run (or checkpoint file)."""


def slot_player(slot: Slot, model_id: str | None = None) -> str:
    """What plays ``slot``, in a few words (manifest, tables): ``scripted``, its model spec
    (``model_id`` names the top-level model where given), ``+ adapters DIR``."""
    if slot.kind == "neural":
        return f"neural {slot.checkpoint}"
    if slot.kind != "llm":
        return slot.kind
    what = model_id or slot.model.spec
    return f"{what} + adapters {slot.model.adapters}" if slot.model.adapters else what


def resolve_slot(config: Any, agent: str) -> Slot:
    """``agent``'s slot: the top-level ``model``/``agents`` settings with its ``team:`` entry on top."""
    own = config.team.get(agent) or SlotConfig()
    kind = own.kind or config.agents.kind
    model = config.model
    if own.model or own.adapters:
        data = {**config.model.model_dump(), **own.model}
        if own.adapters:
            data["adapters"] = own.adapters
        model = ModelConfig.model_validate(data)
    changes: dict[str, Any] = {k: getattr(own, k) for k in SLOT_AGENT_KEYS if getattr(own, k) is not None}
    policy = own.policy if own.policy is not None else config.agents.policies.get(agent, config.agents.policy)
    agents = config.agents.model_copy(update={**changes, "kind": kind, "policy": policy})
    return Slot(name=agent, kind=kind, model=model, agents=agents, role=own.role, learn=own.learn,
                checkpoint=own.checkpoint)


def team_label(config: Any) -> str:
    """How the slots differ from the top-level settings, for row labels: ``agent_1:
    scripted``, ``agent_0: openai:gpt-4o-mini (frozen)``; empty for a uniform team."""
    parts = []
    for name, slot in config.slots().items() if config.team else ():
        differs = slot.kind != config.agents.kind or (slot.kind == "llm" and slot.model != config.model)
        notes = [note for note, on in (("frozen", slot.kind == "llm" and not slot.learn
                                        and config.learning.method != "none"), ("role", bool(slot.role))) if on]
        if differs or notes:
            what = [slot_player(slot)] if differs else []
            parts.append(f"{name}: " + " ".join(what + ([f"({', '.join(notes)})"] if notes else [])))
    return ", ".join(parts)


def check_team(config: Any, names: list[str]) -> None:
    """One-line errors for a ``team:`` section the env or the learner cannot play."""
    if not config.team:
        return
    unknown = [a for a in config.team if a not in names]
    if unknown:
        raise ValueError(f"team: unknown slot {unknown[0]!r}; env {config.env.id!r} with env.n_agents "
                         f"{config.env.n_agents} has {', '.join(names)}")
    if config.agents.kind == "neural":
        raise ValueError("team: agents.kind 'neural' trains the whole team; a trained neural policy plays a "
                         "slot of an LLM run (agents.kind: llm, team.<slot>: {kind: neural, checkpoint: RUN_DIR})")
    for agent, own in config.team.items():
        try:
            config.slot(agent)
        except ValidationError as err:
            first = err.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            if first["type"] == "extra_forbidden":
                fields = list(ModelConfig.model_fields)
                raise ValueError(f"unknown config key 'team.{agent}.model.{loc}'{did_you_mean(loc, fields)}; "
                                 f"valid keys here: {', '.join(fields)}") from None
            raise ValueError(f"invalid value for 'team.{agent}.model.{loc}': "
                             f"{first['msg'].removeprefix('Value error, ')}") from None
        if own.kind in ("scripted", "neural") and (own.model or own.adapters or own.policy is not None or own.role
                                                   or own.memory):
            what = "the env's reference agent" if own.kind == "scripted" else "its trained neural policy"
            raise ValueError(f"team.{agent}: a {own.kind} slot acts as {what} and has no model, adapters, policy, "
                             "memory or role (remove them, or use kind: llm)")
        if own.kind == "neural" and own.checkpoint is None:
            raise ValueError(f"team.{agent}: a neural slot plays the policy of a trained neural run: set "
                             f"team.{agent}.checkpoint to its directory")
        if own.kind != "neural" and own.checkpoint is not None:
            raise ValueError(f"team.{agent}: checkpoint names the neural run that plays a slot of kind: neural "
                             "(set kind: neural, or remove checkpoint)")
    slots = config.slots()
    llm = [a for a, s in slots.items() if s.kind == "llm"]
    neural = [a for a, s in slots.items() if s.kind == "neural"]
    if neural and not llm:
        raise ValueError(f"team.{neural[0]}: a team of neural and scripted slots has no LLM to run; a neural run "
                         "plays its whole team itself (agents.kind: neural), or give one slot kind: llm")
    if config.protocol.name == "unidirectional":
        silent = [a for a in config.protocol.speakers if a not in llm]
        if silent:
            raise ValueError(f"protocol.speakers: {silent[0]!r} is a {slots[silent[0]].kind} slot, which says "
                             f"nothing; speakers must be LLM slots: {', '.join(llm) or '(none)'}")
    method = config.learning.method
    if not llm or method == "none" or config.plays_back:
        return
    learning = config.learning_slots()
    if not learning:
        raise ValueError(f"learning.method {method!r} has no slot to update: every LLM slot has learn: false "
                         "(set learn: true on one, or use learning.method: none)")
    if trains_weights(method):
        served = [a for a in learning if not slots[a].model.spec.startswith(("local:", "hf:"))]
        if served:
            raise ValueError(f"team.{served[0]}: learning.method {method!r} trains local weights and its "
                             f"model.spec {slots[served[0]].model.spec!r} has none here (set learn: false "
                             "on it, or use local:smollm2 or hf:PATH)")
        # local weights are loaded once per spec: the slots on one spec share a base model
        bases = {a: slots[a].model.spec for a in learning}
        played = next((a for a, s in slots.items() if s.model.adapters and s.kind == "llm"
                       and s.model.spec in bases.values()), None)
        if played is not None:
            raise ValueError(f"team.{played}.adapters: learning.method {method!r} trains adapters on this model "
                             f"for {', '.join(learning)}; a slot played back with trained adapters must be on "
                             "another model (or unset its adapters)")
        other = next((a for a in learning if bases[a] != bases[learning[0]]), None)
        if other is None:
            return
        options = config.learning.options
        across = (("learning.sharing 'shared'", "shares one adapter between slots on one base model",
                   getattr(options, "sharing", None) == "shared", "learning.sharing: per_agent"),
                  ("learning.value 'central'", "reads every agent's state on one base model",
                   getattr(options, "value", None) == "central", "learning.value: agent"),
                  ("learning.rollout_server", "serves one base model's adapters",
                   getattr(options, "rollout_server", None) is not None, "no rollout_server"))
        for key, what, on, instead in across:
            if on:
                raise ValueError(f"{key} {what}, and the slots that learn are on several ({learning[0]} on "
                                 f"{bases[learning[0]]}, {other} on {bases[other]}); use {instead}, or put them "
                                 "on one model")
