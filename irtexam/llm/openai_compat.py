"""OpenAI-compatible HTTP backend (vLLM, llama.cpp server, hosted endpoints, our own server).

* ``generate``: ``POST {base_url}/chat/completions`` (or ``/completions`` with
  ``chat=False``), one request per prompt, at most ``max_concurrency`` in flight
  (a thread pool).
* ``score``: ``POST {base_url}/completions`` with ``prompt = prompt + continuation``,
  ``echo=true``, ``logprobs=1``, ``max_tokens=1`` (the generated token is ignored). The
  continuation's log-likelihood is

      log P(cont | prompt) = sum_{t : c <= offset_t < len(prompt + cont)} logprob_t

  over the echoed tokens ``t`` whose character offset lies at or after ``c``, the end of
  the prompt with its trailing whitespace moved to the continuation (a token straddling
  the boundary counts as prompt). Offsets come from ``text_offset`` (the OpenAI legacy
  format: vLLM, llama-cpp-python) or, for the newer ``logprobs.content`` format, from the
  cumulative ``bytes`` (or token strings) of the entries, used only when they spell the
  echoed text exactly.
* The candidates of one question go in one request (``prompt`` is a list; vLLM and the
  OpenAI API accept it) where the server allows; a server that refuses lists
  (llama-cpp-python) is detected on the first question and gets one request per
  candidate instead. Questions run ``max_concurrency`` at a time.
* What cannot be scored is refused with :class:`ScoringError`, never scored as an
  answer: a continuation with zero echoed tokens (servers that do not echo prompt
  log-probabilities, e.g. llama.cpp's own ``/v1/completions``), a missing, null or
  non-finite log-probability inside the continuation, ``logprobs.content`` whose tokens do
  not spell the prompt, and a batch in which every question's candidates got the same
  score. :meth:`OpenAICompatibleLLM.check_scoring` (run by ``take`` before the first
  answer) scores two known questions and an alignment probe (an exact copy must be far
  likelier than its reverse; log-probs shifted by one token fail it), so a server that
  cannot do multiple-choice answering is reported within seconds.
* Timeouts, retries with exponential backoff (``backoff * 2**attempt`` seconds, capped)
  on connection errors, 408/409/429 and 5xx; the API key is read from the environment
  variable named by ``api_key_env`` and is never logged or put in an error message.

Only the standard library is used (urllib), so no extra dependency is needed.
"""

from __future__ import annotations

import http.client
import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

from ..errors import IrtexamError
from .base import LLM, ContinuationScore, GenerationParams, ScoreRequest
from .transformers_backend import split_trailing_whitespace

log = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}

# What any scoring server is checked on: two questions (their answers are not required to
# be right) and an alignment probe: an exact copy of a sequence must be far likelier than
# its reverse (~19 nats for SmolLM2-135M and Gemma3-270M; with log-probs shifted by one
# token, as llama-cpp-python 0.3.36 returns them for models without BOS, ~30 nats less likely).
CHECK_REQUESTS = (
    ScoreRequest("Question: What is the capital of France?\nA. Paris\nB. Berlin\nC. Madrid\nD. Rome\nAnswer:",
                 (" Paris", " Berlin", " Madrid", " Rome")),
    ScoreRequest("Question: How many legs does a spider have?\nA. eight\nB. six\nC. four\nD. two\nAnswer:",
                 (" eight", " six", " four", " two")),
)
ALIGNMENT_REQUEST = ScoreRequest("Copy the sequence exactly.\nSequence: 4 9 1 7 3 8 2 6 5\nCopy:",
                                 (" 4 9 1 7 3 8 2 6 5", " 5 6 2 8 3 7 1 9 4"))
ALIGNMENT_MARGIN = 3.0  # nats the copy must beat the reverse by


class ServerFault(Exception):
    """A reply that is not a JSON object (not UTF-8, not JSON, a list): the server's fault, retried."""


class HTTPBackendError(IrtexamError):
    """The server answered with an HTTP error (``status``) that retrying did not fix."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ScoringError(IrtexamError):
    """The server's answer to a scoring request cannot be turned into a log-likelihood."""


