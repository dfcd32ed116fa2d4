"""Hybrid retrieval: BM25 and dense candidates fused by reciprocal-rank fusion (RRF).

No cross-encoder ships offline, so the candidates are not re-ranked by a model; the
facet level says so (``hybrid-rrf``). RRF (Cormack et al., 2009):

    RRF(d) = sum over rankers r of 1 / (k0 + rank_r(d)),   k0 = 60,

summed over the rankers whose top ``depth`` candidates contain d.
"""

from __future__ import annotations

from typing import Sequence

from .base import Hit, Retriever


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], *, k0: float = 60.0) -> list[Hit]:
    """Fuse ranked hit lists; returns hits ordered by RRF score (ties: first seen first)."""
    score: dict[str, float] = {}
    passage = {}
    for hits in rankings:
        for h in hits:
            score[h.passage.id] = score.get(h.passage.id, 0.0) + 1.0 / (k0 + h.rank)
            passage.setdefault(h.passage.id, h.passage)
    order = sorted(score, key=lambda pid: -score[pid])  # sorted() is stable
    return [Hit(passage[pid], score[pid], r) for r, pid in enumerate(order, start=1)]


class HybridRRF:
    """Fuse the top-``depth`` candidates of several retrievers with RRF."""

    def __init__(self, retrievers: Sequence[Retriever], *, name: str = "hybrid-rrf", depth: int = 50,
                 k0: float = 60.0) -> None:
        """``retrievers``: typically BM25 and dense; ``depth``: candidates taken from each."""
        self._name = name
        self.retrievers = list(retrievers)
        self.depth = depth
        self.k0 = k0

    @property
    def name(self) -> str:
        """Facet level (default ``hybrid-rrf``)."""
        return self._name

    def prepare(self, queries: Sequence[str]) -> None:
        """Let the component retrievers batch their query work."""
        for r in self.retrievers:
            if hasattr(r, "prepare"):
                r.prepare(queries)

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None) -> list[Hit]:
        """Top-``k`` of the fused ranking."""
        rankings = [r.retrieve(query, max(self.depth, k)) for r in self.retrievers]
        return reciprocal_rank_fusion(rankings, k0=self.k0)[:k]
