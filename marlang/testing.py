"""Test helpers: a tiny random Llama with an in-process tokenizer, and scripted chat models.

Everything here is built on this machine in well under a second, without network or model
files, so tests of batching, caching, accounting and scoring mechanics run fast.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, Self

import torch
from langchain_core.messages import BaseMessage
from pydantic import ConfigDict, PrivateAttr
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

from marlang.models.chat_reply import ChatReply, ReplyChatModel
from marlang.models.local_chat import LocalChatModel
from marlang.models.local_engine import LocalLM

TINY_MODEL_ID = "local:tiny-llama"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# Enough text for the byte-level BPE to learn merges for the words tests and prompts use.
_TOKENIZER_CORPUS = """\
You are an agent in a grid world. Your mission is to pick up the red key and open the door.
You see a wall 2 steps forward. You see a blue ball 1 step left and 3 steps forward.
You see a yellow box 2 steps right. You see a green door 4 steps forward. You carry nothing.
Possible actions: turn left, turn right, go forward, pick up, drop, toggle.
Answer with one action. Action: go forward. Action: turn left. Action: pick up.
system user assistant Hello! How are you? What is the capital of France? Paris.
The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 , . ; : ! ? ( ) - ' "
"""


def tiny_tokenizer(vocab_size: int = 512, corpus: Sequence[str] = ()) -> PreTrainedTokenizerBase:
    """A byte-level BPE tokenizer trained in-process, with ChatML special tokens.

    Any text encodes (bytes are the base alphabet); ``<|im_end|>`` is both eos and pad,
    and the chat template is ChatML, like SmolLM2's. ``corpus`` (lines) adds to the text its
    merges are learned from, so that such text encodes in about as many tokens as with a real
    tokenizer.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator([*_TOKENIZER_CORPUS.splitlines(), *corpus], trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        padding_side="left",
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def tiny_llama(
    vocab_size: int,
    *,
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    seed: int = 0,
    eos_token_id: int | None = None,
    attn_implementation: str = "sdpa",
    max_positions: int = 2048,
) -> LlamaForCausalLM:
    """A randomly initialized Llama (float32, eval mode), the same for the same arguments.

    Weights are drawn with a wider spread than a real init so next-token distributions
    are peaked: greedy decoding then does not hinge on float rounding.
    """
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        initializer_range=0.2,
        tie_word_embeddings=False,
        eos_token_id=eos_token_id,
        pad_token_id=eos_token_id,
        # accepted at runtime (the config keeps it as its attention backend); transformers'
        # typed signature of LlamaConfig leaves it out
        attn_implementation=attn_implementation,  # type: ignore[call-arg]
    )
    with torch.random.fork_rng(devices=[]):  # seed without touching the global generator
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return model.eval()


def tiny_local_lm(seed: int = 0, max_positions: int = 2048, **engine_kwargs: Any) -> LocalLM:
    """A `LocalLM` engine over `tiny_llama` + `tiny_tokenizer`, id ``local:tiny-llama``."""
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), seed=seed, eos_token_id=tokenizer.eos_token_id, max_positions=max_positions)
    return LocalLM(model, tokenizer, TINY_MODEL_ID, **engine_kwargs)


def tiny_chat_model(engine: LocalLM | None = None, **params: Any) -> LocalChatModel:
    """A `LocalChatModel` on the tiny engine (a new one unless ``engine`` is given)."""
    return LocalChatModel(engine=engine if engine is not None else tiny_local_lm(), **params)


