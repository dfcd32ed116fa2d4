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
}


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
    head = {k: v for k, v in s.items() if not isinstance(v, dict)}
    out.append(("Summary", pd.DataFrame([head]).T.rename(columns={0: "value"}), None))
    fs = s.get("fit_stats") or {}
    if fs:
        out.append(("Fit statistics", pd.DataFrame([fs]).T.rename(columns={0: "value"}), None))
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
    for title_, df, _ in _sections(manifest, max_rows):
        parts.append(f"<h2>{html.escape(title_)}</h2>")
        parts.append(df.to_html(index=df.index.name is not None or title_ in ("Summary", "Fit statistics"),
                                border=0, escape=True))
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
    for title_, df, _ in _sections(manifest, max_rows):
        parts += ["", f"## {title_}", "", _md_table(df, index=title_ in ("Summary", "Fit statistics"))]
    return "\n".join(parts) + "\n"
