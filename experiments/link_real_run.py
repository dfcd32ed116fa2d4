"""Issue 14: linking two overlapping forms of the real 202-item exam (data/real_run).

The items are split at random into form 1 (old) and form 2 (new) sharing ``--anchors``
common items. Form 1 is taken by the 45 pipelines of the three smaller LLMs, form 2 by the
45 pipelines of the three larger ones (30 pipelines take both), so the two calibrations
standardise different groups and their scales differ. Each form is calibrated separately
(3PL, MAP), form 2 is linked to form 1 by every method of ``irtexam.link``, and the form-2
abilities mapped to form 1's scale (A theta + B) are compared with the joint calibration of
all 202 items by all 60 pipelines (put on form 1's scale by the mean and sd of the form-1
group's abilities): mean absolute difference and correlation over the form-2 group, and for
the 30 pipelines in both groups the difference from their form-1 abilities. Without linking
(A = 1, B = 0) for reference.

    OMP_NUM_THREADS=2 nice -n 5 .venv/bin/python experiments/link_real_run.py

Writes data/real_run/bank/link_real_run.csv.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import irtexam
from irtexam.bank.link import METHODS, link

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", default=str(ROOT / "data/real_run/responses.csv.gz"))
    parser.add_argument("--anchors", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--out", default=str(ROOT / "data/real_run/bank/link_real_run.csv"))
    args = parser.parse_args()
    started = time.perf_counter()
    rm = irtexam.ResponseMatrix.read(args.responses)
    rng = np.random.default_rng(args.seed)
    order = list(rng.permutation(rm.items))
    anchors = order[:args.anchors]
    rest = order[args.anchors:]
    half = len(rest) // 2
    form1, form2 = anchors + rest[:half], anchors + rest[half:]
    llm = rm.examinee_facets["llm"]
    levels = sorted(set(llm), key=lambda name: float(rm.values[:, list(llm == name)].mean()))
    group1 = [e for e in rm.examinees if llm[e] != levels[-1]]
    group2 = [e for e in rm.examinees if llm[e] != levels[0]]
    both = [e for e in group2 if e in group1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        old = irtexam.fit(rm.subset(items=form1, examinees=group1), model="3pl", draws=args.draws, seed=args.seed)
        new = irtexam.fit(rm.subset(items=form2, examinees=group2), model="3pl", draws=args.draws, seed=args.seed)
        joint = irtexam.fit(rm, model="3pl", se=False, seed=args.seed)
    joint_theta = joint.examinees["theta"]
    old_theta = old.examinees["theta"]
    # the joint calibration on form 1's scale: match mean and sd over the form-1 group (the same pipelines)
    j1 = joint_theta.reindex(group1).to_numpy(float)
    scale_a = old_theta.reindex(group1).std() / j1.std()
    scale_b = old_theta.reindex(group1).mean() - scale_a * j1.mean()
    ex = group2
    theta_new = new.examinees["theta"].reindex(ex).to_numpy(float)
    joint_on_old = scale_a * joint_theta.reindex(ex).to_numpy(float) + scale_b
    theta_old = old_theta.reindex(both).to_numpy(float)
    in_both = np.array([e in set(both) for e in ex])
    rows = [{"method": "none (A=1, B=0)", "A": 1.0, "B": 0.0}]
    for method in METHODS:
        t0 = time.perf_counter()
        res = link(new, old, method, draws=args.draws, seed=args.seed)
        t = res.transform
        rows.append({"method": method, **{k: t[k] for k in ("A", "A_low", "A_high", "B", "B_low", "B_high")},
                     "n_drifting": t["n_drifting"], "seconds": time.perf_counter() - t0})
    frame = pd.DataFrame(rows)
    for i, r in frame.iterrows():
        linked = r["A"] * theta_new + r["B"]
        frame.loc[i, "mad_joint"] = np.abs(linked - joint_on_old).mean()
        frame.loc[i, "mean_diff_joint"] = (linked - joint_on_old).mean()
        frame.loc[i, "corr_joint"] = np.corrcoef(linked, joint_on_old)[0, 1]
        frame.loc[i, "mad_form1_both"] = np.abs(linked[in_both] - theta_old).mean()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.out, index=False)
    print(f"data/real_run split: {args.anchors} anchors, form 1 {len(form1)} items x {len(group1)} pipelines "
          f"(without {levels[-1]}), form 2 {len(form2)} items x {len(group2)} pipelines (without {levels[0]}), "
          f"{len(both)} pipelines in both; "
          f"{time.perf_counter() - started:.0f}s, loadavg {open('/proc/loadavg').read().split()[0]}")
    print("form-2 abilities linked to form 1's scale vs the joint calibration on form 1's scale (mad_joint, "
          "mean_diff_joint, corr_joint over the form-2 group) and vs form-1 abilities (mad_form1_both):")
    print(frame.round(3).to_string(index=False))


if __name__ == "__main__":
    main()
