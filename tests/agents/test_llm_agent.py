import asyncio

from marlang.agents import CallContext, LLMAgent, ReflexionMemory
from marlang.types import Decision, Message, Step, TextObservation, Trajectory
from tests.fakes import FakeRuleChatModel, babyai_rule

LEGAL = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
OBS = TextObservation("You see a blue key 2 steps forward", "pick up the blue key", LEGAL)


def make_agent(rule, **kw):
    model = FakeRuleChatModel(rule=rule)
    return LLMAgent("agent_0", model, policy="Be quick.", **kw), model


def test_act_parses_a_legal_action_with_its_thought():
    agent, model = make_agent(babyai_rule)
    d = asyncio.run(agent.act(OBS, [], CallContext(episode=0, step=0)))
    assert d == Decision("go forward", thought="The path ahead looks open.", raw=d.raw, valid=True)
    assert len(model.calls) == 1
    system, user = model.calls[0]
    assert "pick up the blue key" in system.content and "Be quick." in system.content
    assert "You see a blue key 2 steps forward" in user.content
    assert "Action:" in user.content


def test_invalid_output_is_reprompted_once_then_counted():
    replies = iter(["I like turtles.", "Action: toggle"])
    agent, model = make_agent(lambda msgs: next(replies))
    d = asyncio.run(agent.act(OBS, [], CallContext()))
    assert d.action == "toggle" and d.reprompted and not d.valid and not d.fallback
    assert len(model.calls) == 2
    assert "Reply with exactly one of" in model.calls[1][-1].content


def test_fallback_action_when_the_reprompt_also_fails():
    agent, model = make_agent(lambda msgs: "no idea", fallback_action="turn right")
    d = asyncio.run(agent.act(OBS, [], CallContext()))
    assert (d.action, d.valid, d.fallback, d.reprompted) == ("turn right", False, True, True)
    assert len(model.calls) == 2


def test_without_reprompt_the_fallback_defaults_to_the_first_legal_action():
    agent, model = make_agent(lambda msgs: "no idea", reprompt=False)
    d = asyncio.run(agent.act(OBS, [], CallContext()))
    assert (d.action, d.fallback, d.reprompted) == ("turn left", True, False)
    assert len(model.calls) == 1


def test_prompts_show_reflections_history_and_visible_messages():
    mem = ReflexionMemory(capacity=2)
    mem.add_reflection("Pick up the key before opening the door.")
    agent, model = make_agent(babyai_rule, memory=mem)
    ctx = CallContext(episode=3)
    asyncio.run(agent.act(OBS, [], ctx.for_step(0)))
    asyncio.run(agent.act(OBS, [Message("agent_1", "The door is to your left.")], ctx.for_step(1)))
    system, user = model.calls[1]
    assert "Pick up the key before opening the door." in system.content
    assert "step 0: you did 'go forward'" in user.content
    assert "agent_1: The door is to your left." in user.content


def test_speak_returns_a_message_from_the_agent():
    agent, model = make_agent(babyai_rule)
    msg = asyncio.run(agent.speak(OBS, [Message("agent_1", "hello", 0)], CallContext(), round=1))
    assert msg == Message("agent_0", "I see a key. I will go forward.", 1)
    assert "agent_1: hello" in model.calls[0][-1].content


def test_reflect_reads_the_trajectory_and_outcome():
    agent, model = make_agent(babyai_rule)
    steps = [
        Step(t, {"agent_0": OBS}, [], {"agent_0": Decision("go forward")}, {"agent_0": 0.0}) for t in range(3)
    ]
    traj = Trajectory(0, 0, "babyai/pickup", "none", ["agent_0"], steps, success=False)
    text = asyncio.run(agent.reflect(traj, CallContext()))
    assert text.startswith("I should look for the key")
    prompt = model.calls[0][-1].content
    assert "failure" in prompt and "step 2: saw 'You see a blue key 2 steps forward', did 'go forward'" in prompt


def test_sampling_seeds_differ_per_step_and_are_reproducible():
    seen = []
    model = FakeRuleChatModel(rule=babyai_rule)
    orig = model._generate

    def spy(messages, stop=None, run_manager=None, **kwargs):
        seen.append(kwargs.get("seed"))
        return orig(messages, stop, **kwargs)

    object.__setattr__(model, "_generate", spy)
    agent = LLMAgent("agent_0", model, policy="p", sample_seeds=True)
    for step in (0, 1, 0):
        asyncio.run(agent.act(OBS, [], CallContext(episode=0, step=step, seed=7)))
    assert seen[0] is not None and seen[0] != seen[1] and seen[0] == seen[2]


def test_scoring_thinks_then_chooses_among_the_legal_actions_only():
    model = FakeRuleChatModel(rule=lambda msgs: "The key is ahead so I pick up. Action: pick up",
                              supports_choices=True)
    agent = LLMAgent("agent_0", model, policy="", action_selection="score")
    d = asyncio.run(agent.act(OBS, [], CallContext(episode=0, step=3)))
    assert (d.action, d.valid, d.reprompted, d.fallback) == ("pick up", True, False, False)
    assert d.thought == "The key is ahead so I pick up."
    think, choose = model.call_kwargs
    assert "Action:" in think["stop"]
    assert choose["choices"] == LEGAL
    assert choose["choice_prefix"] == "The key is ahead so I pick up.\nAction: "
    assert "step 3: you did 'pick up'" in agent.memory.recent(0, 5)[-1]


