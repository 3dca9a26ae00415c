"""TeamAdapters on a tiny random Llama: per-agent training (PEFT's frozen-adapter trap), mixed
eval batches, atomic save/load with stable hashes, error messages, and shared mode.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from marlang.methods.lora import team as adapters_module
from marlang.methods.lora.team import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    MANIFEST,
    VALUE_HEAD,
    LoraOptions,
    TeamAdapters,
    ValueHeadOptions,
    files_sha256,
)
from marlang.testing import TINY_MODEL_ID, tiny_llama

VOCAB = 64
LORA = LoraOptions(r=4, alpha=8, dropout=0.0)
SAVED_FILES = {ADAPTER_CONFIG, ADAPTER_WEIGHTS, VALUE_HEAD, MANIFEST}

# transformers 5 warns about a deprecated attribute PEFT reads; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def agent_names(n: int) -> list[str]:
    return [f"agent_{i}" for i in range(n)]


def make_team(
    agents: list[str],
    *,
    seed: int = 0,
    base_id: str = TINY_MODEL_ID,
    lora: LoraOptions = LORA,
    value_head: ValueHeadOptions | None = None,
    **kwargs,
) -> TeamAdapters:
    heads = value_head if value_head is not None else ValueHeadOptions(width=16)
    return TeamAdapters(
        tiny_llama(VOCAB, seed=0),
        agents,
        base_id=base_id,
        lora=lora,
        value_head=heads,
        seed=seed,
        **kwargs,
    )


def randomize_lora_b(team: TeamAdapters, seed: int = 1) -> None:
    """LoRA B starts at zero (adapters equal the base); give every adapter its own weights."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in team.model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)


def input_ids(rows: int = 2, length: int = 6, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (rows, length), generator=generator)


def snapshot(team: TeamAdapters) -> dict[str, torch.Tensor]:
    tensors = {f"model.{n}": p.detach().clone() for n, p in team.model.named_parameters()}
    tensors |= {f"head.{n}": p.detach().clone() for n, p in team.value_heads.named_parameters()}
    return tensors


def owner(name: str, team: TeamAdapters) -> str | None:
    """The adapter (or head) a snapshot entry belongs to; None for base weights."""
    if name.startswith("head."):
        return name.split(".")[1]
    for adapter in team.adapters:
        if f".{adapter}." in name:
            return adapter
    return None


def agent_loss(team: TeamAdapters, agent: str, ids: torch.Tensor) -> torch.Tensor:
    out = team.model(input_ids=ids, output_hidden_states=True)
    hidden = out.hidden_states[-1][:, -1]
    log_probs = out.logits[:, -1].log_softmax(-1)
    return -log_probs[:, 3].mean() + (team.value(agent, hidden) - 1.0).pow(2).mean()


