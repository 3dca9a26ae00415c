"""PPO's bootstrap value of a cut-off episode: read on the prompt the agent's next decision
would be scored after, as every decision's value is."""

from __future__ import annotations

import asyncio

from marlang.agents import CallContext, LLMAgent
from marlang.learners.context import LearnerContext
from marlang.methods.ppo.learner import PPOLearner
from marlang.methods.ppo.options import PPOOptions
from marlang.models.local_policy import LocalPolicy, local_policies
from marlang.models.policy import ActionPolicy
from marlang.prompts import PromptLibrary
from marlang.testing import tiny_chat_model
from marlang.types import Step, TextObservation, Trajectory

MISSION = "go to the red ball"
ACTIONS = ["turn left", "turn right", "go forward"]


def test_a_cut_off_episode_is_bootstrapped_on_the_prompt_of_its_next_decision(tmp_path, monkeypatch):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "act_instruction_direct.txt").write_text("Pick the move that brings you nearest the ball.")
    model = tiny_chat_model()
    agent = LLMAgent("agent_0", model, policy="Be quick.", prompts=PromptLibrary(prompts), history=1,
                     chain_of_thought=False, action_selection="score")
    first = TextObservation("You see a wall 1 step forward", MISSION, ACTIONS)
    final = TextObservation("You see a red ball 2 steps left", MISSION, ACTIONS)
    ctx = CallContext(episode=5)
    played = asyncio.run(agent.act(first, [], ctx.for_step(0)))
    # the decision the episode was cut off before: what its bootstrap value stands for
    following = asyncio.run(agent.act(final, [], ctx.for_step(1)))
    assert following.prompt is not None and "step 0: you did" in following.prompt
    assert "nearest the ball" in following.prompt
    traj = Trajectory(episode=5, seed=0, env_id="babyai/goto-obj", protocol="independent", agents=["agent_0"],
                      steps=[Step(0, {"agent_0": first}, [], {"agent_0": played}, {"agent_0": 0.0}, truncated=True)],
                      final_observations={"agent_0": final})

    context = LearnerContext(actors={"agent_0": agent}, agents=["agent_0"], local=local_policies({"agent_0": model}),
                             run_dir=tmp_path / "run")
    learner = PPOLearner(PPOOptions(device="cpu", lora={"r": 4, "alpha": 8}), context)
    learner.trainer.setup()
    scored: list[tuple[str, list[str]]] = []
    original = LocalPolicy.score_actions

    def recording(self, prompt, actions, adapter):
        scored.append((prompt, list(actions)))
        return original(self, prompt, actions, adapter)

    monkeypatch.setattr(LocalPolicy, "score_actions", recording)
    asyncio.run(learner._bootstrap_value(traj, "agent_0"))
    assert scored == [(following.prompt, list(ActionPolicy.candidates(ACTIONS, following.choice_lead)))]
