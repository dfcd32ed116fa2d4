"""``irtexam adapt FITDIR (--replay RESPONSES --examinee ID | --exam EXAM --spec GRID --pipeline LABEL) --out DIR``."""

from __future__ import annotations

import argparse

from ..options import NONNEG_INT, POSITIVE_FLOAT, POSITIVE_INT, SEED


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``adapt`` sub-command."""
    p = subparsers.add_parser(
        "adapt", help="adaptive testing: measure one pipeline with a few items of a calibrated exam",
        description="Give items one at a time (by default one random item from each of --max-items groups of "
                    "similar items, the best predictor of whole-exam accuracy on data/real_run; --selection mfi "
                    "for the classic most-informative-item CAT), re-estimating the ability after each answer "
                    "(EAP under the calibrated item parameters, their draws integrated), until the ability's "
                    "standard error reaches --se-target or --max-items are given. Offline with --replay (answers "
                    "read from a response table) or live with --exam/--spec/--pipeline (the pipeline answers; "
                    "resumable). Writes trajectory.csv and summary.json (ability with 90%% interval, predicted "
                    "whole-exam accuracy with 90%% interval, items used, calls saved).")
    p.add_argument("fitdir", help="fit folder written by `irtexam fit ... --out DIR` (the item bank)")
    p.add_argument("--replay", metavar="RESPONSES", help="offline: long response table holding the examinee's answers")
    p.add_argument("--examinee", metavar="ID", help="offline: the examinee of --replay to adapt")
    p.add_argument("--exam", help="live: the exam JSONL the fit was calibrated on")
    p.add_argument("--spec", metavar="GRID", help="live: grid spec (YAML) with the pipeline's LLM and retriever")
    p.add_argument("--pipeline", metavar="LABEL", help="live: LLM|RETRIEVER|iclK (a single-pipeline spec needs none)")
    p.add_argument("--se-target", type=POSITIVE_FLOAT, default=0.3, help="stop when the ability's posterior sd <= this (0.3)")
    p.add_argument("--max-items", type=POSITIVE_INT, default=30, help="stop after this many items (default 30)")
    p.add_argument("--min-items", type=NONNEG_INT, default=5, help="never stop before this many items (default 5)")
    p.add_argument("--selection", default="stratified",
                   choices=("stratified", "mfi", "astrat", "accuracy", "random", "anchors"),
                   help="next item: stratified (default: one random item per k-means group of the calibration "
                        "answers, largest group first; MAE 0.029 of the predicted whole-exam accuracy at 30 items "
                        "on data/real_run), maximum Fisher information at the current estimate, a-stratified, "
                        "largest expected reduction of the accuracy variance, random, or representative anchors "
                        "(fixed order)")
    p.add_argument("--randomesque", type=POSITIVE_INT, default=1,
                   help="exposure control: pick at random among the N best items (default 1: the best)")
    p.add_argument("--balance", default=None, choices=("bloom", "question_word"),
                   help="content balancing across the exam's Bloom levels or question words (needs --exam)")
    p.add_argument("--estimator", default="eap", choices=("eap", "map"), help="ability estimate (default eap)")
    p.add_argument("--draws", type=POSITIVE_INT, default=100,
                   help="posterior draws of the item parameters integrated (default 100; at least 1)")
    p.add_argument("--no-misfit", dest="misfit", action="store_false",
                   help="leave the model-misfit term (estimated by replaying the calibration examinees) out of the "
                        "accuracy interval")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the adaptive test and print its summary."""
    from ..bank.adapt import adapt
    from ..paths import check_output_dir

    if args.out:
        check_output_dir(args.out, inputs=[args.fitdir], command="adapt")
    res = adapt(args.fitdir, replay=args.replay, examinee=args.examinee, exam=args.exam, spec=args.spec,
                pipeline=args.pipeline, se_target=args.se_target, max_items=args.max_items,
                min_items=args.min_items, seed=args.seed, selection=args.selection, randomesque=args.randomesque,
                balance=args.balance, estimator=args.estimator, draws=args.draws, misfit=args.misfit,
                out=args.out)
    s = res.summary
    print(f"{s['items_used']} of {s['exam_items']} items ({s['stop_reason']}); theta {s['theta']:.3f} "
          f"[{s['theta_low']:.3f}, {s['theta_high']:.3f}] (sd {s['theta_sd']:.3f}); predicted accuracy "
          f"{s['accuracy']:.3f} [{s['accuracy_low']:.3f}, {s['accuracy_high']:.3f}]; calls saved {s['calls_saved']}"
          + (f"; actual accuracy {s['actual_accuracy']:.3f}" if "actual_accuracy" in s else ""))
    print(f"wrote {args.out}/trajectory.csv, {args.out}/summary.json")
    return 0