def logits_for(team: TeamAdapters, agent: str | None, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        if agent is None:
            with team.model.disable_adapter():
                return team.model(input_ids=ids).logits
        with team.training(agent, train_mode=False):
            return team.model(input_ids=ids).logits


# --------------------------------------------------------------------------------- training


@pytest.mark.parametrize("n_agents", [2, 3])
def test_each_agent_step_moves_only_its_own_adapter(n_agents: int) -> None:
    agents = agent_names(n_agents)
    team = make_team(agents)
    optimizers = {a: torch.optim.AdamW(team.parameters_of(a), lr=1e-2) for a in agents}
    # each optimizer holds exactly its agent's parameters, disjoint from the others'
    ids_of = {a: {id(p) for g in optimizers[a].param_groups for p in g["params"]} for a in agents}
    for a in agents:
        assert ids_of[a] == {id(p) for p in team.parameters_of(a)}
        assert all(ids_of[a].isdisjoint(ids_of[b]) for b in agents if b != a)
    base_ids = {id(p) for n, p in team.model.named_parameters() if "lora_" not in n}
    assert all(ids_of[a].isdisjoint(base_ids) for a in agents)

    initial = snapshot(team)
    # back and forth: the second visit to an agent is where PEFT's set_adapter trap would bite
    schedule = [*agents, *reversed(agents), agents[0], agents[-1]]
    ids = input_ids()
    for step, agent in enumerate(schedule):
        before = snapshot(team)
        with team.training(agent) as adapter:
            assert adapter == agent
            assert all(p.requires_grad for p in team.parameters_of(agent))
            for other in agents:
                if other != agent:
                    assert not any(p.requires_grad for p in team.parameters_of(other))
            loss = agent_loss(team, agent, ids)
            loss.backward()
            optimizers[agent].step()
            optimizers[agent].zero_grad(set_to_none=True)
            for other in agents:
                if other != agent:
                    assert all(p.grad is None for p in team.parameters_of(other))
        after = snapshot(team)
        moved = {owner(n, team) for n in after if not torch.equal(after[n], before[n])}
        assert moved == {agent}, f"step {step} ({agent}) moved {moved}"

    final = snapshot(team)
    for name, tensor in final.items():
        if owner(name, team) is None:
            assert torch.equal(tensor, initial[name]), f"base weight {name} changed"
        else:  # every agent trained at least twice: every LoRA A, B and head tensor moved
            assert not torch.equal(tensor, initial[name]), f"{name} never trained"
    assert not any(p.requires_grad for n, p in team.model.named_parameters() if "lora_" not in n)


def test_raw_peft_freezes_added_adapters_but_team_does_not() -> None:
    # The trap TeamAdapters exists for: PEFT's add_adapter leaves the new adapter frozen.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}
        raw = get_peft_model(tiny_llama(VOCAB), LoraConfig(**config), adapter_name="agent_0")
        raw.add_adapter("agent_1", LoraConfig(**config))
    assert not any(p.requires_grad for n, p in raw.named_parameters() if ".agent_1." in n)

    team = make_team(agent_names(2))
    for agent in team.agents:  # outside `training`, every adapter is trainable
        assert all(p.requires_grad for p in team.parameters_of(agent))
    with team.training("agent_1"):
        assert team.model.active_adapter == "agent_1"
        assert team.model.training
    # restored afterwards
    assert team.model.active_adapter == "agent_0"
    assert not team.model.training
    assert all(p.requires_grad for a in team.agents for p in team.parameters_of(a))


# ------------------------------------------------------------------------------ mixed batches


def test_mixed_adapter_batch_equals_per_agent_forwards() -> None:
    agents = agent_names(3)
    team = make_team(agents)
    randomize_lora_b(team)
    team.model.eval()
    rows = ["agent_1", "agent_0", None, "agent_2", "agent_1"]
    ids = input_ids(rows=len(rows))
    names = team.adapter_names(rows)
    assert names == ["agent_1", "agent_0", "__base__", "agent_2", "agent_1"]
    with torch.no_grad():
        mixed = team.model(input_ids=ids, adapter_names=names).logits
    singles = [logits_for(team, agent, ids[i : i + 1])[0] for i, agent in enumerate(rows)]
    for i, single in enumerate(singles):
        torch.testing.assert_close(mixed[i], single, rtol=1e-5, atol=1e-5)
    # the adapters really differ, so the comparison above is not vacuous
    same_ids = ids[:1]
    per_agent = [logits_for(team, a, same_ids) for a in [*agents, None]]
    for i in range(len(per_agent)):
        for j in range(i + 1, len(per_agent)):
            assert not torch.allclose(per_agent[i], per_agent[j], atol=1e-3)


def test_adapter_names_rejects_unknown_agents() -> None:
    team = make_team(agent_names(2))
    with pytest.raises(ValueError, match=r"unknown agent 'agent_7'.*\['agent_0', 'agent_1'\]"):
        team.adapter_names(["agent_0", "agent_7"])


# ---------------------------------------------------------------------------------- save/load


def test_save_load_roundtrip_layout_outputs_and_hashes(tmp_path) -> None:
    agents = agent_names(3)
    team = make_team(agents, seed=0)
    randomize_lora_b(team)
    hashes = team.save(tmp_path / "adapters")

    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == agents
    for agent in agents:
        assert {p.name for p in (tmp_path / "adapters" / agent).iterdir()} == SAVED_FILES
        manifest = json.loads((tmp_path / "adapters" / agent / MANIFEST).read_text())
        assert manifest["base_id"] == TINY_MODEL_ID
        assert manifest["agent"] == agent
        assert manifest["sharing"] == "per_agent"
        assert manifest["lora"] == LORA.model_dump()
        # PEFT writes target_modules in set (hash-seed) order; sorted, the file hash is stable
        config = json.loads((tmp_path / "adapters" / agent / ADAPTER_CONFIG).read_text())
        assert config["target_modules"] == sorted(LORA.targets)
    assert set(hashes) == set(agents) and len(set(hashes.values())) == 3
    assert hashes == {a: files_sha256(tmp_path / "adapters" / a) for a in agents}
    # saving the same weights again (over the previous save) gives the same hashes
    assert team.save(tmp_path / "adapters") == hashes
    assert team.save(tmp_path / "again") == hashes

    fresh = make_team(agents, seed=5)  # another init: differs until loaded
    assert fresh.adapter_hashes() != team.adapter_hashes()
    assert fresh.load(tmp_path / "adapters") == hashes
    assert fresh.adapter_hashes() == team.adapter_hashes()
    assert fresh.save(tmp_path / "resaved") == hashes

    ids = input_ids(rows=2)
    hidden = torch.randn(2, team.hidden_size)
    for agent in agents:
        torch.testing.assert_close(logits_for(fresh, agent, ids), logits_for(team, agent, ids))
        torch.testing.assert_close(fresh.value(agent, hidden), team.value(agent, hidden))

    # the adapter directories are plain PEFT adapters
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = PeftModel.from_pretrained(tiny_llama(VOCAB), tmp_path / "adapters" / agents[1])
    with torch.no_grad():
        torch.testing.assert_close(plain(input_ids=ids).logits, logits_for(team, agents[1], ids))


def test_load_overwrites_in_place_and_adapter_hashes_track_updates(tmp_path) -> None:
    team = make_team(agent_names(2))
    params = team.parameters_of("agent_0")
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    saved = team.adapter_hashes()
    team.save(tmp_path / "a")
    with team.training("agent_0"):
        agent_loss(team, "agent_0", input_ids()).backward()
        optimizer.step()
    updated = team.adapter_hashes()
    assert updated["agent_0"] != saved["agent_0"]
    assert updated["agent_1"] == saved["agent_1"]
    team.load(tmp_path / "a", agents=["agent_0"])
    assert team.adapter_hashes() == saved
    # the optimizer's parameters are still the team's parameters
    assert all(p is q for p, q in zip(params, team.parameters_of("agent_0"), strict=True))


class DiskFull(RuntimeError):
    pass


def test_interrupted_save_leaves_no_partial_directory(tmp_path, monkeypatch) -> None:
    team = make_team(agent_names(2))
    real_save_file = adapters_module.save_file
    calls = []

    def failing_save_file(tensors, filename, metadata=None):
        calls.append(filename)
        if len(calls) == 2:  # the first agent is fully written, the second half-written
            with open(filename, "wb") as handle:
                handle.write(b"partial")
            raise DiskFull("no space left on device")
        real_save_file(tensors, filename, metadata=metadata)

    monkeypatch.setattr(adapters_module, "save_file", failing_save_file)
    with pytest.raises(DiskFull):
        team.save(tmp_path / "new")
    assert list((tmp_path / "new").iterdir()) == []  # no agent dir, no hidden staging left

    # over an earlier save: the earlier save stays whole
    monkeypatch.setattr(adapters_module, "save_file", real_save_file)
    first = team.save(tmp_path / "old")
    randomize_lora_b(team)
    calls.clear()
    monkeypatch.setattr(adapters_module, "save_file", failing_save_file)
    with pytest.raises(DiskFull):
        team.save(tmp_path / "old")
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["agent_0", "agent_1"]
    assert {a: files_sha256(tmp_path / "old" / a) for a in team.agents} == first


def test_state_dict_roundtrip() -> None:
    team = make_team(agent_names(2), seed=0)
    randomize_lora_b(team)
    other = make_team(agent_names(2), seed=3)
    assert other.adapter_hashes() != team.adapter_hashes()
    state = team.state_dict()
    assert all(k.startswith(("lora.agent_", "value_head.agent_")) for k in state)
    other.load_state_dict(state)
    assert other.adapter_hashes() == team.adapter_hashes()
    with pytest.raises(ValueError, match="missing"):
        other.load_state_dict({k: v for k, v in state.items() if "agent_1" not in k})


# ------------------------------------------------------------------------------------- errors


def test_missing_target_module_names_the_targetable_ones() -> None:
    lora = LoraOptions(targets=["q_proj", "qkv_proj"])
    with pytest.raises(ValueError) as info:
        make_team(agent_names(2), lora=lora)
    message = str(info.value)
    assert "'qkv_proj'" in message and "lora.targets" in message and "\n" not in message
    for name in ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]:
        assert name in message
    assert "lm_head" not in message


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"r": 0}, "lora.r"),
        ({"alpha": 0}, "lora.alpha"),
        ({"dropout": 1.0}, "lora.dropout"),
        ({"targets": []}, "lora.targets"),
        ({"rank": 8}, "rank"),
        ({"layers": 0}, "lora.layers"),
    ],
)
def test_lora_options_validate(options, match) -> None:
    with pytest.raises(ValueError, match=match):
        LoraOptions(**options)


