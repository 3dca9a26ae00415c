"""Each protocol's message order and visibility: who sees which message, and when."""

import asyncio
from types import SimpleNamespace

import pytest

from marlang.graphs import build_protocol, list_protocols, register_protocol, run_protocol
from marlang.graphs.protocols import build_no_communication
from marlang.registry import PROTOCOLS
from marlang.types import CallContext, Decision, Message, TextObservation

NAMES = ["agent_0", "agent_1", "agent_2"]


class ScriptedConversant:
    """Records what it saw when it spoke or acted; can wait at a barrier to prove concurrency."""

    def __init__(self, name, log, barrier=None):
        self.name, self.log, self.barrier = name, log, barrier

    async def speak(self, obs, transcript, ctx, round=0):
        self.log.append(("speak", self.name, round, [(m.sender, m.round) for m in transcript]))
        if self.barrier is not None:
            await asyncio.wait_for(self.barrier.wait(), timeout=2)
        return Message(self.name, f"{self.name} says {obs.text} in round {round}", round)

    async def act(self, obs, transcript, ctx):
        self.log.append(("act", self.name, ctx.step, [(m.sender, m.round) for m in transcript]))
        if self.barrier is not None:
            await asyncio.wait_for(self.barrier.wait(), timeout=2)
        return Decision("go forward", thought=f"{len(transcript)} messages")


def run(name, config=None, barrier_parties=None, names=NAMES):
    async def go():
        log = []
        barrier = asyncio.Barrier(barrier_parties) if barrier_parties else None
        agents = {n: ScriptedConversant(n, log, barrier) for n in names}
        graph = build_protocol(name, agents, config)
        obs = {n: TextObservation(f"obs-{n}", "mission", ["go forward"]) for n in names}
        transcript, decisions = await run_protocol(graph, obs, CallContext(step=5))
        return log, transcript, decisions

    return asyncio.run(go())


def test_no_communication_acts_on_observations_only():
    log, transcript, decisions = run("none")
    assert transcript == []
    assert sorted(decisions) == NAMES
    assert all(kind == "act" and seen == [] for kind, _, _, seen in log)
    assert {entry[2] for entry in log} == {5}  # the call context reaches the agents


def test_bidirectional_everyone_speaks_then_acts_seeing_the_others():
    log, transcript, _decisions = run("bidirectional")
    speaks = [e for e in log if e[0] == "speak"]
    acts = [e for e in log if e[0] == "act"]
    assert log.index(acts[0]) > log.index(speaks[-1])  # all messages before any action
    assert [m.sender for m in transcript] == NAMES
    assert all(seen == [] for _, _, _, seen in speaks)  # messages written from own observation only
    for _, name, _, seen in acts:
        assert sorted(s for s, _ in seen) == sorted(n for n in NAMES if n != name)


def test_bidirectional_messages_and_actions_run_concurrently():
    # Every speaker waits at a barrier for all three: this only finishes if they run at once.
    _log, transcript, _ = run("bidirectional", barrier_parties=3)
    assert len(transcript) == 3


def test_final_actions_run_concurrently_in_every_protocol():
    for name, cfg in [("none", None), ("alternating", SimpleNamespace(rounds=1))]:

        async def go(name=name, cfg=cfg):
            log = []
            barrier = asyncio.Barrier(3)

            class ActBarrier(ScriptedConversant):
                async def speak(self, obs, transcript, ctx, round=0):
                    return Message(self.name, "hi", round)

            agents = {n: ActBarrier(n, log, barrier) for n in NAMES}
            obs = {n: TextObservation("o", "m", ["go forward"]) for n in NAMES}
            return await run_protocol(build_protocol(name, agents, cfg), obs, CallContext())

        _, decisions = asyncio.run(go())
        assert len(decisions) == 3


def test_unidirectional_only_speakers_send():
    log, transcript, _decisions = run("unidirectional", SimpleNamespace(speakers=["agent_1"]))
    assert [m.sender for m in transcript] == ["agent_1"]
    assert [e[1] for e in log if e[0] == "speak"] == ["agent_1"]
    seen = {name: s for kind, name, _, s in log if kind == "act"}
    assert seen == {"agent_0": [("agent_1", 0)], "agent_1": [], "agent_2": [("agent_1", 0)]}


def test_unidirectional_rejects_unknown_speakers():
    with pytest.raises(ValueError, match="agent_9"):
        run("unidirectional", SimpleNamespace(speakers=["agent_9"]))


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_alternating_speakers_take_turns_over_the_shared_transcript(rounds):
    log, transcript, decisions = run("alternating", SimpleNamespace(rounds=rounds))
    speaks = [e for e in log if e[0] == "speak"]
    assert [(name, r) for _, name, r, _ in speaks] == [(n, r) for r in range(rounds) for n in NAMES]
    for i, (_, _, _, seen) in enumerate(speaks):  # each speaker sees everything said before it
        assert seen == [(n, r) for r in range(rounds) for n in NAMES][:i]
    full = [(m.sender, m.round) for m in transcript]
    assert len(full) == rounds * len(NAMES)
    acts = [e for e in log if e[0] == "act"]
    assert len(acts) == 3 and all(seen == full for _, _, _, seen in acts)
    assert all(d.thought == f"{rounds * 3} messages" for d in decisions.values())


def test_user_registered_protocol_is_selectable_by_name():
    calls = []

    def build_silent_first(agents, config):
        calls.append(config)
        return build_no_communication(agents, config)

    register_protocol("test-silent", build_silent_first, "a test protocol")
    try:
        assert "test-silent" in list_protocols()
        _, _transcript, decisions = run("test-silent", config="cfg")
        assert calls == ["cfg"] and sorted(decisions) == NAMES
    finally:
        PROTOCOLS.pop("test-silent")


def test_unknown_protocol_names_the_choices():
    with pytest.raises(ValueError, match="valid choices: none, bidirectional, unidirectional, alternating"):
        build_protocol("telepathy", {}, None)
