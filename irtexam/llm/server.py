"""A minimal OpenAI-compatible HTTP server around any irtexam LLM.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions``
(``echo`` + ``logprobs`` supported when the backend has ``token_logprobs``, as
:class:`~irtexam.llm.transformers_backend.TransformersLLM` does). Requests are served
by threads but the model runs one request at a time (a lock). Meant for tests, for
sharing one loaded model between processes, and as a reference for what
:class:`~irtexam.llm.openai_compat.OpenAICompatibleLLM` expects. ``prompt`` may be a
list (one choice per prompt, with its ``index``, as vLLM and the OpenAI API answer).

``server.quirk`` makes ``/v1/completions`` answer like the real servers that break
log-likelihood scoring, for tests (see :data:`QUIRKS`). Usage::

    server = serve(llm, port=0)          # background thread, free port
    client = OpenAICompatibleLLM(server.url)
    server.shutdown()
"""

from __future__ import annotations

import json
import threading
import time
import weakref
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .base import LLM, GenerationParams

# Real-server behaviours that break scoring, reproduced on demand (server.quirk):
QUIRKS = {
    "no-echo": "llama.cpp's own server (ggml-org/llama.cpp#27174): echo ignored, logprobs.content only for "
               "the generated tokens, text without the prompt",
    "content": "newer servers (lm-eval #4158): the echoed prompt's logprobs as logprobs.content "
               "[{token, logprob, bytes}], no text_offset",
    "generated-only": "legacy format, but logprobs only for the generated token (offsets past the prompt)",
    "null-logprobs": "legacy format with every token_logprob null",
    "zeros": "legacy format with every token_logprob 0.0 (all candidates score the same)",
    "shifted": "legacy format, token i valued by the logits after it, log P(next = t_i | t_<=i) (llama-cpp-python "
               "0.3.36 for models without BOS)",
    "echo-500": "HTTP 500 on every echo request (vLLM in some versions, lm-eval #1411)",
    "no-list": "HTTP 500 on a list prompt (llama-cpp-python asserts a single prompt)",
}

# Transport faults, injected into the next ``server.faults[kind]`` POST replies (for the client's tests):
FAULTS = {
    "cut-body": "200 with a Content-Length larger than the body, then the connection closed (IncompleteRead)",
    "close": "the connection closed before any reply (RemoteDisconnected)",
    "non-utf8": "200 with a body that is not UTF-8",
    "not-json": "200 with an HTML error page (a proxy's)",
    "json-list": "200 with a JSON list instead of an object",
    "no-choices": "200 with a JSON object without 'choices'",
}


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

    def _inject_fault(self) -> bool:
        """Reply with the first pending fault of ``server.faults`` (see :data:`FAULTS`); False if none."""
        kind = next((k for k, n in self.server.faults.items() if n > 0), None)
        if kind is None:
            return False
        self.server.faults[kind] -= 1
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if kind == "close":
            self.close_connection = True
            self.connection.shutdown(2)
            return True
        body = {"cut-body": b'{"choices": [{"text": "trun', "non-utf8": b'{"choices": [{"text": "\xff\xfe"}]}',
                "not-json": b"<html><body>502 Bad Gateway</body></html>", "json-list": b"[1, 2, 3]",
                "no-choices": b'{"object": "text_completion"}'}[kind]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body) + (100 if kind == "cut-body" else 0)))
        self.end_headers()
        self.wfile.write(body)
        if kind == "cut-body":
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
        return True

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
        if self._inject_fault():
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
        except _ServerError as exc:
            self._error(500, str(exc))

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
        quirk = self.server.quirk
        prompts = prompt if isinstance(prompt, list) else [prompt]
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise _BadRequest("prompt must be a string or a non-empty list of strings")
        if isinstance(prompt, list) and len(prompt) > 1 and quirk == "no-list":
            raise _ServerError("AssertionError: len(body.prompt) <= 1")
        echo, logprobs = bool(body.get("echo")), body.get("logprobs")
        if echo and quirk == "echo-500":
            raise _ServerError("Internal Server Error")
        choices = [dict(self._one_completion(p, body, echo, logprobs), index=i) for i, p in enumerate(prompts)]
        return {"id": f"cmpl-{time.time_ns()}", "object": "text_completion", "created": int(time.time()),
                "model": self.server.llm.name, "choices": choices}

    def _one_completion(self, prompt: str, body: dict[str, Any], echo: bool, logprobs: Any) -> dict[str, Any]:
        max_tokens = int(body.get("max_tokens") if body.get("max_tokens") is not None else 16)
        llm, quirk = self.server.llm, self.server.quirk
        choice: dict[str, Any] = {"finish_reason": "length", "logprobs": None}
        with self.server.lock:
            if echo and logprobs is not None and quirk != "no-echo":
                scorer = getattr(llm, "token_logprobs", None)
                if scorer is None:
                    raise _BadRequest("this backend cannot echo logprobs")
                toks = scorer(prompt)
                if quirk == "shifted":
                    ends = [o for _, o, _ in toks[1:]] + [len(prompt)]
                    toks = [(t, o, None if i == 0 else scorer(prompt[:e] + prompt[o:e])[-1][2])
                            for i, ((t, o, _), e) in enumerate(zip(toks, ends))]
                choice["logprobs"] = _format_logprobs(toks, prompt, quirk)
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
        if quirk == "no-echo" and logprobs is not None:  # like llama.cpp: only the generated text, no prompt
            choice["logprobs"] = {"content": [{"token": generated, "logprob": -0.5,
                                               "bytes": list(generated.encode()), "top_logprobs": []}]}
            echo = False
        choice["text"] = (prompt if echo else "") + generated
        return choice


