"""What a LoRA update keeps for backward (`recompute`): the same loss, gradients and adapters as
PEFT's plain forward under plain autograd, with the recomputed paths taken.
"""

from __future__ import annotations

from typing import cast

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from peft.utils import set_peft_model_state_dict
from transformers import PreTrainedModel

from marlang.methods.lora import recompute
from marlang.methods.lora.team import LoraOptions, TeamAdapters
from marlang.models.scoring import score_decisions
from marlang.testing import TINY_MODEL_ID, tiny_llama

VOCAB = 64
AGENT = "agent_0"
LORA = LoraOptions(r=4, alpha=8, dropout=0.25)  # a high dropout: most draws matter

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def items(seed: int = 0) -> list[tuple[list[int], list[list[int]]]]:
    """Three decisions, prompts of 5-9 tokens and three candidates of 1-3 tokens each."""
    g = torch.Generator().manual_seed(seed)

    def ids(n: int) -> list[int]:
        return torch.randint(1, VOCAB, (n,), generator=g).tolist()

    return [(ids(5 + 2 * i), [ids(1), ids(2), ids(3)]) for i in range(3)]


def models(dtype: torch.dtype, checkpointing: bool) -> tuple[TeamAdapters, PeftModel]:
    """A team (the recomputing path) and plain PEFT on the same base with the same adapter."""
    team = TeamAdapters(tiny_llama(VOCAB, hidden_size=32, num_layers=2), [AGENT], base_id=TINY_MODEL_ID,
                        lora=LORA, dtype=dtype, seed=0)
    base = tiny_llama(VOCAB, hidden_size=32, num_layers=2)
    torch.nn.Module.to(base, dtype)
    config = LoraConfig(r=LORA.r, lora_alpha=LORA.alpha, lora_dropout=LORA.dropout, target_modules=LORA.targets,
                        bias="none", task_type="CAUSAL_LM")
    plain = get_peft_model(base, config, adapter_name=AGENT)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # lora_B starts at zero, which would leave lora_A without gradients
        for name, param in team.model.named_parameters():
            if "lora_B" in name:
                param.copy_(0.5 * torch.randn(param.shape, generator=g))
    prefix = f"lora.{AGENT}."
    set_peft_model_state_dict(plain, {k[len(prefix):]: v for k, v in team.state_dict().items() if k.startswith(prefix)},
                              adapter_name=AGENT)
    for model in (team.model, plain):
        if checkpointing:
            wrapped = cast(PreTrainedModel, model.get_base_model())
            wrapped.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return team, plain


