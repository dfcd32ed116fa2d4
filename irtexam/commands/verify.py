"""``irtexam verify``: check every item's key against its source passage with an LLM."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..options import NONNEG_INT, THREADS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``irtexam verify``."""
    from ..exam.verify import DEFAULT_VERIFIER

    p = subparsers.add_parser(
        "verify", help="verify answer keys and single-correctness against the source passages (LLM judge)",
        description="For every item a verifier LLM reads the source chunk and judges each candidate alone "
                    "(calibrated P(Yes) of 'is this a correct answer?') and picks among all candidates in every "
                    "cyclic order (position bias cancels); checks without an LLM catch template placeholders, "
                    "parse artifacts, values found nowhere in the chunk and near-duplicate candidates. Writes the "
                    "kept items (clear wrong keys re-keyed) and REPORT.csv with one row per item: verdict "
                    "(keep, wrong_key, multiple_correct, unsupported, malformed), per-candidate scores, reason.")
    p.add_argument("exam", type=Path)
    p.add_argument("--llm", default=DEFAULT_VERIFIER,
                   help=f"verifier: packaged name, .gguf, model folder or http(s)://.../v1 URL (default {DEFAULT_VERIFIER})")
    p.add_argument("--model", default=None, help="model id to request when --llm is a URL")
    p.add_argument("--api-key-env", default=None, help="environment variable holding the server's API key")
    p.add_argument("--corpus", default=None,
                   help="look passages up by chunk_id in this corpus when items lack provenance.document")
    p.add_argument("--cache-dir", type=Path, default=None, help="LLM call cache (default: the user cache)")
    p.add_argument("--out", required=True, type=Path, help="verified exam (JSONL, same schema)")
    p.add_argument("--report", required=True, type=Path, help="REPORT.csv: one row per item")
    p.add_argument("--permutations", type=NONNEG_INT, default=4, help="cyclic candidate orders in the pick pass (0: off)")
    p.add_argument("--no-rekey", action="store_true", help="remove wrong keys instead of re-keying the clear ones")
    p.add_argument("--dtype", default="bfloat16", help="bfloat16 (CPUs with bf16 units) or float32")
    p.add_argument("--threads", type=THREADS, default=None, help="torch CPU threads")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Verify the exam, write the verified exam and the report, print the counts."""
    from ..exam.verify import VerifyConfig, verify_exam
    from ..llm import load_llm
    from .corpus import resolve_corpus

    from ..paths import check_output_file

    check_output_file(args.out, "--out", inputs=[args.exam], formats=["jsonl"])
    check_output_file(args.report, "--report", inputs=[args.exam, args.out], formats=["csv"])
    corpus = resolve_corpus(args.corpus) if args.corpus else None
    config = VerifyConfig(permutations=args.permutations, rekey=not args.no_rekey)

    def loader(name: str):
        return load_llm(name, dtype=args.dtype, model=args.model, api_key_env=args.api_key_env,
                        num_threads=args.threads)

    summary = verify_exam(args.exam, args.llm, args.out, args.report, corpus=corpus, cache_dir=args.cache_dir,
                          config=config, progress=True, loader=loader)
    print(summary.line())
    print(f"wrote {args.out} ({summary.kept} items) and {args.report} ({summary.n_items} rows)")
    return 0
