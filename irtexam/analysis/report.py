"""Render an :func:`irtexam.analysis.summary.analyze_fit` manifest as HTML or Markdown.

HTML is self-contained: figures are embedded as base64 PNG data URIs, tables
are inline. Markdown references the figure files by relative path.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import pandas as pd

FIGURE_TITLES = {
    "icc": "Item characteristic curves",
    "item_information": "Item information curves",
    "exam_information": "Exam information with posterior band",
    "information_by_bloom": "Aggregated information by Bloom level (eq. 4)",
    "information_by_question_word": "Aggregated information by question word (eq. 4)",
    "wright_map": "Wright map",
    "facets": "Facet abilities (90% intervals)",
    "ppc_examinees": "Posterior predictive check: examinee scores",
    "ppc_items": "Posterior predictive check: item scores",
    "information_evolution": "Exam information during pruning",
    "item_rmse": "Per-item RMSE: IRT model against the mean baseline",
}


SUMMARY_LABELS = {
    "data": "data", "model": "model", "method": "estimator", "n_items": "items", "n_examinees": "examinees",
    "mean_information_-2_2": "mean item information on ability [-2, 2]",
    "peak_test_information": "peak test information", "peak_theta": "ability at the peak",
    "min_se_-2_2": "smallest standard error of ability on [-2, 2]",
    "low_discrimination": "items with discrimination near 0", "likely_wrong_key": "items with a likely wrong key",
    "misfit_items": "misfitting items (infit > 1.3 or outfit > 1.5)",
    "local_dependence_pairs": "locally dependent item pairs (Q3*)", "q3_threshold": "Q3* threshold",
    "ppc_examinees_outside_90": "examinees outside their 90% predictive interval",
    "ppc_replicated_to_observed_mean": "replicated / observed mean score",
}
FIT_LABELS = {
    "loglik": "log-likelihood", "n_observed": "observed responses", "n_parameters": "parameters",
    "aic": "AIC", "bic": "BIC", "rmse": "RMSE, IRT model", "rmse_baseline": "RMSE, mean baseline",
    "baseline": "baseline prediction (mean response)",
    "item_rmse_mean": "per-item RMSE, IRT: mean", "item_rmse_sd": "per-item RMSE, IRT: sd",
    "item_rmse_baseline_mean": "per-item RMSE, baseline: mean", "item_rmse_baseline_sd": "per-item RMSE, baseline: sd",
    "heldout_fraction": "held-out fraction of cells", "heldout_cells": "held-out cells",
    "heldout_loglik": "held-out log-likelihood per cell, IRT",
    "heldout_loglik_baseline": "held-out log-likelihood per cell, baseline",
    "heldout_rmse": "held-out RMSE, IRT", "heldout_rmse_baseline": "held-out RMSE, baseline",
    "optimizer": "optimizer", "laplace": "Laplace covariance", "method": None, "model": None,
}
# diagnostics' own RMSE numbers repeat the fit's; the report shows the fit's only
_SUMMARY_SKIP = {"rmse", "rmse_baseline", "baseline", "notes"}


def _value(v: Any) -> str:
    """A table cell: numbers to 4 significant digits, everything else as text."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (int,)):
        return f"{v:,}"
    if isinstance(v, float):
        return "" if v != v else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"
    return "" if v is None else str(v)


def key_value_table(values: dict[str, Any], labels: dict[str, str | None], skip: set[str] = frozenset()) -> pd.DataFrame:
    """Two-column table (quantity, value) of the scalar entries of ``values``, in ``labels`` order first.

    Entries labelled None, listed in ``skip``, or holding lists/dicts (per-item values
    live in items.csv and the figures, not in a cell) are left out.
    """
    keys = [k for k in labels if k in values] + [k for k in values if k not in labels]
    rows = [(labels.get(k) or k, _value(values[k])) for k in keys
            if k not in skip and labels.get(k, k) is not None and not isinstance(values[k], (dict, list, tuple))]
    return pd.DataFrame(rows, columns=["quantity", "value"])


def _fmt(df: pd.DataFrame, max_rows: int) -> pd.DataFrame:
    shown = df.head(max_rows).copy()
    for col in shown.columns:
        if pd.api.types.is_float_dtype(shown[col]):
            shown[col] = shown[col].map(lambda v: "" if pd.isna(v) else f"{v:.3g}")
    return shown


