"""One PPO update on fixed decisions, in one process or data-parallel under ``accelerate
launch``: each process writes its loss (its share of the minibatch's) and its adapters.
Run by tests/methods/lora/test_distributed.py."""

import asyncio
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

from marlang.learners.context import LearnerContext
from marlang.methods.lora.distributed import launched_rank, launched_world_size
from marlang.methods.ppo.learner import PPOLearner, PPOOptions
from marlang.methods.ppo.samples import DecisionSample, PPOSamples
from marlang.models.local_policy import local_policies
from marlang.testing import tiny_chat_model
from marlang.types import PolicyState

ACTIONS = [" turn left", " turn right", " go forward", " pick up"]


def samples() -> list[DecisionSample]:
    out = []
    for i in range(8):
        agent = f"agent_{i % 2}"
        prompt = f"<|im_start|>user\nYou see a key {i} steps ahead. Step {i}.<|im_end|>\n<|im_start|>assistant\nAction:"
        out.append(DecisionSample(agent=agent, episode=i, t=0, prompt=prompt, candidates=ACTIONS,
                                  action_index=i % 4, old_logprob=-1.3 - 0.01 * i, old_value=0.1 * i,
                                  advantage=(-1) ** i * (0.5 + 0.1 * i), ret=0.2 * i))
    return out


def main(out: Path) -> None:
    rank, world = launched_rank(), launched_world_size()
    model = tiny_chat_model()
    context = LearnerContext(actors={a: SimpleNamespace(model=model) for a in ("agent_0", "agent_1")},
                             local=local_policies({a: model for a in ("agent_0", "agent_1")}),
                             agents=["agent_0", "agent_1"], run_dir=None)
    options = PPOOptions(epochs=1, minibatch_size=64, eval_episodes=0, lr=1e-2, device="cpu",
                         lora={"r": 4, "alpha": 8, "dropout": 0.0})
    learner = PPOLearner(options, context)
    # each process gets decisions of both agents (a different half of each agent's)
    mine = [s for i, s in enumerate(samples()) if (i // 2) % world == rank]

    async def given_samples(trajectories):
        return PPOSamples(mine)

    learner._samples = given_samples
    candidate = asyncio.run(learner.update(PolicyState(iteration=0), []))
    losses = {r["agent"]: r["loss"] for r in candidate.records}
    torch.save(learner.trainer.team.state_dict(), out / f"rank{rank}.pt")
    (out / f"rank{rank}.json").write_text(json.dumps({"losses": losses, "world": world}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
