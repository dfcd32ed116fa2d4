"""Job 1: fit an ability model from a script and compare the pipelines' components.

    python examples/fit_abilities.py [--responses data/real_run/responses.csv.gz] [--figures figures/examples]
        [--out runs/examples/fit]

Reads a long response table (one row per item x pipeline answer, with the facet
columns llm, retriever, icl), fits a hierarchical 3PL in which each pipeline's
ability is the sum of its components' abilities, prints the fit, the facet levels
and the strongest contrasts, saves the fit folder (without the large fit.nc) and
draws the facet abilities with their 90% intervals.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

import irtexam  # noqa: E402
from irtexam import plotting  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Fit, print, save, plot; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", default=str(HERE / "data/real_run/responses.csv.gz"),
                        help="long response table (CSV/parquet/JSONL)")
    parser.add_argument("--model", default="3pl", help="1pl, 2pl or 3pl (default 3pl)")
    parser.add_argument("--figures", default="figures/examples", help="folder for the figure")
    parser.add_argument("--out", default="runs/examples/fit", help="folder for the fit (default runs/examples/fit)")
    args = parser.parse_args(argv)

    responses = pd.read_csv(args.responses)  # a DataFrame works as well as a path or a ResponseMatrix
    matrix = irtexam.ResponseMatrix.coerce(responses)
    facets = [f for f in matrix.facet_names if len(matrix.facet_levels(f)) > 1]  # facets with 2+ levels
    with warnings.catch_warnings(record=True) as caught:  # the data's warnings, shown once below
        warnings.simplefilter("always")
        fit = irtexam.fit(matrix, model=args.model, facets=facets)
    print(fit)
    for w in caught:
        print("note:", w.message)
    if fit.contrasts is not None:
        strongest = fit.contrasts[fit.contrasts["diff"] > 0].sort_values("diff", ascending=False)
        print("\nstrongest contrasts (90% intervals):")
        print(strongest[["facet", "level", "reference", "diff", "low", "high", "prob_greater"]].head(5)
              .to_string(index=False, float_format="%.2f"))

    figures = Path(args.figures)
    figures.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    fit.save(out, idata=False)
    print(f"\nwrote {out} ({fit.saved_size(out)['total'] / 1e6:.1f} MB)")
    if fit.facets is not None:
        ax = plotting.plot_forest(fit.facets)
    else:
        ax = plotting.plot_wright_map(fit.items, fit.examinees["theta"])
    print("wrote", plotting.save(ax, figures / "facet_abilities.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
