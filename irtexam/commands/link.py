"""``irtexam link NEWFIT OLDFIT --method {mean-mean,mean-sigma,haebara,stocking-lord,fixed,concurrent} --out DIR``."""

from __future__ import annotations

import argparse

from ..cli import split_list
from ..options import POSITIVE_INT, SEED


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``link`` sub-command."""
    p = subparsers.add_parser(
        "link", help="put a new calibration on an old one's ability scale via common (anchor) items",
        description="theta_old = A theta_new + B from the items both fits share (matched by id): separate "
                    "calibration + mean-mean, mean-sigma, Haebara or Stocking-Lord (90%% intervals from the fits' "
                    "draws and a bootstrap over anchors), fixed-anchor calibration, or concurrent calibration. "
                    "Writes transform.json, items.csv (NEWFIT's items on OLDFIT's scale) and drift.csv.")
    p.add_argument("newfit", help="fit folder of the new exam version")
    p.add_argument("oldfit", help="fit folder of the old exam version (the target scale)")
    p.add_argument("--method", default="stocking-lord",
                   choices=("mean-mean", "mean-sigma", "haebara", "stocking-lord", "fixed", "concurrent"))
    p.add_argument("--anchors", default=None, help="comma-separated anchor item ids (default: every common id)")
    p.add_argument("--drop-drift", action="store_true", help="relink without the anchors flagged as drifting")
    p.add_argument("--draws", type=POSITIVE_INT, default=200, help="draws for the intervals (default 200)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Link and print the transformation and the drift summary."""
    from ..bank.link import link
    from ..paths import check_output_dir

    check_output_dir(args.out, inputs=[args.newfit, args.oldfit], command="link")
    res = link(args.newfit, args.oldfit, args.method, anchors=split_list(args.anchors) or None, draws=args.draws,
               seed=args.seed, drop_drift=args.drop_drift, out=args.out)
    t = res.transform
    print(f"{args.method}: theta_old = A theta_new + B with A = {t['A']:.4f} [{t['A_low']:.4f}, {t['A_high']:.4f}], "
          f"B = {t['B']:.4f} [{t['B_low']:.4f}, {t['B_high']:.4f}] (90%); {t['n_anchors']} anchors, "
          f"{t['n_drifting']} flagged as drifting" + (f" (dropped: {', '.join(t['dropped_for_drift'])})"
                                                       if t["dropped_for_drift"] else ""))
    print(f"wrote {args.out}/transform.json, {args.out}/items.csv, {args.out}/drift.csv")
    return 0
