"""``irtexam corpus``: corpus statistics (paper Table 1) and chunking."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..options import NONNEG_INT, POSITIVE_INT


def add_chunk_options(parser: argparse.ArgumentParser) -> None:
    """Chunking options shared by ``corpus`` and ``generate``."""
    parser.add_argument("--max-sentences", type=POSITIVE_INT, default=10, help="sentences per chunk (default 10)")
    parser.add_argument("--min-chars", type=NONNEG_INT, default=500, help="shortest chunk in characters (default 500)")
    parser.add_argument("--max-chars", type=POSITIVE_INT, default=4500, help="longest chunk in characters (default 4500)")


def resolve_corpus(value: str) -> Path:
    """Path of a corpus argument (``bundled`` = the packaged PostgreSQL manual subset)."""
    if value == "bundled":
        from ..corpus import bundled_corpus_path

        return bundled_corpus_path()
    return Path(value)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``irtexam corpus stats|chunk``."""
    p = subparsers.add_parser("corpus", help="corpus statistics and chunking",
                              description="Load a corpus (.jsonl/.jsonl.gz with doc_id,text[,title,source], "
                                          "or a folder of .txt/.md/.rst/.html) and report or write its chunks. "
                                          "CORPUS may be 'bundled' (PostgreSQL 15 manual subset).")
    sub = p.add_subparsers(dest="corpus_command", metavar="ACTION", required=True)
    s = sub.add_parser("stats", help="documents, chunks, words, vocabulary (paper Table 1)")
    s.add_argument("corpus")
    add_chunk_options(s)
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=run)
    c = sub.add_parser("chunk", help="write the chunks as JSONL (chunk_id, doc_id, index, text, title)")
    c.add_argument("corpus")
    c.add_argument("--out", required=True, type=Path)
    add_chunk_options(c)
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``corpus stats`` or ``corpus chunk``."""
    from dataclasses import asdict

    from ..corpus import ChunkConfig, chunk_documents, corpus_stats, load_corpus

    from ..options import check_order
    from ..paths import check_output_file

    if args.corpus_command == "chunk":
        check_output_file(args.out, "--out", inputs=[args.corpus], formats=["jsonl"])
    check_order(args.min_chars, args.max_chars, "--min-chars", "--max-chars")
    docs = load_corpus(resolve_corpus(args.corpus))
    config = ChunkConfig(args.max_sentences, args.min_chars, args.max_chars)
    chunks, report = chunk_documents(docs, config)
    if args.corpus_command == "chunk":
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_name(args.out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for ch in chunks:
                fh.write(json.dumps(asdict(ch), ensure_ascii=False) + "\n")
        tmp.replace(args.out)
        print(f"wrote {len(chunks)} chunks from {report.documents} documents to {args.out} "
              f"(empty documents skipped: {report.empty_documents}, short chunks kept: {report.short_chunks}, "
              f"over-long sentences split: {report.hard_splits})")
        return 0
    stats = corpus_stats(docs, chunks)
    if args.json:
        print(json.dumps({**asdict(stats), "chunking": {k: v for k, v in asdict(report).items()
                                                        if k != "empty_doc_ids"}}, indent=2))
        return 0
    width = max(len(label) for label, _ in stats.as_rows())
    for label, value in stats.as_rows():
        print(f"{label:<{width}}  {value:>12}")
    print(f"{'Empty documents (skipped)':<{width}}  {report.empty_documents:>12,}")
    print(f"{'Chunks below --min-chars (kept)':<{width}}  {report.short_chunks:>12,}")
    print(f"{'Over-long sentences split':<{width}}  {report.hard_splits:>12,}")
    return 0