def update(model: PeftModel, params: list[torch.nn.Parameter]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """One AdamW step on a scoring loss (LoRA dropout drawn from seed 5): the loss and the gradients."""
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    torch.manual_seed(5)
    scored = score_decisions(cast(PreTrainedModel, model), items(), pad_id=0)
    loss = sum((s * torch.arange(1.0, 4.0)).sum() for s in scored.scores) + scored.prompt_hidden.float().pow(2).mean()
    assert isinstance(loss, torch.Tensor)
    loss.backward()
    grads = [p.grad.clone() for p in params if p.grad is not None]
    optimizer.step()
    return loss.detach(), grads


@pytest.mark.parametrize(("dtype", "checkpointing"),
                         [(torch.float32, False), (torch.bfloat16, False), (torch.float32, True)])
def test_an_update_equals_plain_peft_bit_for_bit(dtype: torch.dtype, checkpointing: bool) -> None:
    team, plain = models(dtype, checkpointing)
    plain_params = [p for n, p in plain.named_parameters() if "lora_" in n]
    plain.train()
    plain_loss, plain_grads = update(plain, plain_params)
    with team.training(AGENT):
        team_params = [p for p in team.parameters_of(AGENT) if p.dim() and p in set(team.model.parameters())]
        loss, grads = update(team.model, team_params)
    assert len(grads) == len(plain_grads) == 2 * 2 * 2  # lora_A and lora_B of q and v in 2 layers
    assert torch.equal(loss, plain_loss)
    for grad, plain_grad in zip(grads, plain_grads, strict=True):
        assert grad.abs().sum() > 0
        assert torch.equal(grad, plain_grad)
    for param, plain_param in zip(team_params, plain_params, strict=True):
        assert torch.equal(param, plain_param)


def test_the_update_recomputes_lora_inputs_and_activations(monkeypatch: pytest.MonkeyPatch) -> None:
    team, _ = models(torch.float32, checkpointing=False)
    calls = {"lora_a": 0, "activation": 0, "repeated_heads": 0}
    dropped_linear, recipe_call = recompute.CheckpointedLoraA._dropped_linear, recompute.Recipe.__call__
    repeated_call = recompute.RepeatedHeads.__call__

    def counted_linear(self: recompute.CheckpointedLoraA, x: torch.Tensor) -> torch.Tensor:
        calls["lora_a"] += 1
        return dropped_linear(self, x)

    def counted_recipe(self: recompute.Recipe) -> torch.Tensor:
        calls["activation"] += 1
        return recipe_call(self)

    def counted_heads(self: recompute.RepeatedHeads) -> torch.Tensor:
        calls["repeated_heads"] += 1
        return repeated_call(self)

    monkeypatch.setattr(recompute.CheckpointedLoraA, "_dropped_linear", counted_linear)
    monkeypatch.setattr(recompute.RepeatedHeads, "__call__", counted_heads)
    monkeypatch.setattr(recompute.Recipe, "__call__", counted_recipe)
    lora_as = [m for m in team.model.modules() if isinstance(m, recompute.CheckpointedLoraA)]
    assert len(lora_as) == 4  # q_proj and v_proj in 2 layers
    with team.training(AGENT):
        update(team.model, [p for p in team.parameters_of(AGENT) if p.dim() >= 2])
    # each lora_A ran once forward and once more in backward; each MLP's activation was
    # recomputed for its multiplication's backward; each attention's keys and values (2 heads
    # sharing each) were kept once per key/value head
    assert calls == {"lora_a": 2 * 4, "activation": 2, "repeated_heads": 2 * 2}


def test_only_repeated_heads_are_kept_once_per_group() -> None:
    packer = recompute.SavedTensorPacker(heads=4, kv_heads=2)
    kv = torch.randn(2, 2, 5, 3)
    repeated = kv[:, :, None].expand(2, 2, 2, 5, 3).reshape(2, 4, 5, 3)
    packed = packer.pack(repeated)
    assert isinstance(packed, recompute.RepeatedHeads) and packed.heads.shape == (2, 2, 5, 3)
    unpacked = packer.unpack(packed)
    assert torch.equal(unpacked, repeated) and unpacked.stride() == repeated.stride()
    query = torch.randn(2, 4, 5, 3)
    assert packer.pack(query) is query
    strided = repeated.transpose(2, 3).contiguous().transpose(2, 3)  # the same values, not contiguous
    assert packer.pack(strided) is strided
    assert recompute.SavedTensorPacker().pack(repeated) is repeated  # no grouped heads given


def test_outside_training_nothing_is_recomputed(monkeypatch: pytest.MonkeyPatch) -> None:
    team, _ = models(torch.float32, checkpointing=False)
    calls = []
    monkeypatch.setattr(recompute.Recipe, "__call__", lambda self: calls.append(self))
    team.model.train()
    update(team.model, [p for p in team.parameters_of(AGENT) if p.dim() >= 2])
    assert calls == []


def test_an_activation_changed_in_place_is_kept_as_it_is() -> None:
    def grad(hooked: bool) -> torch.Tensor:
        act = torch.nn.SiLU()
        if hooked:
            act.register_forward_hook(recompute._note_output)
        x = torch.linspace(-2.0, 2.0, 5, requires_grad=True)
        with recompute.recomputed_activations():
            y = act(x * 1.0)
            y.mul_(2.0)  # a recipe would now give the values before this
            (y * x).sum().backward()
        assert x.grad is not None
        return x.grad

    assert torch.equal(grad(hooked=True), grad(hooked=False))
