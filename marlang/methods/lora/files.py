"""The files of saved adapters: content hashes, durable writes and atomic directory swaps,
and reading back a PEFT adapter (from safetensors only: a run directory may be someone else's)
and the base model it was trained on.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from peft import PeftModel

from marlang.models.local_weights import load_pretrained_dir, resolve_base_model

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
VALUE_HEAD = "value_head.safetensors"
MANIFEST = "marlang_adapter.json"
FORMAT_VERSION = 1


def tensors_sha256(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over names, dtypes, shapes and raw bytes of ``tensors``, in name order."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        # Reinterpreting as bytes works for every dtype (bf16 has no numpy equivalent).
        flat = tensor.reshape(-1).contiguous().cpu()
        digest.update(flat.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def files_sha256(directory: Path) -> str:
    """SHA-256 over the names and contents of the files directly in ``directory``."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        data = path.read_bytes()
        digest.update(f"{path.name}|{len(data)}\n".encode())
        digest.update(data)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    # Directories too: their entries (the renamed files) only survive a crash once synced.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def normalize_adapter_config(path: Path, base_model: str) -> None:
    # PEFT keeps target_modules as a set and writes it in hash-seed order, so the same adapter
    # saved by two processes would hash differently; sorted lists make the file deterministic.
    # The base model is named by its spec, not by where its weights sit on this machine (a
    # cache path that does not exist on the next): `resolve_base_model` finds them on load.
    config = json.loads(path.read_text())
    for key in ("target_modules", "exclude_modules"):
        if isinstance(config.get(key), list):
            config[key] = sorted(config[key])
    config["base_model_name_or_path"] = base_model
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def adapter_base_model(adapter_dir: str | Path) -> str:
    """The local weights of a saved adapter's base model: its ``adapter_config.json`` names a
    model spec (resolved on this machine) or, when saved by an older marlang, a path."""
    config = json.loads((Path(adapter_dir) / ADAPTER_CONFIG).read_text())
    return resolve_base_model(str(config.get("base_model_name_or_path") or ""))


def load_peft_adapter(adapter_dir: str | Path, device: str | torch.device | None = None) -> PeftModel:
    """One saved adapter on its base model, as a ``PeftModel`` (for use outside marlang: the
    base named by spec is found on this machine, which ``AutoPeftModelForCausalLM`` cannot).
    Its weights are read from ``adapter_model.safetensors`` only: a folder holding PEFT's pickled
    ``adapter_model.bin`` instead is refused before anything is loaded."""
    from marlang.config import ConfigError

    if not (Path(adapter_dir) / ADAPTER_WEIGHTS).is_file():
        raise ConfigError(f"{adapter_dir} has no {ADAPTER_WEIGHTS}: marlang loads adapter weights from "
                          "safetensors only (never a pickled adapter_model.bin, whose loading could run code); "
                          "save the adapter with safetensors (PeftModel.save_pretrained's default)")
    base, _tokenizer = load_pretrained_dir(adapter_base_model(adapter_dir), device=device)
    return PeftModel.from_pretrained(base, str(adapter_dir))


def saved_units(directory: Path) -> dict[str, Path]:
    if not directory.is_dir():
        return {}
    return {
        path.name: path
        for path in sorted(directory.iterdir())
        if path.is_dir() and not path.name.startswith(".") and (path / MANIFEST).is_file()
    }


def replace_dir(source: Path, target: Path, *, trash: Path) -> None:
    """Rename ``source`` to ``target``, moving an existing ``target`` to ``trash`` first.

    POSIX rename cannot replace a non-empty directory, hence the two renames; if the second
    fails, the old directory is put back.
    """
    if target.exists():
        os.replace(target, trash)
        try:
            os.replace(source, target)
        except BaseException:
            os.replace(trash, target)
            raise
    else:
        os.replace(source, target)
