"""Job 2: plot information curves: where on the ability scale does the exam measure well?

    python examples/information_curves.py [--responses data/real_run/responses.csv.gz]
        [--exam data/real_run/exam.jsonl] [--figures figures/examples]

Fits a 3PL (with the facets that have two or more levels), attaches the question
texts and Bloom levels of the exam to the item table, and draws three figures:
the information curves of the five most informative items, the exam information
with its 90% posterior band, and the mean item information per Bloom level.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402

import irtexam  # noqa: E402
from irtexam import analysis, plotting  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Fit, join the exam, plot three information figures; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", default=str(HERE / "data/real_run/responses.csv.gz"))
    parser.add_argument("--exam", default=str(HERE / "data/real_run/exam.jsonl"))
    parser.add_argument("--figures", default="figures/examples", help="folder for the figures")
    args = parser.parse_args(argv)

    matrix = irtexam.ResponseMatrix.read(args.responses)
    facets = [f for f in matrix.facet_names if len(matrix.facet_levels(f)) > 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data's warnings are printed by fit_abilities.py
        fit = irtexam.fit(matrix, model="3pl", facets=facets)

    exam = irtexam.read_exam(args.exam)
    items = fit.items.join(analysis.exam_table(exam)).join(analysis.categorize(exam))  # by item id
    grid = np.linspace(-4, 4, 161)
    info = fit.information(grid)  # DataFrame: theta x item
    items["information_-2_2"] = info.loc[(grid >= -2) & (grid <= 2)].mean()
    top = items.sort_values("information_-2_2", ascending=False).head(5)
    print("most informative items on [-2, 2]:")
    for item, row in top.iterrows():
        print(f"  {item}: a={row['a']:.2f} b={row['b']:+.2f}  [{row['bloom']}] {str(row['question'])[:70]}")

    figures = Path(args.figures)
    figures.mkdir(parents=True, exist_ok=True)
    abilities = fit.examinees["theta"]
    ax = plotting.plot_item_information(top, grid, abilities=abilities)
    print("wrote", plotting.save(ax, figures / "item_information.png"))

    draws = fit.item_draws(200)
    # the draws' spread placed around the fit's own curve (estimate=): the band contains what the fit reports
    band = analysis.information_band(grid, draws.values["a"], draws.values["b"], draws.values["c"],
                                     estimate=(fit.items["a"].to_numpy(), fit.items["b"].to_numpy(),
                                               fit.items["c"].to_numpy()))
    ax = plotting.plot_information_band(band, abilities=abilities, label=f"exam, {fit.design.n_items} items")
    print("wrote", plotting.save(ax, figures / "exam_information.png"))

    curves = analysis.category_information(grid, items, items["bloom"], order=analysis.BLOOM_LEVELS)
    ax = plotting.plot_category_information(curves, abilities=abilities, title="Information by Bloom level")
    print("wrote", plotting.save(ax, figures / "information_by_bloom.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
