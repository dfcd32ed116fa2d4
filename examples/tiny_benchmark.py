"""Tiny benchmarks on a leaderboard-shaped table: score new models from 100 of 3,000 questions.

    python examples/tiny_benchmark.py [--models 250] [--items 3000] [--model 2pl] [--splits 1]
        [--figures figures/examples] [--out runs/examples/tiny]

Simulates a leaderboard (``--models`` models x ``--items`` questions, 2PL), holds out 20% of the models,
calibrates the bank on the others (joint MAP: thousands of items per model), and for each selection rule and
k in 25, 50, 100, 200 scores the held-out models from k questions: the mean absolute error and 90% coverage
of the predicted whole-bank accuracy against their actual accuracy, next to the plain subset accuracy.
Then it picks 100 questions by the default rule and scores 1,000 new models in one call. Writes
validation.csv and scores.csv to OUT and the MAE-against-k figure.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import irtexam  # noqa: E402
from irtexam import plotting  # noqa: E402
from irtexam.bank.subset import select_subset  # noqa: E402
from irtexam.bank.tiny import score_models  # noqa: E402
from irtexam.bank.tiny_check import plot_tiny_validation, validate_tiny  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Simulate, validate, score 1,000 new models, draw; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=250)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--model", default="2pl", choices=("2pl", "3pl"))
    parser.add_argument("--splits", type=int, default=1, help="held-out splits pooled (5: every model out once)")
    parser.add_argument("--figures", default="figures/examples", help="folder for the figure")
    parser.add_argument("--out", default="runs/examples/tiny", help="folder for validation.csv and scores.csv")
    args = parser.parse_args(argv)

    leaderboard, truth = irtexam.simulate(args.items, args.models, model=args.model, seed=1)
    result = validate_tiny(leaderboard, model=args.model, method="map", splits=args.splits,
                           truth_theta=truth["theta"], fit_options={"draws": 20})
    table = result.table
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table[["rule", "k", "models", "irt_mae", "irt_cover", "blend_mae", "subset_mae", "theta_cover",
                     "theta_slope_truth"]].round(4).to_string(index=False))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "validation.csv", index=False)

    # a new batch of models answers the 100 questions picked by the default rule: one call scores them all
    subset = select_subset(result.bank, 100, "info")
    new, _ = irtexam.simulate(args.items, 1000, model=args.model, seed=2, a=truth["a"], b=truth["b"],
                              c=truth.get("c"))
    answers = new.subset(items=list(subset["item"])).to_wide()
    started = time.perf_counter()
    scores = score_models(result.bank, answers)
    seconds = time.perf_counter() - started
    actual = pd.Series(np.nanmean(new.values, axis=0), index=list(new.examinees))
    error = np.abs(scores["accuracy"] - actual.reindex(scores.index)).mean()
    print(f"scored {len(scores)} new models on {len(subset)} questions in {seconds:.2f} s: predicted whole-bank "
          f"accuracy off by {error:.4f} on average")
    scores.to_csv(out / "scores.csv")
    print(f"wrote {out}/validation.csv, {out}/scores.csv")
    ax = plot_tiny_validation(table)
    print("wrote", plotting.save(ax, Path(args.figures) / "tiny_benchmark.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