def test_load_errors_say_what_to_change(tmp_path) -> None:
    team = make_team(agent_names(3))
    team.save(tmp_path / "three")

    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no saved adapters.*TeamAdapters.save"):
        team.load(tmp_path / "empty")
    with pytest.raises(ValueError, match="has no saved adapters"):
        team.load(tmp_path / "missing")

    other_base = make_team(agent_names(3), base_id="hf:/models/other")
    with pytest.raises(ValueError, match="base model 'local:tiny-llama'.*'hf:/models/other'"):
        other_base.load(tmp_path / "three")

    two = make_team(agent_names(2))
    with pytest.raises(ValueError, match=r"\['agent_2'\].*\['agent_0', 'agent_1'\]"):
        two.load(tmp_path / "three")
    with pytest.raises(ValueError, match=r"unknown agent 'agent_9'.*\['agent_0', 'agent_1'"):
        team.load(tmp_path / "three", agents=["agent_9"])

    two.save(tmp_path / "two")
    with pytest.raises(ValueError, match=r"no saved adapter for \['agent_2'\]"):
        team.load(tmp_path / "two")

    qkv = make_team(agent_names(3), lora=LoraOptions(r=4, alpha=8, targets=["q_proj", "k_proj"]))
    with pytest.raises(ValueError, match="set lora.r, lora.alpha and lora.targets"):
        qkv.load(tmp_path / "three")

    shared = make_team(agent_names(3), sharing="shared")
    with pytest.raises(ValueError, match="sharing.*per_agent"):
        shared.load(tmp_path / "three")


