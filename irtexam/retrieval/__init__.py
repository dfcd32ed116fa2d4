"""Retrieval methods for RAG pipelines: closed-book, BM25, dense, hybrid (RRF), oracle.

Heavy dependencies (bm25s, sentence-transformers) are imported by the retriever
classes themselves, so importing this package is cheap.
"""

from .base import Hit, Passage, Retriever, corpus_fingerprint, load_passages, passages_from_records
from .evaluation import RecallReport, recall_at_k
from .hybrid import HybridRRF, reciprocal_rank_fusion
from .registry import build_retriever, normalise_retriever_spec
from .simple import ClosedBook, OracleRetriever
from .tokenize import ENGLISH_STOPWORDS, tokenize

__all__ = ["Hit", "Passage", "Retriever", "corpus_fingerprint", "load_passages", "passages_from_records",
           "RecallReport", "recall_at_k", "HybridRRF", "reciprocal_rank_fusion", "build_retriever",
           "normalise_retriever_spec", "ClosedBook", "OracleRetriever", "ENGLISH_STOPWORDS", "tokenize"]
