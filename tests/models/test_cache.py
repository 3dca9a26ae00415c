"""SQLiteResponseCache: hits skip the model, keys cover model + sampling params + seed."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration

from marlang.models import LocalLM, SQLiteResponseCache, default_cache_dir, local_engine, weights_id
from marlang.testing import (
    ScriptedChatModel,
    tiny_chat_model,
    tiny_llama,
    tiny_local_lm,
    tiny_tokenizer,
)

MESSAGES = [HumanMessage("You see a red key. What now?")]


def test_second_identical_call_is_served_from_the_cache(
    tmp_path: Path, tiny_engine: LocalLM
) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    model = tiny_chat_model(tiny_engine, max_tokens=6, cache=cache)
    first = model.invoke(MESSAGES)
    second = model.invoke(MESSAGES)
    assert tiny_engine.counters.requests_served == 1
    assert (cache.hits, cache.misses) == (1, 1)
    assert second.content == first.content
    assert second.usage_metadata["output_tokens"] == first.usage_metadata["output_tokens"]
    assert second.response_metadata["cached"] is True
    assert "cached" not in first.response_metadata


async def test_async_calls_hit_the_cache_too(tmp_path: Path, tiny_engine: LocalLM) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    model = tiny_chat_model(tiny_engine, temperature=1.0, max_tokens=6, cache=cache)
    first = await model.ainvoke(MESSAGES, seed=3)
    second = await model.ainvoke(MESSAGES, seed=3)
    assert second.content == first.content
    assert tiny_engine.counters.requests_served == 1


def test_seed_temperature_and_model_id_are_part_of_the_key(
    tmp_path: Path, tiny_engine: LocalLM
) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    model = tiny_chat_model(tiny_engine, temperature=1.0, max_tokens=4, cache=cache)
    model.invoke(MESSAGES, seed=1)
    model.invoke(MESSAGES, seed=2)  # another per-call seed
    model.model_copy(update={"temperature": 0.5}).invoke(MESSAGES, seed=1)
    model.model_copy(update={"top_p": 0.5}).invoke(MESSAGES, seed=1)
    model.model_copy(update={"max_tokens": 5}).invoke(MESSAGES, seed=1)
    model.invoke(MESSAGES, seed=1, stop=["x"])
    other = tiny_local_lm()
    other.model_id = "local:other-tiny"
    tiny_chat_model(other, temperature=1.0, max_tokens=4, cache=cache).invoke(MESSAGES, seed=1)
    assert cache.hits == 0 and cache.misses == 7
    assert tiny_engine.counters.requests_served == 6 and other.counters.requests_served == 1
    model.invoke(MESSAGES, seed=1)
    assert cache.hits == 1
    # The key material LangChain hands the cache names the model and the call's seed.
    llm_string = model._get_llm_string(seed=1)
    assert "local:tiny-llama" in llm_string and "('seed', 1)" in llm_string


def test_entries_persist_across_processes_worth_of_objects(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    with SQLiteResponseCache(path) as cache:
        model = tiny_chat_model(max_tokens=5, cache=cache)
        first = model.invoke(MESSAGES)
    # A fresh cache object and a fresh engine (as in a re-run) replay the stored answer.
    reopened = SQLiteResponseCache(path)
    replay_model = tiny_chat_model(max_tokens=5, cache=reopened)
    assert replay_model.invoke(MESSAGES).content == first.content
    assert replay_model.counters.requests_served == 0
    assert len(reopened) == 1


def test_cache_uses_wal_and_clear_empties_it(tmp_path: Path) -> None:
    path = tmp_path / "responses.sqlite"
    cache = SQLiteResponseCache(path)
    generation = ChatGeneration(message=AIMessage("go forward"))
    cache.update("prompt", "llm", [generation])
    assert len(cache) == 1
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.clear()
    assert len(cache) == 0 and cache.lookup("prompt", "llm") is None


def test_stored_entries_never_carry_the_cached_flag(tmp_path: Path) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    cache.update("p", "l", [ChatGeneration(message=AIMessage("hi"))])
    hit = cache.lookup("p", "l")
    assert hit is not None and hit[0].generation_info == {"cached": True}
    cache.update("p", "l", hit)  # writing a hit back must not persist the marker
    with sqlite3.connect(tmp_path / "responses.sqlite") as conn:
        stored = conn.execute("SELECT generations FROM responses").fetchone()[0]
    assert '"cached"' not in stored


def test_unreadable_entry_is_a_miss(tmp_path: Path) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    with sqlite3.connect(tmp_path / "responses.sqlite") as conn:
        conn.execute(
            "INSERT INTO responses VALUES (?, 'l', 'p', 'not json', 0)",
            (SQLiteResponseCache.key("p", "l"),),
        )
    assert cache.lookup("p", "l") is None
    assert cache.misses == 1


def test_concurrent_threads_and_tasks(tmp_path: Path) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(25):
                cache.update(f"p{n}-{i}", "l", [ChatGeneration(message=AIMessage(f"{n}-{i}"))])
                hit = cache.lookup(f"p{n}-{i}", "l")
                assert hit is not None and hit[0].message.content == f"{n}-{i}"
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(cache) == 200 and cache.hits == 200

    model = ScriptedChatModel(replies=["ok"], cache=cache)

    async def many() -> None:
        await asyncio.gather(*(model.ainvoke([HumanMessage(str(i))]) for i in range(20)))
        await asyncio.gather(*(model.ainvoke([HumanMessage(str(i))]) for i in range(20)))

    asyncio.run(many())
    assert model.calls == 20


def test_default_cache_dir_follows_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MARLANG_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("MARLANG_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "marlang"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as XDG says
    assert default_cache_dir() == Path.home() / ".cache" / "marlang"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "marlang"


def test_other_weights_under_the_same_model_id_do_not_share_entries(tmp_path: Path) -> None:
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")
    first, retrained, same = tiny_local_lm(seed=0), tiny_local_lm(seed=1), tiny_local_lm(seed=0)
    assert first.model_id == retrained.model_id == same.model_id
    assert first.weights_id != retrained.weights_id
    assert first.weights_id == same.weights_id
    for engine in (first, retrained, same):
        tiny_chat_model(engine, max_tokens=4, cache=cache).invoke(MESSAGES)
    assert [e.counters.requests_served for e in (first, retrained, same)] == [1, 1, 0]
    assert (cache.hits, cache.misses) == (1, 2)
    assert tiny_chat_model(first).weights_id in tiny_chat_model(first)._get_llm_string()


def save_tiny_model(directory: Path, seed: int) -> None:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=seed, eos_token_id=tokenizer.eos_token_id)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def test_rewriting_an_hf_directory_changes_its_weights_id(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MARLANG_CACHE_DIR", str(tmp_path / "cache"))
    hashed: list[Path] = []
    sha256_file = weights_id._sha256_file
    monkeypatch.setattr(
        weights_id, "_sha256_file", lambda path: hashed.append(path) or sha256_file(path)
    )
    directory = tmp_path / "model"
    spec = f"hf:{directory}"
    cache = SQLiteResponseCache(tmp_path / "responses.sqlite")

    save_tiny_model(directory, seed=0)
    trained = LocalLM.from_spec(spec)
    assert len(trained.weights_id) == local_engine.WEIGHTS_ID_LENGTH
    assert any(p.suffix == ".safetensors" for p in hashed)
    assert (tmp_path / "cache" / local_engine.FILE_HASHES_NAME).is_file()
    tiny_chat_model(trained, max_tokens=4, cache=cache).invoke(MESSAGES)

    hashed.clear()
    reloaded = LocalLM.from_spec(spec)
    assert reloaded.weights_id == trained.weights_id
    assert hashed == []  # unchanged files are not read again
    tiny_chat_model(reloaded, max_tokens=4, cache=cache).invoke(MESSAGES)
    assert reloaded.counters.requests_served == 0  # same weights: the stored answer

    save_tiny_model(directory, seed=1)  # retrained in place
    retrained = LocalLM.from_spec(spec)
    assert retrained.model_id == trained.model_id
    assert retrained.weights_id != trained.weights_id
    assert any(p.suffix == ".safetensors" for p in hashed)
    tiny_chat_model(retrained, max_tokens=4, cache=cache).invoke(MESSAGES)
    assert retrained.counters.requests_served == 1  # not the old weights' answer
