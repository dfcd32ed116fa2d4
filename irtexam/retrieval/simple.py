"""The two reference retrievers: closed-book (no context) and oracle (the source chunk)."""

from __future__ import annotations

from typing import Sequence

from .base import Hit, Passage


class ClosedBook:
    """No retrieval: the LLM answers from its parameters alone."""

    name = "closed-book"

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None) -> list[Hit]:
        """Always the empty list."""
        return []


class OracleRetriever:
    """Returns the chunk the question was generated from (``ExamItem.chunk_id``).

    An upper bound on retrieval quality. If the item has no ``chunk_id`` or the id is
    not in the corpus, it returns nothing; the pipeline grid counts those cases as
    ``oracle_missing`` and reports them.
    """

    name = "oracle"

    def __init__(self, passages: Sequence[Passage]) -> None:
        """Index the passages by id."""
        self.by_id = {p.id: p for p in passages}

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None) -> list[Hit]:
        """``[the source chunk]`` when known, else ``[]``; ``k`` >= 1 is ignored."""
        if chunk_id is None or chunk_id not in self.by_id or k < 1:
            return []
        return [Hit(self.by_id[chunk_id], 1.0, 1)]