def _format_logprobs(toks: list[tuple[str, int, float]], prompt: str, quirk: str | None) -> dict[str, Any]:
    """The echoed (token, offset, logprob) triples in the response format ``quirk`` selects."""
    tokens, offsets, values = [t for t, _, _ in toks], [o for _, o, _ in toks], [v for _, _, v in toks]
    if quirk == "content":  # bytes of each token = the prompt text between consecutive offsets
        ends = offsets[1:] + [len(prompt)]
        return {"content": [{"token": t, "logprob": v, "bytes": list(prompt[o:e].encode()), "top_logprobs": []}
                            for t, o, e, v in zip(tokens, offsets, ends, values)]}
    if quirk == "generated-only":
        tokens, offsets, values = ["<gen>"], [len(prompt)], [-0.7]
    elif quirk == "null-logprobs":
        values = [None] * len(values)
    elif quirk == "zeros":
        values = [0.0] * len(values)
    return {"tokens": tokens, "text_offset": offsets, "token_logprobs": values, "top_logprobs": None}


class _ServerError(Exception):
    pass


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
        self.faults: dict[str, int] = {}  # FAULTS kind -> how many of the next POST replies get it
        self.quirk: str | None = None  # one of QUIRKS, for tests
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


LLAMA_CPP_INSTALL = "scripts/setup_llama_server.sh"


