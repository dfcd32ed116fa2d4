"""Recovery and interval coverage of the default estimator against the generating parameters.

For each regime (items x examinees, 2PL or 3PL) it simulates responses from known parameters,
fits with ``irtexam.fit`` (method "auto", which is the marginal estimator for these models, or the
``--method`` given) and compares with the truth **on the sample-standardised scale**: the true
abilities standardised by their own sample mean and sd, theta* = (theta - m) / s, and the item
parameters moved with them, a* = a s, b* = (b - m) / s (c unchanged). Nothing is linked to a fit.

Printed per regime and replication: the geometric mean of a_hat / a*, the slope of b_hat on b*
(least squares), the slope of theta_hat on theta*, mean c_hat - c, the share of 90% intervals of a, b, c,
theta that contain the truth, and how many examinees share an ability with another whose responses differ
(``ties``: abilities equal to 9 decimals, response patterns not).

    python experiments/marginal_recovery.py                      # every regime, 2 replications
    python experiments/marginal_recovery.py --regimes 150x3000 --models 3pl --reps 4
    python experiments/marginal_recovery.py --regimes leaderboard --reps 1       # the leaderboard shapes
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

import irtexam
from irtexam.irt.simulate import simulate

REGIMES = ("150x800", "150x3000", "150x10000", "10x2000", "30x2000")
# issue 42: LLM leaderboards, thousands of items per model (auto fits them by the joint mode)
LEADERBOARD_REGIMES = ("2000x200", "3000x250", "2000x1000", "5761x2211", "12032x2211")


def true_on_sample_scale(truth: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The generating parameters on the scale of standardised sample abilities."""
    theta = truth["theta"]
    m, s = theta.mean(), theta.std()
    out = {"theta": (theta - m) / s, "a": truth["a"] * s, "b": (truth["b"] - m) / s}
    if "c" in truth:
        out["c"] = truth["c"]
    return out


def tied_examinees(theta_hat: np.ndarray, values: np.ndarray) -> int:
    """Examinees whose ability (to 9 decimals) equals that of another examinee with a different response pattern
    (``values``: items x examinees, NaN missing)."""
    patterns = np.unique(np.nan_to_num(values, nan=-1.0), axis=1, return_inverse=True)[1].reshape(-1)
    frame = pd.DataFrame({"theta": np.round(theta_hat, 9), "pattern": patterns})
    return int((frame.groupby("theta")["pattern"].transform("nunique") > 1).sum())


def coverage(table, column: str, truth: np.ndarray) -> float:
    """Share of the 90% intervals [column_low, column_high] that contain the truth."""
    low, high = table[f"{column}_low"].to_numpy(), table[f"{column}_high"].to_numpy()
    return float(np.mean((low <= truth) & (truth <= high)))


