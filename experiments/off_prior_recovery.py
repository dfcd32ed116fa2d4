#!/usr/bin/env python3
"""Recovery where neither the abilities nor the items follow the model's priors (issue 42's "vary the shape").

Simulates a binary 2PL (or 3PL with c ~ U(0, 0.35)) matrix of ``--shape`` items x models whose abilities are
``--theta``: normal; bimodal (30% N(-1.5, 0.5^2), 70% N(0.8, 0.7^2)); skewed (Gamma(2, 1) standardised: skew 1.4,
the questions still centred on the models); shifted (Gamma(2, 1) as drawn: mean 2, so N(0, 1) questions sit below most
models, a benchmark too easy for them), and whose items are ``--items``: prior (a ~ LogNormal(0, 0.35), b ~ N(0, 1))
or wide (a ~ U(0.2, 3), b ~ U(-3, 3)). Each ``--methods`` fit is compared with the truth on the sample-standardised
scale (a* = a s, b* = (b - m) / s, theta* = (theta - m) / s): geometric-mean slope ratio, slope of b_hat on b*, slope
of theta_hat on theta*, the abilities' skew against the truth's, and the errors of log a and b by quartile of b*
(questions outside the models' range carry the error). Last, the abilities' MAP given the true items (what the
answers themselves say, no item error).

    .venv/bin/python experiments/off_prior_recovery.py --shape 2000x200 --theta skewed --items prior --seed 4
    .venv/bin/python experiments/off_prior_recovery.py --shape 2000x200 --theta shifted --items prior --seed 4

Results (2026-11-28) in benchmarks/results/off_prior_recovery.txt.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def simulate(n_items: int, n_models: int, theta_kind: str, item_kind: str, model: str, seed: int):
    """(responses, theta, a, b, c) of the module doc's distributions."""
    import irtexam

    rng = np.random.default_rng(seed)
    if theta_kind == "bimodal":
        theta = np.where(rng.random(n_models) < 0.3, rng.normal(-1.5, 0.5, n_models), rng.normal(0.8, 0.7, n_models))
    elif theta_kind == "skewed":
        theta = (rng.gamma(2.0, 1.0, n_models) - 2.0) / np.sqrt(2.0)
    elif theta_kind == "shifted":
        theta = rng.gamma(2.0, 1.0, n_models)
    else:
        theta = rng.normal(size=n_models)
    if item_kind == "wide":
        a, b = rng.uniform(0.2, 3.0, n_items), rng.uniform(-3.0, 3.0, n_items)
    else:
        a, b = rng.lognormal(0.0, 0.35, n_items), rng.normal(0.0, 1.0, n_items)
    c = rng.uniform(0.0, 0.35, n_items) if model == "3pl" else np.zeros(n_items)
    p = c[:, None] + (1 - c[:, None]) / (1 + np.exp(-a[:, None] * (theta[None, :] - b[:, None])))
    y = (rng.random(p.shape) < p).astype(float)
    responses = irtexam.ResponseMatrix.from_wide(y.T, items=[f"i{j}" for j in range(n_items)],
                                                 examinees=[f"m{j}" for j in range(n_models)])
    return responses, theta, a, b, c


def skew(x: np.ndarray) -> float:
    """Sample skewness."""
    return float(((x - x.mean()) ** 3).mean() / x.std() ** 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="2000x200", help="items x models")
    parser.add_argument("--theta", default="skewed", choices=("normal", "bimodal", "skewed", "shifted"))
    parser.add_argument("--items", default="prior", choices=("prior", "wide"))
    parser.add_argument("--model", default="2pl", choices=("2pl", "3pl"))
    parser.add_argument("--methods", default="auto,map,em")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import irtexam

    n_items, n_models = (int(x) for x in args.shape.split("x"))
    responses, theta, a, b, _ = simulate(n_items, n_models, args.theta, args.items, args.model, args.seed)
    m, s = theta.mean(), theta.std()
    a_star, b_star, t_star = a * s, (b - m) / s, (theta - m) / s
    item_ids, model_ids = [f"i{j}" for j in range(n_items)], [f"m{j}" for j in range(n_models)]
    quartile = np.digitize(b_star, np.quantile(b_star, [0.25, 0.5, 0.75]))
    print(f"{args.model} {args.shape}, abilities {args.theta} (skew {skew(t_star):+.2f}), items {args.items}, "
          f"seed {args.seed}")
    for method in args.methods.split(","):
        started = time.perf_counter()
        fit = irtexam.fit(responses, model=args.model, method=method, progress=False, draws=20)
        seconds = time.perf_counter() - started
        items = fit.items.reindex(item_ids)
        a_hat, b_hat = items["a"].to_numpy(float), items["b"].to_numpy(float)
        t_hat = fit.examinees.reindex(model_ids)["theta"].to_numpy(float)
        log_err, b_err = np.log(a_hat / a_star), b_hat - b_star
        print(f"  {method} ({fit.method}, {seconds:.1f} s): a x{np.exp(log_err.mean()):.3f}, b slope "
              f"{np.polyfit(b_star, b_hat, 1)[0]:.3f}, theta slope {np.polyfit(t_star, t_hat, 1)[0]:.3f}, abilities' "
              f"skew {skew(t_hat):+.2f}")
        print("     by quartile of b*: log a error " + " ".join(f"{log_err[quartile == q].mean():+.3f}" for q in range(4))
              + " | b error " + " ".join(f"{b_err[quartile == q].mean():+.3f}" for q in range(4)))
    if args.model == "2pl":   # the answers' own evidence: MAP abilities given the true items, on a fine grid
        pos = {i: k for k, i in enumerate(responses.items)}
        epos = {e: k for k, e in enumerate(responses.examinees)}
        y = responses.values[[pos[i] for i in item_ids]][:, [epos[e] for e in model_ids]]
        grid = np.linspace(-6, 8, 2801)
        p = np.clip(1 / (1 + np.exp(-a_star[:, None] * (grid[None, :] - b_star[:, None]))), 1e-12, 1 - 1e-12)
        loglik = np.nan_to_num(y).T @ np.log(p) + (1 - np.nan_to_num(y)).T @ np.log1p(-p)
        t_map = grid[np.argmax(loglik - 0.5 * grid ** 2, axis=1)]
        print(f"  true items, MAP abilities: slope {np.polyfit(t_star, t_map, 1)[0]:.3f}, skew {skew(t_map):+.2f}")


if __name__ == "__main__":
    main()
