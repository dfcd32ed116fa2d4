"""Retrieval quality: how often the oracle (source) chunk is in a retriever's top-k."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from .base import Hit


@dataclass(frozen=True)
class RecallReport:
    """recall@k = (# items whose source chunk is among the top-k hits) / (# items with a chunk_id)."""

    retriever: str
    k: int
    n_items: int
    n_with_chunk: int
    n_found: int
    mean_passages: float

    @property
    def recall(self) -> float:
        """n_found / n_with_chunk (NaN when no item names its chunk)."""
        return self.n_found / self.n_with_chunk if self.n_with_chunk else float("nan")


def recall_at_k(retriever: str, hits_by_item: Mapping[str, Sequence[Hit]], chunk_by_item: Mapping[str, str | None],
                k: int) -> RecallReport:
    """Recall@k of the source chunk from precomputed hits; items without chunk_id are counted, not scored."""
    n_with, n_found, n_pass = 0, 0, 0
    for item, hits in hits_by_item.items():
        n_pass += len(hits[:k])
        chunk = chunk_by_item.get(item)
        if chunk is None:
            continue
        n_with += 1
        n_found += any(h.passage.id == chunk for h in hits[:k])
    n = len(hits_by_item)
    return RecallReport(retriever, k, n, n_with, n_found, n_pass / n if n else 0.0)
