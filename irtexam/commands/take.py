"""``irtexam take SPEC --out DIR``: every pipeline of a grid spec takes the exam."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``take`` sub-command."""
    p = subparsers.add_parser(
        "take", help="run a grid of RAG pipelines (llm x retriever x icl) over an exam",
        description="Run every pipeline of a YAML/TOML grid spec over the exam; resumable (re-run the same "
                    "command after a crash). Writes answers.parquet, responses.csv (for `irtexam fit`), "
                    "accuracy.csv, retrieval_recall.csv and provenance.json into --out.")
    p.add_argument("spec", help="grid spec (.yaml/.yml/.toml/.json); see examples/specs/")
    p.add_argument("--out", required=True, help="output directory (created; reused to resume)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--tables-only", action="store_true",
                   help="load no LLM: rebuild the output tables from the answers logged so far in --out "
                        "(pairs not yet answered stay missing and are counted)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the spec, run the grid, print the accuracy table and the counts."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    import pandas as pd

    from ..pipelines.spec import load_spec
    from ..pipelines.take import take_exam

    spec = load_spec(args.spec)
    result = take_exam(spec, args.out, progress=not args.no_progress, score_pending=not args.tables_only)
    print(result.summary())
    acc = result.out_dir / "accuracy.csv"
    if acc.exists():
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(pd.read_csv(acc).round(3).to_string(index=False))
    print(pd.read_csv(result.out_dir / "retrieval_recall.csv").round(3).to_string(index=False))
    print(f"wrote {result.out_dir}/{{answers.parquet, responses.csv, accuracy.csv, retrieval_recall.csv, "
          f"provenance.json}}")
    return 0
