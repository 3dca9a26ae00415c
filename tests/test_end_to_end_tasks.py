"""One sequential episode of each coding and reasoning task on the embedded SmolLM2, two agents,
two turns: the reply's answer is extracted, the sandbox runs the code, and the first turn's
feedback reaches the second turn. A 135M model rarely solves anything, so the machinery is
what is asserted. The five runs share one model and play at once (the engine batches them)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from marlang.config import build_config
from marlang.envs.tasks.data.math_answers import extract_boxed, is_placeholder_answer
from marlang.models import LocalChatModel
from marlang.run import Experiment

pytestmark = pytest.mark.real_model

FIXTURES = Path(__file__).parent / "envs" / "tasks" / "data" / "fixtures"
TASKS = {
    "code/humaneval": {},
    "code/mbpp": {"data_files": str(FIXTURES / "mbpp_sanitized.jsonl")},
    "code/coophumaneval": {"data_files": str(FIXTURES / "coophumaneval.jsonl")},
    "math/math": {"data_files": str(FIXTURES / "math500.jsonl")},
    "qa/hotpotqa": {"data_files": str(FIXTURES / "hotpotqa.jsonl")},
}


def _config(env_id: str, kwargs: dict) -> object:
    return build_config({
        "env": {"id": env_id, "n_agents": 2, "max_steps": 2, "kwargs": {"structure": "sequential", **kwargs}},
        "model": {"spec": "local:smollm2", "max_tokens": 16, "cache": False},
        "agents": {"policy": "Answer carefully and briefly."},
        "run": {"episodes": 1, "parallel": 1, "progress": False, "seed": 3},
    })


def test_one_sequential_episode_of_each_task_on_smollm2(tmp_path, smollm2_engine):
    model = LocalChatModel(engine=smollm2_engine)
    experiments = {
        env_id: Experiment(_config(env_id, kwargs), tmp_path / env_id.replace("/", "_"), chat_model=model)
        for env_id, kwargs in TASKS.items()
    }

    async def run_all() -> None:
        await asyncio.gather(*(e.arun() for e in experiments.values()))

    asyncio.run(run_all())
    for env_id, experiment in experiments.items():
        (episode,) = experiment.run_dir.load_episode_dicts()
        steps = episode["steps"]
        turns_played = 1 if episode["success"] and len(steps) == 2 else 2
        assert len(steps) == 2 * turns_played, env_id
        for t, step in enumerate(steps):
            actor = f"agent_{t % 2}"
            obs = step["observations"][actor]
            assert obs["legal_actions"] == [], env_id  # answer in text
            decision = step["decisions"][actor]
            waiting = step["observations"][f"agent_{(t + 1) % 2}"]
            assert waiting["legal_actions"] == ["wait"]
            # every reply was read: an extracted answer, or an empty one counted invalid
            assert decision["action"].strip() or not decision["valid"], (env_id, decision)
            if decision["valid"]:
                assert decision["action"] in decision["raw"] or env_id.startswith("math"), env_id
            info = step["infos"][actor]
            action = decision["action"]
            # A math reply copying the prompt's \boxed{<answer>} placeholder is no answer either.
            copied = env_id.startswith("math") and (is_placeholder_answer(action)
                                                    or is_placeholder_answer(extract_boxed(action) or ""))
            assert info["invalid"] == (not action.strip() or copied), env_id
        judged = steps[1]["infos"]["agent_1"]
        assert judged["evaluated"] and judged["turn"] == 1
        if env_id.startswith("code/"):
            report = judged["report"]
            assert report["status"] in {"ok", "syntax_error", "error", "timeout", "killed"}, report
            assert judged["total"] >= 1 and report["isolation"]
        if turns_played == 2:
            # the second turn's first agent sees the judged first turn and its feedback
            later = steps[2]["observations"]["agent_0"]["text"]
            assert "Turn 1" in later and "Feedback" in later, env_id
        manifest = experiment.run_dir.read_json("manifest.json")
        assert ("sandbox" in manifest) == env_id.startswith("code/"), env_id
