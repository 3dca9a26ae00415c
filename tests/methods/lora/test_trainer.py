"""The LoRA trainer a weight-space method holds and calls: a step on a minibatch with the
method's loss, micro-batched and guarded; the methods own their update."""

from __future__ import annotations

import ast
import asyncio
import inspect
from types import SimpleNamespace

import torch

from marlang.learners.base import Learner
from marlang.learners.context import LearnerContext
from marlang.methods.lora import trainer as trainer_module
from marlang.methods.lora.team import ValueHeadOptions
from marlang.methods.lora.trainer import LoraTrainer
from marlang.methods.magrpo.learner import GRPOLearner, MAGRPOLearner
from marlang.methods.ppo.learner import PPOLearner
from marlang.methods.ppo.options import PPOOptions
from marlang.models.local_policy import local_policies
from marlang.testing import tiny_chat_model


def test_methods_hold_a_trainer_and_the_trainer_knows_no_method():
    for learner in (PPOLearner, MAGRPOLearner):
        assert learner.__mro__[1] is Learner  # no template between the method and the seam
    assert GRPOLearner.__mro__[1] is MAGRPOLearner
    imported = {node.module for node in ast.walk(ast.parse(inspect.getsource(trainer_module)))
                if isinstance(node, ast.ImportFrom)}
    assert not {m for m in imported if m and m.startswith(("marlang.methods.ppo", "marlang.methods.magrpo"))}


def _trainer(tmp_path, micro_batch_size: int) -> LoraTrainer:
    model = tiny_chat_model()
    context = LearnerContext(actors={"agent_0": SimpleNamespace(model=model)}, agents=["agent_0"],
                             local=local_policies({"agent_0": model}), run_dir=tmp_path)
    options = PPOOptions(micro_batch_size=micro_batch_size, device="cpu", lr=1e-2, value_lr=1e-2,
                         lora={"r": 4, "alpha": 8, "dropout": 0.0})
    out = LoraTrainer("ppo", options, context, state_name="ppo_state",
                      value_heads=ValueHeadOptions(per_agent=True), value_lr=options.value_lr)
    out.setup()
    return out


def _value_loss(trainer: LoraTrainer, part: list[torch.Tensor], total: float) -> dict[str, torch.Tensor]:
    values = trainer.team.value("agent_0", torch.stack(part))
    loss = ((values - 1.0) ** 2).sum() / total
    return {"loss": loss, "squared": loss.detach() * total}


def test_a_step_is_the_minibatchs_mean_however_it_is_cut_into_micro_batches(tmp_path):
    hidden = list(torch.randn(6, _trainer(tmp_path / "probe", 1).team.hidden_size,
                              generator=torch.Generator().manual_seed(0)))
    heads = []
    for micro in (1, 4, 6):
        trainer = _trainer(tmp_path / str(micro), micro)
        result = asyncio.run(trainer.step("agent_0", hidden, lambda p, t, tr=trainer: _value_loss(tr, p, t),
                                          mean_terms=("squared",)))
        assert result is not None and result["grad_norm"] > 0
        heads.append([p.detach().clone() for p in trainer.team.value_heads.parameters()])
    for other in heads[1:]:
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(heads[0], other, strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(heads[0], [p for p in _trainer(
        tmp_path / "fresh", 1).team.value_heads.parameters()], strict=True))  # the step moved the head


def test_a_non_finite_loss_skips_the_step_and_changes_nothing(tmp_path):
    trainer = _trainer(tmp_path, 2)
    before = {k: v.clone() for k, v in trainer._state_dict().items()}
    hidden = list(torch.randn(4, trainer.team.hidden_size))

    def poisoned(part, total):
        return {"loss": _value_loss(trainer, part, total)["loss"] * float("nan")}

    assert asyncio.run(trainer.step("agent_0", hidden, poisoned)) is None
    assert all(torch.equal(before[k], v) for k, v in trainer._state_dict().items())

