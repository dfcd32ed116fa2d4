"""Fit diagnostics for an IRT fit: item/person fit, predictive checks, flags.

All core functions are pure and take arrays: ``x`` the observed responses
(items x examinees, 0/1, NaN = missing) and ``p`` the fitted probabilities of the
same shape. :func:`diagnose` applies them to a fit result.

- Outfit mean square (unweighted): mean over observed cells of z^2 with
  z = (x - P) / sqrt(P (1 - P)). Expected value 1; > 1.3 means noisy, < 0.7 overfit.
- Infit mean square (information weighted): sum (x - P)^2 / sum P (1 - P).
- RMSE per item: sqrt(mean (x - P)^2) against the mean baseline sqrt(mean (x - xbar)^2),
  xbar the average exam performance (grand mean, the paper's Table 5 baseline).
- Yen's Q3: correlation over examinees of the residuals d = x - P of two items;
  a pair is flagged when Q3 - mean(Q3) > 0.2 (Christensen et al. 2017), a bound
  raised for small samples to the Bonferroni critical correlation (see q3_threshold).
- Posterior predictive check: replicate X_rep from the fit's joint posterior draws s;
  compare observed total scores per examinee and per item with the replicated ones
  (two-sided posterior predictive p-value).
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd


# Leaderboard-sized matrices: the predictive check replicates at most PPC_CELL_BUDGET cells in all (at least
# PPC_MIN_DRAWS draws), and Yen's Q3 (items x items matrices, ~8 of them) is computed up to Q3_MAX_ITEMS items.
# At 12,032 items x 2,211 models the check's 200 replicates were 43 GB and Q3's matrices 9 GB: `irtexam info` was
# killed for memory on a 24 GB machine.
PPC_CELL_BUDGET, PPC_MIN_DRAWS, Q3_MAX_ITEMS = 400_000_000, 20, 3000


def _mask(x: np.ndarray) -> np.ndarray:
    return ~np.isnan(x)


def fit_mean_squares(x: np.ndarray, p: np.ndarray, axis: int = 1, variance: np.ndarray | None = None) -> pd.DataFrame:
    """Infit and outfit mean squares along ``axis`` (1: per item, 0: per examinee).

    outfit = mean(z^2), z = (x - E[X])/sqrt(Var[X]); infit = sum (x - E[X])^2 / sum Var[X],
    both over observed cells. Binary: E[X] = P, Var[X] = P (1 - P) (the default when
    ``variance`` is None); graded items pass their own variance. Returns columns infit, outfit, n.
    """
    x = np.asarray(x, dtype=float)
    m = _mask(x)
    if variance is None:
        p = np.clip(np.asarray(p, dtype=float), 1e-6, 1 - 1e-6)
        var = p * (1 - p)
    else:
        p = np.asarray(p, dtype=float)
        var = np.maximum(np.asarray(variance, dtype=float), 1e-6)
    r2 = np.where(m, (np.nan_to_num(x) - p) ** 2, 0.0)
    v = np.where(m, var, 0.0)
    n = m.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        outfit = (r2 / var).sum(axis=axis) / n
        infit = r2.sum(axis=axis) / v.sum(axis=axis)
    return pd.DataFrame({"infit": infit, "outfit": outfit, "n": n})


def item_rmse(x: np.ndarray, p: np.ndarray, baseline: float | None = None) -> pd.DataFrame:
    """Per-item RMSE of the model, sqrt(mean (x - P)^2), and of the mean baseline.

    The baseline is the paper's (Table 5): one constant prediction for every cell, the
    average exam performance (grand mean of the observed scores, ``baseline`` when given),
    sqrt(mean_m (x_im - xbar)^2) per item. The same definition is used by the fit
    statistics (:func:`irtexam.irt.stats.fit_statistics`). Columns rmse, rmse_baseline.
    """
    x = np.asarray(x, dtype=float)
    m = _mask(x)
    n = m.sum(axis=1)
    xbar = float(np.nanmean(x)) if baseline is None else float(baseline)
    with np.errstate(invalid="ignore", divide="ignore"):
        rmse = np.sqrt(np.where(m, (np.nan_to_num(x) - p) ** 2, 0).sum(1) / n)
        base = np.sqrt(np.where(m, (np.nan_to_num(x) - xbar) ** 2, 0).sum(1) / n)
    return pd.DataFrame({"rmse": rmse, "rmse_baseline": base})


def yen_q3(x: np.ndarray, p: np.ndarray, min_pairs: int = 5) -> np.ndarray:
    """Yen's Q3 matrix: Pearson correlation of residuals x - P between item pairs.

    Uses examinees observed on both items (pairwise); NaN where fewer than
    ``min_pairs`` examinees or a residual is constant. Diagonal is NaN.
    """
    d = np.asarray(x, dtype=float) - np.asarray(p, dtype=float)
    m = _mask(d).astype(float)
    d0 = np.nan_to_num(d)
    n = m @ m.T
    s1 = d0 @ m.T  # sum of d_i over examinees also observed on j
    s2 = (d0 ** 2) @ m.T
    sij = d0 @ d0.T
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = sij / n - (s1 / n) * (s1.T / n)
        vi = s2 / n - (s1 / n) ** 2
        q3 = cov / np.sqrt(vi * vi.T)
    q3[n < min_pairs] = np.nan
    np.fill_diagonal(q3, np.nan)
    return q3


def q3_threshold(n_examinees: int, n_pairs: int, base: float = 0.2, alpha: float = 0.05) -> float:
    """Flagging threshold for Q3*: max(base, z / sqrt(n)) with z the Bonferroni critical
    value Phi^-1(1 - alpha / (2 n_pairs)): with few examinees, sampling noise alone
    (sd ~ 1/sqrt(n)) would push many pairs past the usual 0.2.
    """
    from scipy.stats import norm

    if n_examinees < 2 or n_pairs < 1:
        return base
    z = float(norm.ppf(1.0 - alpha / (2.0 * n_pairs)))
    return max(base, z / np.sqrt(n_examinees))


def local_dependence(x: np.ndarray, p: np.ndarray, items: list, threshold: float | None = None) -> pd.DataFrame:
    """Item pairs whose Q3 exceeds the average Q3 by more than a threshold (Q3* = Q3 - mean Q3).

    ``threshold`` defaults to :func:`q3_threshold` (0.2, raised for small samples).
    Pairs with an item whose observed responses are all the same (answered by nobody,
    or by everybody) carry no information: that item's residual is -P(theta) or
    1 - P(theta), a function of ability alone, so its Q3 with any other such item is
    ~1 by construction. They are left out (of the table and of mean Q3) and counted in
    ``.attrs['constant_items']``. Returns columns item_1, item_2, q3, q3_star, sorted
    by q3_star descending; ``.attrs['threshold']`` records the threshold used.
    """
    q3 = yen_q3(x, p)
    xa = np.asarray(x, dtype=float)
    constant = ~(np.fmax.reduce(xa, axis=1) > np.fmin.reduce(xa, axis=1))  # fmax skips NaN; unanswered: True
    q3[constant, :] = np.nan
    q3[:, constant] = np.nan
    iu = np.triu_indices(q3.shape[0], 1)
    vals = q3[iu]
    if threshold is None:
        threshold = q3_threshold(np.asarray(x).shape[1], int(np.isfinite(vals).sum()))
    if np.all(np.isnan(vals)):
        out = pd.DataFrame(columns=["item_1", "item_2", "q3", "q3_star"])
        out.attrs["threshold"] = threshold
        out.attrs["constant_items"] = int(constant.sum())
        return out
    star = vals - np.nanmean(vals)
    keep = np.where(star > threshold)[0]
    out = pd.DataFrame({"item_1": [items[i] for i in iu[0][keep]], "item_2": [items[j] for j in iu[1][keep]],
                        "q3": vals[keep], "q3_star": star[keep]})
    out = out.sort_values("q3_star", ascending=False, ignore_index=True)
    out.attrs["threshold"] = threshold
    out.attrs["constant_items"] = int(constant.sum())
    return out


def replicate(p_draws: np.ndarray, mask: np.ndarray, seed: int = 0) -> np.ndarray:
    """Replicated responses X_rep ~ Bernoulli(P_s), missing where the data are missing.

    ``p_draws`` has shape (S, items, examinees); returns the same shape, NaN where ~mask.
    """
    rng = np.random.default_rng(seed)
    rep = (rng.random(p_draws.shape) < p_draws).astype(float)
    rep[:, ~mask] = np.nan
    return rep


def ppc_scores(x: np.ndarray, p_draws: np.ndarray | None = None, seed: int = 0,
               replicates: np.ndarray | None = None) -> dict[str, pd.DataFrame | np.ndarray]:
    """Posterior predictive check of total scores per examinee and per item.

    ``replicates`` (S, items, examinees) are replicated response matrices (any score
    scale, NaN where missing), or an iterable of (items, examinees) ones taken one at a time
    (:meth:`irtexam.irt.result.FitResult.replicates`: only their totals are kept); without them
    binary replicates are drawn from ``p_draws``.
    For each unit, the observed total T_obs and replicated totals T_rep,s give the 90%
    band (5% and 95% quantiles of T_rep) and the two-sided p-value
    2 min(Pr(T_rep >= T_obs), Pr(T_rep <= T_obs)), capped at 1.
    Returns {'examinee': DataFrame, 'item': DataFrame, 'rep_examinee': (S, E), 'rep_item': (S, I)}.
    """
    x = np.asarray(x, dtype=float)
    rep = replicates if replicates is not None else replicate(np.asarray(p_draws, dtype=float), _mask(x), seed)
    sums = [(np.nansum(r, axis=0), np.nansum(r, axis=1)) for r in rep]   # an (S, I, E) array iterates by draw too
    totals = {"examinee": np.stack([e for e, _ in sums]), "item": np.stack([i for _, i in sums])}
    out: dict = {}
    for name, axis in (("examinee", 0), ("item", 1)):
        obs = np.nansum(x, axis=axis)
        reps = totals[name]
        hi = (reps >= obs).mean(axis=0)
        lo = (reps <= obs).mean(axis=0)
        out[name] = pd.DataFrame({"observed": obs, "replicated_mean": reps.mean(0),
                                  "replicated_low": np.quantile(reps, 0.05, axis=0),
                                  "replicated_high": np.quantile(reps, 0.95, axis=0),
                                  "ppp": np.minimum(1.0, 2 * np.minimum(hi, lo))})
        out[f"rep_{name}"] = reps
    return out


def ppc_calibration(ppc: Mapping[str, pd.DataFrame], unit: str = "examinee") -> dict[str, float]:
    """Share of observed totals outside their 90% replicated band, and replicated/observed mean total."""
    table = ppc[unit]
    outside = (table["observed"] < table["replicated_low"]) | (table["observed"] > table["replicated_high"])
    return {"outside_90": float(outside.mean()),
            "mean_ratio": float(table["replicated_mean"].mean() / max(table["observed"].mean(), 1e-12))}


def likely_wrong_key(x: np.ndarray, theta: np.ndarray, strong_quantile: float = 0.75,
                     min_strong: int = 3) -> pd.DataFrame:
    """Items most strong examinees get wrong: a hint that the answer key is wrong.

    Strong examinees are those with theta at or above the ``strong_quantile``
    quantile (at least ``min_strong`` of them). Per item: the proportion correct
    among strong examinees (p_strong) and the others (p_rest), and the item-rest
    correlation r_ir = corr(x_i, sum_{j != i} x_j) over examinees. ``wrong_key_flag``
    when the strong majority is wrong (p_strong < 0.5) and the item correlates
    negatively with the rest of the exam (r_ir < 0).
    """
    x = np.asarray(x, dtype=float)
    theta = np.asarray(theta, dtype=float)
    k = max(min_strong, int(np.ceil((1 - strong_quantile) * theta.size)))
    strong = np.zeros(theta.size, dtype=bool)
    strong[np.argsort(-theta)[:k]] = True
    with np.errstate(invalid="ignore", divide="ignore"):
        ps = np.nanmean(np.where(strong[None, :], x, np.nan), axis=1)
        pw = np.nanmean(np.where(~strong[None, :], x, np.nan), axis=1)
        # proportion-correct scale so that missing cells do not bias the rest score
        filled = np.where(np.isnan(x), np.nanmean(x, axis=1, keepdims=True), x)
        rest = filled.sum(0)[None, :] - filled
        xc = filled - filled.mean(1, keepdims=True)
        rc = rest - rest.mean(1, keepdims=True)
        r = (xc * rc).sum(1) / np.sqrt((xc ** 2).sum(1) * (rc ** 2).sum(1))
    flag = (ps < 0.5) & (r < 0)
    return pd.DataFrame({"p_strong": ps, "p_rest": pw, "item_rest_corr": r, "wrong_key_flag": flag})


def item_flags(items: pd.DataFrame, a_min: float = 0.65) -> pd.DataFrame:
    """Flags from item parameters: ``low_discrimination`` when a < a_min (default
    0.65, the upper end of Baker's (2001) "low" band) or the 90% interval of a
    reaches 0 (a_low <= 0.05, when present): such an item mostly measures noise.
    Shrinkage priors keep a pure-noise item's estimate above zero, hence a_min > 0.
    """
    low = items["a"] < a_min
    if "a_low" in items:
        low = low | (items["a_low"] <= 0.05)
    return pd.DataFrame({"low_discrimination": low}, index=items.index)


def diagnose(result, n_draws: int = 200, seed: int = 0, q3_min: float | None = None,
             draws: dict[str, np.ndarray] | None = None) -> dict[str, pd.DataFrame]:
    """All diagnostics for a fit result (see module doc), for every model kind.

    Residual statistics use the expected score E[X] and its variance Var[X] per cell
    (binary: P and P (1 - P); graded: from the category probabilities); the posterior
    predictive check replicates whole response matrices from the fit's joint posterior
    draws (:meth:`FitResult.replicate`), so its bands agree with the fit's intervals.
    Returns {'items': per-item table (infit, outfit, rmse, rmse_baseline, ppp, p_strong,
    flags...), 'examinees': per-examinee table (infit, outfit, observed/replicated score,
    ppp), 'local_dependence': flagged pairs, 'summary': dict with counts of every flag,
    'ppc': replicates}. ``draws`` is accepted for compatibility and ignored.
    """
    from ..irt import kinds

    rm = result.responses
    x = np.asarray(rm.values, dtype=float)
    items_df = result.items.loc[list(rm.items)]
    ex_df = result.examinees.loc[list(rm.examinees)]
    item_params = result.item_params()
    theta = ex_df["theta"].to_numpy(dtype=float)
    column = kinds.ItemParams(*(None if v is None else (np.asarray(v)[:, None] if k != "thresholds"
                                                        else np.asarray(v)[:, None, :])
                                for k, v in zip(item_params._fields, item_params)))
    probs = np.asarray(kinds.category_probs(theta[None, :], column, pairwise=True))       # (I, E, K+1)
    scores = np.arange(probs.shape[-1], dtype=float)
    p = probs @ scores
    variance = probs @ scores ** 2 - p ** 2
    per_item = fit_mean_squares(x, p, axis=1, variance=variance).set_axis(list(rm.items))
    baseline = float(np.nanmean(x))
    per_item = per_item.join(item_rmse(x, p, baseline).set_axis(list(rm.items)))
    notes = []
    n_ppc = int(min(n_draws, max(PPC_MIN_DRAWS, PPC_CELL_BUDGET // max(x.size, 1))))
    if n_ppc < n_draws:
        notes.append(f"the posterior predictive check uses {n_ppc} of the {n_draws} draws asked for: "
                     f"{x.shape[0]:,} items x {x.shape[1]:,} examinees, replicated draw by draw "
                     f"(irtexam.analysis.diagnostics.PPC_CELL_BUDGET cells in all)")
    if result.samples is not None:
        replicates = result.replicates(n=n_ppc, seed=seed)
    else:
        notes.append("no posterior draws: the predictive check replicates from the point estimate")
        rng = np.random.default_rng(seed)
        replicates = (np.where(_mask(x), kinds.simulate_responses(theta[None, :], column, rng, pairwise=True), np.nan)
                      for _ in range(n_ppc))
    ppc = ppc_scores(x, replicates=replicates)
    per_item["ppp"] = ppc["item"]["ppp"].to_numpy()
    scale = max(float(np.nanmax(x)) if np.isfinite(x).any() else 1.0, 1.0)
    wk = likely_wrong_key(x / scale, theta).set_axis(list(rm.items))
    per_item = per_item.join(wk).join(item_flags(items_df))
    per_item["misfit_flag"] = (per_item["outfit"] > 1.5) | (per_item["infit"] > 1.3)
    per_item.index.name = "item"
    per_ex = fit_mean_squares(x, p, axis=0, variance=variance).set_axis(list(rm.examinees))
    per_ex = per_ex.join(ppc["examinee"].set_axis(list(rm.examinees)))
    per_ex.index.name = "examinee"
    if x.shape[0] <= Q3_MAX_ITEMS:
        ld = local_dependence(x, p, list(rm.items), q3_min)
    else:
        ld = pd.DataFrame(columns=["item_1", "item_2", "q3", "q3_star"])
        ld.attrs.update(threshold=float("nan"), constant_items=0, skipped=True)
        notes.append(f"local dependence (Yen's Q3) not computed: {x.shape[0]:,} items make "
                     f"{x.shape[0] * (x.shape[0] - 1) // 2:,} pairs, past "
                     f"irtexam.analysis.diagnostics.Q3_MAX_ITEMS = {Q3_MAX_ITEMS:,} items")
    calibration = ppc_calibration(ppc)
    summary = {
        "n_items": len(per_item), "n_examinees": len(per_ex),
        "low_discrimination": int(per_item["low_discrimination"].sum()),
        "likely_wrong_key": int(per_item["wrong_key_flag"].sum()),
        "misfit_items": int(per_item["misfit_flag"].sum()),
        "local_dependence_pairs": None if ld.attrs.get("skipped") else int(len(ld)),
        "q3_threshold": None if ld.attrs.get("skipped") else float(ld.attrs["threshold"]),
        "rmse": float(np.sqrt(np.nanmean((x - p) ** 2))),
        "rmse_baseline": float(np.sqrt(np.nanmean((x - baseline) ** 2))),
        "baseline": baseline,
        "ppc_examinees_outside_90": calibration["outside_90"],
        "ppc_replicated_to_observed_mean": calibration["mean_ratio"],
        "notes": notes,
    }
    return {"items": per_item, "examinees": per_ex, "local_dependence": ld, "summary": summary,
            "ppc": ppc}
