"""The cooperative coding and reasoning task envs: PettingZoo API, turn bookkeeping, joint
answers, feedback modes, memory, rewards, invalid answers, reference solvers, narration, and
that hidden tests and reference answers never reach an observation or a narration."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pettingzoo.test import parallel_api_test

from marlang.envs import list_envs, make
from marlang.envs.core.narration import agent_trajectory, format_trajectory, step_summary
from marlang.envs.tasks.coding import CodeTaskEnv, program_prefix, split_reference
from marlang.envs.tasks.cooperative import CooperativeTaskEnv
from marlang.envs.tasks.data import CodeProblem, MathProblem, QAProblem
from marlang.envs.tasks.feedback import check_sandbox_slice, sliced_indices
from marlang.envs.tasks.levelled import LEVELLED_MAX, analyze_code, helper_usage, levelled_reward
from marlang.envs.tasks.problems import load_problems
from marlang.envs.tasks.reasoning import MathTaskEnv, QATaskEnv, majority_answer
from marlang.types import Decision, Step, Trajectory
from tests.fakes import FakeRuleChatModel

TASK_IDS = ["code/humaneval", "code/mbpp", "code/coophumaneval", "math/math", "qa/hotpotqa"]

# Distinctive values: a leak of a hidden test or its expected value is easy to spot.
ADD = CodeProblem(
    task_id="Toy/add",
    prompt='def add(a, b):\n    """Return the sum of a and b."""\n',
    entry_point="add",
    tests=(
        "assert add(1111, 2222) == 3333",
        "assert add(-40, 7) == -33",
        "assert add(123456, 1) == 123457",
        "assert add(0, 98765) == 98765",
    ),
    canonical_solution='def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n',
    helper_prompt="Write a helper function named `aux` that `add` can call.",
)
CANONICAL_BODY = "return a + b"
WRONG = "def add(a, b):\n    return a - b\n"
"""Fails every test (its first result is -1111)."""
HALF = "def add(a, b):\n    return b + a if a > 0 else 0\n"
"""Passes tests 1 and 3 (a > 0), fails 2 and 4."""
HIDDEN_EXPECTED = ["3333", "123457", "98765"]
PI = MathProblem(
    task_id="Toy/pi",
    problem="Give the best fraction with a three-digit denominator close to pi.",
    answer="\\frac{355}{113}",
    solution="Continued fractions give \\boxed{\\frac{355}{113}}.",
)
RIVER = QAProblem(
    task_id="Toy/river",
    question="Which river flows through the capital of Examplestan?",
    context="Examplestan: Examplestan is a country. Its capital lies on a famous river.",
    answer="Zanzibar Blue",
)


def code_env(**kwargs) -> CodeTaskEnv:
    return CodeTaskEnv([ADD], env_id="toy/add", **kwargs)


def play(env: CooperativeTaskEnv, answers, seed: int = 0, options=None) -> Trajectory:
    """Play one episode: ``answers(env, observations)`` gives the joint action."""
    observations, _ = env.reset(seed=seed, options=options)
    steps = []
    while env.agents:
        actions = answers(env, observations)
        after, rewards, terminations, truncations, infos = env.step(actions)
        steps.append(
            Step(
                t=len(steps), observations=observations, messages=[],
                decisions={a: Decision(action=str(act)) for a, act in actions.items()},
                rewards=rewards, terminated=any(terminations.values()),
                truncated=any(truncations.values()), infos=infos,
            )
        )
        observations = after
    return Trajectory(
        episode=0, seed=seed, env_id=env.env_id, protocol="test", agents=list(env.possible_agents),
        steps=steps, success=any(i.get("success") for s in steps for i in s.infos.values()),
        final_observations=observations,
    )


def by_turn(*per_turn: str):
    """Every acting agent answers ``per_turn[turn - 1]``; waiting agents wait."""

    def answers(env, observations):
        return {
            agent: obs.legal_actions[0] if obs.legal_actions else per_turn[env.turn - 1]
            for agent, obs in observations.items()
        }

    return answers


def observation_texts(trajectory: Trajectory) -> str:
    observations = [o for s in trajectory.steps for o in s.observations.values()]
    observations += list(trajectory.final_observations.values())
    return "\n".join(o.text + o.mission + json.dumps(o.data) for o in observations)


@pytest.fixture(scope="module")
def data_files(tmp_path_factory) -> dict[str, Path]:
    """Small files in each public dataset's own schema."""
    root = tmp_path_factory.mktemp("task_data")
    rows = {
        "mbpp": [
            {"task_id": 11, "prompt": "Write a function to reverse the words of a sentence.",
             "code": "def reverse_words(s):\n    return ' '.join(s.split()[::-1])",
             "test_imports": [], "source_file": "toy.pdf",
             "test_list": ["assert reverse_words('a b c') == 'c b a'",
                           "assert reverse_words('x') == 'x'"]},
            {"task_id": 12, "prompt": "Write a function to find the hypotenuse of a triangle.",
             "code": "import math\ndef hypotenuse(a, b):\n    return math.sqrt(a * a + b * b)",
             "test_imports": ["import math"], "source_file": "toy.pdf",
             "test_list": ["assert math.isclose(hypotenuse(3, 4), 5.0)"]},
        ],
        "coophumaneval": [
            {"task_id": "Coop/0", "entry_point": "square_sum",
             "prompt": "def square_sum(xs):\n    \"\"\"Sum of the squares of xs.\"\"\"\n",
             "canonical_solution": "    return sum(x * x for x in xs)\n",
             "test": "def check(candidate):\n    assert candidate([1, 2]) == 5\n"
                     "    assert candidate([]) == 0\n"},
        ],
        "math": [
            {"problem": "What is $1 + 1$?", "level": "Level 1", "type": "Prealgebra",
             "solution": "It is $\\boxed{2}$."},
            {"problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?", "level": "Level 1",
             "type": "Prealgebra", "solution": "$\\boxed{\\frac{3}{4}}$."},
        ],
        "hotpotqa": [
            {"id": "hp-1", "question": "Which river flows through Sampleton?",
             "answer": "the Blue River", "type": "bridge", "level": "easy",
             "supporting_facts": {"title": ["Sampleton"], "sent_id": [0]},
             "context": {"title": ["Sampleton", "Lake"],
                         "sentences": [["Sampleton lies on the Blue River."], ["A lake."]]}},
        ],
    }
    paths = {}
    for name, records in rows.items():
        path = root / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        paths[name] = path
    return paths


