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


def param_draws(result, n: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Posterior (or Laplace) draws of a, b, c as (S, I) arrays, or None if unavailable.

    c is zeros for models without guessing (2PL, 1PL) and is broadcast when fixed.
    """
    try:
        a = np.asarray(result.draws("a", n=n), dtype=float)
        b = np.asarray(result.draws("b", n=n), dtype=float)
    except Exception:  # noqa: BLE001 - reported by the caller as a note
        return None
    try:
        c = np.asarray(result.draws("c", n=n), dtype=float)
    except Exception:  # noqa: BLE001
        c = np.zeros_like(a)
    a, b = np.broadcast_arrays(a, b)
    c = np.broadcast_to(c, a.shape)
    return a, b, c


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


def analyze_fit(result, out_dir: str | Path, exam_questions: pd.Series | None = None, keywords=None,
                theta: np.ndarray | None = None, n_draws: int = 200, seed: int = 0,
                figures: bool = True) -> dict[str, Any]:
    """Write every analytics table and figure of ``result`` into ``out_dir``.

    Tables: items.csv (parameters, mean information on [-2, 2], categories,
    diagnostics and flags), examinees.csv (theta, information and SE at theta,
    fit statistics, PPC), exam_information.csv (theta grid: mean/sum information,
    SE, posterior band), information_by_bloom.csv, information_by_question_word.csv,
    local_dependence.csv, facets.csv / contrasts.csv when present, summary.json.
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

    a, b = items["a"].to_numpy(), items["b"].to_numpy()
    c = items["c"].to_numpy() if "c" in items else None
    items["information_mean_-2_2"] = inf.mean_information(items, (-2.0, 2.0))
    items = items.join(cats)

    draws = param_draws(result, n_draws)
    shared = None
    if draws is not None:
        try:
            shared = {"a": draws[0], "b": draws[1], "c": draws[2],
                      "theta": np.asarray(result.draws("theta", n=n_draws), dtype=float)}
        except Exception:  # noqa: BLE001 - diagnose falls back to point estimates
            shared = None
    diag = dg.diagnose(result, n_draws=n_draws, seed=seed, draws=shared)
    if shared is None:
        notes.append("posterior predictive checks use the point estimate only (no draws available)")
    items = items.join(diag["items"], rsuffix="_diag")
    exam_info_at = np.asarray(inf.exam_information(abilities.to_numpy(), a, b, c, reduce="sum"))
    exam["test_information_at_theta"] = exam_info_at
    exam["se_at_theta"] = 1.0 / np.sqrt(exam_info_at)
    exam = exam.join(diag["examinees"], rsuffix="_diag")

    total = np.asarray(inf.exam_information(grid, a, b, c, reduce="sum"))
    curve = pd.DataFrame({"theta": grid, "mean_information": total / len(a), "test_information": total,
                          "se": 1.0 / np.sqrt(total)})
    band = None
    if draws is None:
        notes.append("no parameter draws available: information curves have no posterior band")
    else:
        band = inf.information_band(grid, *draws)
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

    table("items", items)
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

    summ = diag["summary"]
    summary = {
        "model": getattr(result, "model", None), "method": getattr(result, "method", None),
        **summ,
        "mean_information_-2_2": float(items["information_mean_-2_2"].mean()),
        "peak_test_information": float(total.max()), "peak_theta": float(grid[total.argmax()]),
        "min_se_-2_2": float(curve.loc[curve.theta.between(-2, 2), "se"].min()),
        "fit_stats": {k: (float(v) if isinstance(v, (int, float, np.floating)) else v)
                      for k, v in (getattr(result, "fit_stats", {}) or {}).items()},
        "bloom_counts": {k: int(v) for k, v in by_cat["bloom"].attrs["n_items"].items()},
        "question_word_counts": {k: int(v) for k, v in by_cat["question_word"].attrs["n_items"].items()},
    }
    if summ["low_discrimination"]:
        notes.append(f"{summ['low_discrimination']} items have discrimination near zero "
                     "(low_discrimination in items.csv): they measure noise; consider `irtexam prune`")
    if summ["likely_wrong_key"]:
        notes.append(f"{summ['likely_wrong_key']} items are answered wrong by most of the strongest "
                     "examinees (wrong_key_flag): check their answer key")
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
    if facets is not None and len(facets) and {"theta_low", "theta_high"} <= set(facets.columns):
        figs["facets"] = pl.save(pl.plot_forest(facets), out / "facets.png")
    ppc = diag["ppc"]
    figs["ppc_examinees"] = pl.save(pl.plot_ppc(ppc["examinee"]["observed"], ppc["rep_examinee"],
                                                what="examinee scores"), out / "ppc_examinees.png")
    figs["ppc_items"] = pl.save(pl.plot_ppc(ppc["item"]["observed"], ppc["rep_item"], what="item scores"),
                                out / "ppc_items.png")
    return figs
