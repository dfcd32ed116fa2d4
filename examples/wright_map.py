"""Job 4: a Wright map: are the questions as hard as the pipelines are able?

    python examples/wright_map.py [--responses data/real_run/responses.csv.gz] [--figures figures/examples]

Fits a 3PL with one ability per pipeline (no facets) and draws the pipelines' abilities
and the questions' difficulties b on one axis: questions far above every pipeline or far
below all of them tell the pipelines apart little.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import irtexam  # noqa: E402
from irtexam import plotting  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Fit, print how many questions lie outside the pipelines' range, draw the map; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", default=str(HERE / "data/real_run/responses.csv.gz"))
    parser.add_argument("--figures", default="figures/examples", help="folder for the figure")
    args = parser.parse_args(argv)

    matrix = irtexam.ResponseMatrix.read(args.responses)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data's warnings are printed by fit_abilities.py
        fit = irtexam.fit(matrix, model="3pl")
    theta, b = fit.examinees["theta"], fit.items["b"]
    print(f"abilities {theta.min():+.2f} to {theta.max():+.2f}; of {len(b)} questions "
          f"{int((b > theta.max()).sum())} are harder than every pipeline, {int((b < theta.min()).sum())} easier")

    ax = plotting.plot_wright_map(fit.items, theta)
    print("wrote", plotting.save(ax, Path(args.figures) / "wright_map.png"))  # save makes the folder
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
