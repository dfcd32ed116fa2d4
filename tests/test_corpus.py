"""Corpus loading (JSONL, folders, HTML), chunking limits, stats, the bundled corpus, CLI."""

from __future__ import annotations

import gzip
import json

import pytest

from irtexam.cli import main
from irtexam.corpus import (ChunkConfig, Document, bundled_corpus_path, chunk_documents, chunk_text,
                            corpus_stats, html_to_text, load_corpus, split_sentences)
from irtexam.errors import InputError


def test_jsonl_loading_and_errors(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"doc_id": "a", "text": "Hello.", "title": "T", "source": "s", "topic": "x"}\n\n'
                 '{"doc_id": 2, "text": "World."}\n')
    docs = load_corpus(p)
    assert [d.doc_id for d in docs] == ["a", "2"] and docs[0].meta == {"topic": "x"} and docs[0].title == "T"
    gz = tmp_path / "c.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(p.read_text())
    assert [d.doc_id for d in load_corpus(gz)] == ["a", "2"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": "a", "text": "x"}\n{"text": "y"}\n')
    with pytest.raises(InputError, match=r"bad.jsonl, row 2, column 'doc_id'"):
        load_corpus(bad)
    bad.write_text('{"doc_id": "a", "text": "x"}\n{"doc_id": "a", "text": "y"}\n')
    with pytest.raises(InputError, match="duplicate doc_id"):
        load_corpus(bad)
    bad.write_text('{"doc_id": "a", "text": "x"}\nnot json\n')
    with pytest.raises(InputError, match="row 2"):
        load_corpus(bad)
    with pytest.raises(InputError, match="does not exist"):
        load_corpus(tmp_path / "missing.jsonl")
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(InputError, match="unsupported"):
        load_corpus(tmp_path / "x.csv")


def test_folder_loading_with_stable_ids(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.html").write_text(
        "<html><head><title>VACUUM</title><style>p{}</style></head><body><div class='navheader'>Prev Next</div>"
        "<h1>VACUUM</h1><p>Garbage-collect and   optionally analyze.</p><pre>VACUUM  FULL;\n  x</pre>"
        "<script>alert(1)</script></body></html>")
    (tmp_path / "notes.md").write_text("# Notes\n\nSome text.")
    (tmp_path / "ignored.bin").write_bytes(b"\x00\x01")
    docs = load_corpus(tmp_path)
    assert [d.doc_id for d in docs] == ["notes", "sub/page"]
    page = docs[1]
    assert page.title == "VACUUM" and "Prev" not in page.text and "alert" not in page.text
    assert "Garbage-collect and optionally analyze." in page.text and "VACUUM  FULL;\n  x" in page.text
    assert docs[0].title == "Notes"
    assert load_corpus(tmp_path / "notes.md")[0].doc_id == "notes"
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .txt"):
        load_corpus(tmp_path / "empty")


def test_html_to_text_entities_and_blocks():
    text, title = html_to_text("<p>a &amp; b</p><ul><li>one</li><li>two</li></ul>")
    assert [line for line in text.splitlines() if line] == ["a & b", "one", "two"]
    assert title is None


def test_sentence_split_keeps_abbreviations():
    s = split_sentences("Use e.g. VACUUM. Then run ANALYZE! Is it done? Yes.\n\nNew paragraph")
    assert s == ["Use e.g. VACUUM.", "Then run ANALYZE!", "Is it done?", "Yes.", "New paragraph"]


def test_chunk_limits():
    sent = "This sentence has exactly some words in it for testing. "
    text = sent * 95  # ~57 chars each
    cfg = ChunkConfig(max_sentences=10, min_chars=500, max_chars=4500)
    chunks = chunk_text(text, cfg)
    assert sum(len(c) for c in chunks) == 95
    assert all(len(c) <= 10 for c in chunks[:-1])
    assert all(500 <= len(" ".join(c)) <= 4500 for c in chunks)  # the short tail was merged
    # the sentence limit yields to min_chars: 10 short headings are not a chunk
    short = chunk_text("Title\n\n" * 30 + sent * 10, cfg)
    assert all(len(" ".join(c)) >= 500 for c in short[:-1])
    # an over-long sentence is hard split
    docs = [Document("big", "x " * 5000), Document("empty", "  "), Document("tiny", "Short.")]
    chunks, rep = chunk_documents(docs, ChunkConfig(max_chars=1000, min_chars=100))
    assert rep.hard_splits == 1 and rep.empty_documents == 1 and rep.empty_doc_ids == ["empty"]
    assert rep.short_chunks == 1 and rep.chunks == len(chunks)
    assert all(len(c.text) <= 1000 for c in chunks)
    assert [c.chunk_id for c in chunks if c.doc_id == "big"][:2] == ["big#0", "big#1"]
    _, rep2 = chunk_documents(docs, ChunkConfig(max_chars=1000, min_chars=100, drop_short=True))
    assert rep2.dropped_short == 1
    with pytest.raises(InputError):
        ChunkConfig(min_chars=600, max_chars=500)


def test_stats_table1():
    docs = [Document("a", "The cat, the dog."), Document("b", "A cat!")]
    chunks, _ = chunk_documents(docs, ChunkConfig(min_chars=0))
    st = corpus_stats(docs, chunks)
    assert st.total_words == 6 and st.vocabulary == 4 and st.avg_document_words == 3.0 and st.chunks == 2


def test_bundled_corpus_and_cli(capsys):
    path = bundled_corpus_path()
    docs = load_corpus(path)
    assert 150 <= len(docs) <= 300
    assert any(d.doc_id == "sql-vacuum" for d in docs)
    assert (path.parent / "LICENSE").read_text().count("PostgreSQL") >= 2
    assert main(["corpus", "stats", "bundled", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["documents"] == len(docs) and out["chunks"] > len(docs) and out["min_chunk_chars"] >= 500


def test_cli_chunk(tmp_path, capsys):
    p = tmp_path / "c.jsonl"
    p.write_text(json.dumps({"doc_id": "a", "text": "One sentence here. " * 80}) + "\n")
    assert main(["corpus", "chunk", str(p), "--out", str(tmp_path / "ch.jsonl"), "--min-chars", "100"]) == 0
    rows = [json.loads(x) for x in (tmp_path / "ch.jsonl").read_text().splitlines()]
    assert rows[0]["chunk_id"] == "a#0" and all(r["doc_id"] == "a" for r in rows)
    assert main(["corpus", "stats", str(tmp_path / "nope.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
