"""LangMARL on the HumanEval task env with the shipped config and a fake model: two programmers
in sequence write code, the sandbox judges it, the critic reads the episode (never the hidden
tests) and the optimizer rewrites both policies."""

from pathlib import Path

from marlang.config import load_config
from marlang.envs.tasks.data import load_task
from marlang.run import Experiment
from tests.fakes import FakeRuleChatModel, langmarl_rule

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "langmarl_humaneval.yaml"


def coder_rule(messages):
    system = str(messages[0].content)
    if "You improve the policies" in system:
        return langmarl_rule(messages)
    prompt = str(messages[-1].content)
    name = prompt.split("the function `")[1].split("`")[0] if "the function `" in prompt else "f"
    return f"Here is my code.\n```python\ndef {name}(*args):\n    return None\n```"


def test_the_humaneval_langmarl_config_runs_and_hides_the_tests_from_the_critic(tmp_path):
    config = load_config(
        CONFIG,
        overrides=["learning.method=langmarl", "learning.iterations=1", "learning.rollouts=2",
                   "run.parallel=2", "run.progress=false", "model.cache=false", "model.spec=openai:fake"],
    )
    model = FakeRuleChatModel(rule=coder_rule)
    result = Experiment(config, tmp_path / "run", chat_model=model).run()
    assert result.summary["episodes"] == 2
    episodes = result.run_dir / "episodes.jsonl"
    assert episodes.exists()
    critic_prompts = [str(m[-1].content) for m in model.calls if "read a whole episode" in str(m[-1].content)]
    assert len(critic_prompts) == 2
    problems = {p.task_id: p for p in load_task("humaneval", "test[33:133]")}
    for prompt in critic_prompts:
        assert "return None" in prompt  # the team's code is what the critic judges
        assert "passed" in prompt       # and how it fared
        shown = [p for p in problems.values() if p.entry_point in prompt]
        assert shown
        for problem in shown:
            for test in problem.tests:
                assert test not in prompt
            body = problem.canonical_solution[len(problem.prompt):].strip()
            assert body not in prompt
    policies = (result.run_dir / "policies.jsonl").read_text().splitlines()
    assert len(policies) == 2  # both programmers' policies rewritten