def test_agent_names_are_checked() -> None:
    with pytest.raises(ValueError, match="reserved"):
        make_team(["agent_0", "shared"])
    with pytest.raises(ValueError, match="unique"):
        make_team(["agent_0", "agent_0"])
    with pytest.raises(ValueError, match="letters, digits"):
        make_team(["agent.0"])


# ----------------------------------------------------------------------- shared mode, central


def test_shared_mode_uses_one_adapter_for_every_agent(tmp_path) -> None:
    agents = agent_names(3)
    team = make_team(agents, sharing="shared")
    assert team.adapters == ("shared",)
    assert set(team.model.peft_config) == {"shared"}
    assert [team.adapter_for(a) for a in agents] == ["shared"] * 3
    assert team.adapter_names([*agents, None]) == ["shared"] * 3 + ["__base__"]
    assert list(team.value_heads) == ["shared"]
    assert [id(p) for p in team.parameters_of("agent_0")] == [
        id(p) for p in team.parameters_of("agent_2")
    ]
    optimizer = torch.optim.AdamW(team.parameters_of("agent_1"), lr=1e-2)
    before = team.adapter_hashes()
    with team.training("agent_1") as adapter:
        assert adapter == "shared"
        agent_loss(team, "agent_1", input_ids()).backward()
        optimizer.step()
    after = team.adapter_hashes()
    assert len(set(after.values())) == 1 and after["agent_0"] != before["agent_0"]

    hashes = team.save(tmp_path / "shared")
    assert [p.name for p in (tmp_path / "shared").iterdir()] == ["shared"]
    assert set(hashes) == set(agents) and len(set(hashes.values())) == 1
    fresh = make_team(agents, sharing="shared", seed=9)
    fresh.load(tmp_path / "shared")
    assert fresh.adapter_hashes() == after


