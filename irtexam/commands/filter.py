"""``irtexam filter``: a-priori filters on a generated exam, with a report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..options import FINITE_FLOAT, PROBABILITY_OPEN


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``irtexam filter``."""
    p = subparsers.add_parser(
        "filter", help="a-priori filters (format, length, self-containment, Jaccard/embedding candidates)",
        description="Run a named filter chain ('paper': format, length, self_containment, extra_candidate, "
                    "intra_candidate; 'cheap': the first three, no embeddings; 'verified': 'paper' then the LLM "
                    "verifier of `irtexam verify`, removing without re-keying) or a comma list of filters. "
                    "Thresholds left out are calibrated to --target-rate removal per candidate filter.")
    p.add_argument("exam", type=Path)
    p.add_argument("--out", required=True, type=Path, help="kept items (JSONL)")
    p.add_argument("--report", type=Path, default=None, help="report table: .csv or .json (default OUT.report.json)")
    p.add_argument("--dropped", type=Path, default=None, help="also write the dropped items here")
    p.add_argument("--chain", default="paper", help="paper | cheap | comma-separated filter names")
    p.add_argument("--target-rate", type=PROBABILITY_OPEN, default=0.05)
    for t in ("t1", "t2", "t3", "t4"):
        p.add_argument(f"--{t}", type=FINITE_FLOAT, default=None)
    p.add_argument("--patterns", type=Path, default=None, help="file with one self-containment regex per line")
    p.add_argument("--no-embeddings", action="store_true", help="Jaccard rules only (no MiniLM)")
    p.add_argument("--baseline-llm", default=None, help="also compute the no-question baseline with this LLM")
    p.add_argument("--verify-llm", default=None, help="verifier of the 'verify' step (default qwen2.5-coder-1.5b)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Filter the exam, write kept/dropped items and the report."""
    from ..errors import InputError
    from ..exam.schema import read_exam, write_exam
    from ..filters import CHAINS, bias_baselines, run_chain

    from ..paths import check_output_file

    check_output_file(args.out, "--out", inputs=[args.exam], formats=["jsonl"])
    if args.dropped:
        check_output_file(args.dropped, "--dropped", inputs=[args.exam, args.out], formats=["jsonl"])
    if args.report:
        check_output_file(args.report, "--report", inputs=[args.exam, args.out], formats=["csv", "json"])
    items = read_exam(args.exam)
    chain = args.chain if args.chain in CHAINS else [c.strip() for c in args.chain.split(",") if c.strip()]
    emb = not args.no_embeddings
    options = {"extra_candidate": {"t1": args.t1, "t2": args.t2, "target_rate": args.target_rate,
                                   "use_embeddings": emb},
               "intra_candidate": {"t3": args.t3, "t4": args.t4, "target_rate": args.target_rate,
                                   "use_embeddings": emb}}
    if args.verify_llm:
        options["verify"] = {"llm": args.verify_llm}
    if args.patterns:
        pats = [line.strip() for line in args.patterns.read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
        if not pats:
            raise InputError("no patterns in file", path=str(args.patterns))
        options["self_containment"] = {"patterns": pats}
    kept, dropped, rep = run_chain(items, chain, options)
    llm = None
    if args.baseline_llm:
        from ..llm import load_llm

        llm = load_llm(args.baseline_llm)
    baselines = bias_baselines(kept, llm) if kept else {}
    write_exam(kept, args.out)
    if args.dropped:
        write_exam(dropped, args.dropped)
    table = rep.table()
    report = args.report or args.out.with_name(args.out.name.removesuffix(".jsonl") + ".report.json")
    report.parent.mkdir(parents=True, exist_ok=True)
    if report.suffix.lower() == ".csv":
        table.to_csv(report, index=False)
        report.with_suffix(".baselines.json").write_text(json.dumps(
            {"baselines": baselines, "params": rep.params}, indent=2, default=str) + "\n")
    else:
        report.write_text(json.dumps({"input": rep.n_in, "kept": rep.n_out, "dropped": len(dropped),
                                      "chain": rep.chain, "counts": table.to_dict(orient="records"),
                                      "params": rep.params, "baselines": baselines},
                                     indent=2, default=str) + "\n", encoding="utf-8")
    print(table.to_string(index=False))
    print(f"kept {rep.n_out} of {rep.n_in} items -> {args.out}; report {report}")
    if baselines:
        fixed = ", ".join(f"{k}={v:.1%}" for k, v in baselines["fixed_answer"].items())
        print(f"baselines: fixed answer {fixed}; longest answer {baselines['longest_answer']:.1%}"
              + (f"; no-question ({baselines['no_question_model']}) {baselines['no_question']:.1%}"
                 if "no_question" in baselines else ""))
    return 0