def _sections(manifest: dict[str, Any], max_rows: int) -> list[tuple[str, pd.DataFrame | None, str | None]]:
    """(title, table, note) sections, in report order."""
    t = manifest["tables"]
    out: list[tuple[str, pd.DataFrame | None, str | None]] = []
    s = manifest["summary"]
    fs = s.get("fit_stats") or {}
    out.append(("Summary", key_value_table(s, SUMMARY_LABELS, _SUMMARY_SKIP if "rmse" in fs else {"notes"}), None))
    if fs:
        out.append(("Fit statistics", key_value_table(fs, FIT_LABELS),
                    "Per-item values (RMSE, infit, outfit, information) are columns of items.csv; the per-item "
                    "RMSE figure compares each item with the baseline."))
    if "facets" in t:
        out.append(("Facet abilities", pd.read_csv(t["facets"]), None))
    if "contrasts" in t:
        out.append(("Contrasts between levels", pd.read_csv(t["contrasts"]), None))
    items = pd.read_csv(t["items"])
    flagged = items[items.get("low_discrimination", False) | items.get("wrong_key_flag", False)
                    | items.get("misfit_flag", False)]
    cols = [c for c in ("item", "a", "b", "c", "information_mean_-2_2", "bloom", "question_word", "infit",
                        "outfit", "low_discrimination", "wrong_key_flag", "misfit_flag") if c in items]
    out.append((f"Flagged items ({len(flagged)} of {len(items)})", flagged[cols], None))
    out.append((f"Least informative items on [-2, 2] (first {max_rows})",
                items.sort_values("information_mean_-2_2")[cols], None))
    for name in ("bloom", "question_word"):
        key = f"counts_by_{name}"
        if key in t:
            out.append((f"Items per {name.replace('_', ' ')}", pd.read_csv(t[key]), None))
    if "local_dependence" in t:
        ld = pd.read_csv(t["local_dependence"])
        out.append((f"Local dependence (Yen's Q3*, {len(ld)} pairs)", ld, None))
    ex = pd.read_csv(t["examinees"])
    ecols = [c for c in ("examinee", "theta", "theta_low", "theta_high", "se_at_theta", "infit", "outfit",
                         "observed", "replicated_mean", "ppp") if c in ex]
    out.append(("Examinees (by ability)", ex.sort_values("theta", ascending=False)[ecols], None))
    return [(title, None if df is None else _fmt(df, max_rows), note) for title, df, note in out]


def render_html(manifest: dict[str, Any], title: str = "irtexam report", max_rows: int = 30) -> str:
    """A self-contained HTML page: notes, tables and base64-embedded figures."""
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:12px;margin-bottom:1.5em}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "img{max-width:100%;border:1px solid #eee}.note{background:#fff4d6;padding:4px 8px}</style>",
             f"</head><body><h1>{html.escape(title)}</h1>"]
    for note in manifest.get("notes", []):
        parts.append(f"<p class='note'>{html.escape(note)}</p>")
    for name, path in manifest.get("figures", {}).items():
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        parts.append(f"<h2>{html.escape(FIGURE_TITLES.get(name, name))}</h2>"
                     f"<img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>")
    for title_, df, note in _sections(manifest, max_rows):
        parts.append(f"<h2>{html.escape(title_)}</h2>")
        if note:
            parts.append(f"<p>{html.escape(note)}</p>")
        parts.append(df.to_html(index=df.index.name is not None, border=0, escape=True))
    parts.append("</body></html>")
    return "\n".join(parts)


def _md_table(df: pd.DataFrame, index: bool) -> str:
    frame = df.reset_index() if index else df
    cols = [str(c) for c in frame.columns]
    esc = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(map(esc, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(esc("" if pd.isna(v) else v) for v in row) + " |"
              for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def render_markdown(manifest: dict[str, Any], relative_to: str | Path, title: str = "irtexam report",
                    max_rows: int = 30) -> str:
    """Markdown report; figures are linked relative to ``relative_to`` (the report's folder)."""
    import os

    parts = [f"# {title}", ""]
    parts += [f"> {n}" for n in manifest.get("notes", [])]
    for name, path in manifest.get("figures", {}).items():
        rel = os.path.relpath(path, relative_to)
        parts += ["", f"## {FIGURE_TITLES.get(name, name)}", "", f"![{name}]({rel})"]
    for title_, df, note in _sections(manifest, max_rows):
        parts += ["", f"## {title_}", ""] + ([note, ""] if note else []) + [_md_table(df, index=False)]
    return "\n".join(parts) + "\n"
