"""Corpus: load documents (JSONL, folders of text/markdown/reST/HTML), chunk them, count them.

The bundled corpus (a subset of the PostgreSQL 15 manual) is :func:`bundled_corpus_path`.
"""

from __future__ import annotations

from pathlib import Path

from .chunking import Chunk, ChunkConfig, ChunkReport, chunk_documents, chunk_text, split_sentences
from .documents import Document, html_to_text, load_corpus, load_folder, load_jsonl, write_jsonl
from .stats import CorpusStats, corpus_stats, words

__all__ = ["Chunk", "ChunkConfig", "ChunkReport", "CorpusStats", "Document", "bundled_corpus_path",
           "chunk_documents", "chunk_text", "corpus_stats", "html_to_text", "load_corpus", "load_folder",
           "load_jsonl", "split_sentences", "words", "write_jsonl"]

BUNDLED_NAME = "postgresql15-manual.jsonl.gz"


def bundled_corpus_path() -> Path:
    """Path of the bundled PostgreSQL 15 manual subset (gzip JSONL).

    Looked up inside the installed package (``irtexam/data/corpus``) first, then in the
    repository's ``data/corpus`` folder.
    """
    from importlib import resources

    packaged = Path(str(resources.files("irtexam"))) / "data" / "corpus" / BUNDLED_NAME
    if packaged.exists():
        return packaged
    repo = Path(__file__).resolve().parents[2] / "data" / "corpus" / BUNDLED_NAME
    if repo.exists():
        return repo
    from ..errors import IrtexamError

    raise IrtexamError(f"bundled corpus {BUNDLED_NAME} not found; rebuild it with scripts/build_corpus.py")
