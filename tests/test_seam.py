"""The learner seam's guarantees for trainers: fixed-length rollouts truncate, a resume with
another ``run.parallel`` never trains on another iteration's episodes, a learner's update
runs as its own subgraph, and adapters travel from candidate to committed state to rollout."""

import json
from typing import ClassVar

from marlang.config import build_config
from marlang.learners import Candidate, Learner, LearnerOptions, RolloutPlan, register_learner
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from tests.fakes import FakeRuleChatModel


class CappedOptions(LearnerOptions):
    cap: int = 2


class Capped(Learner):
    """Plays fixed-length rollouts, records what it trained on and what the rollouts saw."""

    name = "capped"
    options_model = CappedOptions
    uses_adapters = True
    seen: ClassVar[list] = []
    prepared: ClassVar[list] = []

    def rollout_plan(self, iteration, first_episode, count, seed):
        ids = tuple(range(first_episode, first_episode + count))
        return RolloutPlan(ids, tuple(seed + e for e in ids), tuple(None for _ in ids), max_steps=self.options.cap)

    async def prepare_rollout(self, state, phase):
        Capped.prepared.append((state.iteration, phase, dict(state.adapters)))

    async def update(self, state, trajectories):
        Capped.seen.append((state.iteration, sorted((t.episode, t.iteration) for t in trajectories)))
        ref = {"path": f"adapters/{state.iteration}/agent_0", "hash": f"h{state.iteration}"}
        return Candidate(adapters={"agent_0": ref}, extra={"optimizer": f"opt{state.iteration}"},
                         records=[{"agent": "agent_0", "loss": 0.5}])


register_learner("capped", Capped, "test learner: fixed-length rollouts and adapters")


def config(**run):
    return build_config({
        "env": {"id": "babyai/goto-obj", "n_agents": 2},
        "model": {"cache": False},
        "learning": {"method": "capped", "cap": 2},
        "run": {"progress": False, **run},
    })


def spin(messages):
    return "Action: turn left"  # never reaches the goal: only the cap ends an episode


def test_a_plans_step_cap_truncates_and_keeps_the_final_observation(tmp_path):
    Capped.seen, Capped.prepared = [], []
    result = Experiment(config(episodes=2, parallel=2), tmp_path / "run",
                        chat_model=FakeRuleChatModel(rule=spin)).run()
    episodes = RunDirectory(result.run_dir).load_episode_dicts()
    assert len(episodes) == 2
    for ep in episodes:
        assert len(ep["steps"]) == 2
        last = ep["steps"][-1]
        assert last["truncated"] and not last["terminated"]
        assert all(last["truncations"].values())
        assert set(ep["final_observations"]) == {"agent_0", "agent_1"}


def test_adapters_are_committed_and_rollouts_act_with_them(tmp_path):
    Capped.seen, Capped.prepared = [], []
    result = Experiment(config(episodes=4, parallel=2), tmp_path / "run",
                        chat_model=FakeRuleChatModel(rule=spin)).run()
    state = RunDirectory(result.run_dir).read_json("learner_state.json")
    assert state["adapters"]["agent_0"] == {"path": "adapters/1/agent_0", "hash": "h1"}
    assert state["versions"] == {"agent_0": 2, "agent_1": 0}
    assert state["extra"] == {"optimizer": "opt1"}
    # the second iteration's rollouts were prepared with the first update's adapter
    assert Capped.prepared == [(0, "train", {}), (1, "train", {"agent_0": {"path": "adapters/0/agent_0",
                                                                            "hash": "h0"}})]
    updates = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert [u["iteration"] for u in updates] == [0, 1] and all(u["accepted"] for u in updates)


def test_resume_with_another_parallel_never_reuses_episodes(tmp_path, monkeypatch):
    """K is fixed when the run starts: a run killed after its first iteration and resumed
    with run.parallel changed trains iteration 1 on its own fresh episodes."""
    Capped.seen, Capped.prepared = [], []
    out = tmp_path / "run"
    calls = {"n": 0}

    def dies_in_second_iteration(messages):
        calls["n"] += 1
        if calls["n"] > 8:  # 2 episodes x 2 steps x 2 agents in iteration 0
            raise KeyboardInterrupt
        return spin(messages)

    try:
        Experiment(config(episodes=4, parallel=2), out,
                   chat_model=FakeRuleChatModel(rule=dies_in_second_iteration)).run()
    except KeyboardInterrupt:
        pass
    assert Capped.seen == [(0, [(0, 0), (1, 0)])]
    Experiment(config(episodes=4, parallel=1), out, resume=True, chat_model=FakeRuleChatModel(rule=spin)).run()
    assert Capped.seen[-1] == (1, [(2, 1), (3, 1)])
    episodes = RunDirectory(out).load_episode_dicts()
    assert sorted((d["episode"], d["iteration"]) for d in episodes) == [(0, 0), (1, 0), (2, 1), (3, 1)]


class Staged(Learner):
    """A learner whose update is a subgraph with a channel of its own."""

    name = "staged"

    def update_graph(self):
        import operator
        from typing import Annotated, Any, TypedDict

        from langgraph.graph import END, START, StateGraph

        from marlang.learners.base import UpdateOutput

        class S(TypedDict, total=False):
            policy: dict
            episodes: list
            candidate: Any
            notes: Annotated[list, operator.add]

        def note(state):
            return {"notes": [f"saw {len(state['episodes'])}"]}

        def propose(state):
            assert state["notes"] == [f"saw {len(state['episodes'])}"]  # fresh for every update
            return {"candidate": Candidate(records=[{"agent": "agent_0", "notes": state["notes"]}]).to_dict()}

        b = StateGraph(S, output_schema=UpdateOutput)
        b.add_node("note", note)
        b.add_node("propose", propose)
        b.add_edge(START, "note")
        b.add_edge("note", "propose")
        b.add_edge("propose", END)
        return b.compile()


register_learner("staged", Staged, "test learner: update subgraph with its own state")


def test_a_learners_update_subgraph_keeps_its_own_state(tmp_path):
    cfg = build_config({"env": {"id": "babyai/goto-obj", "max_steps": 1}, "model": {"cache": False},
                        "learning": {"method": "staged"}, "run": {"episodes": 4, "parallel": 2, "progress": False}})
    result = Experiment(cfg, tmp_path / "run", chat_model=FakeRuleChatModel(rule=spin)).run()
    updates = [json.loads(line) for line in (result.run_dir / "updates.jsonl").read_text().splitlines()]
    assert [u["notes"] for u in updates] == [["saw 2"], ["saw 2"]]
