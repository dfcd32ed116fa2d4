"""Linking Kolen & Brennan's two real forms (KB36) after calibrating each with irtexam, against the book.

Data (``data/refs/``, from R's SNSequate and plink, see its README): the 0/1 responses of 1,655
examinees to Form X and 1,638 to Form Y, 36 items each, items 3, 6, ..., 36 common; and the
book's BILOG 3PL calibration of both forms (Kolen & Brennan 2004, Table 6.5; ``KB04`` in plink).

Each form is calibrated separately by ``irtexam.fit`` (3PL, the default estimator: marginal EM with
the default weak item priors, abilities N(0, 1)); Form X (new) is then put on Form Y's scale (old)
by all six methods of ``irtexam.link``. For reference the four separate methods are also applied to
the book's own BILOG parameters with the same code (the constants the book and plink report come
from these parameters). The BILOG parameters use the scaling constant D = 1.7; the linking
constants A and B do not depend on it (a common factor of every a).

    .venv/bin/python experiments/link_kb36.py            # prints the table; ~1-2 min
    .venv/bin/python experiments/link_kb36.py --item-prior hierarchical   # centres learned (empirical Bayes)
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import irtexam
from irtexam.bank.link import METHODS, SEPARATE, link, linking_constants
from irtexam.irt import kinds

REFS = Path(__file__).resolve().parents[1] / "data" / "refs"


def form(letter: str) -> irtexam.ResponseMatrix:
    """One form's responses; items named by their position in the form (common items share names)."""
    path = next(REFS.glob(f"kb36_form_{letter}_responses_*.csv"))
    table = pd.read_csv(path).set_index("person")
    common = {f"item{j}": f"common{j}" for j in range(3, 37, 3)}
    table.columns = [common.get(c, f"{letter}_{c}") for c in table.columns]
    table.index = [f"{letter}{p}" for p in table.index]
    return irtexam.ResponseMatrix.from_wide(table)


def bilog_constants() -> dict[str, tuple[float, float]]:
    """The four separate methods on the book's BILOG parameters (Table 6.5), common items only."""
    params = pd.read_csv(REFS / "kb04_3pl_item_params.csv")
    common = params[params["common"] == 1]
    x = kinds.ItemParams(common["x_a"].to_numpy() * 1.7, common["x_b"].to_numpy(), common["x_c"].to_numpy())
    y = kinds.ItemParams(common["y_a"].to_numpy() * 1.7, common["y_b"].to_numpy(), common["y_c"].to_numpy())
    return {method: linking_constants(x, y, method) for method in SEPARATE}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--item-prior", default=None, help="the fits' item prior (default: the estimator's)")
    args = parser.parse_args()
    options = {"item_prior": args.item_prior} if args.item_prior else {}
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_x = irtexam.fit(form("x"), model="3pl", seed=0, **options)
        fit_y = irtexam.fit(form("y"), model="3pl", seed=0, **options)
    print(f"calibrated Form X ({fit_x.design.n_examinees} examinees) and Form Y ({fit_y.design.n_examinees}) by "
          f"{fit_x.method.upper()} in {time.perf_counter() - started:.0f} s; item prior {fit_x.spec.item_prior}; "
          f"mean c {fit_x.items['c'].mean():.3f} / {fit_y.items['c'].mean():.3f}")
    book = bilog_constants()
    print("method         A      A 90% interval       B       B 90% interval      | on the book's BILOG parameters")
    for method in METHODS:
        tr = link(fit_x, fit_y, method, seed=0).transform
        ref = book.get(method)
        ref_text = f"A {ref[0]:.3f}  B {ref[1]:+.3f}" if ref else "-"
        print(f"{method:<13} {tr['A']:.3f}  [{tr['A_low']:.3f}, {tr['A_high']:.3f}]  {tr['B']:+.3f}  "
              f"[{tr['B_low']:+.3f}, {tr['B_high']:+.3f}]  | {ref_text}", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