def one(n_items: int, n_examinees: int, model: str, seed: int, method: str, c_range: tuple[float, float] | None = None,
        item_prior: str | None = None, a_median: float | None = None,
        slope_centre: str | None = None, guessing_centre: str | None = None) -> dict[str, float]:
    c = (np.random.default_rng(seed + 10_000).uniform(*c_range, n_items)
         if c_range is not None and model == "3pl" else None)
    a = (a_median * np.exp(np.random.default_rng(seed + 20_000).normal(0.0, 0.35, n_items))
         if a_median is not None else None)
    responses, truth = simulate(n_items, n_examinees, model=model, seed=seed, c=c, a=a)
    star = true_on_sample_scale(truth)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = irtexam.fit(responses, model=model, method=method, seed=seed,
                          **({"item_prior": item_prior} if item_prior else {}),
                          **({"slope_centre": slope_centre} if slope_centre else {}),
                          **({"guessing_centre": guessing_centre} if guessing_centre and model == "3pl" else {}))
    seconds = time.perf_counter() - started
    items = fit.items.reindex(list(responses.items))
    thetas = fit.examinees.reindex(list(responses.examinees))
    b_hat = items["b"].to_numpy()
    slope = float(np.polyfit(star["b"], b_hat, 1)[0])
    theta_hat = thetas["theta"].to_numpy()
    row = {"a_ratio": float(np.exp(np.mean(np.log(items["a"].to_numpy() / star["a"])))), "b_slope": slope,
           "theta_slope": float(np.polyfit(star["theta"], theta_hat, 1)[0]),
           "ties": tied_examinees(theta_hat, responses.values),
           "cov_a": coverage(items, "a", star["a"]), "cov_b": coverage(items, "b", star["b"]),
           "cov_theta": coverage(thetas, "theta", star["theta"]), "seconds": seconds, "method": fit.method}
    if model == "3pl":
        row["c_bias"] = float(np.mean(items["c"].to_numpy() - star["c"]))
        row["cov_c"] = coverage(items, "c", star["c"])
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regimes", default=",".join(REGIMES))
    parser.add_argument("--models", default="2pl,3pl")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--method", default="auto")
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--c-range", default=None, metavar="LO,HI",
                        help="draw the 3PL's c ~ U(LO, HI) instead of simulate's Beta(5, 15) (centred on the prior's 0.25)")
    parser.add_argument("--item-prior", default=None, help="the fits' item prior (default: the estimator's)")
    parser.add_argument("--slope-centre", default=None, choices=("learned", "fixed"),
                        help="the fits' slope prior centre (default: the estimator's, learned for em)")
    parser.add_argument("--guessing-centre", default=None, choices=("learned", "fixed", "auto"),
                        help="the 3PL fits' c prior centre (default: the estimator's; 'fixed' holds it at 1/4)")
    parser.add_argument("--a-median", type=float, default=None,
                        help="draw a ~ LogNormal(log A_MEDIAN, 0.35) instead of simulate's LogNormal(0, 0.35) (centred on "
                             "the default prior's a = 1)")
    args = parser.parse_args()
    print("regime      model rep method a_ratio b_slope th_slope c_bias cov_a cov_b cov_c cov_theta ties seconds")
    regimes = args.regimes.replace("leaderboard", ",".join(LEADERBOARD_REGIMES))
    for regime in regimes.split(","):
        n_items, n_examinees = map(int, regime.split("x"))
        for model in args.models.split(","):
            rows = []
            for rep in range(args.reps):
                row = one(n_items, n_examinees, model, args.seed + rep, args.method,
                          tuple(map(float, args.c_range.split(","))) if args.c_range else None, args.item_prior,
                          args.a_median, args.slope_centre, args.guessing_centre)
                rows.append(row)
                print(f"{regime:<11} {model:<5} {rep:>3} {row['method']:<6} {row['a_ratio']:.3f}   {row['b_slope']:.3f}  "
                      f" {row['theta_slope']:.3f}   {row.get('c_bias', float('nan')):+.3f}  {row['cov_a']:.2f}  "
                      f"{row['cov_b']:.2f}  {row.get('cov_c', float('nan')):.2f}  {row['cov_theta']:.2f}      "
                      f"{row['ties']:>4} {row['seconds']:.1f}", flush=True)
            mean = {k: np.mean([r[k] for r in rows]) for k in rows[0] if k != "method"}
            print(f"{regime:<11} {model:<5} all {rows[0]['method']:<6} {mean['a_ratio']:.3f}   {mean['b_slope']:.3f}  "
                  f" {mean['theta_slope']:.3f}   {mean.get('c_bias', float('nan')):+.3f}  {mean['cov_a']:.2f}  "
                  f"{mean['cov_b']:.2f}  {mean.get('cov_c', float('nan')):.2f}  {mean['cov_theta']:.2f}      "
                  f"{mean['ties']:>4.0f} {mean['seconds']:.1f}", flush=True)
            if len(rows) > 1:  # the replications' standard errors: is a departure from 1 more than noise?
                se = {k: np.std([r[k] for r in rows], ddof=1) / np.sqrt(len(rows)) for k in ("a_ratio", "b_slope")}
                print(f"{regime:<11} {model:<5} se  {'':<6} {se['a_ratio']:.3f}   {se['b_slope']:.3f}", flush=True)


if __name__ == "__main__":
    main()
