"""One MAGRPO training pass on fixed completions, in one process or data-parallel under
``accelerate launch`` (each process holding a different part of every agent's completions):
each process writes its adapters and its per-agent losses. Run by
tests/methods/lora/test_distributed.py."""

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from marlang.learners.context import LearnerContext
from marlang.methods.lora.distributed import launched_rank, launched_world_size
from marlang.methods.magrpo.learner import MAGRPOLearner, MAGRPOOptions
from marlang.methods.magrpo.tree import Completion, TrainingSample
from marlang.models.local_policy import local_policies
from marlang.testing import tiny_chat_model
from marlang.types import StopFlag


def samples(eos: int) -> dict[str, list[TrainingSample]]:
    out: dict[str, list[TrainingSample]] = {"agent_0": [], "agent_1": []}
    for node in range(3):
        for agent_index, agent in enumerate(out):
            prompt = (7 + node, 11 + agent_index, 13, 17 + node)
            for g in range(4):
                tokens = tuple(20 + (node * 5 + g * 3 + k) % 30 for k in range(2 + g % 3)) + ((eos,) if g % 2 else ())
                advantage = (-1) ** g * (0.3 + 0.1 * g + 0.05 * node)
                out[agent].append(TrainingSample(Completion(agent, prompt, tokens), advantage,
                                                 weight=1 + (g == 3), turn=0))
    return out


def main(out: Path, loss: str, minibatch_size: int) -> None:
    rank, world = launched_rank(), launched_world_size()
    model = tiny_chat_model()
    context = LearnerContext(actors={a: SimpleNamespace(model=model) for a in ("agent_0", "agent_1")},
                             local=local_policies({a: model for a in ("agent_0", "agent_1")}),
                             agents=["agent_0", "agent_1"], run_dir=None, stop=StopFlag())
    options = MAGRPOOptions(epochs=1, minibatch_size=minibatch_size, micro_batch_size=4, eval_episodes=0, lr=1e-2,
                            device="cpu", loss=loss, lora={"r": 4, "alpha": 8, "dropout": 0.0})
    learner = MAGRPOLearner(options, context)
    learner.trainer.setup()
    eos = learner.trainer.local.eos_id
    # process r keeps the nodes r, r + world, ...: an uneven split (2 nodes and 1 under two)
    mine = {a: [s for i, s in enumerate(items) if (i // 4) % world == rank] for a, items in samples(eos).items()}
    if loss != "reinforce":  # the ratio losses' old policy: the adapters before the update
        for agent, items in mine.items():
            for s, lp in zip(items, learner._logprobs(agent, items), strict=True):
                s.completion.logprobs = tuple(float(x) for x in lp)
    records, counters = asyncio.run(learner._fit(mine, 0))
    losses = {r["agent"]: r["loss"] for r in records}
    torch.save(learner.trainer.team.state_dict(), out / f"rank{rank}.pt")
    (out / f"rank{rank}.json").write_text(json.dumps({"losses": losses, "world": world, "counters": counters}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
