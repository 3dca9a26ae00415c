"""The ``learning.*`` options of MAGRPO and GRPO, with the MAGRPO paper's names and defaults
where it has them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from marlang.config import slot_player
from marlang.methods.lora.options import AdapterOptions

TEXT_ENVS = ("code/", "math/", "qa/")
"""Env id prefixes whose agents answer in free text (MAGRPO's domain)."""


class MAGRPOOptions(AdapterOptions):
    """``learning.*`` keys of MAGRPO and GRPO (the MAGRPO paper's names and defaults where it has them)."""

    num_generations: int = Field(4, ge=2, description="G: completions each agent samples at every node.")
    joint_mode: Literal["align", "cross"] = Field(
        "align", description="align: the g-th completions of every agent form a joint action (G per node); "
        "cross: every combination (G^N per node).")
    num_turns: int | None = Field(
        None, ge=1, description="Tree depth in turns; None: the env's turns (env.max_steps).")
    termination_threshold: float | None = Field(
        None, description="A sibling set whose mean reward exceeds this is not expanded further "
        "(None: always expand until the episode ends).")
    advantage: Literal["mean", "group_std", "batch_std", "rloo"] = Field(
        "mean", description="mean: return minus the siblings' mean (the MAGRPO paper); group_std / batch_std: "
        "divided by the siblings' / the batch's std (TRL's scale_rewards); rloo: leave-one-out mean.")
    loss: Literal["reinforce", "grpo", "dr_grpo", "dapo"] = Field(
        "reinforce", description="reinforce: -(sum of token log-probs) x advantage, on-policy (the MAGRPO paper); "
        "grpo, dr_grpo, dapo: TRL's clipped-ratio losses (for epochs > 1).")
    epochs: int = Field(1, ge=1, description="Passes over an iteration's completions.")
    minibatch_size: int = Field(8, ge=1, description="Completions per gradient step.")
    micro_batch_size: int = Field(4, ge=1, description="Completions per forward pass.")
    clip_coef: float = Field(0.2, gt=0, description="Ratio clip of the ratio losses (low side, and high "
                             "unless clip_coef_high is set; TRL's epsilon).")
    clip_coef_high: float | None = Field(
        None, gt=0, description="High-side ratio clip (DAPO uses 0.28; TRL's epsilon_high).")
    beta: float = Field(0.0, ge=0, description="Weight of the KL to the base model (k3 estimate).")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient norm clip of each step.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling of completions.")
    top_k: int = Field(0, ge=0, description="Sample among the top_k most likely tokens only (0: no limit).")
    max_new_tokens: int = Field(256, ge=1, description="Longest completion, in tokens.")
    memory: Literal["env", "memoryful"] = Field(
        "env", description="env: each turn's prompt is the env's observation (env.kwargs.memory, full or last, "
        "says how much of earlier turns it shows); memoryful: each agent's conversation goes on, its next "
        "turn continuing the KV cache of its last prompt and reply (local engine only).")
    max_joint_actions: int = Field(
        64, ge=1, description="Refuse a cross tree with more joint actions per node than this.")
    rollout_server: str | None = Field(
        None, description="Base URL of an OpenAI-compatible server that serves LoRA adapters by name (vLLM "
        "--enable-lora), e.g. http://gpu-host:8000/v1: every rollout samples there, from the committed adapters "
        "loaded after each update; None: the local engine samples.")
    rollout_adapter_root: str | None = Field(
        None, description="The run directory as the rollout server sees it (a shared disk mounted elsewhere); "
        "None: the same path.")
    rollout_api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the rollout "
                                     "server's API key (unset: none sent).")


def check_config(config: Any, method: str) -> None:
    """One-line errors for settings MAGRPO/GRPO (``method``) cannot train, before anything is created."""
    options: MAGRPOOptions = config.learning.options
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