# ------------------------------------------------------------------ pure parsing helpers
def content_offsets(content: Sequence[dict[str, Any]], text: str) -> tuple[list[int], list[Any]]:
    """Character offsets and log-probs of a ``logprobs.content`` list echoing ``text``.

    The offset of entry ``i`` is the number of characters of ``text`` spelled by the bytes
    of entries ``0 .. i-1`` (``bytes`` when every entry has it, else the UTF-8 of ``token``).
    Raises :class:`ScoringError` unless the entries' bytes start with ``text`` exactly
    (no echo, or a server that rewrote the prompt, leaves the continuation unplaceable).
    """
    target = text.encode("utf-8")
    have_bytes = all(isinstance(e.get("bytes"), list) for e in content)
    pieces = [bytes(e["bytes"]) if have_bytes else str(e.get("token", "")).encode("utf-8") for e in content]
    spelled = b"".join(pieces)
    if not spelled.startswith(target):
        raise ScoringError("logprobs.content does not echo the prompt (its tokens do not spell the request's text), "
                           "so the continuation's tokens cannot be found")
    offsets, pos = [], 0
    for piece in pieces:
        offsets.append(len(target[:pos].decode("utf-8", errors="ignore")) if pos < len(target) else len(text) + pos)
        pos += len(piece)
    return offsets, [e.get("logprob") for e in content]


def echoed_logprobs(logprobs: Any, text: str) -> tuple[list[int], list[Any]]:
    """(character offsets, log-probs) of the echoed tokens of one completion choice.

    Accepts the legacy format (``text_offset`` + ``token_logprobs``) and
    ``content`` (see :func:`content_offsets`); anything else raises :class:`ScoringError`.
    """
    if not isinstance(logprobs, dict):
        raise ScoringError("the server returned no logprobs for the echoed prompt")
    offsets, values = logprobs.get("text_offset"), logprobs.get("token_logprobs")
    if isinstance(offsets, list) and isinstance(values, list):
        if len(offsets) != len(values):
            raise ScoringError(f"text_offset has {len(offsets)} entries but token_logprobs {len(values)}")
        return offsets, values
    content = logprobs.get("content")
    if isinstance(content, list):
        return content_offsets(content, text)
    raise ScoringError("the server's logprobs carry neither text_offset/token_logprobs nor content")


def continuation_logprobs(offsets: Sequence[int], values: Sequence[Any], start: int, end: int) -> tuple[float, ...]:
    """Log-probs of the tokens whose offset ``o`` satisfies ``start <= o < end``.

    Refuses (:class:`ScoringError`) zero such tokens and any missing, null, non-finite or
    positive value among them: those would be scored as a certain answer otherwise.
    """
    picked = [v for o, v in zip(offsets, values) if start <= o < end]
    if not picked:
        raise ScoringError("zero tokens of the continuation were echoed with log-probabilities "
                           "(the server does not return prompt log-probs with echo)")
    out = []
    for v in picked:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > 1e-6:
            raise ScoringError(f"the server returned log-probability {v!r} for a continuation token")
        out.append(float(v))
    return tuple(out)


def check_not_degenerate(requests: Sequence[ScoreRequest], scores: Sequence[Sequence[ContinuationScore]]) -> None:
    """Refuse a batch in which every question's (distinct) candidates got identical log-likelihoods.

    Questions whose candidates are all the same text are ignored; a batch with no other
    question passes. Identical scores for different texts on every question mean the
    server scores something else than the continuation (e.g. only the generated token).
    """
    informative = [row for req, row in zip(requests, scores) if len(set(req.continuations)) > 1]
    if informative and all(len({s.logprob for s in row}) == 1 for row in informative):
        raise ScoringError(f"all candidates of all {len(informative)} question(s) got the same log-likelihood "
                           f"({informative[0][0].logprob!r}); the server does not score the continuations")


def unwrap(llm: Any) -> Any:
    """The innermost backend of ``CachedLLM`` wrappers (anything with an ``.llm`` chain)."""
    while hasattr(llm, "llm") and not hasattr(llm, "check_scoring"):
        llm = llm.llm
    return llm


def check_can_score(llm: LLM, label: str | None = None) -> None:
    """Run the backend's start-up scoring check if it has one (served LLMs); raise a one-line error if not usable."""
    check = getattr(unwrap(llm), "check_scoring", None)
    if callable(check):
        try:
            check()
        except IrtexamError as exc:
            who = f"llm {label!r}: " if label else ""
            raise IrtexamError(f"{who}{exc}") from None


