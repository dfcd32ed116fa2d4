"""Chunking documents like the paper (appendix A.4): non-overlapping chunks of at most
``max_sentences`` sentences (10) and ``min_chars``..``max_chars`` characters (500-4500).

Algorithm: split the text into sentences (a regex splitter, no model download; a
blank line also ends a sentence, so headings are short sentences), then greedily
append sentences while the chunk stays within ``max_chars`` and has fewer than
``max_sentences`` sentences; the sentence limit yields to ``min_chars`` (a chunk of
10 headings is not closed below 500 characters). A sentence longer than ``max_chars`` is hard-split at
whitespace. A final chunk shorter than ``min_chars`` is merged into the previous one
when the result stays within ``max_chars``; a chunk that is still short (a short
document) is kept and counted in :class:`ChunkReport` (``short_chunks``), or dropped
when ``drop_short`` (counted in ``dropped_short``). Nothing disappears silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from ..errors import InputError
from .documents import Document

# End of sentence: . ! ? (optionally followed by quotes/brackets) then whitespace and an
# uppercase letter, digit, quote or bracket; or a blank line (paragraph break).
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[A-Z0-9\"'(\[])|\n\s*\n")
_ABBREV = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|Fig|No|approx|Mr|Mrs|Dr|St)\.$", re.IGNORECASE)


@dataclass(frozen=True)
class ChunkConfig:
    """Chunking limits (paper: at most 10 sentences, 500-4500 characters)."""

    max_sentences: int = 10
    min_chars: int = 500
    max_chars: int = 4500
    drop_short: bool = False

    def __post_init__(self) -> None:
        if self.max_sentences < 1 or self.min_chars < 0 or self.max_chars < max(1, self.min_chars):
            raise InputError(f"invalid chunking limits {self}: need max_sentences >= 1 and "
                             "0 <= min_chars <= max_chars")


@dataclass
class Chunk:
    """A piece of one document; ``chunk_id`` is ``<doc_id>#<index>``."""

    chunk_id: str
    doc_id: str
    index: int
    text: str
    title: str | None = None
    n_sentences: int = 0


@dataclass
class ChunkReport:
    """What chunking did: counts of documents, chunks, and every special case."""

    documents: int = 0
    empty_documents: int = 0
    chunks: int = 0
    short_chunks: int = 0
    dropped_short: int = 0
    hard_splits: int = 0
    empty_doc_ids: list[str] = field(default_factory=list)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences (regex; abbreviations like "e.g." do not end a sentence)."""
    pieces: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        candidate = text[start:m.start()]
        if _ABBREV.search(candidate.rstrip()):
            continue
        pieces.append(candidate)
        start = m.end()
    pieces.append(text[start:])
    return [" ".join(p.split()) for p in pieces if p.strip()]


def _hard_split(sentence: str, max_chars: int) -> list[str]:
    parts, current = [], ""
    for word in sentence.split(" "):
        while len(word) > max_chars:  # a single enormous token
            if current:
                parts.append(current)
                current = ""
            parts.append(word[:max_chars])
            word = word[max_chars:]
        if current and len(current) + 1 + len(word) > max_chars:
            parts.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        parts.append(current)
    return parts


def chunk_text(text: str, config: ChunkConfig = ChunkConfig(), report: ChunkReport | None = None) -> list[list[str]]:
    """Group the sentences of ``text`` into chunks; returns each chunk's sentences."""
    sentences: list[str] = []
    for s in split_sentences(text):
        if len(s) > config.max_chars:
            if report is not None:
                report.hard_splits += 1
            sentences.extend(_hard_split(s, config.max_chars))
        else:
            sentences.append(s)
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0
    for s in sentences:
        extra = len(s) + (1 if current else 0)
        full = len(current) >= config.max_sentences and size >= config.min_chars
        if current and (full or size + extra > config.max_chars):
            chunks.append(current)
            current, size, extra = [], 0, len(s)
        current.append(s)
        size += extra
    if current:
        chunks.append(current)
    if len(chunks) >= 2:
        last, prev = chunks[-1], chunks[-2]
        if len(" ".join(last)) < config.min_chars and len(" ".join(prev + last)) <= config.max_chars:
            chunks[-2:] = [prev + last]
    return chunks


def chunk_documents(docs: Iterable[Document], config: ChunkConfig = ChunkConfig()) -> tuple[list[Chunk], ChunkReport]:
    """Chunk every document; each chunk keeps its ``doc_id`` and title."""
    report = ChunkReport()
    out: list[Chunk] = []
    for doc in docs:
        report.documents += 1
        if not doc.text.strip():
            report.empty_documents += 1
            report.empty_doc_ids.append(doc.doc_id)
            continue
        index = 0
        for sentences in chunk_text(doc.text, config, report):
            text = " ".join(sentences)
            if len(text) < config.min_chars:
                if config.drop_short:
                    report.dropped_short += 1
                    continue
                report.short_chunks += 1
            out.append(Chunk(f"{doc.doc_id}#{index}", doc.doc_id, index, text, doc.title, len(sentences)))
            index += 1
    report.chunks = len(out)
    return out, report
