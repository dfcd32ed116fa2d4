"""Job 5: adaptive testing: measure a new pipeline with a few questions of a calibrated exam.

    python examples/adaptive_test.py [--responses data/real_run/responses.csv.gz]
        [--examinee 'qwen2.5-coder-0.5b|bm25|icl1'] [--max-items 30] [--figures figures/examples]
        [--out runs/examples/adapt]

Calibrates a 3PL on every pipeline but one (the item bank), then gives the held-out
pipeline one question at a time, replaying its recorded answers, and re-estimates its
ability and its predicted whole-exam accuracy after each answer. Writes the trajectory
and the summary to OUT and draws both estimates step by step, against the accuracy the
pipeline had on the whole exam.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

import irtexam  # noqa: E402
from irtexam import plotting  # noqa: E402

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    """Calibrate without the examinee, run the adaptive test, save it, draw the trajectory; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", default=str(HERE / "data/real_run/responses.csv.gz"))
    parser.add_argument("--examinee", default="qwen2.5-coder-0.5b|bm25|icl1", help="the pipeline to measure")
    parser.add_argument("--max-items", type=int, default=30, help="stop after this many questions (default 30)")
    parser.add_argument("--figures", default="figures/examples", help="folder for the figure")
    parser.add_argument("--out", default="runs/examples/adapt", help="folder for trajectory.csv and summary.json")
    args = parser.parse_args(argv)

    matrix = irtexam.ResponseMatrix.read(args.responses)
    bank = matrix.subset(examinees=[e for e in matrix.examinees if e != args.examinee])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data's warnings are printed by fit_abilities.py
        fit = irtexam.fit(bank, model="3pl")
    result = irtexam.adapt(fit, replay=matrix, examinee=args.examinee, max_items=args.max_items,
                           se_target=0.2, draws=50, out=args.out)
    s = result.summary
    print(f"{args.examinee}: {s['items_used']} of {s['exam_items']} questions ({s['stop_reason']}); "
          f"theta {s['theta']:+.2f} [{s['theta_low']:+.2f}, {s['theta_high']:+.2f}]; predicted accuracy "
          f"{s['accuracy']:.3f} [{s['accuracy_low']:.3f}, {s['accuracy_high']:.3f}], "
          f"actual {s['actual_accuracy']:.3f}")
    print(f"wrote {args.out}/trajectory.csv, {args.out}/summary.json")

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    plotting.plot_cat_trajectory(result.trajectory, ax=left, what="theta")
    plotting.plot_cat_trajectory(result.trajectory, ax=right, what="accuracy", reference=s["actual_accuracy"],
                                 reference_label="accuracy on all questions")
    print("wrote", plotting.save(right, Path(args.figures) / "cat_trajectory.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
