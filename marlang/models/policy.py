"""The GLAM scoring policy, defined once: log pi(a | prompt) over the legal actions from their
scores (summed token log-probs of ``lead + action`` after the prompt), the calibration offsets
and the temperature. Acting (the local chat model's ``choices`` calls) and PPO's update both
compute it here, so what a rollout recorded and what the update re-derives cannot disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ActionPolicy:
    """pi(a | prompt) = softmax((scores + offsets) / temperature) over the legal actions.

    ``temperature`` 0 acts greedily (the best action; its log pi is that of the softmax at
    temperature 1). ``offsets`` (one per action) are added to the scores before anything
    else: contextual calibration, minus a prior (``agents.calibration``).
    """

    temperature: float = 0.0

    @staticmethod
    def split_prefix(choice_prefix: str) -> tuple[str, str]:
        """The prompt's end and the lead of every candidate: a space ending the prefix moves
        onto the actions, so " go forward" is scored as the model writes it after "Action:"."""
        if choice_prefix.endswith(" "):
            return choice_prefix.rstrip(" "), " "
        return choice_prefix, ""

    @staticmethod
    def candidates(actions: Sequence[str], lead: str) -> tuple[str, ...]:
        """The scored continuations of the prompt, one per action in order."""
        return tuple(lead + a for a in actions)

    def logits(self, scores: torch.Tensor, offsets: Sequence[float] | None = None) -> torch.Tensor:
        """(scores + offsets) / temperature, in the scores' dtype and on their device (no
        division when greedy)."""
        if offsets:
            scores = scores + torch.tensor(list(offsets), dtype=scores.dtype, device=scores.device)
        return scores / self.temperature if self.temperature > 0 else scores

    def log_probs(self, scores: torch.Tensor, offsets: Sequence[float] | None = None) -> torch.Tensor:
        """log pi of every action."""
        return torch.log_softmax(self.logits(scores, offsets), -1)

    def entropy(self, scores: torch.Tensor, offsets: Sequence[float] | None = None) -> torch.Tensor:
        """The policy's entropy over the actions."""
        logits = self.logits(scores, offsets)
        return -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum()

    def choose(self, scores: Sequence[float], offsets: Sequence[float] | None = None,
               seed: int | None = None) -> tuple[int, float]:
        """The action taken and its log pi: sampled with a generator seeded by ``seed`` (None:
        unseeded) above temperature 0, the best one at 0. In float64, as recorded."""
        logits = self.logits(torch.tensor(list(scores), dtype=torch.float64), offsets)
        if self.temperature > 0:
            generator = torch.Generator()
            if seed is None:
                generator.seed()
            else:
                generator.manual_seed(int(seed))
            best = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=generator))
        else:
            best = int(torch.argmax(logits))
        return best, float(torch.log_softmax(logits, -1)[best])
