"""On-disk cache of every LLM call, so an interrupted run resumes without repeating work.

Key: sha256 of the canonical JSON of (backend class, model name, operation, prompt,
parameters or continuations). Storage: one SQLite file (``<dir>/llm_cache.sqlite``) in
WAL mode; each finished call is committed in its own transaction, so a killed process
loses at most the call in flight and never leaves a half-written entry.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

from .base import LLM, ContinuationScore, GenerationParams, ScoreRequest


def cache_key(backend: str, model: str, op: str, prompt: str, extra: Any) -> str:
    """sha256 hex of the canonical JSON of the call's identity."""
    blob = json.dumps({"backend": backend, "model": model, "op": op, "prompt": prompt, "extra": extra},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CallCache:
    """A small key -> JSON value store in SQLite with atomic, per-call commits."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._conn.commit()

    def get(self, key: str) -> Any | None:
        """The stored value, or None."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM calls WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        """Store a value and commit at once."""
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO calls (key, value) VALUES (?, ?)",
                               (key, json.dumps(value, ensure_ascii=False)))
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._conn.close()


class CachedLLM:
    """Wrap any :class:`~irtexam.llm.base.LLM`; every call is looked up on disk first.

    Misses are sent to the wrapped backend in chunks of ``chunk_size`` prompts (or score
    requests) and each result is committed as soon as its chunk returns. By default
    (``chunk_size=None``) generation chunks are the backend's ``batch_size`` (so a
    batching backend gets whole batches) and scoring chunks are single requests. ``hits`` and
    ``misses`` count calls; ``progress=True`` shows a tqdm bar over the misses.
    """

    def __init__(self, llm: LLM, cache_dir: str | Path, *, chunk_size: int | None = None,
                 progress: bool = False) -> None:
        self.llm = llm
        self.cache = CallCache(Path(cache_dir) / "llm_cache.sqlite")
        self.chunk_size = None if chunk_size is None else max(1, chunk_size)
        self.progress = progress
        self.hits = 0
        self.misses = 0
        inner = llm
        while isinstance(inner, CachedLLM):
            inner = inner.llm
        self.backend = type(inner).__name__
        self._batch_size = max(1, int(getattr(inner, "batch_size", 1) or 1))

    @property
    def name(self) -> str:
        """The wrapped model's name."""
        return self.llm.name

    def _run(self, keys: list[str], inputs: list[Any], call: Any, desc: str, chunk: int) -> list[Any]:
        results: list[Any] = [self.cache.get(k) for k in keys]
        todo = [i for i, r in enumerate(results) if r is None]
        self.hits += len(keys) - len(todo)
        bar = None
        if self.progress and todo:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(todo), desc=desc, unit="call")
        for start in range(0, len(todo), chunk):
            idx = todo[start:start + chunk]
            outs = call([inputs[i] for i in idx])
            for i, out in zip(idx, outs):
                self.cache.put(keys[i], out)
                results[i] = out
            self.misses += len(idx)
            if bar is not None:
                bar.update(len(idx))
        if bar is not None:
            bar.close()
        return results

    def generate(self, prompts: Sequence[str], params: GenerationParams = GenerationParams()) -> list[str]:
        """Cached :meth:`LLM.generate`."""
        extra = asdict(params)
        extra["stop"] = list(params.stop)
        keys = [cache_key(self.backend, self.name, "generate", p, extra) for p in prompts]
        return self._run(keys, list(prompts), lambda ps: self.llm.generate(ps, params), "generate",
                         self.chunk_size or self._batch_size)

    def score(self, requests: Sequence[ScoreRequest]) -> list[list[ContinuationScore]]:
        """Cached :meth:`LLM.score` (one cache entry per request)."""
        keys = [cache_key(self.backend, self.name, "score", r.prompt, list(r.continuations)) for r in requests]

        def call(reqs: list[ScoreRequest]) -> list[list[dict[str, Any]]]:
            return [[{"logprob": s.logprob, "n_tokens": s.n_tokens, "n_chars": s.n_chars,
                      "token_logprobs": list(s.token_logprobs)} for s in row] for row in self.llm.score(reqs)]

        raw = self._run(keys, list(requests), call, "score", self.chunk_size or 1)
        return [[ContinuationScore(d["logprob"], d["n_tokens"], d["n_chars"], tuple(d["token_logprobs"]))
                 for d in row] for row in raw]
