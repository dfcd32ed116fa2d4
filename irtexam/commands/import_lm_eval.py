"""``irtexam import-lm-eval LOGS --out responses.csv``: lm-eval per-sample logs -> ResponseMatrix."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``import-lm-eval`` sub-command."""
    p = subparsers.add_parser(
        "import-lm-eval", help="build a response matrix from lm-evaluation-harness --log_samples outputs",
        description="Read results_*.json + samples_<task>_*.jsonl written by `lm_eval --output_path DIR "
                    "--log_samples`; one examinee per run (facets llm, icl from model_args and num_fewshot).")
    p.add_argument("logs", nargs="+", help="lm-eval output directories or files (searched recursively)")
    p.add_argument("--out", required=True, help="response table to write (.csv, .parquet, .jsonl)")
    p.add_argument("--metric", default="acc", help="per-sample 0/1 metric to use (default acc; acc_norm, ...)")
    p.add_argument("--filter", default="none", dest="filter_name", help="lm-eval filter name (default none)")
    p.add_argument("--llm", default=None, help="override the llm facet (default: from model_args)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Import and write the response matrix; print the counts."""
    from ..pipelines.lm_eval_import import import_lm_eval
    from ..paths import check_output_file
    from ..responses import ResponseMatrix

    check_output_file(args.out, inputs=args.logs)
    frame, report = import_lm_eval(args.logs, metric=args.metric, filter_name=args.filter_name, llm=args.llm)
    rm = ResponseMatrix.from_long(frame)
    path = rm.save(args.out)
    print(report.summary())
    print(f"wrote {path}: {rm.n_items} items x {rm.n_examinees} examinees ({', '.join(rm.examinees)})")
    from ..cli import print_warning

    for warning in rm.warnings():
        print_warning(warning)
    return 0
