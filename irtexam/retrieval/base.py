"""Passages, hits and the retriever interface shared by every retrieval method.

A retriever maps a question to a ranked list of corpus passages. Each retriever has
a ``name`` that becomes the level of the ``retriever`` facet of the pipeline grid
(``closed-book``, ``bm25``, ``dense-minilm``, ``hybrid-rrf``, ``oracle``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Protocol, Sequence, runtime_checkable

from ..errors import InputError
from ..jsonl import iter_json_lines


@dataclass(frozen=True)
class Passage:
    """One retrievable chunk of the corpus."""

    id: str
    doc_id: str
    text: str


@dataclass(frozen=True)
class Hit:
    """One retrieved passage with its retriever score and 1-based rank."""

    passage: Passage
    score: float
    rank: int


@runtime_checkable
class Retriever(Protocol):
    """What a pipeline needs from a retrieval method."""

    @property
    def name(self) -> str:
        """Facet level of this retriever (e.g. ``bm25``)."""
        ...

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None) -> list[Hit]:
        """Return at most ``k`` hits, best first. ``chunk_id`` is only read by the oracle."""
        ...


def corpus_fingerprint(passages: Sequence[Passage]) -> str:
    """sha256 over the passage ids and texts; keys saved indexes to their corpus."""
    digest = hashlib.sha256()
    for p in passages:
        digest.update(p.id.encode("utf-8") + b"\0" + p.text.encode("utf-8") + b"\0")
    return digest.hexdigest()


def check_unique_ids(passages: Sequence[Passage], path: str | None = None) -> None:
    """Raise :class:`InputError` if two passages share an id."""
    seen: set[str] = set()
    for row, p in enumerate(passages, start=1):
        if p.id in seen:
            raise InputError(f"duplicate passage id {p.id!r}; passage ids must be unique", path=path, row=row,
                             column="id")
        seen.add(p.id)


def passages_from_records(records: Iterable[dict], path: str | None = None) -> list[Passage]:
    """Build passages from dicts with ``id`` (or ``chunk_id``), ``text`` and optional ``doc_id``."""
    out: list[Passage] = []
    for row, rec in enumerate(records, start=1):
        pid = rec.get("id", rec.get("chunk_id"))
        if pid is None:
            raise InputError("a passage needs an 'id' (or 'chunk_id') field", path=path, row=row, column="id")
        text = rec.get("text")
        if not isinstance(text, str) or not text.strip():
            raise InputError("a passage needs a non-empty 'text' string", path=path, row=row, column="text")
        doc_id = rec.get("doc_id")
        out.append(Passage(id=str(pid), doc_id=str(doc_id if doc_id is not None else pid), text=text))
    check_unique_ids(out, path)
    return out


def load_passages(path: str | Path) -> list[Passage]:
    """Read a chunked corpus (JSONL or JSONL.gz, one passage per line: id/chunk_id, doc_id, text).

    Raises :class:`InputError` naming the line for invalid JSON or missing fields.
    """
    path = str(path)
    records: list[dict] = [rec for _, rec in iter_json_lines(path)]
    if not records:
        raise InputError("the corpus file holds no passages; point 'corpus' at a chunked JSONL file", path=path)
    if all("id" not in r and "chunk_id" not in r and "doc_id" in r for r in records):
        return chunk_corpus(path)
    return passages_from_records(records, path)


def chunk_corpus(path: str | Path) -> list[Passage]:
    """Passages from a document corpus (no chunk ids), chunked by :mod:`irtexam.corpus` defaults.

    The chunk ids are ``<doc_id>#<index>``, the ids the exam generator writes into
    ``ExamItem.chunk_id`` when it used the same (default) chunking.
    """
    from ..corpus.chunking import chunk_documents
    from ..corpus.documents import load_corpus

    chunks, _ = chunk_documents(load_corpus(path))
    out = [Passage(id=c.chunk_id, doc_id=c.doc_id, text=c.text) for c in chunks]
    check_unique_ids(out, str(path))
    return out
