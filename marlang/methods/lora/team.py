"""One base causal LM with one LoRA adapter per agent (or one shared adapter) and small value
heads: per-agent training without PEFT's frozen-adapter trap, mixed-agent eval batches, atomic
save/load in PEFT's format, and content hashes of adapter weights for cache keys.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.tuners.tuners_utils import BaseTunerLayer
from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict
from safetensors.torch import load_file, save_file
from transformers import PreTrainedModel

from marlang.methods.lora.files import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    FORMAT_VERSION,
    MANIFEST,
    VALUE_HEAD,
    files_sha256,
    fsync_path,
    normalize_adapter_config,
    replace_dir,
    saved_units,
    tensors_sha256,
)
from marlang.methods.lora.options import (
    LoraOptions,
    ValueHeadOptions,
    build_value_head,
    check_lora_targets,
    lora_shape,
    model_layer_count,
)
from marlang.methods.lora.recompute import checkpoint_lora_inputs, note_activations, recomputed_activations

logger = logging.getLogger(__name__)

Sharing = Literal["per_agent", "shared"]

SHARED = "shared"  # the adapter (and value head) every agent uses when sharing is "shared"
CENTRAL = "central"  # the central value head, reading every agent's hidden state
BASE = "__base__"  # PEFT's name for "no adapter" in a mixed batch's adapter_names

# Names that mean something else to marlang or PEFT ("default" is where PEFT's save_pretrained
# writes into the root directory instead of a sub-directory).
_RESERVED = {SHARED, CENTRAL, BASE, "default"}
# Agent names become adapter names, ModuleDict keys (no dots) and directory names.
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


class TeamAdapters:
    """A base causal LM wrapped in a ``PeftModel`` with one LoRA adapter per agent (adapter
    named after the agent) or one adapter ``shared`` by all, plus optional value heads.

    The base model is modified in place (PEFT injects its LoRA layers) and its weights stay
    frozen. Train one agent at a time inside ``training(agent)``; roll out several agents in
    one eval-mode forward with ``model(..., adapter_names=team.adapter_names(row_agents))``.
    """

    def __init__(
        self,
        base: PreTrainedModel,
        agents: Sequence[str],
        *,
        base_id: str,
        sharing: Sharing = "per_agent",
        lora: LoraOptions | None = None,
        value_head: ValueHeadOptions | None = None,
        dtype: torch.dtype | None = None,
        device: str | torch.device | None = None,
        seed: int | None = None,
    ) -> None:
        """``base_id`` identifies the base weights (saved with the adapters and checked on load);
        ``dtype``/``device`` move the base model (None: keep its own); LoRA weights and value
        heads are float32 even on a bf16 base. ``seed`` makes the initial LoRA and value-head
        weights reproducible without touching the global random generator.
        """
        agents = list(agents)
        self._check_agents(agents)
        if sharing not in ("per_agent", "shared"):
            raise ValueError(f"sharing must be 'per_agent' or 'shared'; got {sharing!r}")
        if not base_id:
            raise ValueError("base_id must identify the base model's weights, e.g. 'local:smollm2'")
        self.agents: tuple[str, ...] = tuple(agents)
        self.sharing: Sharing = sharing
        self.base_id = base_id
        self.lora = lora if lora is not None else LoraOptions()
        self.value_head_options = value_head
        self.adapters: tuple[str, ...] = (SHARED,) if sharing == "shared" else self.agents

        check_lora_targets(base, self.lora.targets)
        if dtype is not None or device is not None:
            base.to(device=device, dtype=dtype)  # type: ignore[call-arg]  # transformers types .to as an unbound wrapper
        config = base.config.get_text_config() if hasattr(base.config, "get_text_config") else None
        self.hidden_size: int = int((config or base.config).hidden_size)
        # attention heads and key/value heads: backward keeps grouped keys and values once per group
        text = config or base.config
        self._heads = (int(getattr(text, "num_attention_heads", 0) or 0),
                       int(getattr(text, "num_key_value_heads", 0) or 0))

        rng = torch.random.fork_rng(devices=[]) if seed is not None else contextlib.nullcontext()
        with rng:
            if seed is not None:
                torch.manual_seed(seed)
            first, *rest = self.adapters
            # autocast_adapter_dtype (PEFT's default) keeps LoRA weights fp32 on a bf16 base.
            with warnings.catch_warnings():
                # PEFT reads transformers' deprecated is_gradient_checkpointing alias (a
                # FutureWarning on every run that marlang cannot act on); nothing else is hidden
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*",
                                        category=FutureWarning)
                self.model: PeftModel = get_peft_model(base, self._lora_config(base), adapter_name=first)
            for name in rest:
                self.model.add_adapter(name, self._lora_config(base))
            self.value_heads = self._build_value_heads()
        # Backward keeps less of the frozen base's forward (see `recompute`): same numbers.
        checkpoint_lora_inputs(self.model)
        note_activations(self.model)
        self.value_heads.to(device=base.device)
        # PeftModel starts in train mode around an eval-mode base; follow the base's mode.
        self.model.train(base.training)
        self.value_heads.train(base.training)

        self._lora_params: dict[str, list[torch.nn.Parameter]] = {
            name: self._collect_lora_params(name) for name in self.adapters
        }
        # PEFT left only the first adapter trainable (add_adapter freezes the others): make
        # every adapter trainable until `training` narrows it to one.
        for params in self._lora_params.values():
            for param in params:
                param.requires_grad_(True)
        self.value_heads.requires_grad_(True)

    # ----------------------------------------------------------------- construction helpers

    @staticmethod
    def _check_agents(agents: list[str]) -> None:
        if not agents:
            raise ValueError("TeamAdapters needs at least one agent name")
        if len(set(agents)) != len(agents):
            raise ValueError(f"agent names must be unique; got {agents}")
        for agent in agents:
            if not isinstance(agent, str) or not _NAME.match(agent):
                raise ValueError(
                    f"agent name {agent!r} cannot name an adapter: use letters, digits, _ and - "
                    "(e.g. agent_0)"
                )
            if agent in _RESERVED:
                raise ValueError(
                    f"agent name {agent!r} is reserved ({', '.join(sorted(_RESERVED))}); "
                    "rename the agent"
                )

    def _lora_config(self, base: Any) -> LoraConfig:
        layers = None
        if self.lora.layers is not None:
            total = model_layer_count(base)
            if self.lora.layers > total:
                raise ValueError(
                    f"lora.layers is {self.lora.layers} but the model has {total} layers; set "
                    f"lora.layers to at most {total} (or null for all)"
                )
            layers = list(range(total - self.lora.layers, total))
        return LoraConfig(
            r=self.lora.r,
            lora_alpha=self.lora.alpha,
            lora_dropout=self.lora.dropout,
            target_modules=list(self.lora.targets),
            layers_to_transform=layers,
            bias="none",
            task_type="CAUSAL_LM",
        )

    def _build_value_heads(self) -> torch.nn.ModuleDict:
        heads = torch.nn.ModuleDict()
        options = self.value_head_options
        if options is None:
            return heads
        width = options.width or self.hidden_size
        if options.per_agent:
            for name in self.adapters:
                heads[name] = build_value_head(self.hidden_size, width, options.activation)
        if options.central:
            in_features = self.hidden_size * len(self.agents)
            heads[CENTRAL] = build_value_head(in_features, width, options.activation)
        return heads

    def _collect_lora_params(self, adapter: str) -> list[torch.nn.Parameter]:
        params: list[torch.nn.Parameter] = []
        for module in self.model.modules():
            if isinstance(module, BaseTunerLayer):
                for layer_name in module.adapter_layer_names:
                    layers = getattr(module, layer_name)
                    if adapter in layers:
                        params.extend(layers[adapter].parameters())
        if not params:
            raise RuntimeError(f"PEFT created no LoRA parameters for adapter {adapter!r}")
        return params

    # ------------------------------------------------------------------------ agents → adapters

    def adapter_for(self, agent: str) -> str:
        """The adapter name ``agent`` uses (the agent's own name, or ``shared``)."""
        if agent not in self.agents:
            raise ValueError(f"unknown agent {agent!r}; this team's agents: {list(self.agents)}")
        return SHARED if self.sharing == "shared" else agent

    def adapter_names(self, agents: Sequence[str | None]) -> list[str]:
        """PEFT's ``adapter_names`` for a mixed batch, one per row; None rows use the base model.

        PEFT accepts ``adapter_names`` only in eval mode (``team.model.eval()``).
        """
        return [BASE if agent is None else self.adapter_for(agent) for agent in agents]

    def _head_name(self, agent: str) -> str:
        if agent == CENTRAL:
            name = CENTRAL
        else:
            name = self.adapter_for(agent)
        if name not in self.value_heads:
            raise ValueError(
                f"this team has no value head for {agent!r}; heads: {list(self.value_heads)} "
                "(set value_head.per_agent or value_head.central)"
            )
        return name

    # ------------------------------------------------------------------------------- training

    def parameters_of(self, agent: str) -> list[torch.nn.Parameter]:
        """``agent``'s trainable parameters: its adapter's LoRA weights and its value head.

        ``parameters_of("central")`` is the central value head. In shared mode every agent
        gets the same (shared) parameters.
        """
        if agent == CENTRAL:
            return list(self.value_heads[self._head_name(CENTRAL)].parameters())
        return self._owned_params(self.adapter_for(agent))

    @contextlib.contextmanager
    def training(self, agent: str, *, train_mode: bool = True) -> Iterator[str]:
        """Activate ``agent``'s adapter for forward passes, with only its parameters trainable.

        Inside, ``agent``'s LoRA weights and value head have requires_grad=True and every other
        adapter's and per-agent head's False (the central head keeps its own flag); the base
        stays frozen. ``train_mode`` puts the model in train mode (LoRA dropout on). The active
        adapter, train/eval mode and requires_grad flags are restored on exit. Yields the
        adapter name.
        """
        adapter = self.adapter_for(agent)
        previous_adapter = self.model.active_adapter
        # Per module: restoring one top-level flag would switch every sub-module with it.
        modules = [*self.model.modules(), *self.value_heads.modules()]
        previous_modes = [(module, module.training) for module in modules]
        owned = [(name, p) for name in self.adapters for p in self._owned_params(name)]
        previous_flags = [p.requires_grad for _, p in owned]
        # PEFT's set_adapter also flips requires_grad (active on, others off); set the flags
        # explicitly anyway so correctness does not hinge on that PEFT behaviour.
        self.model.set_adapter(adapter)
        for name, param in owned:
            param.requires_grad_(name == adapter)
        self.model.train(train_mode)
        self.value_heads.train(train_mode)
        try:
            with recomputed_activations(*self._heads):
                yield adapter
        finally:
            self.model.set_adapter(previous_adapter)
            for (_, param), flag in zip(owned, previous_flags, strict=True):
                param.requires_grad_(flag)
            for module, mode in previous_modes:
                module.training = mode

    def _owned_params(self, adapter: str) -> list[torch.nn.Parameter]:
        head = list(self.value_heads[adapter].parameters()) if adapter in self.value_heads else []
        return [*self._lora_params[adapter], *head]

    def value(self, agent: str, hidden: torch.Tensor) -> torch.Tensor:
        """Value estimates ``[...]`` from hidden states ``[..., hidden]`` by ``agent``'s head.

        ``value("central", h)`` takes every agent's hidden state, ``[..., n_agents, hidden]``
        or already concatenated ``[..., n_agents * hidden]`` (agents in team order).
        """
        head = self.value_heads[self._head_name(agent)]
        per_agent_shape = (len(self.agents), self.hidden_size)
        if agent == CENTRAL and hidden.dim() >= 2 and tuple(hidden.shape[-2:]) == per_agent_shape:
            hidden = hidden.flatten(-2)
        weight = next(head.parameters())  # the first layer's weights: where the head lives
        return head(hidden.to(device=weight.device, dtype=weight.dtype)).squeeze(-1)

    # ------------------------------------------------------------------------- state and hashes

    def _adapter_state(self, adapter: str) -> dict[str, torch.Tensor]:
        # PEFT's keys without the adapter name, i.e. the keys of adapter_model.safetensors.
        return get_peft_model_state_dict(self.model, adapter_name=adapter)

    def _head_state(self, name: str) -> dict[str, torch.Tensor]:
        return {k: v.detach() for k, v in self.value_heads[name].state_dict().items()}

    def _unit_hashes(self) -> dict[str, str]:
        hashes = {}
        for adapter in self.adapters:
            tensors = {f"lora.{k}": v for k, v in self._adapter_state(adapter).items()}
            if adapter in self.value_heads:
                tensors |= {f"value_head.{k}": v for k, v in self._head_state(adapter).items()}
            hashes[adapter] = tensors_sha256(tensors)
        if CENTRAL in self.value_heads:
            hashes[CENTRAL] = tensors_sha256(self._head_state(CENTRAL))
        return hashes

    def _per_agent(self, by_unit: dict[str, str]) -> dict[str, str]:
        result = {
            agent: by_unit[self.adapter_for(agent)]
            for agent in self.agents
            if self.adapter_for(agent) in by_unit
        }
        if CENTRAL in by_unit:
            result[CENTRAL] = by_unit[CENTRAL]
        return result

    def adapter_hashes(self) -> dict[str, str]:
        """SHA-256 of each agent's current weights (its LoRA weights + value head), for cache keys.

        In shared mode every agent has the shared adapter's hash; the central head, if any,
        is under ``"central"``.
        """
        return self._per_agent(self._unit_hashes())

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Every trainable tensor: ``lora.<adapter>.<peft key>`` and ``value_head.<name>.<key>``."""
        state: dict[str, torch.Tensor] = {}
        for adapter in self.adapters:
            state |= {f"lora.{adapter}.{k}": v for k, v in self._adapter_state(adapter).items()}
        for name in self.value_heads:
            state |= {f"value_head.{name}.{k}": v for k, v in self._head_state(name).items()}
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load what ``state_dict`` returned (same agents, sharing, LoRA and head options)."""
        expected = self.state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        if missing or unexpected:
            raise ValueError(
                f"state does not match this team's adapters: missing {missing[:5]}, unexpected "
                f"{unexpected[:5]}; load a state saved with the same agents, sharing and options"
            )
        for key, tensor in state.items():
            if tuple(tensor.shape) != tuple(expected[key].shape):
                raise ValueError(
                    f"{key} has shape {tuple(tensor.shape)}, this team's "
                    f"{tuple(expected[key].shape)}; load a state saved with the same lora and "
                    "value_head options"
                )
        for adapter in self.adapters:
            prefix = f"lora.{adapter}."
            sub = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
            set_peft_model_state_dict(self.model, sub, adapter_name=adapter)
        for name, head in self.value_heads.items():
            prefix = f"value_head.{name}."
            sub = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
            head.load_state_dict(sub)

    # ------------------------------------------------------------------------------ save/load

    def _manifest(self, unit: str) -> dict[str, Any]:
        heads = self.value_head_options
        return {
            "format": FORMAT_VERSION,
            "kind": "central_value_head" if unit == CENTRAL else "adapter",
            "base_id": self.base_id,
            "agent": unit,
            "agents": list(self.agents) if unit in (SHARED, CENTRAL) else [unit],
            "sharing": self.sharing,
            "lora": self.lora.model_dump(),
            "value_head": heads.model_dump() if heads is not None else None,
            "hidden_size": self.hidden_size,
        }

    def _write_unit(self, unit: str, target: Path, scratch: Path) -> None:
        if unit == CENTRAL:
            target.mkdir()
        else:
            # save_pretrained writes README.md into its root and the adapter into <root>/<name>/;
            # move only the adapter's own files into the final layout.
            peft_root = scratch / unit
            self.model.save_pretrained(str(peft_root), selected_adapters=[unit])
            os.replace(peft_root / unit, target)
            normalize_adapter_config(target / ADAPTER_CONFIG, self.base_id.split("@", 1)[0])
        if unit in self.value_heads:
            save_file(
                {k: v.contiguous() for k, v in self._head_state(unit).items()},
                str(target / VALUE_HEAD),
                metadata={"format": "pt"},
            )
        (target / MANIFEST).write_text(json.dumps(self._manifest(unit), indent=2, sort_keys=True))
        for path in target.iterdir():
            fsync_path(path)
        fsync_path(target)

    def save(self, directory: str | Path, hashes: bool = True) -> dict[str, str]:
        """Write each adapter to ``directory/<adapter>/`` and return per-agent content hashes.

        Each sub-directory holds PEFT's ``adapter_config.json`` and ``adapter_model.safetensors``
        (loadable with ``PeftModel.from_pretrained``), ``value_head.safetensors`` if the team
        has value heads, and ``marlang_adapter.json`` (base id, agent, sharing, options); the
        central head goes to ``directory/central/``. Everything is first written and fsynced in
        a hidden staging directory inside ``directory`` and only then renamed into place, so an
        interrupted save leaves earlier saves untouched and no partial ``<adapter>`` directory.
        The hashes (SHA-256 over each directory's files, keyed by agent; all agents share one
        in shared mode) are the same for every save of the same weights; ``hashes=False``
        skips them and returns ``{}``.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        units = [*self.adapters, *([CENTRAL] if CENTRAL in self.value_heads else [])]
        staging = Path(tempfile.mkdtemp(prefix=".marlang-save-", suffix=".partial", dir=directory))
        try:
            scratch = staging / ".peft"
            for unit in units:
                self._write_unit(unit, staging / unit, scratch)
            by_unit = {unit: files_sha256(staging / unit) for unit in units} if hashes else {}
            for unit in units:
                replace_dir(staging / unit, directory / unit, trash=staging / f".old-{unit}")
            fsync_path(directory)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self._per_agent(by_unit) if hashes else {}

    def load(self, directory: str | Path, agents: Sequence[str] | None = None) -> dict[str, str]:
        """Load adapters and value heads written by ``save`` into this team, in place.

        ``agents=None`` loads every adapter of the team (and the central head if saved), and
        the directory must hold no other; otherwise only those agents' adapters (``"central"``
        for the central head). Existing parameters are overwritten in place, so optimizers
        holding them stay valid. Nothing is loaded unless every check passes. Returns the
        loaded files' hashes, as ``save`` does.
        """
        directory = Path(directory)
        saved = saved_units(directory)
        if not saved:
            raise ValueError(
                f"{directory} has no saved adapters (no {directory}/<agent>/{MANIFEST}); point "
                "load at a directory written by TeamAdapters.save"
            )
        manifests = {unit: json.loads((p / MANIFEST).read_text()) for unit, p in saved.items()}
        units = self._units_to_load(directory, saved, manifests, agents)
        for unit in units:  # a team trained on several base models saves them side by side
            if manifests[unit].get("base_id") != self.base_id:
                raise ValueError(
                    f"adapters in {directory} were trained on base model "
                    f"{manifests[unit].get('base_id')!r}, but this team's base is {self.base_id!r}; "
                    f"load them on base {manifests[unit].get('base_id')!r} or train new adapters"
                )

        plans: list[tuple[str, dict[str, torch.Tensor] | None, dict[str, torch.Tensor] | None]] = []
        for unit in units:
            path, manifest = saved[unit], manifests[unit]
            lora_state = None
            if unit != CENTRAL:
                saved_lora = LoraOptions.model_validate(manifest.get("lora", {}))
                if lora_shape(saved_lora) != lora_shape(self.lora):
                    raise ValueError(
                        f"adapter {unit!r} in {directory} has lora r={saved_lora.r} alpha="
                        f"{saved_lora.alpha} targets={saved_lora.targets}, this team r="
                        f"{self.lora.r} alpha={self.lora.alpha} targets={self.lora.targets}; set "
                        "lora.r, lora.alpha and lora.targets to the saved values"
                    )
                lora_state = load_file(str(path / ADAPTER_WEIGHTS))
                self._check_tensors(f"adapter {unit!r}", lora_state, self._adapter_state(unit))
            head_state = None
            if unit in self.value_heads:
                if (path / VALUE_HEAD).is_file():
                    head_state = load_file(str(path / VALUE_HEAD))
                    self._check_tensors(f"value head {unit!r}", head_state, self._head_state(unit))
                else:
                    logger.warning("%s has no value head; keeping %r's current head", path, unit)
            plans.append((unit, lora_state, head_state))

        for unit, lora_state, head_state in plans:
            if lora_state is not None:
                set_peft_model_state_dict(self.model, lora_state, adapter_name=unit)
            if head_state is not None:
                self.value_heads[unit].load_state_dict(head_state)
        return self._per_agent({unit: files_sha256(saved[unit]) for unit in units})

    def _units_to_load(
        self,
        directory: Path,
        saved: dict[str, Path],
        manifests: dict[str, dict[str, Any]],
        agents: Sequence[str] | None,
    ) -> list[str]:
        saved_sharing = {m.get("sharing") for u, m in manifests.items() if u != CENTRAL}
        if saved_sharing and saved_sharing != {self.sharing}:
            raise ValueError(
                f"adapters in {directory} were saved with sharing {sorted(map(str, saved_sharing))}, this "
                f"team uses {self.sharing!r}; set learning.sharing to the saved mode"
            )
        foreign = sorted(u for u in saved if u not in self.adapters and u != CENTRAL)
        if foreign and agents is None:
            raise ValueError(
                f"{directory} holds adapters for {foreign}, which this team does not have; its "
                f"agents are {list(self.agents)} (load with agents=[...] or rename the agents)"
            )
        if agents is None:
            wanted = list(self.adapters)
            if CENTRAL in saved and CENTRAL in self.value_heads:
                wanted.append(CENTRAL)
            elif CENTRAL in saved:
                logger.warning("%s has a central value head; this team has none", directory)
        else:
            wanted = []
            for agent in agents:
                unit = CENTRAL if agent == CENTRAL else self.adapter_for(agent)
                if unit == CENTRAL and CENTRAL not in self.value_heads:
                    raise ValueError(
                        "this team has no central value head; set value_head.central to load one"
                    )
                if unit not in wanted:
                    wanted.append(unit)
        missing = [u for u in wanted if u not in saved]
        if missing:
            raise ValueError(
                f"{directory} has no saved adapter for {missing} (it has {sorted(saved)}); "
                "load with agents=[...] naming the saved ones, or save them first"
            )
        return wanted

    @staticmethod
    def _check_tensors(
        what: str, loaded: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]
    ) -> None:
        if set(loaded) != set(expected):
            extra = sorted(set(loaded) - set(expected))[:3]
            lacking = sorted(set(expected) - set(loaded))[:3]
            raise ValueError(
                f"{what} does not fit this model (unexpected {extra}, missing {lacking}); save "
                "and load with the same base model and lora.targets"
            )
        for key, tensor in loaded.items():
            if tuple(tensor.shape) != tuple(expected[key].shape):
                raise ValueError(
                    f"{what}: {key} has shape {tuple(tensor.shape)}, this team's "
                    f"{tuple(expected[key].shape)}; use the saved lora.r / value_head.width"
                )


