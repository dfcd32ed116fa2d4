"""``irtexam info FITDIR --out DIR``: information, categories, diagnostics tables and figures."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..options import POSITIVE_INT, SEED, THETA


def add_analysis_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``info`` and ``report``."""
    p.add_argument("--exam", help="exam JSONL (question text for Bloom / question-word categories)")
    p.add_argument("--keywords", help="YAML/JSON keyword table category -> keywords, replacing Bloom's")
    p.add_argument("--theta-min", type=THETA, default=-4.0, help="theta grid lower end (default -4)")
    p.add_argument("--theta-max", type=THETA, default=4.0, help="theta grid upper end (default 4)")
    p.add_argument("--draws", type=POSITIVE_INT, default=200, help="posterior draws for bands and PPC (default 200)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the posterior predictive replicates")


def register(subparsers) -> None:
    """Add the ``info`` sub-command."""
    p = subparsers.add_parser("info", help="exam analytics of a fit: information, categories, diagnostics",
                              description="Write item/exam information, Bloom and question-word "
                                          "aggregates, fit diagnostics (CSV) and figures (PNG) for a fit.")
    p.add_argument("fitdir", help="folder written by `irtexam fit --out`")
    p.add_argument("--out", required=True, help="output folder for tables and figures")
    add_analysis_options(p)
    p.set_defaults(func=run)


def exam_questions(path: str | None, fit_items=None):
    """Question text by item id from an exam JSONL, or None; with ``fit_items``, an exam none of whose
    ids is an item of the fit is an error (it is the wrong exam, or its ids were renamed)."""
    if not path:
        return None
    import pandas as pd

    from ..errors import InputError
    from ..exam.schema import read_exam

    questions = pd.Series({it.id: it.question for it in read_exam(path)}, dtype=object)
    if fit_items is not None and len(fit_items) and not questions.index.isin(list(fit_items)).any():
        raise InputError(f"none of its {len(questions)} item ids matches one of the fit's {len(fit_items)} items "
                         f"(exam: {', '.join(map(str, questions.index[:3]))}, ...; fit: "
                         f"{', '.join(map(str, list(fit_items)[:3]))}, ...); give the exam the fit was made from",
                         path=str(path))
    return questions


def analyze(args, out_dir: str | Path) -> dict:
    """Load the fit named by ``args.fitdir`` and run :func:`analyze_fit` into ``out_dir``."""
    import numpy as np

    import irtexam
    from ..analysis.summary import analyze_fit
    from ..errors import InputError

    if args.theta_max <= args.theta_min:
        raise InputError(f"--theta-max ({args.theta_max}) must exceed --theta-min ({args.theta_min})")
    result = irtexam.load_fit(args.fitdir)
    grid = np.linspace(args.theta_min, args.theta_max, 161)
    return analyze_fit(result, out_dir, exam_questions=exam_questions(args.exam, result.items.index), keywords=args.keywords,
                       theta=grid, n_draws=args.draws, seed=args.seed, data=recorded_source(args.fitdir))


def recorded_source(fitdir: str | Path) -> str | None:
    """The response file a fit folder says it was fitted to (meta.json ``responses_source``), if recorded."""
    import json

    try:
        meta = json.loads((Path(fitdir) / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta.get("responses_source") or meta.get("source")


def run(args) -> int:
    """Run ``irtexam info``; prints the headline numbers and where the files are."""
    import matplotlib

    matplotlib.use("Agg")
    from ..paths import check_output_dir

    from ..paths import atomic_output_dir, relocate

    check_output_dir(args.out, inputs=[args.fitdir], command="info")  # a user's folder is refused, not replaced
    with atomic_output_dir(args.out, "info") as staging:  # the folder is one complete run, never a mix
        manifest = relocate(analyze(args, staging), staging, Path(args.out))
    s = manifest["summary"]
    fs = s.get("fit_stats") or {}  # the fit's own RMSE numbers (one definition of the baseline)
    print(f"{s['n_items']} items, {s['n_examinees']} examinees; mean item information on [-2, 2]: "
          f"{s['mean_information_-2_2']:.3f}; peak test information {s['peak_test_information']:.2f} "
          f"at theta={s['peak_theta']:.2f}; RMSE {fs.get('rmse', s['rmse']):.3f} vs mean baseline "
          f"{fs.get('rmse_baseline', s['rmse_baseline']):.3f}")
    for note in manifest["notes"]:
        print(f"note: {note}")
    print(f"wrote {len(manifest['tables'])} tables and {len(manifest['figures'])} figures to {args.out}")
    return 0
