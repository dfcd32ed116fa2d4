"""Job 6: link two versions of an exam through the questions they share (anchors).

    python examples/link_forms.py [--responses data/real_run/responses.csv.gz] [--anchors 40]
        [--method stocking-lord] [--figures figures/examples] [--out runs/examples/link]

Splits the exam into two forms sharing ``--anchors`` questions; the old form is taken by
the pipelines without the strongest LLM, the new form by those without the weakest, so
the two separate calibrations put their abilities on different scales. Links the new
form to the old one's scale (theta_old = A theta_new + B), writes the link to OUT and
draws the anchors' difficulties before and after linking.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

import irtexam  # noqa: E402
from irtexam import plotting  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Split, calibrate both forms, link, save, draw; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", default=str(HERE / "data/real_run/responses.csv.gz"))
    parser.add_argument("--anchors", type=int, default=40, help="number of questions both forms share")
    parser.add_argument("--method", default="stocking-lord", help="mean-mean, mean-sigma, haebara, stocking-lord, "
                                                                  "fixed or concurrent")
    parser.add_argument("--figures", default="figures/examples", help="folder for the figure")
    parser.add_argument("--out", default="runs/examples/link", help="folder for transform.json, items.csv, drift.csv")
    args = parser.parse_args(argv)

    matrix = irtexam.ResponseMatrix.read(args.responses)
    order = list(np.random.default_rng(0).permutation(matrix.items))
    anchors, rest = order[:args.anchors], order[args.anchors:]
    old_items, new_items = anchors + rest[:len(rest) // 2], anchors + rest[len(rest) // 2:]
    llm = matrix.examinee_facets["llm"]
    by_accuracy = sorted(set(llm), key=lambda name: float(matrix.values[:, list(llm == name)].mean()))
    old_group = [e for e in matrix.examinees if llm[e] != by_accuracy[-1]]
    new_group = [e for e in matrix.examinees if llm[e] != by_accuracy[0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data's warnings are printed by fit_abilities.py
        old = irtexam.fit(matrix.subset(items=old_items, examinees=old_group), model="3pl")
        new = irtexam.fit(matrix.subset(items=new_items, examinees=new_group), model="3pl")
    result = irtexam.link(new, old, args.method, out=args.out)
    t = result.transform
    print(f"old form {len(old_items)} questions x {len(old_group)} pipelines (without {by_accuracy[-1]}), "
          f"new form {len(new_items)} x {len(new_group)} (without {by_accuracy[0]}), {len(anchors)} anchors")
    print(f"{args.method}: theta_old = A theta_new + B, A = {t['A']:.3f} [{t['A_low']:.3f}, {t['A_high']:.3f}], "
          f"B = {t['B']:+.3f} [{t['B_low']:+.3f}, {t['B_high']:+.3f}] (90%); {t['n_drifting']} anchors drifting")
    both = [e for e in new_group if e in old_group]
    gap = np.abs(result.theta(new.examinees["theta"].loc[both]) - old.examinees["theta"].loc[both]).mean()
    raw = np.abs(new.examinees["theta"].loc[both] - old.examinees["theta"].loc[both]).mean()
    print(f"{len(both)} pipelines took both forms: mean |ability difference| {raw:.2f} unlinked, {gap:.2f} linked")
    print(f"wrote {args.out}/transform.json, {args.out}/items.csv, {args.out}/drift.csv")

    ax = plotting.plot_linking(result.drift, t)
    print("wrote", plotting.save(ax, Path(args.figures) / "linking.png"))  # save makes the folder
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