class OpenAICompatibleLLM:
    """Client for an OpenAI-compatible server.

    ``base_url`` is the API root, e.g. ``http://localhost:8000/v1``. ``model`` is sent
    as the request's ``model`` field (``None``: the first id of ``GET /models``).
    ``max_concurrency`` requests are in flight at most; ``batch_candidates`` sends the
    candidates of one question in one request (``None``: try on the first question,
    fall back to one request per candidate if the server refuses). ``progress`` shows a
    bar with requests/s for calls of more than one request. ``cache_chunk_size`` is how
    many requests a :class:`~irtexam.llm.cache.CachedLLM` around this client should hand
    over at once (enough to keep ``max_concurrency`` busy).
    """

    def __init__(self, base_url: str, model: str | None = None, *, api_key_env: str | None = None,
                 timeout: float = 120.0, max_retries: int = 4, backoff: float = 0.5,
                 max_backoff: float = 30.0, max_concurrency: int = 4, chat: bool = True, score_max_tokens: int = 1,
                 batch_candidates: bool | None = None, progress: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.startswith(("http://", "https://")):
            raise IrtexamError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.api_key_env = api_key_env
        if api_key_env and not os.environ.get(api_key_env):
            raise IrtexamError(f"environment variable {api_key_env} (the API key) is not set; export it first")
        self.timeout, self.max_retries, self.backoff, self.max_backoff = timeout, max_retries, backoff, max_backoff
        self.max_concurrency = max(1, int(max_concurrency))
        self.chat = chat
        self.score_max_tokens = score_max_tokens  # vLLM/OpenAI want >= 1; llama-cpp-python reads 0 as "unlimited"
        self.batch_candidates = batch_candidates
        self.progress = progress
        self.cache_chunk_size = 4 * self.max_concurrency
        self.requests_sent = 0  # HTTP attempts, retries included
        self.requests_ok = 0
        self.busy_seconds = 0.0  # wall time spent inside generate/score calls
        self._count_lock = threading.Lock()
        self._model = model or self.list_models()[0]

    def __repr__(self) -> str:  # never shows the key
        return f"OpenAICompatibleLLM(base_url={self.base_url!r}, model={self._model!r})"

    @property
    def name(self) -> str:
        """The served model id."""
        return self._model

    @property
    def requests_per_second(self) -> float:
        """Successful requests per second of time spent in ``generate``/``score`` calls."""
        return self.requests_ok / self.busy_seconds if self.busy_seconds > 0 else 0.0

    # ---------------------------------------------------------------- transport
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = "Bearer " + os.environ.get(self.api_key_env, "")
        return headers

    def _request(self, method: str, path: str, payload: dict[str, Any] | None = None, *,
                 retries: int | None = None) -> dict[str, Any]:
        url = self.base_url + path
        data = json.dumps(payload).encode() if payload is not None else None
        retries = self.max_retries if retries is None else retries
        last, status = "", None
        for attempt in range(retries + 1):
            req = urllib.request.Request(url, data=data, method=method, headers=self._headers())
            try:
                with self._count_lock:
                    self.requests_sent += 1
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    body_bytes = resp.read()
                try:
                    out = json.loads(body_bytes.decode("utf-8"))
                except UnicodeDecodeError:
                    raise ServerFault("the body is not UTF-8") from None
                except json.JSONDecodeError as exc:
                    raise ServerFault(f"the body is not JSON ({exc.msg}): {body_bytes[:80]!r}") from None
                if not isinstance(out, dict):
                    raise ServerFault(f"the body is a JSON {type(out).__name__}, not an object")
                with self._count_lock:
                    self.requests_ok += 1
                return out
            except urllib.error.HTTPError as exc:
                body = exc.read().decode(errors="replace")[:300].replace("\n", " ")
                status, last = exc.code, f"HTTP {exc.code}: {body}"
                if exc.code not in RETRY_STATUS:
                    raise HTTPBackendError(f"{method} {url} failed with {last}", exc.code) from None
            except ServerFault as exc:  # a wrong-shaped answer: retried (a proxy's error page), then reported
                status, last = None, f"server fault: {exc}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError, http.client.HTTPException) as exc:
                # HTTPException: a body cut short (IncompleteRead), a garbled status line: transient, as a reset
                status, last = None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            if attempt < retries:
                delay = min(self.max_backoff, self.backoff * 2 ** attempt)
                log.warning("%s %s: %s; retry %d/%d in %.1fs", method, url, last, attempt + 1, retries, delay)
                time.sleep(delay)
        message = (f"{method} {url} failed after {retries + 1} attempts ({last}); "
                   "check that the server is up and the URL ends with /v1")
        if status is not None:
            raise HTTPBackendError(message, status)
        raise IrtexamError(message)

    def _map(self, func: Callable[[Any], T], items: Sequence[Any], desc: str) -> list[T]:
        """``[func(x) for x in items]`` with ``max_concurrency`` in flight, a progress bar, timing."""
        t0 = time.perf_counter()
        bar = None
        if self.progress and len(items) > 1:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(items), desc=f"{desc} {self._model}", unit="req", leave=False, dynamic_ncols=True)

        def run(x: Any) -> T:
            out = func(x)
            if bar is not None:
                bar.update(1)
            return out

        try:
            if self.max_concurrency == 1 or len(items) <= 1:
                return [run(x) for x in items]
            with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(items))) as pool:
                return list(pool.map(run, items))
        finally:
            if bar is not None:
                bar.close()
            self.busy_seconds += time.perf_counter() - t0

    # ---------------------------------------------------------------- API
    def list_models(self) -> list[str]:
        """Model ids served at ``GET /models``."""
        data = self._request("GET", "/models")
        ids = [m["id"] for m in data.get("data", []) if isinstance(m, dict) and isinstance(m.get("id"), str)]
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
            return self._reply_field(data, "/chat/completions", ("message", "content"))
        body["prompt"] = prompt
        data = self._request("POST", "/completions", body)
        return self._reply_field(data, "/completions", ("text",))

    def _reply_field(self, data: dict[str, Any], path: str, keys: tuple[str, ...]) -> str:
        """``data["choices"][0][keys...]`` as text; a reply without it is the server's fault, named."""
        value: Any = (data.get("choices") or [None])[0]
        for key in keys:
            value = value.get(key) if isinstance(value, dict) else None
        if value is None and keys[-1] == "content" and isinstance((data.get("choices") or [None])[0], dict):
            return ""  # a chat reply with content null (tool calls only): an empty answer
        if not isinstance(value, str):
            raise IrtexamError(f"POST {self.base_url}{path}: the reply has no choices[0].{'.'.join(keys)} "
                               f"(got {json.dumps(data)[:160]}); is this an OpenAI-compatible server?")
        return value

    def generate(self, prompts: Sequence[str], params: GenerationParams = GenerationParams()) -> list[str]:
        """One completion per prompt, ``max_concurrency`` requests in flight."""
        return self._map(lambda p: self._generate_one(p, params), list(prompts), "generate")

    # ---------------------------------------------------------------- scoring
    def _score_body(self, prompt: str | list[str]) -> dict[str, Any]:
        return {"model": self._model, "prompt": prompt, "echo": True, "logprobs": 1,
                "max_tokens": self.score_max_tokens, "temperature": 0.0}

    def _post_score(self, prompt: str | list[str], *, retries: int | None = None) -> dict[str, Any]:
        try:
            return self._request("POST", "/completions", self._score_body(prompt), retries=retries)
        except HTTPBackendError as exc:
            if retries == 0:
                raise
            raise ScoringError(f"the server at {self.base_url} cannot score continuations "
                               f"(/completions with echo+logprobs failed: {exc}); use a server that supports "
                               "echo + prompt logprobs (vLLM, llama-cpp-python, `irtexam` serve) or a local model") from None

    def _parse_choice(self, choice: Any, original: str, context: str, text: str) -> ContinuationScore:
        if not isinstance(choice, dict):
            raise ScoringError("the server's completion has no choice to read logprobs from")
        offsets, values = echoed_logprobs(choice.get("logprobs"), text)
        vals = continuation_logprobs(offsets, values, len(context), len(text))
        return ContinuationScore(math.fsum(vals), len(vals), len(original), vals)

    def _split(self, prompt: str, original: str) -> tuple[str, str]:
        context, cont = split_trailing_whitespace(prompt, original)
        if not cont.strip():
            raise ScoringError(f"continuation {original!r} is empty: nothing to score")
        return context, context + cont

    def _score_pair(self, pair: tuple[str, str]) -> ContinuationScore:
        prompt, original = pair
        context, text = self._split(prompt, original)
        data = self._post_score(text)
        return self._parse_choice((data.get("choices") or [None])[0], original, context, text)

    def _score_batched(self, request: ScoreRequest, *, probe: bool = False) -> list[ContinuationScore] | None:
        """All candidates of one question in one request; ``None`` if the server refuses lists (probe only)."""
        split = [self._split(request.prompt, c) for c in request.continuations]
        texts = [t for _, t in split]
        try:
            data = self._post_score(texts, retries=0 if probe else None)
        except HTTPBackendError as exc:
            log.info("%s refuses a list prompt (%s); one request per candidate", self.base_url, exc)
            return None
        choices = data.get("choices") or []
        by_index = {c.get("index"): c for c in choices if isinstance(c, dict)}
        if len(choices) != len(texts) or set(by_index) != set(range(len(texts))):
            if probe:
                log.info("%s answered a list of %d prompts with %d choices; one request per candidate",
                         self.base_url, len(texts), len(choices))
                return None
            raise ScoringError(f"the server answered {len(texts)} prompts with {len(choices)} choices")
        return [self._parse_choice(by_index[i], c, ctx, t)
                for i, (c, (ctx, t)) in enumerate(zip(request.continuations, split))]

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[ContinuationScore]]:
        """Log-likelihood of each continuation through echo+logprobs completions (see the module doc)."""
        requests = list(requests)
        out: list[list[ContinuationScore] | None] = [None] * len(requests)
        start = 0
        if self.batch_candidates is None and requests:
            if len(requests[0].continuations) > 1:
                first = self._score_batched(requests[0], probe=True)
                self.batch_candidates = first is not None
                if first is not None:
                    out[0], start = first, 1
        if self.batch_candidates:
            rest = self._map(self._score_batched, requests[start:], "score")
            out[start:] = rest
        else:
            pairs = [(r.prompt, c) for r in requests[start:] for c in r.continuations]
            flat = self._map(self._score_pair, pairs, "score")
            i = 0
            for j, r in enumerate(requests[start:], start):
                out[j] = flat[i:i + len(r.continuations)]
                i += len(r.continuations)
        result = [list(row or []) for row in out]
        check_not_degenerate(requests, result)
        return result

    def check_scoring(self) -> list[list[ContinuationScore]]:
        """Score :data:`ALIGNMENT_REQUEST` and :data:`CHECK_REQUESTS`; raise a one-line :class:`ScoringError` if the server cannot.

        Called by ``take`` before the first answer, so a server without prompt
        log-probabilities is reported within seconds instead of after scoring anything.
        """
        t0 = time.perf_counter()
        where = f"the server at {self.base_url} (model {self._model!r}) cannot do multiple-choice answering"
        try:  # the alignment probe first: the slowest broken servers fail it within seconds
            copy, reverse = self.score([ALIGNMENT_REQUEST])[0]
            if copy.logprob - reverse.logprob >= ALIGNMENT_MARGIN:
                scores = self.score(list(CHECK_REQUESTS))
        except IrtexamError as exc:
            raise ScoringError(f"{where}: {exc}") from None
        if copy.logprob - reverse.logprob < ALIGNMENT_MARGIN:
            raise ScoringError(f"{where}: its echoed log-probabilities are not aligned with the prompt's tokens (an "
                               f"exact copy of a sequence scored {copy.logprob:.1f} nats, its reverse "
                               f"{reverse.logprob:.1f}); llama-cpp-python <= 0.3.36 shifts them by one token for "
                               "models without a BOS token: serve the model with irtexam's patched launcher "
                               "(irtexam.llm.server.LlamaCppServer(patched=True)) or vLLM")
        picks = [max(range(len(row)), key=lambda i: row[i].logprob) for row in scores]
        log.info("scoring check of %s passed in %.1fs (picks %s; batched candidates: %s)", self.base_url,
                 time.perf_counter() - t0, picks, self.batch_candidates)
        return scores
