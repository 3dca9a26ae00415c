"""learning.rollout_server: MAGRPO samples every rollout on an OpenAI-compatible server that
serves the agents' LoRA adapters by name (a loopback fake of vLLM's endpoints), loading the
committed adapters after each update; a server that cannot serve them is a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marlang.config import build_config
from marlang.models import LocalChatModel, LocalLM
from marlang.run import Experiment
from marlang.rundir import RunDirectory
from marlang.testing import tiny_llama, tiny_tokenizer
from tests.methods.magrpo.fake_lora_server import ANSWERS, BASE, FakeLoraServer


@pytest.fixture
def server():
    fake = FakeLoraServer()
    yield fake
    fake.close()


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny")
    tok = tiny_tokenizer()
    tiny_llama(len(tok), seed=0, eos_token_id=tok.eos_token_id).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def _config(tiny_dir: Path, url: str, **learning) -> dict:
    return {
        "env": {"id": "code/humaneval", "n_agents": 2, "max_steps": 1,
                "kwargs": {"structure": "joint", "task_ids": ["HumanEval/23"]}},
        "model": {"spec": f"hf:{tiny_dir}", "cache": False, "max_tokens": 24},
        "agents": {"chain_of_thought": False, "history": 0},
        "learning": {"method": "magrpo", "iterations": 2, "rollouts": 1, "num_generations": 4,
                     "max_new_tokens": 24, "eval_episodes": 1, "lr": 0.05, "minibatch_size": 8,
                     "device": "cpu", "lora": {"r": 4, "alpha": 8, "dropout": 0.0},
                     "rollout_server": url, **learning},
        "run": {"parallel": 1, "progress": False, "seed": 0},
    }


def _run(tiny_dir: Path, url: str, out: Path, **learning):
    engine = LocalLM.from_spec(f"hf:{tiny_dir}")
    result = Experiment(build_config(_config(tiny_dir, url, **learning)), out,
                        chat_model=LocalChatModel(engine=engine)).run()
    return result, engine


def test_rollouts_sample_the_committed_adapters_by_name_and_reload_them_after_each_update(tiny_dir, tmp_path,
                                                                                         server):
    result, engine = _run(tiny_dir, server.url, tmp_path / "run")
    run = result.run_dir.resolve()
    assert engine.counters.generate_calls == 0  # every rollout, tree and evaluation sampled on the server
    loads = [(b["lora_name"], Path(b["lora_path"])) for _, p, b in server.log if p == "/v1/load_lora_adapter"]
    unloads = [b["lora_name"] for _, p, b in server.log if p == "/v1/unload_lora_adapter"]
    # the initial adapters, then each committed update's: named by run, agent and content hash
    assert [path.relative_to(run).parts[1:] for _, path in loads] == [
        ("initial", "agent_0"), ("initial", "agent_1"), ("0", "agent_0"), ("0", "agent_1"),
        ("1", "agent_0"), ("1", "agent_1")]
    state = RunDirectory(run).read_json("learner_state.json")
    from marlang.methods.magrpo.rollout_server import RolloutServer

    naming = RolloutServer(server.url, run)
    final = {naming.adapter_name(a, state["adapters"][a]["hash"]) for a in ("agent_0", "agent_1")}
    assert all(name.startswith(f"{run.name}-") for name in final)
    assert set(server.adapters) == final  # what is committed is what is served, nothing stale
    assert unloads == [name for name, _ in loads[:4]]
    # every chat request went to an adapter loaded at the time (else the fake answers 404)
    requested = server.chat_models()
    assert BASE not in requested and set(requested) == {name for name, _ in loads}
    initial = {name for name, _ in loads[:2]}
    first_update = [i for i, (m, p, _) in enumerate(server.log) if p == "/v1/load_lora_adapter"][2]
    before = {b["model"] for _, p, b in server.log[:first_update] if p == "/v1/chat/completions"}
    assert before == initial  # iteration 0's rollouts and tree: the initial adapters
    # the trees hold the server's answers, and both adapters trained on them
    tree = [json.loads(line) for line in (run / "trees" / "0.jsonl").read_text().splitlines()]
    assert len(tree) == 4 and all(t["answers"]["agent_1"] in {a.split("\n", 1)[1].rsplit("\n```", 1)[0]
                                                               for a in ANSWERS} for t in tree)
    assert len({t["reward"] for t in tree}) > 1
    rows = RunDirectory(run).read_iterations()
    assert [r["completions"] for r in rows] == [8, 8] and all(r["skipped_steps"] == 0 for r in rows)


def test_a_ratio_loss_takes_its_old_policy_from_the_trainer_when_the_server_gives_no_logprobs(tiny_dir, tmp_path,
                                                                                            server):
    result, _ = _run(tiny_dir, server.url, tmp_path / "run", iterations=1, eval_episodes=0, loss="grpo",
                     epochs=2)
    (row,) = RunDirectory(result.run_dir).read_iterations()
    assert row["steps"] == 4 and row["skipped_steps"] == 0


@pytest.mark.parametrize(("fake", "message"), [
    ({"lists_adapters": False}, "does not list adapter"),
    ({"runtime_loading": False}, "has no /load_lora_adapter"),
])
def test_a_server_that_cannot_serve_the_adapters_is_one_line(tiny_dir, tmp_path, fake, message):
    server = FakeLoraServer(**fake)
    try:
        with pytest.raises(Exception, match=message) as err:
            _run(tiny_dir, server.url, tmp_path / "run", iterations=1)
        assert "--enable-lora" in str(err.value) and "\n" not in str(err.value)
    finally:
        server.close()


def test_an_unreachable_server_retries_then_says_what_to_check(tmp_path):
    from marlang.methods.magrpo.rollout_server import RolloutServer
    from marlang.models.errors import ModelUnreachableError

    server = RolloutServer("http://127.0.0.1:9/v1", tmp_path, max_retries=1, backoff_s=0.01, timeout=2)
    with pytest.raises(ModelUnreachableError, match="Check that: the server is running"):
        server.listed_models()


def test_the_rollout_server_retries_5xx_with_the_chat_calls_backoff_then_says_what_it_refused(tmp_path):
    from marlang.methods.magrpo.rollout_server import RolloutServer, RolloutServerError
    from marlang.testing import FakeOpenAIServer

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with FakeOpenAIServer(faults=[503, 502]) as fake:
        server = RolloutServer(fake.base_url, tmp_path, max_retries=2, backoff_s=0.001, timeout=5)
        assert server._post("/chat/completions", body, what="chat").status_code == 200
        assert len(fake.requests) == 3
    with FakeOpenAIServer(faults=lambda n: 500) as fake:
        server = RolloutServer(fake.base_url, tmp_path, max_retries=1, backoff_s=0.001, timeout=5)
        with pytest.raises(RolloutServerError, match="refused to chat: HTTP 500"):
            server._post("/chat/completions", body, what="chat")
        assert len(fake.requests) == 2


def test_rollout_server_settings_are_checked_in_one_line():
    from marlang.learners.base import learner_entry

    base = {"env": {"id": "code/humaneval", "n_agents": 2, "kwargs": {"structure": "joint"}},
            "model": {"spec": "local:smollm2"}}
    for learning, message in [({"rollout_server": "gpu-host:8000"}, "base URL"),
                              ({"rollout_server": "http://h:8000/v1", "memory": "memoryful"}, "keeps none")]:
        config = build_config({**base, "learning": {"method": "magrpo", **learning}})
        with pytest.raises(ValueError, match=message):
            learner_entry("magrpo").check_config(config)


def test_adapter_paths_are_rewritten_to_where_the_server_sees_the_run(tmp_path):
    from marlang.methods.magrpo.rollout_server import RolloutServer, RolloutServerError

    server = RolloutServer("http://h/v1", tmp_path / "my run", adapter_root="/mnt/runs/my run")
    assert (server.server_path(tmp_path / "my run" / "adapters" / "3" / "agent_0")
            == "/mnt/runs/my run/adapters/3/agent_0")
    name = server.adapter_name("agent_0", "ab" * 32)
    assert name.startswith("my-run-") and name.endswith("-agent_0-" + "ab" * 6)
    # another run of the same name elsewhere gets other names
    assert RolloutServer("http://h/v1", tmp_path / "x" / "my run").adapter_name("agent_0", "ab" * 32) != name
    with pytest.raises(RolloutServerError, match="outside the run directory"):
        server.server_path(tmp_path / "elsewhere")


def test_a_resumed_run_finds_its_adapters_on_the_server_and_does_not_load_them_twice(tmp_path, server):
    from marlang.methods.magrpo.rollout_server import RolloutServer

    adapter = tmp_path / "run" / "adapters" / "4" / "agent_0"
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text("{}")
    refs = {"agent_0": ("agent_0", str(adapter), "c0ffee" * 10)}
    first = RolloutServer(server.url, tmp_path / "run").publish(refs)
    again = RolloutServer(server.url, tmp_path / "run")  # the process of the resumed run
    assert again.publish(refs) == first and again.loads == 0
    assert [p for _, p, _ in server.log].count("/v1/load_lora_adapter") == 1
