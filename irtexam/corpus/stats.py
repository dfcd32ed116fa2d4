"""Corpus statistics as in the paper's Table 1.

Words are counted like "NLTK word tokenizer and punctuation remover": tokens matching
``\\w+`` (letters, digits, underscore), so punctuation is not a word; the vocabulary
is the set of lower-cased words.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Iterable

from .chunking import Chunk
from .documents import Document

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """Word tokens of ``text`` (punctuation removed)."""
    return _WORD.findall(text)


@dataclass
class CorpusStats:
    """Table 1 of the paper for one corpus (plus character counts)."""

    documents: int
    chunks: int
    avg_document_words: float
    total_words: int
    vocabulary: int
    total_chars: int
    avg_chunk_chars: float
    min_chunk_chars: int
    max_chunk_chars: int

    def as_rows(self) -> list[tuple[str, str]]:
        """(label, formatted value) rows for printing."""
        labels = {"documents": "# Documents", "chunks": "# Document chunks",
                  "avg_document_words": "Average document length (words)", "total_words": "Total # words",
                  "vocabulary": "Vocabulary size", "total_chars": "Total # characters",
                  "avg_chunk_chars": "Average chunk length (characters)",
                  "min_chunk_chars": "Shortest chunk (characters)", "max_chunk_chars": "Longest chunk (characters)"}
        return [(labels[k], f"{v:,.1f}" if isinstance(v, float) else f"{v:,}") for k, v in asdict(self).items()]


def corpus_stats(docs: Iterable[Document], chunks: Iterable[Chunk]) -> CorpusStats:
    """Documents, chunks, words per document, total words, vocabulary size, characters."""
    docs, chunks = list(docs), list(chunks)
    vocab: set[str] = set()
    total_words = 0
    for d in docs:
        ws = words(d.text)
        total_words += len(ws)
        vocab.update(w.lower() for w in ws)
    lengths = [len(c.text) for c in chunks] or [0]
    return CorpusStats(documents=len(docs), chunks=len(chunks),
                       avg_document_words=total_words / max(len(docs), 1), total_words=total_words,
                       vocabulary=len(vocab), total_chars=sum(len(d.text) for d in docs),
                       avg_chunk_chars=sum(lengths) / max(len(chunks), 1), min_chunk_chars=min(lengths),
                       max_chunk_chars=max(lengths))
