"""``irtexam take SPEC --out DIR``: every pipeline of a grid spec takes the exam."""

from __future__ import annotations

import argparse

from ..options import THREADS


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
    p.add_argument("--threads", type=THREADS, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--tables-only", action="store_true",
                   help="load no LLM: rebuild the output tables from the answers logged so far in --out "
                        "(pairs not yet answered stay missing and are counted)")
    p.set_defaults(func=run)


def check_python_systems(spec, source) -> None:
    """Import every ``python`` system of the spec before any call: one that cannot be imported is a spec
    error naming the file and the system, not a failure at its first item."""
    from ..errors import IrtexamError
    from ..pipelines.systems import load_function

    for i, entry in enumerate(spec.systems or []):
        if "python" in entry:
            try:
                load_function(entry["python"])
            except Exception as exc:  # noqa: BLE001 - ImportError, AttributeError, or the module's own error
                raise IrtexamError(f"{source}, key 'systems[{i}].python': cannot import {entry['python']} "
                                   f"({type(exc).__name__}: {exc}); is the module on PYTHONPATH or in the working "
                                   "directory?") from None


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

    from ..paths import check_output_dir

    spec = load_spec(args.spec)
    check_output_dir(args.out, inputs=[args.spec, spec.exam], command="take")
    check_python_systems(spec, args.spec)
    from pathlib import Path

    from ..outdirs import claim

    claim(Path(args.out), "take")  # take writes into --out directly (resumable): mark the folder as take's
    result = take_exam(spec, args.out, progress=not args.no_progress, score_pending=not args.tables_only)
    print(result.summary())
    acc = result.out_dir / "accuracy.csv"
    if acc.exists():
        with pd.option_context("display.width", 200, "display.max_columns", 20):
            print(pd.read_csv(acc).round(3).to_string(index=False))
    recall = pd.read_csv(result.out_dir / "retrieval_recall.csv")
    if len(recall):
        print(recall.round(3).to_string(index=False))
    tables = ("answers.parquet", "responses.csv", "accuracy.csv", "retrieval_recall.csv", "provenance.json")
    written = [name for name in tables if (result.out_dir / name).exists()]
    print(f"wrote {result.out_dir}/{{{', '.join(written)}}}")
    missing = [name for name in tables if name not in written]
    if missing:
        print(f"not written (no answer logged yet): {', '.join(missing)}; run without --tables-only to answer")
    return 0
