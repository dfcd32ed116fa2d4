"""Issue 7 analyses of a grid run: the paper's tables and figures from one `irtexam take` folder.

    .venv/bin/python experiments/real_run_analysis.py                       # data/real_run -> figures/real_run
    .venv/bin/python experiments/real_run_analysis.py --take DIR --exam EXAM --out DIR

Reads the take folder (responses.csv, accuracy.csv, retrieval_recall.csv) and the exam,
then writes to ``--out`` (tables as CSV + one Markdown file, figures as PNG):

* accuracy grid (paper Table 2): llm x retriever, best over ICL and per ICL;
* hierarchical 3PL (facets llm + retriever + icl, MAP + Laplace, 10 % held-out cells):
  facet abilities with 90 % intervals and contrasts against closed-book (Table 3),
  fit statistics against the mean baseline (Table 5: RMSE and held-out log-likelihood);
* exam analytics of that fit (`irtexam info`): information by Bloom level and
  question word (Figs 3, 4), item curves (Figs 8-11), diagnostics;
* iterative pruning, 10 % per round, 3 rounds (Fig. 5);
* retriever recall@k against retriever ability (the recall of the source chunk in the
  top k, per retriever, next to the fitted retriever level);
* the bias baselines of the exam (fixed letter, longest answer).

The same script runs on any take folder with llm / retriever / icl facets (e.g. the
bundled MMLU grid in data/responses with ``--take data/responses --exam
data/responses/exam.jsonl``), so it can be checked before the real grid finishes.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import irtexam  # noqa: E402
from irtexam.analysis.summary import analyze_fit  # noqa: E402
from irtexam.commands.info import exam_questions  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FACETS = ("llm", "retriever", "icl")


def find_responses(take: Path) -> Path:
    """The response table of a take folder (responses.csv or responses.csv.gz)."""
    for name in ("responses.csv", "responses.csv.gz", "responses.parquet"):
        if (take / name).exists():
            return take / name
    raise SystemExit(f"no responses.csv in {take}: run `irtexam take` (or experiments/real_run.py --stage take) first")


def accuracy_tables(responses: irtexam.ResponseMatrix) -> pd.DataFrame:
    """Paper Table 2: accuracy per llm x retriever, per ICL and best over ICL."""
    frame = responses.to_long(include_missing=False)
    per = frame.groupby(["llm", "retriever", "icl"])["response"].mean().unstack("icl")
    per.columns = [str(c) if str(c).lower().startswith("icl") else f"icl{c}" for c in per.columns]
    per["best"] = per.max(axis=1)
    return per.reset_index()


def selection_bias(answers: pd.DataFrame, items: Any) -> pd.DataFrame:
    """Per LLM: accuracy under the grid's rule and the other length normalisations, and how
    often the pick is the longest candidate or the most frequent position.

    ``chosen_token`` / ``chosen_char`` / ``chosen_sum`` are the picks under per-token,
    per-character and no normalisation of the summed log-likelihood (all logged by
    ``irtexam take``); the longest candidate is the one with the most characters.
    """
    longest = {it.id: max(range(len(it.choices)), key=lambda k: len(it.choices[k])) for it in items}
    frame = answers.assign(longest=answers["item"].map(longest))
    rows = []
    for llm, group in frame.groupby("llm", sort=False):
        row = {"llm": llm, "answers": len(group)}
        for rule in ("token", "char", "sum"):
            row[f"accuracy_{rule}"] = float((group[f"chosen_{rule}"] == group["answer"]).mean())
        row["picks_longest"] = float((group["chosen"] == group["longest"]).mean())
        row["top_position_share"] = float(group["chosen"].value_counts(normalize=True).iloc[0])
        rows.append(row)
    return pd.DataFrame(rows)


def grid_order(take: Path, responses: irtexam.ResponseMatrix) -> dict[str, list[str]]:
    """LLM and retriever levels in the grid spec's order (provenance.json's pipelines), else sorted."""
    order = {f: list(responses.facet_levels(f)) for f in ("llm", "retriever")}
    try:
        pipelines = json.loads((take / "provenance.json").read_text())["pipelines"]
    except (OSError, KeyError, json.JSONDecodeError):
        return order
    for position, facet in ((0, "llm"), (1, "retriever")):
        spec_order = list(dict.fromkeys(p.split("|")[position] for p in pipelines))
        order[facet] = [level for level in spec_order if level in order[facet]] + \
            [level for level in order[facet] if level not in spec_order]
    return order


def plot_accuracy_grid(accuracy: pd.DataFrame, ax=None, order: dict[str, list[str]] | None = None):
    """Heat map of the best accuracy over ICL per llm x retriever, annotated with the ICL level
    that reached it (paper Table 2 / Fig. 1 analogue); returns ax."""
    ax = ax or plt.subplots(figsize=(7, 3.6))[1]
    icl_cols = [c for c in accuracy.columns if c.startswith("icl")]
    order = order or {}
    llms = order.get("llm") or list(dict.fromkeys(accuracy["llm"]))
    retrievers = order.get("retriever") or list(dict.fromkeys(accuracy["retriever"]))
    table = accuracy.set_index(["llm", "retriever"])
    grid = np.array([[table.loc[(l, r), "best"] if (l, r) in table.index else np.nan for r in retrievers]
                     for l in llms])
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    for i, l in enumerate(llms):
        for j, r in enumerate(retrievers):
            if (l, r) in table.index:
                row = table.loc[(l, r)]
                best_icl = row[icl_cols].astype(float).idxmax()
                ax.text(j, i, f"{row['best']:.2f}\n{best_icl}", ha="center", va="center", fontsize=8,
                        color="white" if row["best"] < np.nanmean(grid) else "black")
    ax.set_xticks(range(len(retrievers)), retrievers, rotation=20)
    ax.set_yticks(range(len(llms)), llms)
    ax.figure.colorbar(image, ax=ax, label="best accuracy over ICL")
    return ax


def recall_vs_ability(take: Path, facets: pd.DataFrame) -> pd.DataFrame | None:
    """Join recall@k of each retriever with its fitted ability level."""
    path = take / "retrieval_recall.csv"
    if not path.exists() or facets is None:
        return None
    recall = pd.read_csv(path)
    levels = facets[facets["facet"] == "retriever"].rename(columns={"level": "retriever"})
    return recall.merge(levels[["retriever", "theta", "theta_low", "theta_high"]], on="retriever", how="inner")


def plot_recall(table: pd.DataFrame, ax=None):
    """Scatter of recall@k against the retriever ability with its 90 % interval; returns ax."""
    ax = ax or plt.subplots(figsize=(5, 4))[1]
    ax.errorbar(table["recall"], table["theta"], yerr=[table["theta"] - table["theta_low"],
                                                       table["theta_high"] - table["theta"]], fmt="o", capsize=3)
    for i, (_, row) in enumerate(table.sort_values("recall").iterrows()):  # alternate sides: no overlaps
        ax.annotate(row["retriever"], (row["recall"], row["theta"]), textcoords="offset points",
                    xytext=(5, 5) if i % 2 == 0 else (5, -13))
    ax.set_xlabel("recall@k of the source chunk")
    ax.set_ylabel("retriever ability (90 % interval)")
    return ax


def _mean_sd(values: Any) -> tuple[float, float]:
    arr = np.asarray(list(values), dtype=float)
    arr = arr[np.isfinite(arr)]
    return float(arr.mean()), float(arr.std(ddof=1)) if len(arr) > 1 else 0.0


def table5(responses: irtexam.ResponseMatrix, result: Any) -> pd.DataFrame:
    """Paper Table 5: exam accuracy, RMSE of IRT vs the mean baseline, item parameters, theta.

    Each row is a mean and standard deviation: across pipelines for the accuracy and
    theta, across items for the per-item RMSEs and the item parameters (a, b, c).
    Held-out rows score the 10 % of cells the fit did not see.
    """
    stats = result.fit_stats
    values = np.asarray(responses.values, dtype=float)
    accuracy = np.nanmean(values, axis=0)  # per pipeline (examinee columns)
    items = result.items
    rows = [("average exam accuracy", *_mean_sd(accuracy)),
            ("RMSE, mean prediction baseline", *_mean_sd(stats["item_rmse_baseline"].values())),
            ("RMSE, hierarchical IRT", *_mean_sd(stats["item_rmse"].values())),
            ("held-out RMSE, mean baseline", stats.get("heldout_rmse_baseline", np.nan), np.nan),
            ("held-out RMSE, IRT", stats.get("heldout_rmse", np.nan), np.nan),
            ("held-out log-likelihood per cell, mean baseline", stats.get("heldout_loglik_baseline", np.nan), np.nan),
            ("held-out log-likelihood per cell, IRT", stats.get("heldout_loglik", np.nan), np.nan)]
    for column, label in (("a", "discrimination a"), ("b", "difficulty b"), ("c", "guessing c")):
        if column in items:
            rows.append((label, *_mean_sd(items[column])))
    rows.append(("theta (pipelines)", *_mean_sd(result.examinees["theta"])))
    return pd.DataFrame(rows, columns=["attribute", "mean", "sd"])


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A DataFrame as a GitHub Markdown table."""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in frame.astype(object).itertuples(index=False):  # object dtype keeps integers integers
        cells = [("" if np.isnan(v) else f"{v:.{digits}f}") if isinstance(v, (float, np.floating)) else str(v)
                 for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--take", default=str(REPO / "data" / "real_run"), help="irtexam take folder (default: the published real run)")
    ap.add_argument("--exam", default=str(REPO / "data" / "real_run" / "exam.jsonl"), help="exam JSONL")
    ap.add_argument("--out", default=str(REPO / "figures" / "real_run"), help="output folder")
    ap.add_argument("--reference", default="closed-book", help="retriever the contrasts are taken against")
    ap.add_argument("--prune-steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    take, out = Path(args.take), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()

    responses = irtexam.ResponseMatrix.read(find_responses(take))
    facets = [f for f in FACETS if f in responses.facet_names and len(responses.facet_levels(f)) > 1]
    print(f"{responses.n_items} items x {responses.n_examinees} pipelines; facets {facets}")
    sections: list[str] = [f"# Real-run analyses ({responses.n_items} items x {responses.n_examinees} pipelines)"]

    accuracy = accuracy_tables(responses) if set(FACETS) <= set(responses.facet_names) else None
    if accuracy is not None:
        accuracy.to_csv(out / "accuracy_grid.csv", index=False)
        sections += ["## Accuracy (paper Table 2)", markdown_table(accuracy), "![accuracy grid](accuracy_grid.png)"]
        order = grid_order(take, responses)
        ax = plot_accuracy_grid(accuracy, order=order)
        ax.figure.tight_layout()
        ax.figure.savefig(out / "accuracy_grid.png", dpi=120)
        plt.close(ax.figure)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = irtexam.fit(responses, model="3pl", facets=facets or None, method="map", heldout=0.1,
                             seed=args.seed)
    for w in caught:
        print(f"warning: {w.message}")
    result.save(out / "fit", idata=False)  # fit.nc (27 MB of pointwise log-likelihoods) not published
    stats = result.fit_stats
    fit_rows = table5(responses, result)
    fit_rows.to_csv(out / "fit_statistics.csv", index=False)
    sections += ["## Fit statistics against the mean baseline (paper Table 5)",
                 "mean +- sd across items (RMSE, item parameters) or pipelines (accuracy, theta); "
                 f"held-out: {stats.get('heldout_cells', 0)} random cells (10 %) left out of the fit.",
                 markdown_table(fit_rows, 3)]
    if result.facets is not None:
        sections += ["## Facet abilities, 90 % intervals (paper Table 3)",
                     markdown_table(result.facets[["facet", "level", "theta", "theta_low", "theta_high"]])]
        contrasts = result.contrasts
        versus = contrasts[(contrasts["facet"] == "retriever") & (contrasts["reference"] == args.reference)]
        if len(versus):
            versus.to_csv(out / f"contrasts_vs_{args.reference}.csv", index=False)
            sections += [f"## Retrievers against {args.reference}",
                         markdown_table(versus[["level", "diff", "low", "high", "prob_greater"]])]

    manifest = analyze_fit(result, out / "info", exam_questions=exam_questions(args.exam), seed=args.seed)
    print(f"exam analytics: {len(manifest['tables'])} tables, {len(manifest['figures'])} figures in {out / 'info'}")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the same data warnings as the fit above, once per round
        pruned = irtexam.prune(responses, model="3pl", drop=0.1, steps=args.prune_steps, seed=args.seed,
                               heldout=0.1, fit_kwargs={"facets": facets or None}, progress=False)
    pruned.save(out / "pruning", idata=False)
    steps = pruned.steps[["step", "n_items", "mean_information", "heldout_loglik"]] \
        if "heldout_loglik" in pruned.steps else pruned.steps[["step", "n_items", "mean_information"]]
    sections += ["## Iterative pruning, 10 % per round (paper Fig. 5)", markdown_table(steps, 4)]

    recall = recall_vs_ability(take, result.facets)
    if recall is not None and len(recall):
        recall.to_csv(out / "recall_vs_ability.csv", index=False)
        ax = plot_recall(recall)
        ax.figure.tight_layout()
        ax.figure.savefig(out / "recall_vs_ability.png", dpi=120)
        plt.close(ax.figure)
        sections += ["## Retriever recall@k against retriever ability",
                     markdown_table(recall[["retriever", "k", "recall", "theta", "theta_low", "theta_high"]])]

    from irtexam.exam.schema import read_exam
    from irtexam.filters.baselines import bias_baselines

    if Path(args.exam).exists():
        exam_items = read_exam(args.exam)
        baselines = bias_baselines(exam_items)
        (out / "bias_baselines.json").write_text(json.dumps(baselines, indent=1))
        sections += ["## Bias baselines of the exam", "```\n" + json.dumps(baselines, indent=1) + "\n```"]
        if (take / "answers.parquet").exists():
            bias = selection_bias(pd.read_parquet(take / "answers.parquet"), exam_items)
            bias.to_csv(out / "selection_bias.csv", index=False)
            sections += ["## How the LLMs pick (accuracy per length normalisation, longest-candidate and "
                         "top-position share)", markdown_table(bias)]

    (out / "results.md").write_text("\n\n".join(sections) + "\n")
    print(f"wrote {out / 'results.md'} and tables/figures in {out} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
