"""OpenAI-compatible HTTP backend (vLLM, llama.cpp server, hosted endpoints, our own server).

* ``generate``: ``POST {base_url}/chat/completions`` (or ``/completions`` with
  ``chat=False``), one request per prompt, at most ``max_concurrency`` in flight
  (a thread pool).
* ``score``: ``POST {base_url}/completions`` with ``prompt = prompt + continuation``,
  ``echo=true``, ``logprobs=0``, ``max_tokens=1`` (tokens after the text are ignored); the continuation's log-likelihood is
  the sum of the echoed ``token_logprobs`` whose ``text_offset`` lies at or after the end
  of the prompt (a token straddling the boundary counts as prompt). Servers without
  echo+logprobs (most chat-only hosted APIs) get a clear :class:`IrtexamError`.
* Timeouts, retries with exponential backoff (``backoff * 2**attempt`` seconds, capped)
  on connection errors, 408/409/429 and 5xx; the API key is read from the environment
  variable named by ``api_key_env`` and is never logged or put in an error message.

Only the standard library is used (urllib), so no extra dependency is needed.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

from ..errors import IrtexamError
from .base import ContinuationScore, GenerationParams, ScoreRequest
from .transformers_backend import split_trailing_whitespace

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class HTTPBackendError(IrtexamError):
    """The server answered with an error that retrying will not fix."""


class OpenAICompatibleLLM:
    """Client for an OpenAI-compatible server.

    ``base_url`` is the API root, e.g. ``http://localhost:8000/v1``. ``model`` is sent
    as the request's ``model`` field (``None``: the first id of ``GET /models``).
    """

    def __init__(self, base_url: str, model: str | None = None, *, api_key_env: str | None = None,
                 timeout: float = 120.0, max_retries: int = 4, backoff: float = 0.5,
                 max_backoff: float = 30.0, max_concurrency: int = 4, chat: bool = True, score_max_tokens: int = 1) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise IrtexamError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.api_key_env = api_key_env
        if api_key_env and not os.environ.get(api_key_env):
            raise IrtexamError(f"environment variable {api_key_env} (the API key) is not set; export it first")
        self.timeout, self.max_retries, self.backoff, self.max_backoff = timeout, max_retries, backoff, max_backoff
        self.max_concurrency = max(1, int(max_concurrency))
        self.chat = chat
        self.score_max_tokens = score_max_tokens  # vLLM/OpenAI want >= 1; the extra token is ignored
        self.requests_sent = 0
        self._model = model or self.list_models()[0]

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleLLM(base_url={self.base_url!r}, model={self._model!r})"

    @property
    def name(self) -> str:
        """The served model id."""
        return self._model

    # ---------------------------------------------------------------- transport
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self.api_key_env, "")
        return headers

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.base_url + path
        data = json.dumps(payload).encode() if payload is not None else None
        last: str = ""
        for attempt in range(self.max_retries + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=self._headers())
            try:
                self.requests_sent += 1
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as exc:
                body = exc.read().decode(errors="replace")[:500]
                if exc.code not in RETRY_STATUS:
                    raise HTTPBackendError(f"{method} {url} failed with HTTP {exc.code}: {body}") from None
                last = f"HTTP {exc.code}: {body}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt < self.max_retries:
                delay = min(self.max_backoff, self.backoff * 2 ** attempt)
                log.warning("%s %s: %s; retry %d/%d in %.1fs", method, url, last, attempt + 1,
                            self.max_retries, delay)
                time.sleep(delay)
        raise IrtexamError(f"{method} {url} failed after {self.max_retries + 1} attempts ({last}); "
                           "check that the server is up and the URL ends with /v1")

    def _map(self, func: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
        if self.max_concurrency == 1 or len(items) <= 1:
            return [func(x) for x in items]
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(func, items))

    # ---------------------------------------------------------------- API
    def list_models(self) -> list[str]:
        """Model ids served at ``GET /models``."""
        data = self._request("GET", "/models")
        ids = [m["id"] for m in data.get("data", [])]
        if not ids:
            raise IrtexamError(f"{self.base_url}/models lists no model; pass model= explicitly")
        return ids

    def _generate_one(self, prompt: str, params: GenerationParams) -> str:
        body: dict[str, Any] = {"model": self._model, "max_tokens": params.max_new_tokens,
                                "temperature": params.temperature, "top_p": params.top_p, "seed": params.seed}
        if params.stop:
            body["stop"] = list(params.stop)
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}]
            data = self._request("POST", "/chat/completions", body)
            return data["choices"][0]["message"]["content"] or ""
        body["prompt"] = prompt
        data = self._request("POST", "/completions", body)
        return data["choices"][0]["text"]

    def generate(self, prompts: Sequence[str], params: GenerationParams = GenerationParams()) -> list[str]:
        """One completion per prompt, ``max_concurrency`` requests in flight."""
        return self._map(lambda p: self._generate_one(p, params), list(prompts))

    def _score_pair(self, pair: tuple[str, str]) -> ContinuationScore:
        prompt, original = pair
        context, cont = split_trailing_whitespace(prompt, original)
        if not cont:
            return ContinuationScore(0.0, 0, len(original), ())
        text = context + cont
        body = {"model": self._model, "prompt": text, "echo": True, "logprobs": 0, "max_tokens": self.score_max_tokens,
                "temperature": 0.0}
        try:
            data = self._request("POST", "/completions", body)
        except HTTPBackendError as exc:
            raise IrtexamError(f"the server at {self.base_url} cannot score continuations "
                               f"(/completions with echo+logprobs failed: {exc}); use a server that "
                               "supports echo+logprobs (vLLM, `irtexam` serve) or a local model") from None
        lp = (data.get("choices") or [{}])[0].get("logprobs") or {}
        offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
        if offsets is None or values is None:
            raise IrtexamError(f"the server at {self.base_url} returned no echoed token logprobs; "
                               "it does not support scoring, use a local model for multiple-choice answering")
        picked = [v for o, v in zip(offsets, values) if len(context) <= o < len(text)]
        if any(v is None for v in picked):
            raise IrtexamError("the server returned a null logprob inside the continuation")
        vals = tuple(float(v) for v in picked)
        return ContinuationScore(math.fsum(vals), len(vals), len(original), vals)

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[ContinuationScore]]:
        """Log-likelihood of each continuation through echo+logprobs completions."""
        pairs = [(r.prompt, c) for r in requests for c in r.continuations]
        flat = self._map(self._score_pair, pairs)
        out, i = [], 0
        for r in requests:
            out.append(flat[i:i + len(r.continuations)])
            i += len(r.continuations)
        return out
