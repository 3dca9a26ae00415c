"""Rollouts on an OpenAI-compatible server that serves each agent's LoRA adapter by name
(``learning.rollout_server``): vLLM started with ``--enable-lora`` and
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``, or any server with vLLM's adapter endpoints.

The trainer keeps the weights and trains them where it runs; the server only samples. Every
committed state's adapters are loaded into the server (``POST /v1/load_lora_adapter``) under
names that carry their content hash, so a name always means the same weights: the new ones
after an update, none again after a rejected candidate. Once ``/v1/models`` lists them, the
names no longer committed are unloaded, and rollouts ask for an agent's adapter by name
through marlang's ``openai:`` backend (retries, one-line errors, accounting).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

from marlang.models.errors import ModelUnreachableError
from marlang.models.remote import backoff_policy, unreachable_message

logger = logging.getLogger(__name__)

LOAD_PATH = "/load_lora_adapter"
UNLOAD_PATH = "/unload_lora_adapter"
MODELS_PATH = "/models"
VLLM_HINT = ("start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True (and --max-lora-rank "
             "at least learning.lora.r)")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


class RolloutServerError(RuntimeError):
    """The rollout server answered, but cannot serve the adapters (one line: what to check)."""


class RolloutServer:
    """The adapters a server holds for one run, and chat models that sample from them.

    ``adapter_root``: the run directory as the server sees it (a shared disk mounted
    elsewhere); None: the same path as here.
    """

    def __init__(self, base_url: str, run_dir: str | Path, *, adapter_root: str | None = None,
                 api_key: str | None = None, timeout: float = 60.0, max_retries: int = 3,
                 backoff_s: float = 0.5) -> None:
        self.base_url = base_url.rstrip("/")
        self.run_dir = Path(run_dir).resolve()
        self.adapter_root = adapter_root
        self.api_key = api_key or "EMPTY"
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        # the run directory's name and a digest of its path: runs (and a launched run's
        # processes, each in its own directory) sharing a server never share a name
        digest = hashlib.sha256(str(self.run_dir).encode()).hexdigest()[:6]
        self.prefix = f"{_NAME_CHARS.sub('-', self.run_dir.name).strip('-') or 'run'}-{digest}"
        self.loaded: dict[str, str] = {}
        """Adapter name -> the path the server was given, for what this run loaded."""
        self.served: dict[str, str] = {}
        """Agent -> the adapter name its rollouts ask for (the committed state's)."""
        self.loads = 0
        """Adapters loaded into the server so far (reloads after updates included)."""

    # the adapters ------------------------------------------------------------------------
    def adapter_name(self, unit: str, content_hash: str) -> str:
        """``<run>-<path digest>-<adapter>-<first 12 hex digits of its content hash>``."""
        return f"{self.prefix}-{_NAME_CHARS.sub('-', unit)}-{content_hash[:12]}"

    def server_path(self, path: str | Path) -> str:
        """Where the server finds an adapter directory of this run."""
        local = Path(path).resolve()
        if self.adapter_root is None:
            return str(local)
        try:
            rel = local.relative_to(self.run_dir)
        except ValueError as exc:
            raise RolloutServerError(f"adapter {local} is outside the run directory {self.run_dir}, so "
                                     "learning.rollout_adapter_root cannot say where the server finds it") from exc
        return f"{self.adapter_root.rstrip('/')}/{rel.as_posix()}"

    def publish(self, adapters: dict[str, tuple[str, str, str]]) -> dict[str, str]:
        """Have the server serve ``adapters`` (agent -> (adapter unit, local path, content
        hash)): load those it does not hold, check ``/v1/models`` lists them, unload the
        names no longer used. Returns agent -> adapter name."""
        names = {agent: self.adapter_name(unit, digest) for agent, (unit, _path, digest) in adapters.items()}
        if names == self.served:  # loaded, listed and the rest unloaded when they were published
            return names
        held = self.listed_models()  # a resumed run finds its committed adapters there already
        for agent, (_unit, path, _digest) in adapters.items():
            name = names[agent]
            if name in self.loaded:
                continue
            if name in held:  # the name is the content's: what the server holds is these weights
                self.loaded[name] = self.server_path(path)
                continue
            where = self.server_path(path)
            self._post(LOAD_PATH, {"lora_name": name, "lora_path": where}, what=f"load adapter {name} from {where}")
            self.loaded[name] = where
            self.loads += 1
        listed = self.listed_models()
        missing = sorted(set(names.values()) - listed)
        if missing:
            raise RolloutServerError(
                f"the rollout server at {self.base_url} does not list adapter(s) {', '.join(missing)} after "
                f"loading them (it lists: {', '.join(sorted(listed)) or 'nothing'}); {VLLM_HINT}")
        for stale in sorted(set(self.loaded) - set(names.values())):
            try:
                self._post(UNLOAD_PATH, {"lora_name": stale}, what=f"unload adapter {stale}")
            except RolloutServerError as exc:  # the server keeps a stale adapter: wasteful, not wrong
                logger.warning("%s", exc)
            del self.loaded[stale]
        self.served = names
        return names

    def listed_models(self) -> set[str]:
        """The model ids ``/v1/models`` lists (the base model and the adapters it serves)."""
        body = self._request("GET", MODELS_PATH, None, what="list the served models").json()
        return {str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)}

    # sampling ----------------------------------------------------------------------------
    def chat_model(self, agent: str, **params: Any) -> Any:
        """A chat model (marlang's ``openai:`` backend, never answered from the response cache)
        that samples from ``agent``'s served adapter. ``top_k`` > 0 goes in the request body
        (vLLM reads it there)."""
        from marlang.models.factory import load_chat_model

        name = self.served.get(agent)
        if name is None:
            raise RuntimeError(f"no adapter of {agent!r} is served yet: publish the committed state first")
        top_k = params.pop("top_k", 0)
        if top_k:
            params["extra_body"] = {"top_k": int(top_k)}
        return load_chat_model(f"openai:{name}", base_url=self.base_url, api_key=self.api_key, cache=False,
                               timeout=self.timeout, max_retries=self.max_retries,
                               retry_backoff_s=self.backoff_s, token_limit_field="max_tokens", **params)

    # http --------------------------------------------------------------------------------
    def _post(self, path: str, payload: dict[str, Any], *, what: str) -> Any:
        return self._request("POST", path, payload, what=what)

    def _request(self, method: str, path: str, payload: dict[str, Any] | None, *, what: str) -> Any:
        """One request, retried (as chat calls are: `backoff_policy`) while the server cannot be
        reached or answers 5xx; other answers than 2xx are a one-line `RolloutServerError`."""
        import httpx
        from tenacity import Retrying

        url = self.base_url + path
        headers = {"Authorization": f"Bearer {self.api_key}"}

        def attempt() -> Any:
            response = httpx.request(method, url, json=payload, headers=headers, timeout=self.timeout)
            if response.status_code >= 500:
                response.raise_for_status()
            return response

        def retryable(exc: BaseException) -> bool:
            return isinstance(exc, (httpx.TransportError, httpx.HTTPStatusError))

        policy = backoff_policy(self.max_retries, lambda k: min(8.0, self.backoff_s * 2**k), retryable)
        try:
            response = Retrying(reraise=True, **policy)(attempt)
        except httpx.TransportError as exc:
            raise ModelUnreachableError(unreachable_message("the rollout server", url, self.max_retries + 1, exc),
                                        url=url, attempts=self.max_retries + 1) from exc
        except httpx.HTTPStatusError as exc:
            raise RolloutServerError(self._refusal(exc.response, path, what)) from exc
        if response.status_code >= 300:
            raise RolloutServerError(self._refusal(response, path, what))
        return response

    def _refusal(self, response: Any, path: str, what: str) -> str:
        text = " ".join(response.text.split())[:200]
        if response.status_code in (404, 405) and path in (LOAD_PATH, UNLOAD_PATH):
            return (f"the rollout server at {self.base_url} has no {path} (HTTP {response.status_code}): it cannot "
                    f"load adapters at run time; {VLLM_HINT}")
        hint = (" (is the adapter directory readable by the server? learning.rollout_adapter_root says where the "
                "server sees the run directory)") if path == LOAD_PATH else ""
        return f"the rollout server at {self.base_url} refused to {what}: HTTP {response.status_code} {text}{hint}"


def api_key_from(env_var: str | None) -> str | None:
    """The rollout server's API key, from the environment variable named (None: unset)."""
    return os.environ.get(env_var) if env_var else None
