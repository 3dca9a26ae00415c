"""The learner seam: the registry, per-method config keys, a learner of one's own, and the
learner model (``learning.model``) serving the learner's calls."""

import pytest
from pydantic import Field

from marlang.config import ConfigError, build_config
from marlang.learners import Candidate, Learner, LearnerOptions, list_learners, register_learner
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from tests.fakes import FakeRuleChatModel, babyai_rule


class HintOptions(LearnerOptions):
    hint: str = Field("Be quick.", min_length=1)


class HintAfterFailure(Learner):
    name = "hint-after-failure"
    options_model = HintOptions
    uses_policies = True

    async def update(self, state, trajectories):
        if any(t.success for t in trajectories):
            return Candidate()
        return Candidate(policies={a: f"{p} {self.options.hint}" for a, p in state.policies.items()},
                         records=[{"agent": a, "episodes": [t.episode for t in trajectories]} for a in state.policies])


register_learner("hint-after-failure", HintAfterFailure, "append a hint after failed iterations")


def config(**learning):
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2, "max_steps": 2},
        "model": {"cache": False},
        "learning": learning,
        "run": {"parallel": 2, "progress": False},
    })


def test_registry_lists_the_builtin_and_registered_learners():
    assert {"none", "reflexion", "langmarl", "hint-after-failure"} <= set(list_learners())


def test_a_registered_learner_runs_on_the_seam_with_its_own_keys(tmp_path):
    with pytest.raises(ConfigError, match="unknown config key 'learning.memory_size' for learning.method "
                                          "'hint-after-failure'; valid keys here: method, iterations, rollouts, "
                                          "accept, eval_rollouts, review, hint"):  # the loop's: it rewrites policies
        config(method="hint-after-failure", memory_size=2)
    with pytest.raises(ConfigError, match="invalid value for 'learning.hint'"):
        config(method="hint-after-failure", hint="")
    cfg = config(method="hint-after-failure", hint="Hurry.", rollouts=2, iterations=2)
    assert cfg.run.episodes == 4 and cfg.total_iterations == 2
    model = FakeRuleChatModel(rule=lambda msgs: "Action: turn left")  # spins: never succeeds
    result = Experiment(cfg, tmp_path / "run", chat_model=model).run()
    rd = RunDirectory(result.run_dir)
    state = rd.read_json("learner_state.json")
    assert state["policies"]["agent_0"].endswith("Hurry. Hurry.") and state["versions"]["agent_0"] == 2
    last_system = str(model.calls[-1][0].content)
    assert "Your policy: Work with your teammates to finish the mission in as few steps as possible. Hurry." \
        in last_system  # iteration 1 acted with version 1
    assert [u["episodes"] for u in rd.read_jsonl("updates.jsonl")] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert result.summary["setting"] == "none, hint-after-failure"


def test_run_episodes_decide_the_iterations_unless_iterations_are_given():
    cfg = config(method="none")
    assert (cfg.rollouts_per_iteration, cfg.total_iterations, cfg.run.episodes) == (2, 5, 10)
    cfg = config(method="none", rollouts=3)
    assert (cfg.total_iterations, cfg.run.episodes) == (4, 10)  # the last iteration plays one episode
    cfg = config(method="none", rollouts=3, iterations=2)
    assert cfg.run.episodes == 6


def test_the_learner_model_serves_every_learner_call(tmp_path):
    from marlang.testing import FakeOpenAIServer

    actors = FakeRuleChatModel(rule=babyai_rule)
    with FakeOpenAIServer(reply='{"agent_0": "fine", "agent_1": "slow"}') as server:
        cfg = config(method="langmarl", rollouts=1, iterations=1,
                     model={"spec": "openai:critic", "base_url": server.base_url, "max_retries": 0, "cache": False})
        Experiment(cfg, tmp_path / "run", chat_model=actors).run()
        served = [r["messages"][-1]["content"] for r in server.requests]
    assert not any("You improve the policies" in str(m[0].content) for m in actors.calls)
    # critic 1, gradient 2, optimizer 2 (K = 1: no aggregator)
    assert len(served) == 5 and sum("read a whole episode" in p for p in served) == 1


def test_a_learners_hooks_into_the_run_are_given_at_construction_and_bound_by_the_run():
    """A context is complete when built: its episode sink and checkpoint barrier exist from the
    start (unbound: nothing is written, nothing awaited) and the run binds them, never
    replacing a field of a built context."""
    import asyncio

    from marlang.learners import CheckpointBarrier, EpisodeSink, LearnerContext
    from marlang.types import PolicyState, Trajectory

    episodes, checkpoint = EpisodeSink(), CheckpointBarrier()
    context = LearnerContext(agents=["agent_0"], record_episode=episodes, before_calls=checkpoint)
    traj = Trajectory(episode=3, seed=0, env_id="babyai/goto-obj", protocol="independent", agents=["agent_0"])
    policy = PolicyState()
    context.record_episode(traj, policy)  # unbound: written nowhere
    asyncio.run(context.before_calls())  # unbound: returns at once
    written, flushed = [], []

    async def flush():
        flushed.append(True)

    episodes.bind(lambda t, p: written.append((t.episode, p)))
    checkpoint.bind(flush)
    context.record_episode(traj, policy)
    asyncio.run(context.before_calls())
    assert written == [(3, policy)] and flushed == [True]
    assert context.record_episode is episodes and context.before_calls is checkpoint


def test_learner_options_declare_the_learners_own_model_and_memory_size():
    from marlang.config import ModelConfig
    from marlang.methods.langmarl.learner import LangMARLOptions
    from marlang.methods.reflexion.learner import ReflexionOptions

    assert (LearnerOptions().learning_model, LearnerOptions().memory_capacity) == (None, 3)
    own = ModelConfig(spec="openai:gpt-4o-mini", structured="json_object")
    assert ReflexionOptions(memory_size=5, model=own).memory_capacity == 5
    assert ReflexionOptions(model=own).learning_model == own
    assert LangMARLOptions(model=own).learning_model == own and LangMARLOptions().learning_model is None
    assert HintOptions().learning_model is None