class ScriptedChatModel(ReplyChatModel):
    """A chat model that answers from a script instead of a model.

    ``replies`` are returned in order (cycling), or ``reply_fn(messages)`` computes each
    reply. Usage metadata counts whitespace-separated words as tokens; `calls` counts the
    calls that reached the model (not cache hits).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    replies: list[str] | None = None
    reply_fn: Callable[[Sequence[BaseMessage]], str] | None = None
    model_id: str = "scripted"

    _calls: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def calls(self) -> int:
        return self._calls

    @property
    def _llm_type(self) -> str:
        return "marlang-scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_id": self.model_id, "replies": self.replies}

    def _reply(self, messages: list[BaseMessage], stop: list[str] | None, **kwargs: Any) -> ChatReply:
        with self._lock:
            index = self._calls
            self._calls += 1
        if self.reply_fn is not None:
            text = self.reply_fn(messages)
        elif self.replies:
            text = self.replies[index % len(self.replies)]
        else:
            raise ValueError("ScriptedChatModel needs replies or reply_fn")
        return ChatReply(text, self.model_id, sum(len(m.text.split()) for m in messages), len(text.split()))


FAULTS = ("cut", "empty", "closed")
"""What `FakeOpenAIServer` can send instead of a completion, besides an HTTP status."""
BODY_FAULTS = ("not_utf8", "deep", "reset", "stall", "trickle", "trickle_headers", "redirect", "huge")
"""Faults of a 200 reply's body or its connection (`FakeOpenAIServer`): bytes that are not
UTF-8, JSON nested 100,000 deep, a connection reset after the headers, a body that stalls
half way, a body trickled a byte at a time, the status line and headers trickled a byte at a
time, a redirect to itself, 20 MB of content."""


class FakeOpenAIServer:
    """A minimal OpenAI-compatible chat-completions server on 127.0.0.1, in a thread.

    Answers every ``POST .../chat/completions`` with ``reply``, after failing the first
    ``fail_first`` requests with HTTP ``fail_status``. ``requests`` holds the decoded
    request bodies. Use as a context manager; ``base_url`` ends in ``/v1``.

    ``limit_fields`` names the body fields the server honours as a token limit (a word is a
    token): ``("max_tokens",)`` mimics llama.cpp's server, which cuts the reply at
    ``max_tokens`` and ignores ``max_completion_tokens``. By default no limit is honoured.

    ``faults`` makes it misbehave as loaded servers and proxies do: request ``n`` (from 1)
    gets ``faults[n - 1]`` (a sequence; requests past its end are answered) or ``faults(n)``
    (a callable), each one of `FAULTS`, an HTTP status, or None to answer: ``"cut"`` (a body
    cut mid-object), ``"empty"`` (``{"choices": []}``), ``"closed"`` (the headers and half
    the body, then the connection closed), or one of `BODY_FAULTS`.

    ``keep_alive`` answers over HTTP/1.1 and keeps each connection open for the next request, as
    vLLM, SGLang and OpenAI do. ``served_models`` (when given) are the models it serves: a call
    for another gets a 404, as does any path outside ``/v1``, and ``GET /v1/models`` lists them.
    ``retry_after`` is sent as a ``Retry-After`` header with every HTTP status fault; ``usage``
    replaces the reply's ``usage`` object; ``trickle_s`` is the pause between trickled bytes.
    """

    def __init__(
        self,
        reply: str = "go forward",
        *,
        fail_first: int = 0,
        fail_status: int = 503,
        limit_fields: Sequence[str] = (),
        faults: Sequence[str | int | None] | Callable[[int], str | int | None] = (),
        keep_alive: bool = False,
        served_models: Sequence[str] | None = None,
        retry_after: str | None = None,
        usage: Any = None,
        trickle_s: float = 0.05,
    ) -> None:
        self.reply = reply
        self.keep_alive = keep_alive
        self.served_models = None if served_models is None else tuple(served_models)
        self.retry_after = retry_after
        self.usage = usage
        self.trickle_s = trickle_s
        self.connections = 0
        """TCP connections accepted (fewer than requests when connections are kept alive)."""
        self._closing = threading.Event()
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.limit_fields = tuple(limit_fields)
        self.faults = faults
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> Self:
        from http.server import ThreadingHTTPServer

        class Server(ThreadingHTTPServer):
            request_queue_size = 128  # concurrent calls wait for a thread, not for a SYN resent after 1 s

        self._server = Server(("127.0.0.1", 0), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing.set()  # wakes the handlers of stalled and trickled replies
        self._server.shutdown()
        self._server.server_close()

    def _fault(self, n: int) -> str | int | None:
        if n <= self.fail_first:
            return self.fail_status
        if callable(self.faults):
            return self.faults(n)
        return self.faults[n - 1] if n <= len(self.faults) else None

    def _respond(self, body: dict[str, Any]) -> tuple[int | str, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            fault = self._fault(len(self.requests))
        if isinstance(fault, int):
            return fault, {"error": {"message": "unavailable", "type": "server_error"}}
        if self.served_models is not None and body.get("model") not in self.served_models:
            missing = f"model {body.get('model')!r} not found"
            return 404, {"error": {"message": missing, "type": "invalid_request_error"}}
        if fault == "empty":
            return 200, {"id": "chatcmpl-empty", "object": "chat.completion", "created": 0, "choices": []}
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
        words = self.reply.split()
        limits = [int(body[f]) for f in self.limit_fields if body.get(f) is not None]
        cut = bool(limits) and min(limits) < len(words)
        text = " ".join(words[: min(limits)]) if cut else self.reply
        completion_tokens = len(text.split())
        return fault or 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if cut else "stop",
                }
            ],
            "usage": self.usage if self.usage is not None else {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    def _handler_class(self) -> type:
        import json
        import socket
        import struct
        from http.server import BaseHTTPRequestHandler

        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _outside_v1(self) -> bool:
                return server.served_models is not None and not self.path.startswith("/v1/")

            def do_GET(self) -> None:
                if self._outside_v1() or not self.path.rstrip("/").endswith("/models"):
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                models = [{"id": m, "object": "model"} for m in server.served_models or ("fake",)]
                self._send(200, json.dumps({"object": "list", "data": models}).encode())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                request = self.rfile.read(length)
                if self._outside_v1():
                    self._send(404, b'{"error": {"message": "not found"}}')
                    return
                status, payload = server._respond(json.loads(request))
                data = json.dumps(payload).encode()
                if status in BODY_FAULTS:
                    self._body_fault(str(status), data)
                    return
                if status == "cut":  # a whole HTTP reply whose JSON stops mid-object
                    data = data[: len(data) // 2]
                self.send_response(status if isinstance(status, int) else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if isinstance(status, int) and status >= 400 and server.retry_after is not None:
                    self.send_header("Retry-After", server.retry_after)
                try:
                    self.end_headers()
                    if status == "closed":  # half the promised body, then the connection goes
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    # The client gave up on this request (a refusal it need not read in
                    # full, a timeout): like a real server, carry on without a traceback.
                    self.close_connection = True

            def _body_fault(self, fault: str, data: bytes) -> None:
                if fault != "redirect":
                    self.close_connection = True
                if fault == "not_utf8":
                    data = data.replace(b"go", b"\xff\xfe", 1) if b"go" in data else b"\xff" + data
                elif fault == "deep":
                    data = b"[" * 100_000 + b"]" * 100_000
                elif fault == "huge":
                    completion = json.loads(data)
                    completion["choices"][0]["message"]["content"] = "go " * 7_000_000  # 21 MB
                    data = json.dumps(completion).encode()
                elif fault == "redirect":  # to itself, for ever
                    self.send_response(307)
                    self.send_header("Location", self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                try:
                    if fault == "trickle_headers":  # every byte of the reply, headers first, slowly
                        head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: {'x' * 200}"
                                f"\r\nContent-Length: {len(data)}\r\n\r\n").encode()
                        for i in range(len(head)):
                            if server._closing.wait(server.trickle_s):
                                return
                            self.wfile.write(head[i:i + 1])
                            self.wfile.flush()
                        self.wfile.write(data)
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if fault == "reset":  # headers, a few bytes, then a TCP reset (RST, not FIN)
                        self.wfile.write(data[:10])
                        self.wfile.flush()
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        self.connection.close()
                        return
                    if fault == "stall":  # half the body, then nothing until the server stops
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                        server._closing.wait(30)
                        return
                    if fault == "trickle":  # the whole body, one byte at a time
                        for i in range(len(data)):
                            if server._closing.wait(server.trickle_s):
                                return
                            self.wfile.write(data[i:i + 1])
                            self.wfile.flush()
                        return
                    self.wfile.write(data)
                except OSError:  # the client gave up on the reply (a deadline, a timeout)
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

        return Handler
