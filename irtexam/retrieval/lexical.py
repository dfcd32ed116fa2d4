"""BM25 retrieval with the ``bm25s`` library; the index is built once and saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from .base import Hit, Passage, corpus_fingerprint
from .tokenize import ENGLISH_STOPWORDS, tokenize


def _vocab_ids(token_lists: list[list[str]]) -> tuple[list[list[int]], dict[str, int]]:
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in toks] for toks in token_lists]
    return ids, vocab


class BM25Retriever:
    """Okapi BM25 (bm25s, method ``lucene``) over the passages.

    score(q, d) = sum_{t in q} IDF(t) * f(t,d) (k1 + 1) / (f(t,d) + k1 (1 - b + b |d| / avgdl)),
    with IDF(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5)). Passages with score 0 (no
    query term in common) are not returned, so a hit list can be shorter than k.
    """

    def __init__(self, passages: Sequence[Passage], *, name: str = "bm25", index_dir: str | Path | None = None,
                 k1: float = 1.5, b: float = 0.75, stopwords: bool = True) -> None:
        """Build (or load from ``index_dir``) the BM25 index of ``passages``."""
        import bm25s

        self._name = name
        self.passages = list(passages)
        self.stopwords = ENGLISH_STOPWORDS if stopwords else None
        self.fingerprint = corpus_fingerprint(self.passages)
        self.loaded_from_disk = False
        path = None
        if index_dir is not None:
            path = Path(index_dir) / f"bm25-k1{k1}-b{b}-sw{int(stopwords)}-{self.fingerprint[:16]}"
        if path is not None and (path / "irtexam_vocab.json").exists():
            self._model = bm25s.BM25.load(str(path))
            self._vocab = json.loads((path / "irtexam_vocab.json").read_text(encoding="utf-8"))
            self.loaded_from_disk = True
        else:
            token_lists = [tokenize(p.text, stopwords=self.stopwords) for p in self.passages]
            ids, self._vocab = _vocab_ids(token_lists)
            self._model = bm25s.BM25(k1=k1, b=b, method="lucene")
            self._model.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self._vocab), show_progress=False)
            if path is not None:
                path.mkdir(parents=True, exist_ok=True)
                self._model.save(str(path))
                tmp = path / "irtexam_vocab.json.tmp"
                tmp.write_text(json.dumps(self._vocab), encoding="utf-8")
                tmp.replace(path / "irtexam_vocab.json")
        self.index_path = path

    @property
    def name(self) -> str:
        """Facet level (default ``bm25``)."""
        return self._name

    def _query_ids(self, query: str) -> list[int]:
        return [self._vocab[t] for t in tokenize(query, stopwords=self.stopwords) if t in self._vocab]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every passage for ``query`` (length = number of passages)."""
        ids = self._query_ids(query)
        if not ids:
            return np.zeros(len(self.passages), dtype=np.float32)
        return np.asarray(self._model.get_scores(ids), dtype=np.float32)

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None) -> list[Hit]:
        """Top-``k`` passages by BM25 score, ties broken by corpus order; zero scores dropped."""
        s = self.scores(query)
        order = np.argsort(-s, kind="stable")[:k]
        return [Hit(self.passages[i], float(s[i]), r) for r, i in enumerate((i for i in order if s[i] > 0), start=1)]
