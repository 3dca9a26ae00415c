"""The shared records of ``marlang.types``."""


def test_call_context_lives_in_types_and_is_still_importable_from_the_agents():
    from marlang.agents import CallContext as FromAgents
    from marlang.agents.llm_agent import CallContext as FromLLMAgent
    from marlang.types import CallContext

    assert FromAgents is CallContext and FromLLMAgent is CallContext
    ctx = CallContext(episode=3, step=1, seed=7, iteration=2).for_step(5)
    assert (ctx.episode, ctx.step, ctx.seed, ctx.iteration) == (3, 5, 7, 2)
