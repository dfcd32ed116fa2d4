"""Plots of fitted exams. Every function takes ``ax=None`` and returns the Axes.

Inputs are plain tables (the ``items`` / ``examinees`` / ``facets`` DataFrames of a
fit, or the outputs of :mod:`irtexam.analysis`), so plots can be drawn from files
written by ``irtexam info`` without refitting. Examinee abilities, where given,
are drawn as crosses on the x axis (the paper's Figs 3, 4, 8-11).
Matplotlib only; no torch, no jax needed here except through the analysis module.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .analysis import information as inf
from .irt import kinds


def _axes(ax):
    """Return ``ax``, or a new Axes on a new figure when it is None."""
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(6.4, 4.2))
    return ax


def _grid(theta) -> np.ndarray:
    return inf.theta_grid() if theta is None else np.asarray(theta, dtype=float)


REDUCE_LABELS = {"mean": r"mean item information $\bar I(\theta)$",
                 "sum": r"test information $I(\theta)$, sum over items"}


def information_label(reduce: str) -> str:
    """The y-axis label for exam information aggregated by ``reduce`` ("mean" or "sum")."""
    if reduce not in REDUCE_LABELS:
        raise ValueError(f"reduce must be 'mean' or 'sum', not {reduce!r}")
    return REDUCE_LABELS[reduce]


def _title(ax, title: str, detail: str | None = None):
    """A title that stays inside the figure: the detail goes on a second, smaller line."""
    ax.set_title(title if not detail else f"{title}\n{detail}", fontsize=11 if not detail else 10)
    return ax


def ability_crosses(ax, abilities: Mapping[str, float] | pd.Series | Sequence[float] | None,
                    color: str = "black"):
    """Mark examinee abilities as crosses on the x axis of ``ax``; returns ``ax``."""
    if abilities is None:
        return ax
    vals = np.asarray(pd.Series(abilities).astype(float).to_numpy())
    if vals.size == 0:
        return ax
    ymin = ax.get_ylim()[0]
    ax.scatter(vals, np.full(vals.shape, ymin), marker="x", color=color, s=30, zorder=5,
               clip_on=False, label="examinee abilities")
    ax.set_ylim(bottom=ymin)
    return ax


def icc_selection(items: pd.DataFrame, max_items: int, highlight: Sequence[str] = ()) -> list:
    """Up to ``max_items`` item ids spread evenly over difficulty (sorted by ``b``), highlighted ones first.

    With more items than that, overlaid curves become an unreadable block; a spread
    of difficulties shows the shapes the exam has.
    """
    chosen = [i for i in items.index if i in set(highlight)][:max_items]
    if len(items) <= max_items:
        return list(items.index)
    key = items["b"] if "b" in items else pd.Series(np.arange(len(items)), index=items.index)
    order = [i for i in key.sort_values(kind="stable").index if i not in set(chosen)]
    room = max_items - len(chosen)
    if room > 0:
        picks = np.unique(np.linspace(0, len(order) - 1, room).round().astype(int))
        chosen += [order[k] for k in picks]
    return chosen


def plot_icc(items: pd.DataFrame, theta=None, ax=None, abilities=None, max_items: int = 12,
             highlight: Sequence[str] | None = None):
    """Item characteristic curves P_i(theta) = c + (1 - c) sigmoid(a (theta - b)).

    Up to ``max_items`` items are drawn one line each; with more items, a selection
    spread over difficulty (:func:`icc_selection`) is drawn over a grey band holding
    the middle 80% of all items' curves at each theta (10th to 90th percentile) and
    their median (dashed), so the figure stays readable at hundreds of items.
    """
    ax = _axes(ax)
    grid = _grid(theta)
    hl = set(highlight or [])
    shown = items.loc[icc_selection(items, max_items, list(hl))]
    if len(items) > len(shown):
        p_all = np.asarray(kinds.prob_correct(grid, kinds.from_table(items)))
        low, mid, high = np.percentile(p_all, [10, 50, 90], axis=1)
        ax.fill_between(grid, low, high, color="0.85", label=f"middle 80% of all {len(items)} items")
        ax.plot(grid, mid, color="0.35", lw=1.4, ls="--", label="median item")
    p = np.asarray(kinds.prob_correct(grid, kinds.from_table(shown)))  # GRM: P(any credit)
    for j, item in enumerate(shown.index):
        ax.plot(grid, p[:, j], lw=1.6 if item in hl else 0.9, alpha=1.0 if item in hl else 0.7,
                color="tab:red" if item in hl else None, label=f"_{item}", gid=str(item))
    ax.set_xlabel(r"ability $\theta$")
    ax.set_ylabel(r"$P(\mathrm{correct}\mid\theta)$")
    ax.set_ylim(0, 1)
    if len(items) > len(shown):
        ax.legend(loc="upper left", fontsize=8)
        _title(ax, "Item characteristic curves", f"{len(shown)} of {len(items)} items, spread over difficulty")
    else:
        _title(ax, f"Item characteristic curves ({len(items)} items)")
    return ability_crosses(ax, abilities)


def plot_item_rmse(rmse: pd.Series, baseline: pd.Series, ax=None):
    """Per-item RMSE of the IRT predictions (y) against the mean baseline's (x), one dot per item.

    Dots below the diagonal are items the model predicts better than the baseline.
    """
    ax = _axes(ax)
    both = pd.DataFrame({"irt": rmse, "baseline": baseline}).dropna()
    ax.scatter(both["baseline"], both["irt"], s=12, alpha=0.6)
    top = float(max(both.max().max(), 0.01)) * 1.05 if len(both) else 1.0
    ax.plot([0, top], [0, top], color="0.4", lw=1, ls="--", label="equal")
    better = int((both["irt"] < both["baseline"]).sum())
    ax.set_xlim(0, top)
    ax.set_ylim(0, top)
    ax.set_xlabel("RMSE of the mean baseline, per item")
    ax.set_ylabel("RMSE of the IRT model, per item")
    ax.set_title(f"Per-item fit: IRT better on {better} of {len(both)} items")
    ax.legend(loc="upper left", fontsize=8)
    return ax


def plot_item_information(items: pd.DataFrame, theta=None, ax=None, abilities=None,
                          max_items: int = 200, show_mean: bool = True, legend: bool | None = None):
    """Item information curves I_i(theta) (3PL Fisher information), one line per item, and their mean (eq. 4).

    The first ``max_items`` rows of ``items`` are drawn; each line is labelled with its item
    id (``ax.get_legend_handles_labels()``), and a legend is drawn when ``legend`` is True
    (default: when at most 10 items are shown). The thick black line is the mean of the
    items shown, not of the whole exam: pass the exam's items to get the exam's mean.
    """
    ax = _axes(ax)
    grid = _grid(theta)
    shown = items.iloc[:max_items]
    info = inf.table_information(grid, shown)
    for j, item in enumerate(shown.index):
        ax.plot(grid, info[:, j], lw=0.9, alpha=0.6, label=str(item))
    if show_mean:
        ax.plot(grid, info.mean(axis=-1), color="black", lw=2.2, label=f"mean of the {len(shown)} items shown")
    ax.set_xlabel(r"ability $\theta$")
    ax.set_ylabel(r"item information $I_i(\theta)$")
    ax.set_ylim(bottom=0)
    detail = f"first {len(shown)} of {len(items)} items" if len(shown) < len(items) else None
    _title(ax, f"Item information curves ({len(shown)} items)" if detail is None else "Item information curves",
           detail)
    if legend if legend is not None else len(shown) <= 10:
        ax.legend(loc="upper right", fontsize=7)
    elif show_mean:  # only the mean in the legend: one entry per item would hide the plot
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[-1:], labels[-1:], loc="upper right", fontsize=8)
    return ability_crosses(ax, abilities)


def plot_category_information(curves: pd.DataFrame, ax=None, abilities=None, title: str | None = None,
                              band: Mapping[str, pd.DataFrame] | None = None):
    """Aggregated information per category (paper eq. 4): one line per column of ``curves``.

    ``curves`` is indexed by theta (see ``analysis.information.category_information``);
    its ``attrs['n_items']`` feeds the legend. ``band`` optionally maps category ->
    DataFrame(theta, low, high) for posterior bands.
    """
    ax = _axes(ax)
    n = curves.attrs.get("n_items", {})
    grid = curves.index.to_numpy(dtype=float)
    for cat in curves.columns:
        label = f"{cat} (n={n[cat]})" if cat in n else str(cat)
        (line,) = ax.plot(grid, curves[cat].to_numpy(), lw=1.8, label=label)
        if band and cat in band:
            bd = band[cat]
            ax.fill_between(bd["theta"], bd["low"], bd["high"], color=line.get_color(), alpha=0.15)
    ax.set_xlabel(r"ability $\theta$")
    reduce = curves.attrs.get("reduce", "mean")
    ax.set_ylabel(r"mean item information per category" if reduce == "mean"
                  else r"test information per category (sum)")
    ax.set_ylim(bottom=0)
    _title(ax, title or "Aggregated information by category")
    ax.legend(fontsize=8, loc="upper right")
    return ability_crosses(ax, abilities)


def plot_information_band(band: pd.DataFrame, ax=None, abilities=None, label: str = "exam",
                          title: str | None = None, reduce: str | None = None):
    """Exam information with its posterior interval (columns theta, mean, low, high; the line is ``estimate``,
    the fit's own curve, where the band has it, else the draws' mean).

    The y label follows ``reduce`` ("mean": mean item information, "sum": test information),
    by default the ``reduce`` that :func:`irtexam.analysis.information_band` recorded in
    ``band.attrs``; the interval's level comes from ``band.attrs['prob']`` (default 0.9).
    """
    ax = _axes(ax)
    reduce = reduce or band.attrs.get("reduce", "mean")
    level = int(round(100 * float(band.attrs.get("prob", 0.9))))
    centre = "estimate" if "estimate" in band else "mean"
    (line,) = ax.plot(band["theta"], band[centre], lw=2,
                      label=f"{label} ({'estimate' if centre == 'estimate' else 'posterior mean'})")
    ax.fill_between(band["theta"], band["low"], band["high"], color=line.get_color(), alpha=0.2,
                    label=f"{level}% interval")
    ax.set_xlabel(r"ability $\theta$")
    ax.set_ylabel(information_label(reduce))
    ax.set_ylim(bottom=0)
    _title(ax, title or ("Exam information (posterior)" if reduce == "mean" else "Test information (posterior)"))
    ax.legend(fontsize=8)
    return ability_crosses(ax, abilities)


PRUNING_COLOURS = 0.6  # the last step's colour: viridis(0.6), a teal green with 3:1 contrast on white (WCAG graphics)


def plot_pruning(curves: pd.DataFrame, ax=None, abilities=None, n_items: Mapping | None = None):
    """Evolution of exam information during pruning (paper Fig. 5/12).

    ``curves`` is indexed by theta with one column per step (step 0 = full exam).
    """
    import matplotlib.pyplot as plt

    ax = _axes(ax)
    grid = curves.index.to_numpy(dtype=float)
    cmap = plt.get_cmap("viridis")
    k = max(len(curves.columns) - 1, 1)
    for j, step in enumerate(curves.columns):
        lab = f"step {step}" + (f" ({n_items[step]} items)" if n_items and step in n_items else "")
        # viridis from dark purple to green only: its yellow end is unreadable on white
        ax.plot(grid, curves[step].to_numpy(), color=cmap(PRUNING_COLOURS * j / k), lw=1.8, label=lab)
    ax.set_xlabel(r"ability $\theta$")
    ax.set_ylabel(r"mean item information $\bar I_{Q_j}(\theta)$")
    ax.set_ylim(bottom=0)
    _title(ax, "Exam information during iterative pruning")
    ax.legend(fontsize=8)
    return ability_crosses(ax, abilities)


def plot_forest(facets: pd.DataFrame, ax=None, estimate: str = "theta", low: str = "theta_low",
                high: str = "theta_high"):
    """Forest plot of facet-level abilities with intervals (the paper's Table 3 view).

    ``facets`` has columns facet, level and the estimate/interval columns; one row
    per level, grouped by facet, sorted by estimate within a facet.
    """
    ax = _axes(ax)
    rows = []
    for facet, grp in facets.groupby("facet", sort=False):
        rows.extend(grp.sort_values(estimate).itertuples(index=False))
        rows.append(None)
    rows = rows[:-1] if rows and rows[-1] is None else rows
    labels, y = [], 0
    colors = {}
    for r in rows:
        y += 1
        if r is None:
            labels.append("")
            continue
        d = r._asdict()
        col = colors.setdefault(d["facet"], f"C{len(colors)}")
        ax.errorbar(d[estimate], -y, xerr=[[d[estimate] - d[low]], [d[high] - d[estimate]]],
                    fmt="o", color=col, capsize=3)
        labels.append(f"{d['facet']}={d['level']}")
    ax.set_yticks([-(i + 1) for i in range(len(labels))], labels, fontsize=8)
    ax.axvline(0, color="grey", lw=0.8, ls=":")
    ax.set_xlabel(r"ability $\theta$ (90% interval)")
    ax.set_title("Facet abilities")
    return ax


def plot_wright_map(items: pd.DataFrame, abilities: pd.Series | Mapping[str, float], ax=None,
                    bins: int = 25, label_examinees: bool = True):
    """Wright map: examinee abilities and item difficulties b on one theta axis.

    Examinees left (histogram or labelled points), item difficulties right.
    """
    ax = _axes(ax)
    th = pd.Series(abilities).astype(float)
    b = items["b"].to_numpy(dtype=float)
    lo, hi = float(min(th.min(), b.min())) - 0.3, float(max(th.max(), b.max())) + 0.3
    edges = np.linspace(lo, hi, bins + 1)
    hb, _ = np.histogram(b, edges)
    centers = 0.5 * (edges[1:] + edges[:-1])
    h = edges[1] - edges[0]
    ax.barh(centers, hb, height=h * 0.9, color="tab:orange", label=f"item difficulty b ({len(b)})")
    if label_examinees and len(th) <= 40:
        x = -0.5 - 0.0 * th.to_numpy()
        ax.scatter(x, th.to_numpy(), marker="x", color="tab:blue", label=f"examinees ({len(th)})")
        for name, v in th.items():
            ax.annotate(str(name), (-0.6, v), fontsize=6, ha="right", va="center")
        ax.set_xlim(left=-max(hb.max(), 1) * 1.2 - 1)
    else:
        he, _ = np.histogram(th.to_numpy(), edges)
        ax.barh(centers, -he, height=h * 0.9, color="tab:blue", label=f"examinees ({len(th)})")
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{abs(v):g}"))
    ax.axvline(0, color="black", lw=0.8)
    ax.set_ylabel(r"$\theta$ / difficulty $b$")
    ax.set_xlabel("examinees  |  items")
    ax.set_title("Wright map")
    ax.legend(fontsize=8, loc="lower right")
    return ax


TRAJECTORY_LABELS = {"theta": r"ability $\theta$", "accuracy": "predicted whole-exam accuracy"}


def plot_cat_trajectory(trajectory: pd.DataFrame, ax=None, what: str = "theta", reference: float | None = None,
                        reference_label: str = "reference"):
    """An adaptive test step by step: the estimate after each item with its 90% interval.

    ``trajectory`` is :class:`irtexam.bank.adapt.AdaptResult`'s table (trajectory.csv of ``irtexam adapt``):
    ``what`` ("theta" or "accuracy") names the columns drawn (``what``, ``what_low``, ``what_high``). The
    answers are marked on the estimate (filled: correct, open: wrong). ``reference``: a horizontal line, e.g.
    the ability from all the items or the actual accuracy.
    """
    if what not in TRAJECTORY_LABELS:
        raise ValueError(f"what must be one of {', '.join(TRAJECTORY_LABELS)}, not {what!r}")
    ax = _axes(ax)
    step = trajectory["step"].to_numpy(dtype=float)
    estimate = trajectory[what].to_numpy(dtype=float)
    (line,) = ax.plot(step, estimate, lw=1.5, label="estimate after each item")
    ax.fill_between(step, trajectory[f"{what}_low"].to_numpy(dtype=float),
                    trajectory[f"{what}_high"].to_numpy(dtype=float), color=line.get_color(), alpha=0.2,
                    label="90% interval")
    correct = trajectory["response"].to_numpy(dtype=float) >= 0.5
    ax.scatter(step[correct], estimate[correct], color=line.get_color(), s=18, zorder=3, label="correct")
    ax.scatter(step[~correct], estimate[~correct], facecolor="white", edgecolor=line.get_color(), s=18,
               zorder=3, label="wrong")
    if reference is not None:
        ax.axhline(reference, color="black", lw=1, ls="--", label=reference_label)
    ax.set_xlabel("items given")
    ax.set_ylabel(TRAJECTORY_LABELS[what])
    _title(ax, "Adaptive test: " + ("ability" if what == "theta" else "predicted accuracy"))
    ax.legend(fontsize=8)
    return ax


def plot_linking(drift: pd.DataFrame, transform: Mapping, ax=None):
    """Anchor difficulties of two calibrations before and after linking (``irtexam link``).

    ``drift`` is the link's drift table (drift.csv: b_old, b_new on the old scale, flag) and ``transform``
    its transform.json (A, B, method). Each anchor's new difficulty is drawn against its old one, on the
    new calibration's own scale (open) and mapped by b = A b_new + B (filled); after a good link the filled
    points lie on the diagonal. Anchors flagged as drifting are circled in red.
    """
    ax = _axes(ax)
    A, B = float(transform["A"]), float(transform["B"])
    b_old = drift["b_old"].to_numpy(dtype=float)
    linked = drift["b_new"].to_numpy(dtype=float)
    raw = (linked - B) / A
    ax.scatter(b_old, raw, facecolor="white", edgecolor="tab:grey", s=22, label="new scale (not linked)")
    ax.scatter(b_old, linked, color="tab:blue", s=22, label=f"linked: {A:.2f} b + {B:.2f}")
    flag = drift["flag"].to_numpy(dtype=bool) if "flag" in drift else np.zeros(len(drift), bool)
    if flag.any():
        ax.scatter(b_old[flag], linked[flag], facecolor="none", edgecolor="tab:red", s=90, lw=1.5,
                   label=f"drifting ({int(flag.sum())})")
    lo = float(np.nanmin([b_old.min(), raw.min(), linked.min()])) - 0.3
    hi = float(np.nanmax([b_old.max(), raw.max(), linked.max()])) + 0.3
    ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls=":")
    ax.set_xlabel("anchor difficulty $b$, old calibration")
    ax.set_ylabel("anchor difficulty $b$, new calibration")
    _title(ax, f"Linking by {transform.get('method', 'anchors')}", f"{len(drift)} anchor items")
    ax.legend(fontsize=8)
    return ax


def plot_ppc(observed: np.ndarray, replicated: np.ndarray, ax=None, what: str = "examinee scores"):
    """Posterior predictive check: observed totals (points) against replicated ones (interval).

    ``observed`` is (K,), ``replicated`` is (S, K); units sorted by observed value.
    """
    ax = _axes(ax)
    obs = np.asarray(observed, dtype=float)
    rep = np.asarray(replicated, dtype=float)
    order = np.argsort(obs)
    x = np.arange(obs.size)
    lo, mid, hi = np.quantile(rep[:, order], [0.05, 0.5, 0.95], axis=0)
    ax.fill_between(x, lo, hi, color="tab:blue", alpha=0.25, label="replicated 90%")
    ax.plot(x, mid, color="tab:blue", lw=1, label="replicated median")
    ax.scatter(x, obs[order], s=8, color="black", zorder=3, label="observed")
    ax.set_xlabel(f"{what} (sorted)")
    ax.set_ylabel("total correct")
    ax.set_title(f"Posterior predictive check: {what}")
    ax.legend(fontsize=8)
    return ax


def save(ax, path) -> str:
    """Save the figure of ``ax`` to ``path`` (PNG/SVG/PDF by extension; its folder is made), close it, return the
    path."""
    from pathlib import Path

    import matplotlib.pyplot as plt

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig = ax.figure
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return str(path)
