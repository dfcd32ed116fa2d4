"""Issue 14: adaptive testing replayed on data/real_run (202 items x 60 pipelines).

Leave one pipeline out (``--holdout pipeline``): calibrate a 3PL (no facets) on the other
59 pipelines, then give the held-out pipeline items one at a time from its recorded
answers and predict its accuracy on all 202 items. Leave one LLM out (``--holdout llm``):
calibrate on the 45 pipelines of the other three LLMs and adapt each of the held-out 15.

Estimators of whole-exam accuracy after k items (k = 5, 10, ..., 30):

* ``stratified-irt`` (the ``irtexam adapt`` default): one random item from each of k strata (k-means
  clusters of the items' correctness vectors over the calibration pipelines, largest first), same IRT
  predictor (observed + predicted unadministered); two seeds averaged;
* ``cat-mfi``: maximum Fisher information at the EAP, item draws integrated (``--selection mfi``);
* ``cat-accuracy``: the item that shrinks the variance of the predicted accuracy most;
* ``random-irt``: k random items, same IRT predictor (observed + predicted unadministered);
* ``random-plain``: plain accuracy of k random items (expected |error| over 200 draws);
* ``tiny-anchor`` / ``tiny-pirt``: tinyBenchmarks-style anchors (k-means of the items'
  correctness vectors over the calibration pipelines, the item nearest each centroid,
  weights = cluster sizes): the weighted anchor accuracy, and p-IRT (observed anchors +
  IRT prediction of the rest);
* ``fluid``: Fluid-Benchmarking-style: a 2PL bank (point estimates), maximum Fisher
  information, MAP ability, 2PL prediction of the whole exam.

Every method that runs ``run_cat`` reports a 90% interval that adds the misfit variance measured by
replaying the same procedure on the calibration pipelines (``irtexam.bank.adapt.misfit_curve``).

    OMP_NUM_THREADS=2 nice -n 5 .venv/bin/python experiments/adapt_replay.py --holdout pipeline
    OMP_NUM_THREADS=2 nice -n 5 .venv/bin/python experiments/adapt_replay.py --holdout llm

Writes data/real_run/bank/adapt_<holdout>.csv (one row per pipeline, method, k) and
figures/bank/adapt_mae_<holdout>.png, and prints the MAE table.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import irtexam
from irtexam.bank.adapt import ItemBank, make_state, predicted_accuracy, run_cat

KS = (5, 10, 15, 20, 25, 30)
ROOT = Path(__file__).resolve().parents[1]


def anchors(train: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """tinyBenchmarks anchor items: k-means (k clusters) of item correctness rows; nearest item, cluster weight."""
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=k, n_init=5, random_state=seed).fit(train)
    chosen, weights = [], []
    for c in range(k):
        members = np.flatnonzero(km.labels_ == c)
        dist = ((train[members] - km.cluster_centers_[c]) ** 2).sum(axis=1)
        chosen.append(members[np.argmin(dist)])
        weights.append(len(members) / train.shape[0])
    return np.array(chosen), np.array(weights)


def prediction_given(bank: ItemBank, order: np.ndarray, y: np.ndarray) -> float:
    """IRT-predicted whole-exam accuracy after the items ``order`` with answers y[order] (observed + predicted)."""
    state = make_state(bank)
    for j in order:
        state.update(int(j), float(y[j]))
    return predicted_accuracy(state, n_samples=200)["accuracy"]


METHODS = ("stratified-irt", "cat-mfi", "cat-astrat", "cat-accuracy", "random-irt", "fluid", "random-plain", "tiny", "anchors")


def evaluate(rm: irtexam.ResponseMatrix, held: list[str], draws: int, seed: int,
             methods: tuple[str, ...] = METHODS) -> list[dict]:
    """All estimators for every examinee in ``held`` after calibrating on the others."""
    train = rm.subset(examinees=[e for e in rm.examinees if e not in held])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit3 = irtexam.fit(train, model="3pl", draws=200, seed=seed)
        fit2 = irtexam.fit(train, model="2pl", se=False, seed=seed)
    bank = ItemBank.from_fit(fit3, draws=draws, seed=seed)
    bank2 = ItemBank.from_fit(fit2, draws=0)
    position = {i: j for j, i in enumerate(rm.items)}
    reorder = np.array([position[i] for i in bank.ids])
    train_values = train.values[reorder]
    anchor_sets = {k: anchors(train_values, k, seed) for k in KS}
    rows = []
    for e in held:
        y = rm.values[reorder, rm.examinees.index(e)]
        actual = float(np.mean(y))
        answers = dict(zip(bank.ids, y))
        base = {"examinee": e, "llm": e.split("|")[0], "actual": actual}

        def cat(name: str, b: ItemBank, **kw) -> None:
            res = run_cat(b, answers.get, se_target=1e-9, max_items=max(KS), min_items=0, **kw)
            for k in KS:
                rows.append({**base, "method": name, "k": k, "predicted": float(res.trajectory.accuracy.iloc[k - 1]),
                             "low": float(res.trajectory.accuracy_low.iloc[k - 1]),
                             "high": float(res.trajectory.accuracy_high.iloc[k - 1]),
                             "theta_sd": float(res.trajectory.theta_sd.iloc[k - 1])})

        if "cat-mfi" in methods:
            cat("cat-mfi", bank, seed=seed, selection="mfi")
        if "cat-astrat" in methods:
            cat("cat-astrat", bank, seed=seed, selection="astrat")
        if "cat-accuracy" in methods:
            cat("cat-accuracy", bank, seed=seed, selection="accuracy")
        for r in range(2 if "stratified-irt" in methods else 0):
            cat(f"stratified-irt-{r}", bank, seed=seed + 100 + r, selection="stratified")
        for r in range(2 if "random-irt" in methods else 0):
            cat(f"random-irt-{r}", bank, seed=seed + 100 + r, selection="random")
        if "anchors" in methods:  # irtexam adapt --selection anchors (k = 30 anchors, read at k = 5..30)
            cat("anchors", bank, seed=seed, selection="anchors")
        if "fluid" in methods:
            cat("fluid", bank2, seed=seed, selection="mfi", estimator="map")
        rng = np.random.default_rng(seed)
        for k in (KS if "tiny" in methods else ()):
            picks = np.array([rng.choice(len(y), size=k, replace=False) for _ in range(200)])
            rows.append({**base, "method": "random-plain", "k": k, "predicted": float("nan"),
                         "abs_error": float(np.abs(y[picks].mean(axis=1) - actual).mean())})
            chosen, weights = anchor_sets[k]
            rows.append({**base, "method": "tiny-anchor", "k": k, "predicted": float(weights @ y[chosen])})
            rows.append({**base, "method": "tiny-pirt", "k": k, "predicted": prediction_given(bank, chosen, y)})
    return rows


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """MAE per method and k (random-irt averaged over its seeds) and interval coverage of the CAT prediction."""
    frame = frame.copy()
    error = (frame["predicted"] - frame["actual"]).abs()
    frame["abs_error"] = frame["abs_error"].fillna(error) if "abs_error" in frame else error  # absent without random-plain
    frame["method"] = frame["method"].str.replace(r"^(random-irt|stratified-irt)-\d+$", r"\1", regex=True)
    covered = (frame["low"] <= frame["actual"]) & (frame["actual"] <= frame["high"])
    frame["covered"] = np.where(frame["low"].isna(), np.nan, covered.astype(float))
    table = frame.groupby(["method", "k"]).agg(mae=("abs_error", "mean"),
                                               coverage90=("covered", "mean")).reset_index()
    return table


def figure(table: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for method, part in table.groupby("method"):
        ax.plot(part["k"], part["mae"], marker="o", label=method,
                lw=2.8 if method == "stratified-irt" else 1.8 if method.startswith("cat") else 1.1)
    ax.axhline(0.03, color="red", ls="--", lw=0.8, label="target 0.03")
    ax.set_xlabel("items administered (k)")
    ax.set_ylabel("MAE of whole-exam accuracy")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--responses", default=str(ROOT / "data/real_run/responses.csv.gz"))
    parser.add_argument("--holdout", choices=("pipeline", "llm"), default="pipeline")
    parser.add_argument("--draws", type=int, default=50, help="item-parameter draws integrated by the CAT")
    parser.add_argument("--limit", type=int, default=None, help="only the first N held-out groups")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated subset of " + ", ".join(METHODS) + " (random-plain comes with tiny)")
    parser.add_argument("--merge", action="store_true",
                        help="keep the rows of other methods already in the output CSV (add or replace these)")
    parser.add_argument("--out", default=str(ROOT / "data/real_run/bank"))
    parser.add_argument("--figures", default=str(ROOT / "figures/bank"))
    args = parser.parse_args()
    rm = irtexam.ResponseMatrix.read(args.responses)
    if args.holdout == "pipeline":
        groups = [[e] for e in rm.examinees]
    else:
        llms = rm.examinee_facets["llm"]
        groups = [list(llms.index[llms == level]) for level in rm.facet_levels("llm")]
    groups = groups[:args.limit] if args.limit else groups
    rows, started = [], time.perf_counter()
    for g, held in enumerate(groups):
        rows.extend(evaluate(rm, held, args.draws, args.seed, tuple(args.methods.split(","))))
        print(f"[{g + 1}/{len(groups)}] {held[0]}{' ...' if len(held) > 1 else ''} "
              f"{time.perf_counter() - started:.0f}s", flush=True)
    frame = pd.DataFrame(rows)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    previous = out / f"adapt_{args.holdout}.csv"
    if args.merge and previous.exists():
        old = pd.read_csv(previous)
        old = old[~old["method"].isin(set(frame["method"]))]
        frame = pd.concat([old, frame], ignore_index=True)
    frame.to_csv(out / f"adapt_{args.holdout}.csv", index=False)
    table = summarise(frame)
    figure(table, Path(args.figures) / f"adapt_mae_{args.holdout}.png",
           f"leave one {args.holdout} out, {len(set(frame.examinee))} pipelines")
    wide = table.pivot(index="method", columns="k", values="mae").round(4)
    print(f"MAE of predicted whole-exam accuracy (leave one {args.holdout} out, "
          f"{len(set(frame.examinee))} pipelines, {time.perf_counter() - started:.0f}s, "
          f"loadavg {open('/proc/loadavg').read().split()[0]}):")
    print(wide.to_string())
    cov = table.dropna(subset=["coverage90"]).pivot(index="method", columns="k", values="coverage90").round(3)
    print("coverage of the 90% predictive interval of whole-exam accuracy:")
    print(cov.to_string())


if __name__ == "__main__":
    main()
