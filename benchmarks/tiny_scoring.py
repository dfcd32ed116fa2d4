"""Speed of tiny-benchmark scoring: many new models scored at once on a k-item subset of a calibrated bank.

A bank of known 2PL items (the same distributions as ``irtexam simulate``) with 200 calibration models;
--models new models answer --k items chosen by the ``info`` rule; one call of
:func:`irtexam.bank.tiny.score_models` scores them all (abilities, predicted whole-bank accuracy with the
misfit term measured on the calibration models, subset accuracy, blend). Prints the wall time of that call
(best of --repeats, after one warm-up call), for the whole call and without the calibration models' misfit
replay, and the same through the CLI (``irtexam tiny score``, whole process, reading the fit folder).

Run:  .venv/bin/python benchmarks/tiny_scoring.py --models 1000 --k 100 --items 3000
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--items", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-cli", action="store_true", help="skip the CLI timing")
    args = parser.parse_args()

    from irtexam.bank.subset import select_subset
    from irtexam.bank.tiny import TinyBank, score_models
    from irtexam.irt import kinds

    rng = np.random.default_rng(0)
    n = args.items
    params = kinds.ItemParams(rng.lognormal(0.0, 0.35, n), rng.normal(0.0, 1.0, n), np.zeros(n))
    ids = tuple(f"q{i:05d}" for i in range(n))
    theta_cal = rng.normal(0.0, 1.0, 200)
    cal = (rng.random((200, n)) < kinds.prob_correct(theta_cal, params)).astype(float)
    bank = TinyBank(ids, params, cal.T, theta_cal)
    subset = select_subset(bank, args.k, "info")
    cols = [ids.index(i) for i in subset["item"]]
    theta = rng.normal(0.0, 1.0, args.models)
    p = kinds.prob_correct(theta, params.subset(np.array(cols)))
    answers = pd.DataFrame((rng.random(p.shape) < p).astype(float), columns=list(subset["item"]),
                           index=[f"new{m:05d}" for m in range(args.models)])
    for misfit in (True, False):
        score_models(bank, answers, misfit=misfit)                       # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            scores = score_models(bank, answers, misfit=misfit)
            times.append(time.perf_counter() - start)
        print(f"score_models: {args.models} models x {args.k} items of a {n}-item bank, misfit={misfit}: "
              f"best {min(times):.2f} s of {args.repeats} (all: {', '.join(f'{t:.2f}' for t in times)}); "
              f"accuracy MAE vs the models' expected whole-bank accuracy "
              f"{np.mean(np.abs(scores['accuracy'] - kinds.prob_correct(theta, params).mean(axis=1))):.4f}")
    if args.no_cli:
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        answers.to_csv(root / "answers.csv", index_label="model")
        fit_dir = _bank_folder(root, ids, params, cal)
        start = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "irtexam.cli", "tiny", "score", str(fit_dir), str(root / "answers.csv"),
                        "--out", str(root / "scores.csv")], check=True, capture_output=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        print(f"irtexam tiny score (whole process, fit folder of {n} items fitted on the 200 calibration models): "
              f"{wall:.2f} s wall, {cpu:.2f} s CPU (the wall time counts the other processes of a shared machine)")


def _bank_folder(root: Path, ids: tuple[str, ...], params, cal: np.ndarray) -> Path:  # noqa: ANN001
    """A fit folder of the bank: a quick MAP fit of the calibration answers (few draws)."""
    import irtexam

    wide = pd.DataFrame(cal, columns=list(ids), index=[f"cal{m:03d}" for m in range(cal.shape[0])])
    irtexam.fit(wide, model="2pl", method="map", draws=10).save(root / "fit")
    return root / "fit"


if __name__ == "__main__":
    main()
