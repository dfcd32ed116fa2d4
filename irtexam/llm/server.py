"""A minimal OpenAI-compatible HTTP server around any irtexam LLM.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions``
(``echo`` + ``logprobs`` supported when the backend has ``token_logprobs``, as
:class:`~irtexam.llm.transformers_backend.TransformersLLM` does). Requests are served
by threads but the model runs one request at a time (a lock). Meant for tests, for
sharing one loaded model between processes, and as a reference for what
:class:`~irtexam.llm.openai_compat.OpenAICompatibleLLM` expects. Usage::

    server = serve(llm, port=0)          # background thread, free port
    client = OpenAICompatibleLLM(server.url)
    server.shutdown()
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .base import LLM, GenerationParams


def _params(body: dict[str, Any]) -> GenerationParams:
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    return GenerationParams(max_new_tokens=int(body.get("max_tokens") or 16),
                            temperature=float(body.get("temperature") or 0.0),
                            top_p=float(body.get("top_p") or 1.0), seed=int(body.get("seed") or 0),
                            stop=tuple(stop))


class _Handler(BaseHTTPRequestHandler):
    server: "LLMHTTPServer"

    def log_message(self, format: str, *args: Any) -> None:  # quiet; never logs headers
        return

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, code: int, message: str) -> None:
        self._send(code, {"error": {"message": message, "type": "invalid_request_error", "code": code}})

    def _authorised(self) -> bool:
        key = self.server.api_key
        if key is None:
            return True
        if self.headers.get("Authorization") == f"Bearer {key}":
            return True
        self._error(401, "invalid API key")
        return False

    def do_GET(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": self.server.llm.name, "object": "model",
                                                          "owned_by": "irtexam"}]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorised():
            return
        self.server.requests_served += 1
        if self.server.fail_next > 0:  # for retry tests
            self.server.fail_next -= 1
            self._error(503, "temporarily unavailable")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
        except (ValueError, json.JSONDecodeError):
            self._error(400, "body is not JSON")
            return
        path = self.path.rstrip("/")
        try:
            if path == "/v1/chat/completions":
                self._send(200, self._chat(body))
            elif path == "/v1/completions":
                self._send(200, self._completions(body))
            else:
                self._error(404, f"no route {self.path}")
        except _BadRequest as exc:
            self._error(400, str(exc))

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _BadRequest("messages must be a non-empty list")
        # The irtexam LLM interface takes one user prompt: join the turns' contents.
        prompt = "\n\n".join(str(m.get("content", "")) for m in messages)
        with self.server.lock:
            text = self.server.llm.generate([prompt], _params(body))[0]
        return {"id": f"chatcmpl-{time.time_ns()}", "object": "chat.completion", "created": int(time.time()),
                "model": self.server.llm.name,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}]}

    def _completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise _BadRequest("prompt must be a string (lists are not supported by this server)")
        echo, logprobs = bool(body.get("echo")), body.get("logprobs")
        max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
        llm = self.server.llm
        choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "logprobs": None}
        with self.server.lock:
            if echo and logprobs is not None:
                scorer = getattr(llm, "token_logprobs", None)
                if scorer is None:
                    raise _BadRequest("this backend cannot echo logprobs")
                toks = scorer(prompt)
                choice["logprobs"] = {"tokens": [t for t, _, _ in toks], "text_offset": [o for _, o, _ in toks],
                                      "token_logprobs": [v for _, _, v in toks], "top_logprobs": None}
                # The echoed prompt is scored; generated tokens (if any) carry no logprobs here.
            generated = ""
            if max_tokens > 0:
                params = _params({**body, "max_tokens": max_tokens})
                fmt = getattr(llm, "chat", None)
                if fmt:  # raw completion: bypass the chat template
                    llm.chat = False
                    try:
                        generated = llm.generate([prompt], params)[0]
                    finally:
                        llm.chat = fmt
                else:
                    generated = llm.generate([prompt], params)[0]
        choice["text"] = (prompt if echo else "") + generated
        return {"id": f"cmpl-{time.time_ns()}", "object": "text_completion", "created": int(time.time()),
                "model": llm.name, "choices": [choice]}


class _BadRequest(Exception):
    pass


class LLMHTTPServer(ThreadingHTTPServer):
    """The HTTP server object; ``url`` is the API root to give clients."""

    daemon_threads = True

    def __init__(self, llm: LLM, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None) -> None:
        super().__init__((host, port), _Handler)
        self.llm, self.api_key = llm, api_key
        self.lock = threading.Lock()
        self.requests_served = 0
        self.fail_next = 0
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port/v1``."""
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "LLMHTTPServer":
        """Serve in a daemon thread and return self."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.shutdown()
        self.server_close()


def serve(llm: LLM, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None) -> LLMHTTPServer:
    """Start serving ``llm`` in a background thread (``port=0``: a free port)."""
    return LLMHTTPServer(llm, host, port, api_key).start()


def main(argv: list[str] | None = None) -> int:
    """``python -m irtexam.llm.server MODEL [--port P]``: serve a model until interrupted."""
    import argparse
    import os

    from . import load_llm

    parser = argparse.ArgumentParser(prog="python -m irtexam.llm.server")
    parser.add_argument("model", help="packaged model name, .gguf file or transformers directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key-env", default=None, help="require the key stored in this env variable")
    args = parser.parse_args(argv)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    server = LLMHTTPServer(load_llm(args.model), args.host, args.port, key)
    print(f"serving {server.llm.name} at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
