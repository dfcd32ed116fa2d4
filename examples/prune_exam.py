"""Job 3: prune the least discriminative questions and write the exam's next version.

    python examples/prune_exam.py [--responses data/real_run/responses.csv.gz]
        [--exam data/real_run/exam.jsonl] [--drop 0.1] [--steps 2] [--figures figures/examples] [--out runs/examples]

Items every pipeline answered alike carry no information and go first; then each
round drops the ``--drop`` fraction of the remaining items with the lowest
discrimination and refits the same hierarchical 3PL. Writes the kept questions,
in the exam's order, to OUT/exam_pruned.jsonl and draws the exam information
of each round.
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
    """Prune, print the summary, write the pruned exam and the figure; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", default=str(HERE / "data/real_run/responses.csv.gz"))
    parser.add_argument("--exam", default=str(HERE / "data/real_run/exam.jsonl"))
    parser.add_argument("--drop", type=float, default=0.1, help="fraction of the remaining items per round")
    parser.add_argument("--steps", type=int, default=2, help="number of drop rounds")
    parser.add_argument("--figures", default="figures/examples", help="folder for the figure")
    parser.add_argument("--out", default="runs/examples", help="folder for the pruned exam")
    args = parser.parse_args(argv)

    matrix = irtexam.ResponseMatrix.read(args.responses)
    facets = [f for f in matrix.facet_names if len(matrix.facet_levels(f)) > 1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = irtexam.prune(matrix, model="3pl", facets=facets, drop=args.drop, steps=args.steps,
                               progress=False)
    print(result.summary())
    for w in caught:
        print("note:", str(w.message).splitlines()[0])

    figures = Path(args.figures)
    figures.mkdir(parents=True, exist_ok=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    path = result.write_exam(args.exam, Path(args.out) / "exam_pruned.jsonl")
    print(f"wrote {path}: {len(result.kept_items)} questions")
    n_items = dict(zip(result.steps["step"], result.steps["n_items"]))
    ax = plotting.plot_pruning(result.curves, n_items=n_items)
    print("wrote", plotting.save(ax, figures / "pruning.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
