"""``irtexam tiny score|select|validate``: tiny benchmarks on a calibrated item bank.

* ``irtexam tiny score FITDIR ANSWERS --out scores.csv``: abilities and predicted whole-bank accuracy of
  every model of ANSWERS (any subset of the bank's items), with 90% intervals;
* ``irtexam tiny select FITDIR --k 100 --rule info --out DIR``: a k-item subset written as subset.csv,
  items.txt, exam.jsonl (with --exam) and lm_eval_samples.json (lm-eval ids);
* ``irtexam tiny validate RESPONSES --out DIR``: the held-out experiment (MAE and coverage per rule and k).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..options import PROBABILITY_OPEN, POSITIVE_FLOAT, SEED

if TYPE_CHECKING:
    import pandas as pd

RULE_CHOICES = ("info", "anchors", "stratified", "mfi", "random")


def _ints(text: str) -> list[int]:
    """'25,50,100' -> [25, 50, 100]; a one-line usage error otherwise."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers like 25,50,100, got '{text}'")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers like 25,50,100, got '{text}'")
    return values


def _rules(text: str) -> list[str]:
    """'info,random' -> ['info', 'random'], each one of RULE_CHOICES."""
    values = [part.strip() for part in text.split(",") if part.strip()]
    bad = [v for v in values if v not in RULE_CHOICES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"rules must be among {','.join(RULE_CHOICES)}, got '{text}'")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tiny`` sub-command and its three actions."""
    p = subparsers.add_parser(
        "tiny", help="tiny benchmarks: score new models from a few items of a calibrated bank, pick the items, "
                     "validate on held-out models",
        description="Tiny benchmarks (tinyBenchmarks, metabench): a bank calibrated on the models already "
                    "evaluated scores new models from a small subset of its items. `score` scores many models at "
                    "once, `select` picks a k-item subset, `validate` measures how far off the scores are on "
                    "held-out models.")
    actions = p.add_subparsers(dest="tiny_action", metavar="ACTION", required=True)

    s = actions.add_parser("score", help="abilities and predicted whole-bank accuracy of many models at once",
                           description="Score every model of ANSWERS (wide: rows models, columns item ids; or long: "
                                       "item, examinee, response) on the bank: ability (EAP) with 90%% interval, "
                                       "predicted accuracy on all the bank's items (IRT prediction of the unseen "
                                       "items plus the observed answers) with 90%% interval, the plain subset "
                                       "accuracy and the gp-IRT-style blend. Writes a CSV, one row per model.")
    s.add_argument("fitdir", help="fit folder written by `irtexam fit ... --out DIR` (the calibrated bank)")
    s.add_argument("answers", help="the new models' answers (any subset of the bank's items; missing allowed)")
    s.add_argument("--weights", metavar="SUBSET", help="the folder of `irtexam tiny select --out` or its subset.csv "
                                                      "(anchor weights of the subset accuracy; default equal weights)")
    s.add_argument("--prior-sd", type=POSITIVE_FLOAT, default=1.0, help="sd of the N(0, sd^2) ability prior (1)")
    s.add_argument("--no-misfit", dest="misfit", action="store_false",
                   help="leave the misfit measured on the calibration models out of the accuracy interval")
    s.add_argument("--estimator", default="eap", choices=("eap", "wle"),
                   help="ability: eap (posterior mean, default) or wle (Warm's estimate: no shrinkage, noisier)")
    s.add_argument("--item-draws", action="store_true",
                   help="integrate the answered items over the fit's posterior draws (default: point estimates)")
    s.add_argument("--seed", type=SEED, default=0)
    s.add_argument("--out", required=True, help="CSV to write (one row per model)")
    s.set_defaults(func=run_score)

    c = actions.add_parser("select", help="pick k items of the bank and write them as an exam",
                           description="Choose --k items by --rule: auto (default: validates info, anchors and "
                                       "stratified on three held-out folds of the bank's calibration models, each "
                                       "a calibration, and takes the one whose predicted accuracy was closest), "
                                       "info (greedy, the expected error of "
                                       "the predicted accuracy over the calibration models' abilities), anchors "
                                       "(tinyBenchmarks: k-means medoids, weights = cluster sizes), stratified (one "
                                       "random item a cluster), mfi (most informative at the mean ability) or "
                                       "random. Writes subset.csv, items.txt, exam.jsonl (with --exam) and "
                                       "lm_eval_samples.json (when the ids are lm-eval's task/doc_id).")
    c.add_argument("fitdir", help="fit folder (the calibrated bank)")
    c.add_argument("--k", type=int, required=True, help="number of items")
    c.add_argument("--rule", default="auto", choices=("auto",) + RULE_CHOICES,
                   help="selection rule (default auto: the best of info, anchors, stratified on held-out models)")
    c.add_argument("--exam", help="the exam JSONL the bank was calibrated on (writes the subset's exam.jsonl)")
    c.add_argument("--seed", type=SEED, default=0)
    c.add_argument("--out", required=True, help="output folder")
    c.set_defaults(func=run_select)

    v = actions.add_parser("validate", help="held-out experiment: how far off are k-item scores",
                           description="Split the models (--holdout of them held out, seeded), calibrate on the "
                                       "others, and for each --rules and --k score the held-out models from k items; "
                                       "print the mean absolute error and 90%% interval coverage of the predicted "
                                       "whole-bank accuracy (IRT, blend, plain subset accuracy) and of the ability "
                                       "against the full-bank truth. Writes validation.csv and settings.json.")
    v.add_argument("responses", help="response table of the calibrating models (binary)")
    v.add_argument("--model", default="2pl", choices=("1pl", "2pl", "3pl"), help="IRT model (default 2pl)")
    v.add_argument("--method", default="auto", choices=("auto", "em", "map", "nuts"),
                   help="calibration estimator (fit's --method; default auto)")
    v.add_argument("--k", type=_ints, default=[25, 50, 100, 200], help="subset sizes (default 25,50,100,200)")
    v.add_argument("--rules", type=_rules, default=list(RULE_CHOICES), help="selection rules (default all)")
    v.add_argument("--holdout", type=PROBABILITY_OPEN, default=0.2, help="share of models held out (0.2)")
    v.add_argument("--splits", type=int, default=1, help="held-out splits pooled (default 1; 5 with --holdout 0.2 "
                                                          "holds every model out once)")
    v.add_argument("--truth", metavar="TRUTH_JSON", help="truth file of `irtexam simulate` (slopes against true "
                                                          "abilities)")
    v.add_argument("--estimator", default="eap", choices=("eap", "wle"), help="ability estimator (default eap)")
    v.add_argument("--draws", type=int, default=50, help="posterior draws the calibration keeps (50)")
    v.add_argument("--seed", type=SEED, default=0)
    v.add_argument("--out", required=True, help="output folder")
    v.set_defaults(func=run_validate)


def run_score(args: argparse.Namespace) -> int:
    """Score and write the CSV; print a one-line summary."""
    from ..bank.tiny import score_models
    from ..paths import check_output_file

    check_output_file(args.out, inputs=[args.answers], formats=["csv"])
    scores = score_models(args.fitdir, args.answers, weights=args.weights, prior_sd=args.prior_sd,
                          misfit=args.misfit, item_draws=args.item_draws, estimator=args.estimator,
                          seed=args.seed)
    scores.to_csv(args.out)
    cal = scores.attrs["calibration"]
    print(f"scored {len(scores)} models on {int(scores['n_answered'].median())} items (median) of "
          f"{scores.attrs['bank_items']}; mean predicted accuracy {scores['accuracy'].mean():.3f}, mean 90% "
          f"interval width {(scores['accuracy_high'] - scores['accuracy_low']).mean():.3f}"
          + (f"; misfit sd {cal['misfit_var'] ** 0.5:.4f} from {cal['models']} calibration models" if cal else ""))
    outside = scores.attrs.get("answered_outside_weights", 0)
    if outside:
        print(f"{outside} answered item(s) are not in {args.weights}: they inform theta and accuracy, not "
              f"subset_accuracy (the subset's weighted accuracy)")
    print(f"wrote {args.out}")
    return 0


def run_select(args: argparse.Namespace) -> int:
    """Select and write the subset; print what was written."""
    from ..bank.subset import select_subset, write_subset
    from ..paths import check_output_dir

    check_output_dir(args.out, inputs=[args.fitdir])
    subset = select_subset(args.fitdir, args.k, args.rule, seed=args.seed, progress=lambda m: print(m, flush=True))
    if subset.attrs.get("validation"):
        rows = subset.attrs["validation"]
        print(f"auto: predicted accuracy of held-out models from {args.k} items, mean absolute error "
              + ", ".join(f"{row['rule']} {row['irt_mae']:.4f}" for row in rows)
              + f" ({rows[0]['models']} models held out once) -> {subset.attrs['rule']}")
    written = write_subset(subset, args.out, exam=args.exam)
    print(f"{len(subset)} items by {subset.attrs['rule']}: mean a {subset['a'].mean():.2f}, b from {subset['b'].min():.2f} "
          f"to {subset['b'].max():.2f}")
    print("wrote " + ", ".join(written.values()))
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """Run the held-out experiment and print its table."""
    import json

    from ..bank.tiny_check import validate_tiny
    from ..paths import check_output_dir

    check_output_dir(args.out, inputs=[args.responses])
    truth = None
    if args.truth:
        truth = json.loads(open(args.truth, encoding="utf-8").read()).get("theta")
    result = validate_tiny(args.responses, model=args.model, method=args.method, ks=args.k, rules=args.rules,
                           holdout=args.holdout, splits=args.splits, seed=args.seed, truth_theta=truth,
                           fit_options={"draws": args.draws}, estimator=args.estimator, progress=lambda m: print(m, flush=True))
    print(format_table(result.table))
    written = result.save(args.out)
    print("wrote " + ", ".join(written.values()))
    return 0


def format_table(table: "pd.DataFrame") -> str:
    """The validation table as printed: one line per rule and k."""
    columns = [c for c in ("rule", "k", "models", "irt_mae", "irt_cover", "blend_mae", "blend_cover", "subset_mae",
                           "subset_cover", "theta_mae", "theta_cover", "theta_slope", "theta_slope_truth",
                           "theta_cover_truth") if c in table]
    return table[columns].to_string(index=False, float_format=lambda x: f"{x:.4f}")