def test_central_value_head(tmp_path) -> None:
    agents = agent_names(3)
    team = make_team(agents, value_head=ValueHeadOptions(central=True, width=8))
    assert set(team.value_heads) == {*agents, "central"}
    hidden = torch.randn(4, len(agents), team.hidden_size)
    values = team.value("central", hidden)
    assert values.shape == (4,)
    torch.testing.assert_close(values, team.value("central", hidden.flatten(-2)))
    assert team.value_heads["central"][0].in_features == 3 * team.hidden_size
    assert {id(p) for p in team.parameters_of("central")} == {
        id(p) for p in team.value_heads["central"].parameters()
    }

    hashes = team.save(tmp_path / "c")
    assert "central" in hashes
    assert {p.name for p in (tmp_path / "c" / "central").iterdir()} == {VALUE_HEAD, MANIFEST}
    fresh = make_team(agents, value_head=ValueHeadOptions(central=True, width=8), seed=4)
    fresh.load(tmp_path / "c")
    torch.testing.assert_close(fresh.value("central", hidden), values)

    no_heads = make_team(agents, value_head=ValueHeadOptions(per_agent=False))
    with pytest.raises(ValueError, match="no value head"):
        no_heads.value("agent_0", hidden[:, 0])


def test_bf16_base_keeps_adapters_and_heads_in_float32() -> None:
    team = make_team(agent_names(2), dtype=torch.bfloat16)
    assert team.model.get_base_model().model.embed_tokens.weight.dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for a in team.agents for p in team.parameters_of(a))
    with team.training("agent_0"):
        out = team.model(input_ids=input_ids(), output_hidden_states=True)
        value = team.value("agent_0", out.hidden_states[-1][:, -1])
    assert value.dtype == torch.float32
    value.sum().backward()
    assert len(team.adapter_hashes()) == 2


def test_lora_layers_adapt_only_the_last_layers() -> None:
    team = make_team(agent_names(2), lora=LoraOptions(r=4, alpha=8, dropout=0.0, layers=1))
    adapted = {name.split(".layers.")[1].split(".")[0]
               for name, _ in team.model.named_parameters() if "lora_" in name}
    assert adapted == {"1"}  # the tiny model has layers 0 and 1: only the last is adapted

    # Nothing below the adapted layer takes part in backward: the first layer's output needs
    # no gradient, so autograd records no graph there.
    seen: list[bool] = []
    first_layer = team.model.get_base_model().model.layers[0]
    handle = first_layer.register_forward_hook(lambda _m, _i, out: seen.append(
        (out[0] if isinstance(out, tuple) else out).requires_grad))
    with team.training("agent_0"):
        team.model(input_ids()).logits.sum().backward()
    handle.remove()
    assert seen == [False]

    with pytest.raises(ValueError, match="lora.layers is 3 but the model has 2 layers"):
        make_team(agent_names(2), lora=LoraOptions(r=4, alpha=8, layers=3))


