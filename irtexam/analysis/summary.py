"""Everything ``irtexam info`` and ``irtexam report`` show, computed from one fit.

:func:`analyze_fit` writes tables (CSV) and figures (PNG) into a folder and returns
a manifest (paths, headline numbers, notes) that the report renders. Nothing is
dropped silently: items without question text (so without categories), draws
that could not be taken, and every diagnostic flag are counted in ``notes``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import categories as cz
from . import diagnostics as dg
from . import information as inf


def item_categories(result, exam_questions: pd.Series | None = None, keywords=None) -> tuple[pd.DataFrame, list[str]]:
    """Categories (bloom, question_word) of the fitted items, with notes.

    Uses existing ``bloom``/``question_word`` item metadata when present, else
    categorises the ``question`` metadata or ``exam_questions`` (id -> text).
    Items without question text get "unknown" and are counted in the notes.
    """
    items = list(result.items.index)
    meta = getattr(result.responses, "item_meta", pd.DataFrame(index=items))
    notes: list[str] = []
    if keywords is None and {"bloom", "question_word"} <= set(meta.columns) and meta["bloom"].notna().all():
        cats = meta.loc[items, ["bloom", "question_word"]].astype(str)
        return cats, notes
    text = pd.Series(index=items, dtype=object)
    if "question" in meta.columns:
        text = meta["question"].reindex(items)
    if exam_questions is not None:
        text = text.fillna(exam_questions.reindex(items))
    missing = text.isna()
    cats = cz.categorize(text.fillna(""), keywords)
    cats.loc[missing, ["bloom", "question_word"]] = "unknown"
    if missing.any():
        notes.append(f"{int(missing.sum())} of {len(items)} items have no question text "
                     "(pass --exam EXAM.jsonl); their category is 'unknown'")
    return cats, notes


def data_label(result, source: str | None = None) -> str:
    """What was fitted, for titles: the response file (relative to the working directory when inside it).

    ``source`` is the original response file a fit folder records; without it the
    matrix's own source is used; the matrix's size is always given.
    """
    rm = result.responses
    source = source or getattr(rm, "source", None)
    size = f"{rm.n_items} items x {rm.n_examinees} examinees"
    if not source:
        return size
    path = Path(str(source))
    try:
        path = path.resolve().relative_to(Path.cwd())
    except (ValueError, OSError):
        pass
    return f"{path} ({size})"


def split_fit_stats(stats: dict, item_ids: list[str]) -> tuple[dict[str, Any], dict[str, pd.Series]]:
    """Split a fit's statistics into scalars (a summary table) and per-item values (item table columns).

    A dict keyed by item id (e.g. ``item_rmse``) becomes a Series over ``item_ids``;
    the optimizer's dict becomes one readable line; other nested values are dropped
    from the table (they stay in the fit folder's meta.json).
    """
    scalars: dict[str, Any] = {}
    per_item: dict[str, pd.Series] = {}
    ids = set(item_ids)
    for key, value in stats.items():
        if isinstance(value, dict) and value and set(map(str, value)) <= ids:
            per_item[key] = pd.Series({str(k): v for k, v in value.items()}, dtype=float).reindex(item_ids)
        elif key == "optimizer" and isinstance(value, dict):
            parts = [str(value.get("solver", "")), "converged" if value.get("converged") else "NOT converged"
                     if "converged" in value else "", f"{value['iterations']} iterations" if "iterations" in value
                     else ""]
            scalars[key] = ", ".join(p for p in parts if p)
        elif isinstance(value, (bool, np.bool_)):
            scalars[key] = bool(value)
        elif isinstance(value, (int, float, np.integer, np.floating)):
            scalars[key] = float(value) if isinstance(value, (float, np.floating)) else int(value)
        elif isinstance(value, str) or value is None:
            scalars[key] = value
    return scalars, per_item


def analyze_fit(result, out_dir: str | Path, exam_questions: pd.Series | None = None, keywords=None,
                theta: np.ndarray | None = None, n_draws: int = 200, seed: int = 0,
                figures: bool = True, data: str | None = None) -> dict[str, Any]:
    """Write every analytics table and figure of ``result`` into ``out_dir``.

    Tables: items.csv (parameters, mean information on [-2, 2], categories,
    diagnostics and flags), examinees.csv (theta, information and SE at theta,
    fit statistics, PPC), exam_information.csv (theta grid: mean/sum information,
    SE, posterior band), information_by_bloom.csv, information_by_question_word.csv,
    local_dependence.csv, facets.csv / contrasts.csv when present, summary.json.
    ``data`` names the fitted response file in titles (default: the matrix's source).
    Returns the manifest: {'tables': {...}, 'figures': {...}, 'summary': {...}, 'notes': [...]}.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    grid = inf.theta_grid() if theta is None else np.asarray(theta, dtype=float)
    rm = result.responses
    item_ids = list(rm.items)
    items = result.items.loc[item_ids].copy()
    exam = result.examinees.loc[list(rm.examinees)].copy()
    items.index.name, exam.index.name = "item", "examinee"
    abilities = exam["theta"]
    cats, notes = item_categories(result, exam_questions, keywords)
    tables: dict[str, str] = {}
    figs: dict[str, str] = {}

    items["information_mean_-2_2"] = inf.mean_information(items, (-2.0, 2.0))
    items = items.join(cats)

    diag = dg.diagnose(result, n_draws=n_draws, seed=seed)
    notes.extend(diag["summary"].pop("notes", []))
    items = items.join(diag["items"], rsuffix="_diag")
    exam_info_at = result.information_array(abilities.to_numpy()).sum(axis=-1)  # every model kind
    exam["test_information_at_theta"] = exam_info_at
    exam["se_at_theta"] = 1.0 / np.sqrt(exam_info_at)
    exam = exam.join(diag["examinees"], rsuffix="_diag")

    total = result.information_array(grid).sum(axis=-1)
    n_items = len(items)
    curve = pd.DataFrame({"theta": grid, "mean_information": total / n_items, "test_information": total,
                          "se": 1.0 / np.sqrt(total)})
    band = None
    if result.samples is None:
        notes.append("no parameter draws available: information curves have no posterior band")
    else:
        # the same joint posterior draws as every interval of the fit
        per_draw = np.stack([info.mean(axis=-1) for info in result.information_draws(grid, n_draws, seed)])  # (S, T)
        low, high = inf.band_around(total / n_items, per_draw, 0.9)   # around the fit's own curve
        band = pd.DataFrame({"theta": grid, "mean": per_draw.mean(axis=0), "estimate": total / n_items,
                             "low": low, "high": high})
        curve["mean_information_low"] = band["low"].to_numpy()
        curve["mean_information_high"] = band["high"].to_numpy()

    by_cat = {}
    for name, order in (("bloom", cz.bloom_order() + ["unknown"]),
                        ("question_word", list(cz.QUESTION_WORDS) + ["other", "unknown"])):
        by_cat[name] = inf.category_information(grid, items, items[name], order=order)

    def table(name: str, df: pd.DataFrame, index: bool = True) -> None:
        path = out / f"{name}.csv"
        df.to_csv(path, index=index)
        tables[name] = str(path)

    table("items", items)  # per-item fit statistics (RMSE, infit, outfit, ...) are columns here
    table("examinees", exam)
    table("exam_information", curve, index=False)
    for name, df in by_cat.items():
        counts = pd.Series(df.attrs["n_items"], name="n_items")
        table(f"information_by_{name}", df)
        table(f"counts_by_{name}", counts.rename_axis(name).to_frame())
    table("local_dependence", diag["local_dependence"], index=False)
    facets = getattr(result, "facets", None)
    if facets is not None and len(facets):
        table("facets", facets, index=False)
    contrasts = getattr(result, "contrasts", None)
    if contrasts is not None and len(contrasts):
        table("contrasts", contrasts, index=False)

    fit_stats, per_item_stats = split_fit_stats(getattr(result, "fit_stats", {}) or {}, item_ids)
    for name, values in per_item_stats.items():
        if name not in items.columns:
            items[name] = values
    summ = diag["summary"]
    summary = {
        "data": data_label(result, data),
        "model": getattr(result, "model", None), "method": getattr(result, "method", None),
        **summ,
        "mean_information_-2_2": float(items["information_mean_-2_2"].mean()),
        "peak_test_information": float(total.max()), "peak_theta": float(grid[total.argmax()]),
        "min_se_-2_2": float(curve.loc[curve.theta.between(-2, 2), "se"].min()),
        "fit_stats": fit_stats,
        "bloom_counts": {k: int(v) for k, v in by_cat["bloom"].attrs["n_items"].items()},
        "question_word_counts": {k: int(v) for k, v in by_cat["question_word"].attrs["n_items"].items()},
    }
    if summ["low_discrimination"]:
        notes.append(f"{summ['low_discrimination']} items have discrimination near zero "
                     "(low_discrimination in items.csv): they measure noise; consider `irtexam prune`")
    if summ["likely_wrong_key"]:
        notes.append(f"{summ['likely_wrong_key']} items are answered wrong by most of the strongest "
                     "examinees (wrong_key_flag): check their answer key")
    constant = diag["local_dependence"].attrs.get("constant_items", 0)
    if constant:
        notes.append(f"{constant} items with all-equal responses (answered by nobody or by everybody) are left out "
                     "of the local-dependence check: their residuals depend on ability alone")
    if summ["local_dependence_pairs"]:
        notes.append(f"{summ['local_dependence_pairs']} item pairs show local dependence "
                     f"(Yen's Q3* > {summ['q3_threshold']:.2f}, local_dependence.csv): near-duplicate questions?")
    (out / "summary.json").write_text(json.dumps({"summary": summary, "notes": notes}, indent=2,
                                                 default=str))
    tables["summary"] = str(out / "summary.json")

    if figures:
        figs = _figures(out, items, abilities, grid, band, by_cat, facets, diag)
    return {"tables": tables, "figures": figs, "summary": summary, "notes": notes}


def _figures(out: Path, items, abilities, grid, band, by_cat, facets, diag) -> dict[str, str]:
    """Render the standard figures into ``out``; returns name -> path."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from .. import plotting as pl

    figs: dict[str, str] = {}
    figs["icc"] = pl.save(pl.plot_icc(items, grid, abilities=abilities), out / "icc.png")
    figs["item_information"] = pl.save(pl.plot_item_information(items, grid, abilities=abilities),
                                       out / "item_information.png")
    if band is not None:
        figs["exam_information"] = pl.save(pl.plot_information_band(band, abilities=abilities),
                                           out / "exam_information.png")
    figs["information_by_bloom"] = pl.save(
        pl.plot_category_information(by_cat["bloom"], abilities=abilities, title="Information by Bloom level"),
        out / "information_by_bloom.png")
    figs["information_by_question_word"] = pl.save(
        pl.plot_category_information(by_cat["question_word"], abilities=abilities,
                                     title="Information by question word"),
        out / "information_by_question_word.png")
    figs["wright_map"] = pl.save(pl.plot_wright_map(items, abilities), out / "wright_map.png")
    pair = next(((irt, base) for irt, base in (("item_rmse", "item_rmse_baseline"), ("rmse", "rmse_baseline"))
                 if {irt, base} <= set(items.columns)), None)
    if pair is not None:
        figs["item_rmse"] = pl.save(pl.plot_item_rmse(items[pair[0]], items[pair[1]]), out / "item_rmse.png")
    if facets is not None and len(facets) and {"theta_low", "theta_high"} <= set(facets.columns):
        figs["facets"] = pl.save(pl.plot_forest(facets), out / "facets.png")
    ppc = diag["ppc"]
    figs["ppc_examinees"] = pl.save(pl.plot_ppc(ppc["examinee"]["observed"], ppc["rep_examinee"],
                                                what="examinee scores"), out / "ppc_examinees.png")
    figs["ppc_items"] = pl.save(pl.plot_ppc(ppc["item"]["observed"], ppc["rep_item"], what="item scores"),
                                out / "ppc_items.png")
    return figs