def test_scoring_without_chain_of_thought_is_one_call():
    model = FakeRuleChatModel(rule=lambda msgs: "toggle", supports_choices=True)
    agent = LLMAgent("agent_0", model, policy="", action_selection="score", chain_of_thought=False)
    d = asyncio.run(agent.act(OBS, [], CallContext()))
    assert d.action == "toggle" and d.thought == "" and len(model.calls) == 1


def test_unknown_action_selection_names_the_choices():
    import pytest

    with pytest.raises(ValueError, match="'generate' or 'score'"):
        LLMAgent("agent_0", FakeRuleChatModel(), policy="", action_selection="vote")


def test_a_chooser_answering_outside_the_choices_is_counted_invalid():
    class OffListChooser(FakeRuleChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            kwargs.pop("choices", None)
            kwargs.pop("choice_prefix", None)
            return super()._generate(messages, stop, run_manager, **kwargs)

    model = OffListChooser(rule=lambda msgs: "dance", supports_choices=True)
    agent = LLMAgent("agent_0", model, policy="", action_selection="score", chain_of_thought=False,
                     fallback_action="toggle")
    d = asyncio.run(agent.act(OBS, [], CallContext()))
    assert (d.action, d.valid, d.fallback) == ("toggle", False, True)
    assert d.raw.endswith("dance")


CODE_OBS = TextObservation(
    "Write add(a, b) returning the sum.", "solve the task", [],
    {"answer_format": "code", "entry_point": "add"},
)


def test_free_text_observation_is_answered_with_extracted_code():
    agent, model = make_agent(lambda msgs: "Sure.\n```python\ndef add(a, b):\n    return a + b\n```")
    d = asyncio.run(agent.act(CODE_OBS, [], CallContext()))
    assert d.valid and d.action == "def add(a, b):\n    return a + b" and d.thought == "Sure."
    system, user = model.calls[0]
    assert "Python code" in system.content and "```python" in user.content


def test_a_reply_without_an_answer_is_asked_again_then_counted_invalid():
    replies = iter(["I would add them.", "Still thinking."])
    agent, model = make_agent(lambda msgs: next(replies))
    d = asyncio.run(agent.act(CODE_OBS, [], CallContext()))
    assert (d.action, d.valid, d.reprompted) == ("", False, True)
    assert len(model.calls) == 2 and "held no Python code block" in model.calls[1][-1].content
    replies = iter(["hmm", "```python\ndef add(a, b):\n    return a + b\n```"])
    agent, _ = make_agent(lambda msgs: next(replies))
    d = asyncio.run(agent.act(CODE_OBS, [], CallContext()))
    assert d.action.startswith("def add") and not d.valid and d.reprompted


def test_math_and_text_formats():
    math_obs = TextObservation("What is 2+2?", "solve", [], {"answer_format": "math"})
    agent, model = make_agent(lambda msgs: r"2+2 is four, so \boxed{4}")
    assert asyncio.run(agent.act(math_obs, [], CallContext())).action == "4"
    assert r"\boxed{<answer>}" in model.calls[0][-1].content
    text_obs = TextObservation("Who wrote Hamlet?", "answer", [], {})
    agent, _ = make_agent(lambda msgs: "A playwright.\nAnswer: William Shakespeare")
    assert asyncio.run(agent.act(text_obs, [], CallContext())).action == "William Shakespeare"


def test_a_lone_legal_action_needs_no_model_call():
    agent, model = make_agent(lambda msgs: "Action: toggle")
    d = asyncio.run(agent.act(TextObservation("wait for agent_0", "m", ["wait"]), [], CallContext()))
    assert d == Decision("wait", valid=True) and not model.calls


class FakePrefillChatModel(FakeRuleChatModel):
    """Continues a given start of the reply, like the local models."""

    supports_prefill: bool = True


def test_reprompt_starts_the_reply_with_the_format_on_models_that_continue_one():
    replies = iter(["hmm", "def add(a, b):\n    return a + b\n```"])
    model = FakePrefillChatModel(rule=lambda msgs: next(replies))
    agent = LLMAgent("agent_0", model, policy="Be quick.")
    d = asyncio.run(agent.act(CODE_OBS, [], CallContext()))
    assert model.call_kwargs[0].get("prefill") is None
    assert model.call_kwargs[1]["prefill"] == "```python\n"
    assert d.action == "def add(a, b):\n    return a + b" and d.reprompted and not d.valid
    assert "[re-prompt] ```python\ndef add" in d.raw
    # a model that cannot continue a reply gets no prefill, and its reply is taken as it is
    replies = iter(["hmm", "def add(a, b):\n    return a + b"])
    agent, plain = make_agent(lambda msgs: next(replies))
    d = asyncio.run(agent.act(CODE_OBS, [], CallContext()))
    assert "prefill" not in plain.call_kwargs[1] and d.action.startswith("def add")