def test_value_heads_start_at_zero() -> None:
    team = make_team(agent_names(2), value_head=ValueHeadOptions(width=16, central=True))
    hidden = torch.randn(3, team.hidden_size)
    assert torch.equal(team.value("agent_0", hidden), torch.zeros(3))
    assert torch.equal(team.value("central", torch.randn(3, 2, team.hidden_size)), torch.zeros(3))


def test_wrapping_the_model_raises_no_deprecation_warning_about_checkpointing() -> None:
    """PEFT reads transformers' deprecated ``is_gradient_checkpointing``; the team hides that
    one warning (every PPO and MAGRPO run printed it) and nothing else."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_team(agent_names(2))
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        get_peft_model(tiny_llama(VOCAB, seed=0), LoraConfig(r=2, target_modules=["q_proj"]))
    assert [w for w in caught if "is_gradient_checkpointing" in str(w.message)]  # PEFT alone warns


def test_saved_adapters_name_their_base_by_spec_and_load_on_another_machine(tmp_path, monkeypatch):
    from peft.utils import get_peft_model_state_dict

    from marlang.methods.lora.files import adapter_base_model, load_peft_adapter
    from marlang.models import local_weights
    from marlang.testing import tiny_tokenizer

    # the base model's weights on "this machine": where local:smollm2 resolves to here
    weights = tmp_path / "cache" / "tiny-base"
    tiny_llama(VOCAB, seed=0).save_pretrained(weights)
    tiny_tokenizer().save_pretrained(weights)
    monkeypatch.setattr(local_weights, "smollm2_checkpoint_dir", lambda cache_dir=None: weights)

    team = make_team(agent_names(2), base_id="local:smollm2@0123456789abcdef")
    randomize_lora_b(team)
    team.save(tmp_path / "adapters")
    adapter = tmp_path / "adapters" / "agent_0"
    config = json.loads((adapter / ADAPTER_CONFIG).read_text())
    assert config["base_model_name_or_path"] == "local:smollm2"  # no path of the machine that trained
    assert adapter_base_model(adapter) == str(weights)
    loaded = load_peft_adapter(adapter, device="cpu")
    expected = team._adapter_state("agent_0")
    got = get_peft_model_state_dict(loaded, adapter_name="default", save_embedding_layers=False)
    assert set(got) == set(expected) and all(torch.equal(got[k], expected[k]) for k in expected)

    # an adapter saved by an older marlang names an absolute path: it still loads, there and here
    config["base_model_name_or_path"] = str(weights)
    (adapter / ADAPTER_CONFIG).write_text(json.dumps(config))
    assert adapter_base_model(adapter) == str(weights)
    assert isinstance(load_peft_adapter(adapter, device="cpu"), PeftModel)
    fresh = make_team(agent_names(2), seed=5, base_id="local:smollm2@0123456789abcdef")
    fresh.load(tmp_path / "adapters")
    assert fresh.adapter_hashes() == team.adapter_hashes()


def test_base_model_specs_resolve_to_local_weights(tmp_path):
    from marlang.models.local_weights import resolve_base_model

    assert resolve_base_model(f"hf:{tmp_path}") == str(tmp_path)
    assert resolve_base_model("hf:org/name") == "org/name"  # the local Hugging Face cache's id
    assert resolve_base_model("/old/absolute/path") == "/old/absolute/path"


def test_an_adapter_folder_with_pickled_weights_is_refused_before_anything_loads(tmp_path, monkeypatch):
    from marlang.config import ConfigError
    from marlang.methods.lora import files

    adapter = tmp_path / "agent_0"
    adapter.mkdir()
    (adapter / ADAPTER_CONFIG).write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": "hf:/x"}))
    torch.save({"weights": torch.zeros(2)}, adapter / "adapter_model.bin")  # PEFT's pickled format

    def base_loaded(*args, **kwargs):
        raise AssertionError("the base model was loaded for an adapter that is refused")

    monkeypatch.setattr(files, "load_pretrained_dir", base_loaded)
    with pytest.raises(ConfigError, match=rf"{adapter} has no adapter_model.safetensors: .* safetensors only"):
        files.load_peft_adapter(adapter, device="cpu")
