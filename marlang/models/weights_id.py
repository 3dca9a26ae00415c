"""Content hashes that name a model's weights (a directory's files, or a module's state dict),
so that caches and run manifests can tell retrained weights apart.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from marlang.models.cache import default_cache_dir

logger = logging.getLogger(__name__)

WEIGHTS_ID_LENGTH = 16
"""Hex digits kept of a weights id (64 bits: plenty to tell checkpoints apart)."""


MODEL_FILE_PATTERNS = (
    "*.safetensors",
    "*.bin",
    "config.json",
    "generation_config.json",
    "adapter_config.json",
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
)
"""Files of a model directory that decide what the model answers, hence its weights id."""


_NOT_MODEL_FILES = frozenset({"training_args.bin"})


FILE_HASHES_NAME = "file_hashes.json"
"""Sidecar in the marlang cache dir: path -> (size, mtime, inode, sha256) of hashed files."""


_file_hashes_lock = threading.Lock()


def directory_weights_id(directory: str | Path, cache_dir: Path | None = None) -> str | None:
    """SHA-256 over the model files of ``directory`` (None when it holds none).

    Each file's own hash is remembered in ``FILE_HASHES_NAME`` under ``cache_dir`` (default:
    the marlang cache dir), keyed by its path and checked against its size, mtime and inode,
    so only new or rewritten files are read.
    """
    root = Path(directory).resolve()
    files = sorted(
        {
            p
            for pattern in MODEL_FILE_PATTERNS
            for p in root.glob(pattern)
            if p.is_file() and p.name not in _NOT_MODEL_FILES
        }
    )
    if not files:
        return None
    sidecar = (cache_dir if cache_dir is not None else default_cache_dir()) / FILE_HASHES_NAME
    with _file_hashes_lock:
        known = _read_file_hashes(sidecar)
        changed = False
        digest = hashlib.sha256()
        for path in files:
            stat = path.stat()
            signature = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
            entry = known.get(str(path))
            if entry is None or entry.get("signature") != signature:
                logger.info("Hashing %s for its weights id (once per file version)", path)
                entry = known[str(path)] = {"signature": signature, "sha256": _sha256_file(path)}
                changed = True
            digest.update(f"{path.name}\0{entry['sha256']}\n".encode())
        if changed:
            _write_file_hashes(sidecar, known)
    return digest.hexdigest()[:WEIGHTS_ID_LENGTH]


def is_adapter_weight(name: str) -> bool:
    """Names of LoRA weights and value heads (an attached `TeamAdapters`), not base weights."""
    return "lora_" in name or "value_head" in name


def state_dict_weights_id(model: torch.nn.Module, skip: Callable[[str], bool] | None = None) -> str:
    """SHA-256 over a model's state_dict (names, dtypes, shapes and tensor bytes), leaving out
    the tensors whose names ``skip`` says."""
    digest = hashlib.sha256()
    with torch.no_grad():
        for name, tensor in sorted(model.state_dict().items()):
            if skip is not None and skip(name):
                continue
            flat = tensor.detach().reshape(-1).contiguous().cpu()
            digest.update(f"{name}\0{flat.dtype}\0{tuple(tensor.shape)}\n".encode())
            digest.update(flat.view(torch.uint8).numpy())
    return digest.hexdigest()[:WEIGHTS_ID_LENGTH]


def source_dir(model: PreTrainedModel) -> Path | None:
    """The directory a model was loaded from: its ``name_or_path`` when that is a directory,
    else that id's snapshot in the local Hugging Face cache (never downloaded)."""
    name = str(getattr(model, "name_or_path", "") or "")
    if not name:
        return None
    if Path(name).is_dir():
        return Path(name)
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # noqa: BLE001 - not a cached hub model: the tensors are hashed instead
        return None


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_file_hashes(sidecar: Path) -> dict[str, Any]:
    try:
        data = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_file_hashes(sidecar: Path, known: dict[str, Any]) -> None:
    """Write the sidecar atomically, dropping entries of files that are gone."""
    kept = {path: entry for path, entry in known.items() if os.path.exists(path)}
    tmp = None
    try:
        sidecar.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=sidecar.parent, prefix=f".{sidecar.name}.", suffix=".tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(kept, fh)
        os.replace(tmp, sidecar)
    except OSError as exc:  # a read-only cache dir only costs hashing again next time
        logger.warning("Could not remember file hashes in %s: %s", sidecar, exc)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)

