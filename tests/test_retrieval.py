"""Retrievers on a small real corpus (tests/data/retrieval_corpus.jsonl)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from irtexam.errors import InputError
from irtexam.exam.schema import read_exam
from irtexam.retrieval import (ClosedBook, Hit, OracleRetriever, Passage, load_passages, recall_at_k,
                               reciprocal_rank_fusion, tokenize)
from irtexam.retrieval.registry import build_retriever, normalise_retriever_spec

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def passages():
    return load_passages(DATA / "retrieval_corpus.jsonl")


@pytest.fixture(scope="module")
def exam():
    return read_exam(DATA / "retrieval_exam.jsonl")


def test_tokenizer_lowercases_splits_punctuation_and_drops_stopwords():
    assert tokenize("The max_connections, (VACUUM)!") == ["max", "connections", "vacuum"]
    assert tokenize("The max", stopwords=None) == ["the", "max"]


def test_load_passages_names_row_of_bad_line(tmp_path):
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"id": "a", "text": "x"}\n{"id": "b"}\n')
    with pytest.raises(InputError, match=r"row 2.*'text'"):
        load_passages(bad)
    dup = tmp_path / "d.jsonl"
    dup.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(InputError, match="duplicate passage id"):
        load_passages(dup)


def test_bm25_finds_oracle_chunk_for_verbatim_query(passages, tmp_path):
    bm25 = build_retriever(normalise_retriever_spec("bm25"), passages, index_dir=tmp_path)
    for p in passages:
        sentence = p.text.split(". ")[0]
        hits = bm25.retrieve(sentence, 3)
        assert hits[0].passage.id == p.id, (sentence, [h.passage.id for h in hits])
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))


def test_bm25_index_saved_and_reused(passages, tmp_path):
    from irtexam.retrieval.lexical import BM25Retriever

    first = BM25Retriever(passages, index_dir=tmp_path)
    assert not first.loaded_from_disk and first.index_path.exists()
    second = BM25Retriever(passages, index_dir=tmp_path)
    assert second.loaded_from_disk
    q = "inverted index for arrays and full-text search"
    assert [h.passage.id for h in first.retrieve(q, 5)] == [h.passage.id for h in second.retrieve(q, 5)]
    # a different corpus gets its own index, never the stale one
    third = BM25Retriever(passages[:5], index_dir=tmp_path)
    assert not third.loaded_from_disk


def test_bm25_no_overlap_returns_nothing(passages):
    from irtexam.retrieval.lexical import BM25Retriever

    assert BM25Retriever(passages).retrieve("zzzz qqqq", 3) == []


def test_closed_book_and_oracle(passages, exam):
    assert ClosedBook().retrieve("anything", 5) == []
    oracle = OracleRetriever(passages)
    item = exam[0]
    assert [h.passage.id for h in oracle.retrieve(item.question, 3, chunk_id=item.chunk_id)] == [item.chunk_id]
    assert oracle.retrieve(item.question, 3, chunk_id="not-there") == []


def test_rrf_formula():
    a, b, c = (Passage(x, x, x) for x in "abc")
    fused = reciprocal_rank_fusion([[Hit(a, 9, 1), Hit(b, 8, 2)], [Hit(b, 1, 1), Hit(c, 0.5, 2)]], k0=60)
    assert [h.passage.id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61)


def test_recall_counts_items_without_chunk(passages, exam):
    hits = {it.id: OracleRetriever(passages).retrieve(it.question, 1, chunk_id=it.chunk_id) for it in exam}
    chunks = {it.id: it.chunk_id for it in exam}
    chunks["q1"] = None
    rep = recall_at_k("oracle", hits, chunks, 1)
    assert (rep.n_items, rep.n_with_chunk, rep.n_found, rep.recall) == (8, 7, 7, 1.0)


def test_registry_rejects_unknown_kind_and_option():
    with pytest.raises(ValueError, match="unknown retriever kind 'splade'"):
        normalise_retriever_spec("splade")
    with pytest.raises(ValueError, match="unknown option"):
        normalise_retriever_spec({"name": "bm25", "depth": 3})
    assert normalise_retriever_spec("dense")["name"] == "dense-minilm"
    assert normalise_retriever_spec({"name": "my-lex", "kind": "bm25", "k1": 1.2})["kind"] == "bm25"


@pytest.mark.llm
def test_dense_and_hybrid_on_packaged_minilm(passages, exam, tmp_path):
    import torch

    torch.set_num_threads(1)
    shared: dict = {}
    dense = build_retriever(normalise_retriever_spec("dense-minilm"), passages, index_dir=tmp_path, _shared=shared)
    hybrid = build_retriever(normalise_retriever_spec("hybrid-rrf"), passages, index_dir=tmp_path, _shared=shared)
    assert dense.embeddings.shape == (len(passages), 384)
    # paraphrased question, little word overlap: the dense model still finds the GIL passage
    hits = dense.retrieve("Why can only a single thread run Python code at once?", 3)
    assert hits[0].passage.id == "py-gil#0"
    found = {r.name: recall_at_k(r.name, {it.id: r.retrieve(it.question, 3) for it in exam},
                                 {it.id: it.chunk_id for it in exam}, 3).recall for r in (dense, hybrid)}
    assert found["dense-minilm"] >= 0.75 and found["hybrid-rrf"] >= 0.75, found
    # saved embeddings are reused
    from irtexam.retrieval.dense import DenseRetriever

    again = DenseRetriever(passages, index_dir=tmp_path)
    assert again.loaded_from_disk


def test_bundled_document_corpus_is_chunked_and_bm25_finds_verbatim_chunk():
    corpus = Path(__file__).parents[1] / "data" / "corpus" / "postgresql15-manual.jsonl.gz"
    if not corpus.exists():
        pytest.skip("bundled corpus not present")
    from irtexam.retrieval.lexical import BM25Retriever

    passages = load_passages(corpus)
    assert len(passages) > 500 and all("#" in p.id for p in passages[:50])
    bm25 = BM25Retriever(passages)
    for p in passages[::400]:
        query = " ".join(p.text.split()[:40])
        assert p.id in [h.passage.id for h in bm25.retrieve(query, 3)], p.id
