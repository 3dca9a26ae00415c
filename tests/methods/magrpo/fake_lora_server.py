"""A loopback stand-in for vLLM serving LoRA adapters by name (``--enable-lora`` with runtime
loading): ``/v1/models``, ``/v1/load_lora_adapter``, ``/v1/unload_lora_adapter`` and
``/v1/chat/completions``, each request logged. A chat request for a model the server does not
hold is a 404, as vLLM answers it. Replies are HumanEval/23 (``strlen``) answers that pass 3,
1 or 0 of its tests, picked by the request's seed."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

BASE = "base-model"
ANSWERS = [
    "```python\ndef strlen(string: str) -> int:\n    return len(string)\n```",
    "```python\ndef strlen(string: str) -> int:\n    return 0\n```",
    "```python\ndef strlen(string: str) -> int:\n    return -1\n```",
]


@dataclass
class FakeLoraServer:
    runtime_loading: bool = True
    """False: the adapter endpoints answer 404 (vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING)."""
    lists_adapters: bool = True
    """False: loads succeed but /v1/models lists the base model only."""
    adapters: dict[str, str] = field(default_factory=dict)
    log: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    """(method, path, body) of every request, in order."""

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any] | str) -> None:
                data = (json.dumps(body) if isinstance(body, dict) else body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if isinstance(body, dict) else "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                server.log.append(("GET", self.path, {}))
                if self.path != "/v1/models":
                    return self._answer(404, {"error": {"message": "not found"}})
                names = [BASE, *(server.adapters if server.lists_adapters else [])]
                self._answer(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.log.append(("POST", self.path, body))
                if self.path == "/v1/load_lora_adapter" and server.runtime_loading:
                    name, path = body["lora_name"], body["lora_path"]
                    if name in server.adapters:
                        return self._answer(400, {"error": {"message": f"adapter {name} already loaded"}})
                    if not (Path(path) / "adapter_config.json").is_file():
                        return self._answer(400, {"error": {"message": f"no adapter at {path}"}})
                    server.adapters[name] = path
                    return self._answer(200, f"Success: LoRA adapter '{name}' added successfully.")
                if self.path == "/v1/unload_lora_adapter" and server.runtime_loading:
                    if server.adapters.pop(body["lora_name"], None) is None:
                        return self._answer(404, {"error": {"message": "no such adapter"}})
                    return self._answer(200, "Success")
                if self.path == "/v1/chat/completions":
                    if body["model"] not in server.adapters and body["model"] != BASE:
                        return self._answer(404, {"error": {"message": f"The model `{body['model']}` does "
                                                                       "not exist.", "code": 404}})
                    text = ANSWERS[int(body.get("seed") or 0) % len(ANSWERS)]
                    return self._answer(200, {
                        "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()),
                        "model": body["model"],
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}})
                self._answer(404, {"error": {"message": "not found"}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def chat_models(self) -> list[str]:
        """The model names of the chat requests, in order."""
        return [body["model"] for method, path, body in self.log if path == "/v1/chat/completions"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
