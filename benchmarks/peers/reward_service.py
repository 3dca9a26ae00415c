"""The peers' prompts and reward, from marlang: a process in marlang's venv that answers JSON
lines on stdin/stdout, so that CoMLRL and TRL (in .venv-peers) read exactly the prompts marlang's
agents read and are scored by marlang's sandboxed verdict of the joint answer.

Requests: ``{"op": "prompts", "seeds": [...]}`` -> ``{"prompts": [[messages of each agent] of each
seed]}`` (role/content dicts, as ``LearnerContext.act_messages`` builds them for MAGRPO's trees);
``{"op": "reward", "seed": s, "texts": [reply of each agent]}`` -> ``{"reward": r}`` (each reply's
answer extracted as MAGRPO's sampler does, the joint answer judged by the env as MAGRPO's tree
judges it: an env that raises gives 0). Run: ``python reward_service.py CONFIG.json``.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from marlang.agents.answer_parsing import extract_answer
from marlang.config import build_config
from marlang.prompts import PromptLibrary
from marlang.run.build import build_agents, build_env, world
from marlang.types import CallContext

logger = logging.getLogger(__name__)

ROLES = {"system": "system", "human": "user", "ai": "assistant"}


class RewardService:
    """One env and the config's agents' prompt builders (no model: the peer samples)."""

    def __init__(self, config_data: dict[str, Any]) -> None:
        self.config = build_config(config_data)
        self.env = build_env(self.config)
        prompts = PromptLibrary(self.config.agents.prompt_dir)
        self.agents = build_agents(self.config, None, prompts, world(self.env))
        self.names = list(self.agents)

    def prompts(self, seed: int) -> list[list[dict[str, str]]]:
        self.env.reset(seed=seed)
        out = []
        for name in self.names:
            obs = self.env.observe(name)
            form = obs.data.get("answer_format", "text")
            messages = self.agents[name].act_messages(obs, [], CallContext(episode=-1),
                                                      instruction=f"act_instruction_{form}")
            out.append([{"role": ROLES[m.type], "content": str(m.content)} for m in messages])
        return out

    def reward(self, seed: int, texts: list[str]) -> float:
        self.env.reset(seed=seed)
        answers = {}
        for name, text in zip(self.names, texts, strict=True):
            data = self.env.observe(name).data
            form = data.get("answer_format", "text")
            entry = data.get("entry_point") if form == "code" else None
            answers[name] = extract_answer(text, form, entry).answer or ""
        try:
            _obs, rewards, _terms, _truncs, _infos = self.env.step(answers)
        except Exception as error:  # noqa: BLE001 - as MAGRPO's judge: an env failure scores 0
            logger.warning("the env could not judge a joint answer (%s); reward 0", error)
            return 0.0
        return float(rewards[self.names[0]])

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "prompts":
            return {"prompts": [self.prompts(int(s)) for s in request["seeds"]]}
        if request["op"] == "reward":
            return {"reward": self.reward(int(request["seed"]), list(request["texts"]))}
        raise ValueError(f"unknown op {request['op']!r}")


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    service = RewardService(json.loads(Path(args[0]).read_text()))
    out = sys.stdout
    sys.stdout = sys.stderr  # only answers on the protocol's stream
    try:
        for line in sys.stdin:
            if line.strip():
                out.write(json.dumps(service.answer(json.loads(line))) + "\n")
                out.flush()
    finally:
        service.env.close()


if __name__ == "__main__":
    main()