def build(env_id: str, data_files: dict[str, Path], **kwargs) -> CooperativeTaskEnv:
    task = env_id.split("/")[1]
    if task != "humaneval":
        kwargs.setdefault("data_files", str(data_files["hotpotqa" if task == "hotpotqa" else task]))
    return make(env_id, **kwargs)


# ------------------------------------------------------------------------------ registry, API


def test_task_envs_are_registered_with_one_line_descriptions():
    envs = list_envs()
    for env_id in TASK_IDS:
        assert env_id in envs and "\n" not in envs[env_id]


@pytest.mark.parametrize("structure", ["sequential", "joint"])
@pytest.mark.parametrize("env_id", TASK_IDS)
def test_parallel_api(env_id, structure, data_files):
    kwargs = {"limit": 2} if env_id == "code/humaneval" else {}
    env = build(env_id, data_files, structure=structure, **kwargs)
    parallel_api_test(env, num_cycles=20)
    env.close()


def test_defaults_and_kinds(data_files):
    expected = {
        "code/humaneval": (CodeTaskEnv, 2, "code"),
        "code/mbpp": (CodeTaskEnv, 2, "code"),
        "code/coophumaneval": (CodeTaskEnv, 2, "code"),
        "math/math": (MathTaskEnv, 1, "math"),
        "qa/hotpotqa": (QATaskEnv, 1, "text"),
    }
    for env_id, (cls, turns, answer_format) in expected.items():
        env = build(env_id, data_files)
        assert type(env) is cls and env.max_steps == turns and env.n_agents == 2
        observations, _ = env.reset(seed=0)
        assert observations["agent_0"].data["answer_format"] == answer_format
    assert len(make("code/humaneval").problems) == 164
    assert [p.entry_point for p in build("code/mbpp", data_files).problems] == [
        "reverse_words", "hypotenuse",
    ]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"structure": "tree"}, ["structure", "'sequential'", "'joint'"]),
        ({"feedback": "loud"}, ["feedback", "'level_feedback'", "'expert_edits'"]),
        ({"memory": "all"}, ["memory", "'full'", "'last'"]),
        ({"sandbox_slice": "first"}, ["sandbox_slice", "'all'"]),
        ({"sandbox_slice": 1.5}, ["sandbox_slice"]),
        ({"reward": "levelled"}, ["reward='levelled'", "joint"]),
        ({"reward": "bonus"}, ["reward", "'tests'", "'levelled'"]),
        ({"feedback": "expert_edits"}, ["expert_model", "required"]),
        ({"feedback": "expert_edits", "expert_model": "nope:x"}, ["expert_model", "openai:"]),
        ({"structure": "joint", "n_agents": 1}, ["n_agents >= 2"]),
        ({"max_steps": 0}, ["max_steps", "turns"]),
        ({"n_agents": 0}, ["n_agents"]),
        ({"timeout": -1}, ["timeout"]),
        ({"sandbox_workers": 0}, ["sandbox_workers"]),
    ],
)
def test_bad_parameters_name_the_parameter_and_choices(kwargs, words):
    with pytest.raises(ValueError) as error:
        make("code/humaneval", **kwargs)
    message = str(error.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_unknown_parameter_lists_valid_ones():
    with pytest.raises(ValueError, match="valid parameters: .*structure.*feedback"):
        make("math/math", colour="red")
    with pytest.raises(ValueError, match="no parameter 'reward'"):
        make("math/math", reward="tests")


def test_problem_choice_by_seed_index_and_task_id():
    env = make("code/humaneval")
    assert env.reset(seed=3)[0]["agent_0"].data["task_id"] == "HumanEval/3"
    assert env.reset(seed=164 + 5)[0]["agent_0"].data["task_id"] == "HumanEval/5"
    assert env.reset(options={"problem": 7})[0]["agent_0"].data["task_id"] == "HumanEval/7"
    chosen = env.reset(seed=1, options={"problem": "HumanEval/42"})[0]
    assert chosen["agent_0"].data["task_id"] == "HumanEval/42"
    with pytest.raises(ValueError, match=r"options\['problem'\].*0\.\.163.*task id"):
        env.reset(options={"problem": "HumanEval/9999"})


def test_problems_are_loaded_once_per_process(data_files, tmp_path):
    assert make("code/humaneval").problems is make("code/humaneval").problems
    path = tmp_path / "math.jsonl"
    path.write_text(data_files["math"].read_text())
    first = load_problems("math", data_files=str(path))
    assert load_problems("math", data_files=str(path)) is first
    path.write_text(data_files["math"].read_text().splitlines()[0] + "\n")
    assert len(load_problems("math", data_files=str(path))) == 1  # a changed file is reloaded


# ------------------------------------------------------------------------------ sequential turns


def test_sequential_turns_who_acts_and_waits_ignored():
    env = code_env(n_agents=3, max_steps=2)
    observations, _ = env.reset(seed=0)
    assert [observations[a].legal_actions for a in env.agents] == [[], ["wait"], ["wait"]]
    assert [observations[a].data["role"] for a in env.agents] == ["draft", "draft", "final"]
    # A waiting agent's action is ignored, whatever it is.
    observations, rewards, *_, infos = env.step(
        {"agent_0": "def add(a, b):\n    return 0\n", "agent_1": CANONICAL_BODY, "agent_2": None}
    )
    assert rewards == dict.fromkeys(env.possible_agents, 0.0)
    assert [observations[a].legal_actions for a in env.agents] == [["wait"], [], ["wait"]]
    assert infos["agent_2"]["invalid"] is False and infos["agent_0"]["acting"]
    assert "agent_0 (draft) answered:\n```python\ndef add(a, b):\n    return 0" in (
        observations["agent_1"].text
    )
    observations, *_ = env.step({"agent_0": "wait", "agent_1": WRONG, "agent_2": "wait"})
    assert observations["agent_2"].legal_actions == []
    assert "return 0" in observations["agent_2"].text and "return a - b" in observations["agent_2"].text
    _, rewards, terminations, truncations, infos = env.step(
        {"agent_0": "wait", "agent_1": "wait", "agent_2": HALF}
    )
    assert infos["agent_0"]["evaluated"] and infos["agent_0"]["passed"] == 2
    assert rewards["agent_0"] == pytest.approx(0.5)
    assert not any(terminations.values()) and not any(truncations.values())
    assert env.turn == 2 and env.history[0].answers["agent_2"].startswith("def add")
    assert env.max_env_steps == 6


def test_feedback_reaches_the_next_turn_and_memory_full_vs_last():
    seen = {}
    for memory in ("full", "last"):
        env = code_env(max_steps=3, memory=memory, feedback="level_passed")
        trajectory = play(env, by_turn(WRONG, HALF, HALF))
        turn3 = trajectory.steps[4].observations["agent_0"].text
        seen[memory] = turn3
        assert "Turn 2:" in turn3 and "return b + a if a > 0 else 0" in turn3
        assert "- Tests: 1 of 1 passed" in turn3  # turn 2's feedback (first test passes)
    assert "Turn 1:" in seen["full"] and "return a - b" in seen["full"]
    assert "- Tests: 0 of 1 passed" in seen["full"]  # turn 1's feedback
    assert "Turn 1:" not in seen["last"] and "return a - b" not in seen["last"]


def test_rewards_sum_to_the_final_share_and_success_terminates():
    env = code_env(max_steps=3)
    trajectory = play(env, by_turn(HALF, WRONG, ADD.canonical_solution))
    judged = [s for s in trajectory.steps if s.infos["agent_0"].get("evaluated")]
    assert [s.rewards["agent_0"] for s in judged] == pytest.approx([0.5, -0.5, 1.0])
    assert [s.rewards["agent_0"] for s in trajectory.steps if s not in judged] == [0.0] * 3
    assert trajectory.team_return == pytest.approx(1.0)
    last = trajectory.steps[-1]
    assert last.terminated and not last.truncated and trajectory.success
    assert last.infos["agent_1"]["solved"] and last.infos["agent_1"]["pass_rate"] == 1.0
    assert "passed all 4 hidden tests on turn 3" in trajectory.final_observations["agent_0"].text


def test_running_out_of_turns_truncates():
    env = code_env(max_steps=2)
    trajectory = play(env, by_turn(WRONG, HALF))
    last = trajectory.steps[-1]
    assert last.truncated and not last.terminated and not trajectory.success
    assert trajectory.team_return == pytest.approx(0.5) and len(trajectory.steps) == 4
    assert env.agents == []
    with pytest.raises(RuntimeError, match="reset"):
        env.step({"agent_0": "wait", "agent_1": "wait"})


def test_invalid_answers_are_counted_and_judged_wrong():
    env = code_env(max_steps=2)
    env.reset(seed=0)
    _, _, _, _, infos = env.step({"agent_0": "   \n", "agent_1": "wait"})
    assert infos["agent_0"]["invalid"] and infos["agent_0"]["invalid_count"] == 1
    observations, rewards, _, _, infos = env.step({"agent_0": "wait", "agent_1": None})
    assert infos["agent_1"]["invalid"] and infos["agent_0"]["invalid_count"] == 2
    assert infos["agent_0"]["status"] == "no_answer" and infos["agent_0"]["report"] is None
    assert rewards["agent_0"] == 0.0 and env.invalid_counts == {"agent_0": 1, "agent_1": 1}
    assert "gave no answer" in observations["agent_0"].text
    _, _, _, _, infos = env.step({"agent_0": 42, "agent_1": "wait"})  # not a string
    assert infos["agent_0"]["invalid"] and infos["agent_0"]["invalid_count"] == 3


def test_markdown_fences_are_stripped_from_code_answers():
    env = code_env(max_steps=1)
    fenced_answer = f"Here it is:\n```python\n{ADD.canonical_solution}```\nDone."
    trajectory = play(env, by_turn(fenced_answer))
    assert trajectory.success


# ------------------------------------------------------------------------------ joint coding


def test_joint_combines_helper_and_main_and_scores_levels():
    env = code_env(structure="joint", max_steps=1)
    observations, _ = env.reset(seed=0)
    assert [observations[a].legal_actions for a in env.agents] == [[], []]
    assert observations["agent_0"].data["role"] == "helper"
    assert observations["agent_0"].data["helper_name"] == "aux"
    assert observations["agent_1"].data["helper_names"] == ["aux"]
    assert "Write a helper function named `aux`" in observations["agent_0"].text
    helper = "def aux(a, b):\n    return a + b\n"
    main = "def add(a, b):\n    total = aux(a, b)\n    return int(total)\n"
    _, rewards, terminations, _, infos = env.step({"agent_0": helper, "agent_1": main})
    assert all(terminations.values()) and infos["agent_0"]["success"]
    levelled = infos["agent_0"]["levelled_reward"]
    assert (levelled["structure"], levelled["syntax"], levelled["tests"]) == (1.0, 0.5, 1.0)
    assert levelled["cooperation"] == 1.5 and levelled["total"] == LEVELLED_MAX
    assert rewards["agent_0"] == 1.0  # reward="tests" by default
    program = env.history[0].evaluation.team_answer
    assert program.index("def aux") < program.index("total = aux")


def test_levelled_reward_as_reward_and_its_levels():
    env = code_env(structure="joint", max_steps=2, reward="levelled")
    wrapper = "def add(a, b):\n    return aux(a, b)\n"
    trajectory = play(env, lambda e, o: {"agent_0": "def aux(a, b):\n    return a - b\n",
                                         "agent_1": wrapper})
    first = trajectory.steps[0].infos["agent_1"]["levelled_reward"]
    # 0 tests pass: nothing real was earned, so no level pays (not even structure or syntax).
    assert (first["structure"], first["syntax"], first["tests"], first["cooperation"]) == (
        0.0, 0.0, 0.0, 0.0,
    )
    assert trajectory.steps[0].rewards["agent_0"] == 0.0
    assert trajectory.team_return == 0.0

    facts = {"loads": True, "passed": 2, "total": 4, "helper_works": True}
    thin = levelled_reward([("aux", "def aux(a, b):\n    return a + b\n")], wrapper, "add", **facts)
    assert thin.thin_wrapper and thin.cooperation == 0.5 and thin.tests == 0.5
    ignored = levelled_reward(
        [("aux", "def aux(a):\n    return a * 2\n")],
        "def add(a, b):\n    aux(a)\n    s = aux(a) + b\n    return s\n", "add", **facts,
    )
    assert ignored.ignored_helper_call and ignored.cooperation == 1.0
    no_main = levelled_reward([("aux", "def aux(a):\n    return a * 2\n")], "x = 1", "add", **facts)
    assert (no_main.structure, no_main.total) == (0.4, 0.4)
    broken = levelled_reward([("aux", "pass")], "def add(a, b):\n    return a\n", "add",
                             loads=False, passed=0, total=4, helper_works=False)
    assert (broken.structure, broken.syntax, broken.total) == (0.0, 0.0, 0.0)


def test_joint_with_three_agents_names_each_helper():
    env = code_env(structure="joint", n_agents=3, max_steps=1)
    observations, _ = env.reset(seed=0)
    assert observations["agent_0"].data["helper_name"] == "aux_0"
    assert "`aux_1`" in observations["agent_1"].text and "`aux`" not in observations["agent_1"].text
    _, _, _, _, infos = env.step({
        "agent_0": "def aux_0(a, b):\n    return a + b\n",
        "agent_1": "def aux_1(x):\n    return int(x)\n",
        "agent_2": "def add(a, b):\n    s = aux_0(a, b)\n    return aux_1(s)\n",
    })
    assert infos["agent_2"]["success"]
    assert infos["agent_2"]["levelled_reward"]["total"] == LEVELLED_MAX


def test_code_analysis_helpers():
    assert not analyze_code("def f(:\n  pass").compiles
    facts = analyze_code("def f():\n    return 1\ndef g():\n    pass\n")
    assert facts.functions == {"f", "g"} and facts.returning == {"f"}
    usage = helper_usage("def main(x):\n    r = aux(x)\n    return r\n", "main", ["aux"])
    assert usage.called == ("aux",) and usage.thin_wrapper
    assert helper_usage("def main(x):\n    return x\n", "main", ["aux"]).called == ()
    helper, main = split_reference("import math\n\ndef h(x):\n    return x\n\ndef f(x):\n"
                                   "    return h(x)\n", "f")
    assert "import math" in helper and "def h" in helper and main.startswith("def f")
    assert program_prefix("Write a function.\nimport math\n") == "import math"
    assert program_prefix(ADD.prompt).startswith("def add")


# ------------------------------------------------------------------------------ feedback modes


def test_sandbox_slice_semantics():
    assert sliced_indices(5, 1) == [0]
    assert sliced_indices(5, 2) == [0, 1]
    assert sliced_indices(5, -2) == [3, 4]
    assert sliced_indices(5, None) == [0, 1, 2, 3, 4]
    assert sliced_indices(2, 9) == [0, 1]
    assert check_sandbox_slice(0) is None and check_sandbox_slice("all") is None
    assert check_sandbox_slice(None) is None and check_sandbox_slice(-3) == -3


def feedback_after(answer: str, **kwargs) -> str:
    """The feedback agent_0 sees in turn 2 after the team answered ``answer``."""
    env = code_env(max_steps=2, **kwargs)
    env.reset(seed=0)
    env.step({"agent_0": answer, "agent_1": "wait"})
    observations, *_ = env.step({"agent_0": "wait", "agent_1": answer})
    text = observations["agent_0"].text
    assert env.turn == 2
    return text.split("Feedback:\n", 1)[1]


def test_level_feedback_shows_failing_tests_in_the_slice_without_their_source():
    one = feedback_after(WRONG)
    assert "AssertionError: expected 3333, got -1111" in one
    assert "-33" not in one and "123457" not in one  # outside the slice
    last_two = feedback_after(HALF, sandbox_slice=-2)
    assert "1 of 2 passed" in last_two and "test 4" in last_two and "98765" in last_two
    every = feedback_after(WRONG, sandbox_slice="all")
    assert "0 of 4 passed" in every and "expected 123457" in every
    for text in (one, last_two, every):
        for source in ADD.tests:
            assert source not in text and "add(1111, 2222)" not in text
    passing_slice = feedback_after(HALF)  # test 1 passes, others do not
    assert "1 of 1 passed" in passing_slice and "Not every hidden test passes yet" in passing_slice


def test_level_feedback_reports_syntax_and_load_errors():
    syntax = feedback_after("def add(a, b)\n    return a + b\n")
    assert "Syntax: ERROR (line 1" in syntax
    raising = feedback_after("def add(a, b):\n    return a + b\n\nraise ValueError('boom at load')\n")
    assert "Loading: FAILED" in raising and "ValueError" in raising and "boom at load" in raising
    missing = feedback_after("def plus(a, b):\n    return a + b\n")
    assert "Function `add`: NOT defined" in missing


def test_passed_level_passed_and_plain_feedback():
    passed = feedback_after(WRONG, feedback="passed")
    assert passed.startswith("The team's answer did NOT pass the first hidden test")
    assert "3333" not in passed and "Syntax" not in passed
    level = feedback_after(WRONG, feedback="level_passed", sandbox_slice=2)
    assert "- Syntax: OK." in level and "- Tests: 0 of 2 passed" in level
    assert "expected" not in level and "AssertionError" not in level
    plain = feedback_after(WRONG, feedback="plain")
    assert plain.startswith("Revise the team's previous answer")
    assert "3333" not in plain and "passed" not in plain


def test_expert_edits_feedback_with_a_fake_expert():
    expert = FakeRuleChatModel(rule=lambda messages: "Replace `a - b` with `a + b`.")
    text = feedback_after(WRONG, feedback="expert_edits", expert_model=expert)
    assert "An expert reviewed" in text and "Replace `a - b` with `a + b`." in text
    (call,) = expert.calls
    request = call[-1].content
    assert "return a - b" in request and ADD.prompt.strip() in request
    assert "expected 3333, got -1111" in request  # the sliced tests' diagnostics
    for hidden in (*ADD.tests, CANONICAL_BODY, "123457"):
        assert hidden not in request


def test_expert_edits_survives_a_failing_expert():
    class Broken(FakeRuleChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            raise ConnectionError("expert offline")

    env = code_env(max_steps=2, feedback="expert_edits", expert_model=Broken())
    env.reset(seed=0)
    env.step({"agent_0": WRONG, "agent_1": "wait"})
    observations, _, _, _, infos = env.step({"agent_0": "wait", "agent_1": WRONG})
    assert "ConnectionError" in infos["agent_0"]["expert_error"]
    assert "The expert proposed no edits" in observations["agent_0"].text


def test_expert_model_spec_is_built_lazily(monkeypatch):
    built = []

    def fake_load(spec, **params):
        built.append(spec)
        return FakeRuleChatModel(rule=lambda m: "Looks fine.")

    monkeypatch.setattr("marlang.models.load_chat_model", fake_load)
    env = code_env(max_steps=2, feedback="expert_edits", expert_model="openai:expert-model")
    env.reset(seed=0)
    assert built == []
    env.step({"agent_0": WRONG, "agent_1": "wait"})
    observations, *_ = env.step({"agent_0": "wait", "agent_1": WRONG})
    assert built == ["openai:expert-model"] and "Looks fine." in observations["agent_0"].text
    env.close()


# ------------------------------------------------------------------------------ math and QA


def test_math_rewards_boxed_answers_and_feedback():
    env = MathTaskEnv([PI], max_steps=2)
    trajectory = play(env, by_turn("The answer is \\boxed{3.14}", "\\boxed{\\dfrac{355}{113}}"))
    judged = [s for s in trajectory.steps if s.infos["agent_0"].get("evaluated")]
    assert [s.infos["agent_0"]["correct"] for s in judged] == [False, True]
    assert judged[0].infos["agent_0"]["answer"] == "3.14"
    assert trajectory.team_return == 1.0 and trajectory.success
    feedback = trajectory.steps[2].observations["agent_0"].text.split("Feedback:\n")[1]
    assert "Final answer found: yes (3.14)" in feedback and "Correct: no" in feedback
    assert "\\boxed" in feedback  # the format hint
    assert "355" not in observation_texts(Trajectory(0, 0, "", "", [], trajectory.steps[:3]))


def test_math_reads_final_answer_phrasings_and_a_copied_placeholder_is_no_answer():
    env = MathTaskEnv([PI], max_steps=2)
    trajectory = play(env, by_turn("The answer is \\boxed{<answer>}", "So the final answer is 355/113."))
    judged = [s.infos["agent_0"] for s in trajectory.steps if s.infos["agent_0"].get("evaluated")]
    assert not judged[0]["answer_found"] and judged[0]["answer"] == "" and not judged[0]["correct"]
    assert judged[1]["answer"] == "355/113" and judged[1]["correct"] and trajectory.success
    joint = MathTaskEnv([PI], structure="joint", n_agents=3)
    joint.reset(seed=0)
    _, _, _, _, infos = joint.step({"agent_0": "\\boxed{<answer>}", "agent_1": "\\boxed{<answer>}",
                                    "agent_2": "The final answer is 3.14."})
    assert infos["agent_0"]["answer"] == "3.14" and infos["agent_0"]["answer_found"]


def test_qa_f1_reward_exact_match_success_and_joint_vote():
    env = QATaskEnv([RIVER], max_steps=2)
    trajectory = play(env, by_turn("Answer: Blue", "zanzibar blue"))
    judged = [s.infos["agent_0"] for s in trajectory.steps if s.infos["agent_0"].get("evaluated")]
    assert judged[0]["f1"] == pytest.approx(2 / 3) and not judged[0]["exact_match"]
    assert judged[1]["exact_match"] and trajectory.success
    assert trajectory.team_return == pytest.approx(1.0)
    joint = QATaskEnv([RIVER], structure="joint", n_agents=3)
    joint.reset(seed=0)
    _, _, _, _, infos = joint.step(
        {"agent_0": "Red", "agent_1": "Zanzibar Blue", "agent_2": "the zanzibar blue"}
    )
    assert infos["agent_0"]["answer"] == "Zanzibar Blue" and infos["agent_0"]["votes"] == 2


def test_majority_vote_ties_go_to_the_last_agent():
    def same(a, b):
        return a == b

    assert majority_answer([("a", "1"), ("b", "2")], same) == ("2", 1)
    assert majority_answer([("a", "1"), ("b", "1"), ("c", "2")], same) == ("1", 2)
    assert majority_answer([("a", "1"), ("b", "2"), ("c", "")], same) == ("1", 1)
    assert majority_answer([("a", ""), ("b", " ")], same) == ("", 0)


# ------------------------------------------------------------------------------ hidden data


@pytest.mark.parametrize("structure", ["sequential", "joint"])
def test_observations_never_show_hidden_tests_or_references(structure):
    for feedback in ("level_feedback", "level_passed", "passed", "plain"):
        env = code_env(max_steps=3, structure=structure, feedback=feedback)
        text = observation_texts(play(env, by_turn(WRONG, HALF, WRONG)))
        for hidden in (*ADD.tests, CANONICAL_BODY, "123457"):
            assert hidden not in text, (feedback, hidden)
    for env in (MathTaskEnv([PI], max_steps=2, structure=structure),
                QATaskEnv([RIVER], max_steps=2, structure=structure)):
        text = observation_texts(play(env, by_turn("3.14", "Red")))
        assert "355" not in text and "Zanzibar" not in text and "Continued fractions" not in text


def test_humaneval_feedback_never_quotes_hidden_test_code():
    """On real problems, including those whose ``check`` could not be split (its asserts live
    in ``test_setup``): level feedback over every test shows no line of the hidden tests."""
    env = make("code/humaneval", n_agents=1, max_steps=2, sandbox_slice="all")
    unsplit = [i for i, p in enumerate(env.problems) if not p.metadata.get("check_split")]
    assert unsplit  # HumanEval has a few
    for index in [*unsplit, *range(12)]:
        problem = env.problems[index]
        observations, _ = env.reset(options={"problem": index})
        wrong = f"def {problem.entry_point}(*args, **kwargs):\n    return [0]\n"
        observations, *_ = env.step({"agent_0": wrong})
        text = observations["agent_0"].text
        assert "Feedback:" in text
        hidden = [*problem.tests, *problem.test_setup.splitlines()]
        for line in (h.strip() for h in hidden):
            if line.startswith(("assert", "check(")):
                assert line not in text, (problem.task_id, line)


def test_narration_never_shows_hidden_tests_expected_values_or_references():
    env = code_env(max_steps=2, sandbox_slice="all")
    trajectory = play(env, by_turn(WRONG, HALF))
    report = trajectory.steps[1].infos["agent_1"]["report"]
    assert report is not None and "assert add(1111, 2222) == 3333" in json.dumps(report)
    texts = [
        format_trajectory(env, trajectory, max_tokens=4000),
        agent_trajectory(env, trajectory, "agent_1", max_tokens=4000),
        *(step_summary(env, s, a) for s in trajectory.steps for a in s.observations),
    ]
    narration = "\n".join(texts)
    assert "tests 0/4 passed" in narration and "tests 2/4 passed" in narration
    assert "return a - b" in narration and "agent_1 (final)" in narration
    for hidden in (*ADD.tests, CANONICAL_BODY, *HIDDEN_EXPECTED, "-1111", "expected"):
        assert hidden not in narration, hidden
    assert format_trajectory(env, trajectory, max_tokens=4000).splitlines()[-1].startswith(
        "Outcome: failure: not solved after 2 judged turns"
    )
    for reasoning in (MathTaskEnv([PI], max_steps=2), QATaskEnv([RIVER], max_steps=2)):
        trajectory = play(reasoning, by_turn("3.14", ""))
        narration = format_trajectory(reasoning, trajectory, max_tokens=4000)
        assert "355" not in narration and "Zanzibar" not in narration
        assert "answer '3.14'" in narration and "1 invalid answer" in narration


# ------------------------------------------------------------------------------ reference solvers


@pytest.mark.parametrize("structure", ["sequential", "joint"])
def test_reference_team_solves_every_humaneval_problem(structure):
    env = make("code/humaneval", structure=structure)
    team = env.scripted_team()
    # Joint splits each canonical program into a helper part and the entry-point function.
    unsolved = []
    for index in range(len(env.problems)):
        observations, _ = env.reset(options={"problem": index})
        team.reset()
        infos = {}
        while env.agents:
            observations, _, _, _, infos = env.step(team.act(observations))
        if not any(info.get("success") for info in infos.values()):
            unsolved.append(env.current_problem.task_id)
    assert unsolved == []


def test_reference_team_solves_the_fixture_datasets(data_files):
    for env_id in TASK_IDS[1:]:
        for structure in ("sequential", "joint"):
            env = build(env_id, data_files, structure=structure)
            team = env.scripted_team()
            for index in range(len(env.problems)):
                observations, _ = env.reset(options={"problem": index})
                while env.agents:
                    observations, _, _, _, infos = env.step(team.act(observations))
                assert infos["agent_0"]["success"], (env_id, structure, index)


BROKEN = [
    ("wrong value", "    return a - b\n", "AssertionError", "expected 3333, got -1111"),
    ("exception", "    return a + undefined_name\n", "NameError", "undefined_name"),
    ("endless loop", "    while True:\n        pass\n", None, "timed out"),
]


@pytest.mark.parametrize(("name", "body", "error_type", "shown"), BROKEN)
def test_broken_solutions_get_the_right_diagnostics(name, body, error_type, shown):
    env = code_env(max_steps=2, timeout=2.5, test_timeout=0.5)
    env.reset(seed=0)
    env.step({"agent_0": "pass", "agent_1": "wait"})
    observations, _, _, _, infos = env.step({"agent_0": "wait", "agent_1": ADD.prompt + body})
    first = infos["agent_0"]["report"]["tests"][0]
    assert not first["passed"] and infos["agent_0"]["passed"] == 0
    if error_type:
        assert first["error_type"] == error_type
    else:
        assert first["timed_out"]
    feedback = observations["agent_0"].text.split("Feedback:\n", 1)[1]
    assert shown in feedback and (error_type or "") in feedback


def test_broken_programs_syntax_error_and_missing_entry_point():
    env = code_env(max_steps=1)
    for answer, status in (("def add(a, b):\nreturn a\n", "syntax_error"),
                           ("def plus(a, b):\n    return a + b\n", "ok")):
        env.reset(seed=0)
        env.step({"agent_0": answer, "agent_1": "wait"})
        _, _, _, _, infos = env.step({"agent_0": "wait", "agent_1": answer})
        assert infos["agent_0"]["status"] == status and infos["agent_0"]["passed"] == 0
    # The prompt's stub defines `add` returning None: the tests fail on its result.
    assert infos["agent_0"]["report"]["tests"][0]["error_type"] == "AssertionError"
    bare = CodeTaskEnv([dataclasses.replace(ADD, prompt="Add two numbers.")], max_steps=1)
    bare.reset(seed=0)
    bare.step({"agent_0": "wait", "agent_1": "wait"})
    _, _, _, _, infos = bare.step({"agent_0": "wait", "agent_1": "def plus(a, b):\n    return 1\n"})
    assert infos["agent_0"]["report"]["tests"][0]["error_type"] == "NameError"


def test_scripted_experiment_runs_the_task_envs(tmp_path, data_files):
    from marlang.config import build_config
    from marlang.run import Experiment

    for env_id, kwargs in (("code/humaneval", {}), ("math/math", {"data_files": str(data_files["math"])})):
        config = build_config({
            "env": {"id": env_id, "n_agents": 2, "kwargs": kwargs},
            "agents": {"kind": "scripted"},
            "run": {"episodes": 2, "parallel": 2, "progress": False},
        })
        result = Experiment(config, tmp_path / env_id.replace("/", "_")).run()
        assert result.summary["success_rate"]["mean"] == 1.0


def test_task_ids_pose_the_named_problems_in_order_and_an_unknown_id_is_one_line():
    env = make("code/humaneval", n_agents=1, task_ids=["HumanEval/42", 60, "HumanEval/5"])
    inner = env.unwrapped
    assert [str(p.task_id) for p in inner.problems] == ["HumanEval/42", "HumanEval/60", "HumanEval/5"]
    env.reset(seed=4)  # seed mod 3 picks the second named problem
    assert str(inner.current_problem.task_id) == "HumanEval/60"
    with pytest.raises(ValueError, match=r"task_ids: no problem 'HumanEval/999'.*HumanEval/0"):
        make("code/humaneval", n_agents=1, task_ids=["HumanEval/999"])
    with pytest.raises(ValueError, match="index 164 is outside the 164 loaded problems"):
        make("code/humaneval", n_agents=1, task_ids=[164])