def echo_logprobs_fast(llm: Any, prompt: str, logprobs: int, model: str | None) -> dict[str, Any]:
    """llama-cpp-python ``Llama`` completion of ``prompt`` with echo, ``logprobs`` and one greedy token.

    Same response format as llama-cpp-python's own path (legacy ``text_offset`` /
    ``token_logprobs`` / ``top_logprobs``, first entry null), with the generated token as
    the last entry, as vLLM and OpenAI answer (the stock path leaves it out), and two
    upstream defects of llama-cpp-python 0.3.36 mended:

    * alignment: there, echoed token ``t_i`` gets ``log softmax(z_i)[t_i]`` (the logits
      *after* ``t_i``) when the model adds no BOS token (SmolLM2, Qwen2.5); here it gets
      ``log P(t_i | t_<i) = z_{i-1}[t_i] - logsumexp(z_{i-1})``;
    * cost: there, every echoed token sorts the whole vocabulary in Python (about 0.15 s
      a token for a 49k vocabulary); here the top-k come from ``numpy.argpartition`` and
      the log-normalisers of a reused prefix are kept.

    The longest prefix already evaluated is reused (the candidates of one question share it).
    """
    import numpy as np

    bos = llm.token_bos()
    head = [bos] if llm._model.add_bos_token() and bos != -1 else []
    tokens = head + llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
    if len(tokens) + 1 >= llm._n_ctx:
        raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {llm._n_ctx}")
    prefix = min(llm.longest_token_prefix(llm._input_ids.tolist(), tokens), len(tokens) - 1)
    llm.n_tokens = prefix
    llm.eval(tokens[prefix:])
    logits = llm.scores[: len(tokens), :]  # row i: the logits after token i (a view, float32)
    # log-normalisers of the rows; those of the reused prefix are kept from the previous request
    cached, cached_tokens = getattr(llm, "_irtexam_lse", None), getattr(llm, "_irtexam_lse_tokens", [])
    keep = 0 if cached is None else min(prefix, llm.longest_token_prefix(cached_tokens, tokens))
    rows = logits[keep:]
    top = rows.max(axis=1, keepdims=True)
    fresh = (top + np.log(np.exp(rows - top).sum(axis=1, keepdims=True, dtype=np.float64)))[:, 0]
    lse = np.concatenate([cached[:keep], fresh]) if keep else fresh
    llm._irtexam_lse, llm._irtexam_lse_tokens = lse, tokens
    next_id = int(np.argmax(logits[-1]))
    all_tokens = tokens + [next_id]
    # value of token i (i >= 1): row i - 1; the first entry is null (OpenAI's convention)
    ids = np.asarray(all_tokens[1:])
    picked = logits[np.arange(len(ids)), ids].astype(np.float64) - lse[: len(ids)]
    values: list[float | None] = [None] + [float(v) for v in picked]
    k = max(1, int(logprobs))
    tops = (np.argmax(logits, axis=1)[:, None] if k == 1
            else np.argpartition(-logits, min(k, logits.shape[1] - 1), axis=1)[:, :k])
    start = len(head)
    out_tokens = all_tokens[start:]
    strs = [llm.detokenize([t], prev_tokens=out_tokens[:i]).decode("utf-8", errors="ignore")
            for i, t in enumerate(out_tokens)]
    offsets = [len(llm.detokenize(out_tokens[:i]).decode("utf-8", errors="ignore")) for i in range(len(out_tokens))]
    top_logprobs: list[dict[str, float] | None] = []
    for i in range(start, len(all_tokens)):
        if i == start:
            top_logprobs.append(None)
            continue
        row = {llm.detokenize([int(j)], prev_tokens=all_tokens[start:i]).decode("utf-8", errors="ignore"):
               float(logits[i - 1, j] - lse[i - 1]) for j in tops[i - 1]}
        row[strs[i - start]] = values[i]
        top_logprobs.append(row)
    token_logprobs = [None] + values[start + 1:]
    return {"id": f"cmpl-{time.time_ns()}", "object": "text_completion", "created": int(time.time()),
            "model": model or str(llm.model_path),
            "choices": [{"text": prompt + strs[-1], "index": 0, "finish_reason": "length",
                         "logprobs": {"tokens": strs, "text_offset": offsets, "token_logprobs": token_logprobs,
                                      "top_logprobs": top_logprobs}}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": 1, "total_tokens": len(tokens) + 1}}


def patch_llama_cpp_echo() -> None:
    """Route llama-cpp-python's echo + logprobs + ``max_tokens=1`` completions through
    :func:`echo_logprobs_fast` (every other request is served unchanged)."""
    from llama_cpp import Llama

    original = Llama._create_completion
    if getattr(original, "irtexam_patched", False):
        return

    def create(self: Any, *args: Any, **kw: Any) -> Any:
        if (not args and kw.get("echo") and kw.get("logprobs") is not None and isinstance(kw.get("prompt"), str)
                and kw.get("max_tokens") == 1 and not kw.get("stream") and kw.get("suffix") is None):
            yield echo_logprobs_fast(self, kw["prompt"], kw["logprobs"], kw.get("model"))
            return
        yield from original(self, *args, **kw)

    create.irtexam_patched = True  # type: ignore[attr-defined]
    Llama._create_completion = create


def run_llama_cpp_server(patched: bool = True) -> None:
    """``python -m llama_cpp.server`` (arguments from ``sys.argv``), with :func:`patch_llama_cpp_echo` first."""
    if patched:
        patch_llama_cpp_echo()
    from llama_cpp.server.__main__ import main as llama_main

    llama_main()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago."""
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LlamaCppServer:
    """llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``) in a subprocess.

    Serves one GGUF file as model id ``alias`` at :attr:`url` with prompt log-probabilities
    on (``logits_all``); the API key, if any, is passed through the environment, never
    the command line. :meth:`kill` and :meth:`start` (same port) simulate a crashed and
    restarted server. Needs ``llama-cpp-python[server]`` (``scripts/setup_llama_server.sh``).

    ``patched=False`` runs the stock server, whose echoed log-probabilities are shifted by
    one token for models without a BOS token (irtexam's scoring check refuses them);
    ``patched=True`` mends that and its per-token vocabulary sort
    (:func:`echo_logprobs_fast`), leaving every other request to the stock code.
    """

    instances: "weakref.WeakSet[LlamaCppServer]" = weakref.WeakSet()  # for tests: report servers that died

    def __init__(self, model_path: str | Path, *, alias: str = "served", host: str = "127.0.0.1",
                 port: int | None = None, api_key: str | None = None, n_threads: int = 1, n_ctx: int = 2048,
                 python: str | None = None, log_path: str | Path | None = None, patched: bool = False) -> None:
        import sys

        self.model_path, self.alias, self.host = Path(model_path), alias, host
        self.port = port or free_port(host)
        self.api_key, self.n_threads, self.n_ctx = api_key, n_threads, n_ctx
        self.python = python or sys.executable
        self.log_path = Path(log_path) if log_path else None
        self.patched = patched
        self.proc: Any = None
        self.death_reported = False
        LlamaCppServer.instances.add(self)

    @property
    def url(self) -> str:
        """``http://host:port/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    def death_report(self, lines: int = 15) -> str | None:
        """None while the process runs (or was never started, or was killed or stopped on purpose);
        once it has died by itself: its exit code or signal and the last ``lines`` lines of its log."""
        import signal

        if self.proc is None or self.proc.poll() is None:
            return None
        code = self.proc.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
        tail = ""
        if self.log_path and self.log_path.exists():
            text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
            tail = "; last log lines:\n" + "\n".join(text)
        return f"llama.cpp server {self.url} ({self.model_path.name}) died with {how}{tail}"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        launch = (["-c", "from irtexam.llm.server import run_llama_cpp_server; run_llama_cpp_server()"]
                  if self.patched else ["-m", "llama_cpp.server"])
        return [self.python, *launch, "--model", str(self.model_path), "--model_alias", self.alias,
                "--host", self.host, "--port", str(self.port), "--n_ctx", str(self.n_ctx),
                "--n_threads", str(self.n_threads), "--n_threads_batch", str(self.n_threads),
                "--logits_all", "true", "--verbose", "false"]

    def start(self, timeout: float = 180.0) -> "LlamaCppServer":
        """Start the process and wait until ``GET /v1/models`` answers (raises IrtexamError otherwise)."""
        import os
        import subprocess
        import urllib.error
        import urllib.request

        from ..errors import IrtexamError

        env = dict(os.environ)
        env.pop("API_KEY", None)
        if self.api_key:
            env["API_KEY"] = self.api_key  # read by llama_cpp.server's pydantic settings
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + timeout
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise IrtexamError(f"llama.cpp server exited with code {self.proc.returncode} at start "
                                   f"(is llama-cpp-python[server] installed? run {LLAMA_CPP_INSTALL})")
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + "/models", headers=headers),
                                            timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.kill()
        raise IrtexamError(f"llama.cpp server did not answer at {self.url} within {timeout:.0f} s")

    def kill(self) -> None:
        """Kill the process at once (SIGKILL), as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc = None

    def __enter__(self) -> "LlamaCppServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


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
