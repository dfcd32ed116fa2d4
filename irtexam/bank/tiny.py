"""Tiny benchmarks: score many new models at once on a subset of a calibrated item bank.

As tinyBenchmarks (Polo et al., ICML 2024) and metabench do for LLM leaderboards: the bank is calibrated on
the models already evaluated (``irtexam fit``), a new model answers k of its N items (any subset, missing
allowed), and from those answers :func:`score_models` estimates, for every new model at once:

* the ability theta (EAP on a fixed grid, prior N(0, 1), the bank's own scale):
  w_m(q) ∝ phi(theta_q) mean_s prod_{i in O_m} P_is(theta_q)^y_mi (1 - P_is(theta_q))^(1 - y_mi) over the
  bank's S posterior draws s of the answered items (default S = 1, the point estimates; ``item_draws``),
  theta_hat = sum_q w_m(q) theta_q, with its posterior sd and 90% posterior interval;
* ``accuracy``, the IRT prediction of the whole-bank accuracy (tinyBenchmarks' p-IRT):
  A_m = (sum_{i in O_m} y_mi + sum_{i not in O_m} P_i(theta_m)) / N, whose predictive distribution mixes
  the ability posterior w_m with the binomial noise of the unseen items (mean S_m(q) = sum_unseen P_i,
  variance V_m(q) = sum_unseen P_i (1 - P_i)) and, where the bank keeps its calibration responses, a
  normal misfit term v_misfit (:func:`calibration_errors`, measured once per call on the items that at least
  half of the new models answered); its 90% interval is read from 2,000 draws
  (theta_q from w_m, then a normal draw of the unseen score);
* ``subset_accuracy``, the plain (or weighted, ``weights``) accuracy on the answered items,
  s_m = sum_{i in O_m} u_i y_mi / sum_{i in O_m} u_i, with the finite-population sampling variance
  s_m (1 - s_m) (sum u_i^2 / (sum u_i)^2) (N - k) / (N - 1) plus the squared bias that the calibration
  models show for this subset (an information-selected subset is not a random sample);
* ``accuracy_blend``, the gp-IRT-style blend lambda_m A_m + (1 - lambda_m) s_m with
  lambda_m = (v_s - c) / (v_A + v_s - 2 c) clipped to [0, 1] (the mean-squared-error optimal weight of two
  correlated estimators: v_A and v_s their error variances, c their covariance from the calibration
  models' error correlation), and its normal 90% interval of variance
  lambda^2 v_A + (1 - lambda)^2 v_s + 2 lambda (1 - lambda) c. The IRT prediction dominates where it is
  reliable (many unseen items, a bank that fits); the subset accuracy takes over where the IRT
  prediction's misfit is larger than the subset's sampling error.

A bank read from a fit (folder or FitResult) with posterior draws uses empirical-Bayes slopes
(:func:`shrink_slopes`: the fit's log a shrunk toward the spread of the bank's own slopes), so that the items an
information rule picks for their large estimated a are not over-trusted.

``estimator="wle"`` reports Warm's weighted likelihood estimate instead of the EAP (:func:`wle_summary`).
Everything is vectorised over models (one (E, k) x (k, Q) product for the likelihood, one (E, N) x (N, Q) for
the unseen items): 1,000 models on 100 items of a 3,000-item bank take 1.4-2.1 s, the misfit replay on the
calibration models included (benchmarks/tiny_scoring.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..irt import kinds
from ..responses import ResponseMatrix
from .itembank import describe_items

LOW_Q, HIGH_Q = 0.05, 0.95
Z90 = 1.6448536269514722
GRID = np.linspace(-6.0, 6.0, 241)
ACCURACY_DRAWS = 2000
MAX_CALIBRATION_MODELS = 500
ITEM_DRAWS = 50

__all__ = ["TinyBank", "score_models", "shrink_slopes", "calibration_errors", "answered_loglik", "grid_posterior", "Z90"]


@dataclass
class TinyBank:
    """A calibrated bank for tiny-benchmark scoring: item ids and point parameters (I,), and optionally
    the calibration responses (I, E) and the calibration models' abilities (E,) (for the misfit term and
    for selection by the ability distribution)."""

    ids: tuple[str, ...]
    params: kinds.ItemParams
    calibration: np.ndarray | None = None
    thetas: np.ndarray | None = None
    source: str | None = None
    draws: kinds.ItemParams | None = None     # (S, I) posterior draws of the items, integrated by the EAP
    shrinkage: dict | None = None             # the empirical-Bayes slope prior (:func:`shrink_slopes`)

    @property
    def n_items(self) -> int:
        """Number of items N."""
        return len(self.ids)

    def __repr__(self) -> str:
        parts = [describe_items(self.params)]
        if self.draws is not None:
            parts.append(f"{int(np.shape(self.draws.a)[0])} posterior draws")
        if self.calibration is not None:
            parts.append(f"calibrated on {np.shape(self.calibration)[1]} models")
        if self.shrinkage and self.shrinkage.get("applied"):
            parts.append(f"empirical-Bayes slopes (log a ~ N({self.shrinkage['mu']:.2f}, {self.shrinkage['tau']:.2f}^2))")
        return f"TinyBank: {'; '.join(parts)}{'' if self.source is None else ', from ' + self.source}"

    def prob(self, grid: np.ndarray = GRID) -> np.ndarray:
        """P_i(theta_q), (Q, I), clipped to [1e-9, 1 - 1e-9]."""
        return np.clip(np.asarray(kinds.prob_correct(np.asarray(grid, float), self.params)), 1e-9, 1 - 1e-9)

    @classmethod
    def coerce(cls, bank: Any, shrink: bool = True) -> "TinyBank":
        """A TinyBank from a fit folder, a FitResult, an :class:`~irtexam.bank.itembank.ItemBank`, an items
        DataFrame (index item ids, columns a, b[, c]) or a TinyBank; a one-line error for anything else.
        From a fit (folder or FitResult) with posterior draws the slopes are the empirical-Bayes posterior means
        of :func:`shrink_slopes` (``shrink=False``: the fit's own estimates)."""
        if isinstance(bank, TinyBank):
            return bank
        if isinstance(bank, (str, Path)):
            from .itembank import load_fit_checked

            out = cls.coerce(load_fit_checked(bank), shrink)
            out.source = str(bank)
            return out
        if isinstance(bank, pd.DataFrame):
            params = kinds.from_table(bank)
            if params.graded:
                raise IrtexamError("tiny benchmarks need binary items (1PL/2PL/3PL); the items table is graded")
            return cls(tuple(map(str, bank.index)), params)
        from .itembank import ItemBank

        if isinstance(bank, ItemBank):
            draws = kinds.ItemParams(*bank.draws[:3]) if bank.n_draws > 1 else None
            return cls(bank.ids, kinds.ItemParams(*bank.params[:3]), bank.calibration, None, bank.source, draws)
        if hasattr(bank, "items") and hasattr(bank, "examinees"):
            item_bank = ItemBank.from_fit(bank, draws=ITEM_DRAWS)
            thetas = bank.examinees["theta"].to_numpy(float) if "theta" in bank.examinees else None
            draws = kinds.ItemParams(*item_bank.draws[:3]) if item_bank.n_draws > 1 else None
            params = kinds.ItemParams(*item_bank.params[:3])
            shrinkage = None
            if draws is not None and shrink:
                loc, scale = fit_slope_prior(bank)
                a, shrinkage = shrink_slopes(np.asarray(params.a, float), np.asarray(draws.a, float), loc, scale)
                draws = kinds.ItemParams(np.asarray(draws.a) * (a / np.asarray(params.a))[None, :], *draws[1:])
                params = kinds.ItemParams(a, *params[1:])
            return cls(item_bank.ids, params, item_bank.calibration, thetas, None, draws, shrinkage)
        raise IrtexamError(f"tiny: the bank must be a fit folder, a FitResult, an ItemBank or an items table "
                           f"(a, b, c), got {type(bank).__name__}")


def fit_slope_prior(fit: Any) -> tuple[float, float]:
    """The centre and sd of the normal prior on log a that the fit used (``fit_stats["item_prior"]``'s a_median
    and the model's log_a_scale; sd infinite for ``item_prior="none"``)."""
    spec = getattr(fit, "spec", None)
    summary = (getattr(fit, "fit_stats", None) or {}).get("item_prior") or {}
    if spec is None or getattr(spec, "item_prior", "none") == "none":
        return 0.0, float("inf")
    centre = summary.get("a_median")
    loc = float(np.log(centre)) if centre else float(getattr(spec, "log_a_loc", 0.0))
    return loc, float(spec.log_a_scale)


def shrink_slopes(a: np.ndarray, a_draws: np.ndarray, prior_loc: float, prior_scale: float
                  ) -> tuple[np.ndarray, dict[str, float]]:
    """Empirical-Bayes slopes: the items' log a shrunk toward the bank's own distribution of slopes.

    The fit reports x_i = log a_hat_i, the mode of a posterior of variance v_i (the variance of its draws of
    log a) under its fixed prior log a ~ N(mu_0, s_0^2) (sd 0.5, wider than most banks' spread of slopes). Its
    likelihood part has precision lambda_i = 1 / v_i - 1 / s_0^2 and centre l_i = (x_i / v_i - mu_0 / s_0^2) /
    lambda_i. The bank's slope distribution log a ~ N(mu, tau^2) is estimated from all items by maximum
    likelihood of l_i ~ N(mu, tau^2 + 1 / lambda_i) (fixed-point iterations), and each slope is replaced by
    its posterior mean under it, exp((lambda_i l_i + mu / tau^2) / (lambda_i + 1 / tau^2)). Where the bank's
    spread is wider than the fit's prior (tau > s_0: the fit's modes are over-shrunk rather than over-spread, as
    the em fit of data/real_run, tau 1.4) the slopes are kept (``applied`` False): they are never pulled apart.

    Why: the information and mfi rules pick the items of largest a_hat, whose noise is then mostly upward
    (the winner's curse; on 200 models x 3,000 items of a 2PL the 100 info items' a_hat were 7% above their true
    slopes, which squeezed the held-out abilities and made the accuracy intervals cover 84%). A posterior mean
    under the right prior is unbiased given a_hat, hence given any selection made on a_hat. Returns the shrunk
    a (I,) and {"mu", "tau", "items", "applied"}."""
    x = np.log(np.maximum(a, 1e-12))
    v = np.maximum(np.var(np.log(np.maximum(a_draws, 1e-12)), axis=0, ddof=1), 1e-8)
    prior_precision = 0.0 if not np.isfinite(prior_scale) else 1.0 / prior_scale ** 2
    lam = np.maximum(1.0 / v - prior_precision, 1e-3)
    ell = (x / v - prior_loc * prior_precision) / lam
    ok = np.isfinite(ell)
    if ok.sum() < 10:
        return a, {"mu": float("nan"), "tau": float("nan"), "items": int(ok.sum()), "applied": False}
    mu, tau2 = float(np.mean(ell[ok])), max(float(np.var(ell[ok]) - np.mean(1.0 / lam[ok])), 1e-4)
    for _ in range(100):
        wt = 1.0 / (tau2 + 1.0 / lam[ok])
        mu = float(np.sum(wt * ell[ok]) / wt.sum())
        new = max(float(np.sum(wt ** 2 * ((ell[ok] - mu) ** 2 - 1.0 / lam[ok])) / np.sum(wt ** 2)), 1e-4)
        if abs(new - tau2) < 1e-10:
            tau2 = new
            break
        tau2 = new
    if np.isfinite(prior_scale) and tau2 > prior_scale ** 2:
        return a, {"mu": mu, "tau": float(np.sqrt(tau2)), "items": int(ok.sum()), "applied": False}
    post = np.where(ok, (lam * ell + mu / tau2) / (lam + 1.0 / tau2), x)
    return np.exp(post), {"mu": mu, "tau": float(np.sqrt(tau2)), "items": int(ok.sum()), "applied": True}


def align(bank: TinyBank, responses: Any) -> tuple[np.ndarray, list[str], str]:
    """The new models' answers on the bank's items, (E, N) with NaN for unseen items, their ids and the
    source name. Items the bank lacks are an error (they cannot be scored); missing cells are allowed."""
    rm = ResponseMatrix.coerce(responses)   # a path: long or wide (ResponseMatrix.read)
    source = rm.source or "the responses"
    if not rm.is_binary:
        raise IrtexamError(f"{source}: tiny benchmarks need 0/1 answers; the table has graded scores")
    position = {item: j for j, item in enumerate(bank.ids)}
    unknown = [i for i in rm.items if i not in position]
    if unknown:
        raise IrtexamError(f"{source}: {len(unknown)} of {rm.n_items} items are not in the bank "
                           f"{bank.source or ''} (e.g. '{unknown[0]}'; bank ids look like '{bank.ids[0]}'): "
                           f"score only the bank's items")
    y = np.full((rm.n_examinees, bank.n_items), np.nan)
    y[:, [position[i] for i in rm.items]] = rm.values.T
    return y, list(rm.examinees), source


def answered_loglik(y: np.ndarray, bank: TinyBank, grid: np.ndarray = GRID, item_draws: bool = True
                    ) -> np.ndarray:
    """log L_m(theta_q) of every model's answers, (E, Q): sum over answered items of y log P + (1 - y) log(1 - P)
    (missing answers contribute nothing). With the bank's item draws (``item_draws``) the items are integrated
    out: log L = log mean_s exp(log L_s), L_s under draw s (the adaptive test's rule, :mod:`.cat`). Only the
    columns someone answered enter the products."""
    seen = ~np.isnan(y)
    cols = np.flatnonzero(seen.any(axis=0))
    y1 = np.where(seen[:, cols], y[:, cols], 0.0)
    y0 = np.where(seen[:, cols], 1.0 - y1, 0.0)

    def loglik(params: kinds.ItemParams) -> np.ndarray:
        p = np.clip(np.asarray(kinds.prob_correct(grid, params.subset(cols))), 1e-9, 1 - 1e-9)
        return y1 @ np.log(p).T + y0 @ np.log1p(-p).T

    if not item_draws or bank.draws is None:
        return loglik(bank.params)
    draws = bank.draws
    total = None
    for s in range(int(np.shape(draws.a)[0])):
        ls = loglik(kinds.ItemParams(*(None if v is None else np.asarray(v)[s] for v in draws)))
        total = ls if total is None else np.logaddexp(total, ls)
    return total - np.log(np.shape(draws.a)[0])


def grid_posterior(loglik: np.ndarray, prior_mean: float = 0.0, prior_sd: float = 1.0, grid: np.ndarray = GRID
                   ) -> np.ndarray:
    """Posterior weights over the grid, (E, Q): w ∝ exp(log L) phi((theta - prior_mean) / prior_sd), normalised
    per model; ``loglik`` from :func:`answered_loglik`."""
    logw = loglik - 0.5 * ((grid - prior_mean) / prior_sd) ** 2
    logw = logw - logw.max(axis=1, keepdims=True)
    w = np.exp(logw)
    return w / w.sum(axis=1, keepdims=True)


def posterior_summary(w: np.ndarray, grid: np.ndarray = GRID) -> dict[str, np.ndarray]:
    """EAP, posterior sd and the 5% / 95% quantiles (linear interpolation of the cdf) of (E, Q) weights."""
    mean = w @ grid
    sd = np.sqrt(np.maximum(w @ grid ** 2 - mean ** 2, 0.0))
    cdf = np.cumsum(w, axis=1)
    low = np.array([np.interp(LOW_Q, c, grid) for c in cdf])
    high = np.array([np.interp(HIGH_Q, c, grid) for c in cdf])
    return {"theta": mean, "theta_sd": sd, "theta_low": low, "theta_high": high}


def wle_summary(y: np.ndarray, bank: TinyBank, loglik: np.ndarray, grid: np.ndarray = GRID
                ) -> dict[str, np.ndarray]:
    """Warm's weighted likelihood estimate on the grid: theta maximising log L(theta) + 1/2 log I(theta), with
    I(theta) = sum over the answered items of I_i(theta) (refined by a parabola through the best grid point and
    its neighbours), sd = 1 / sqrt(I(theta_hat)) and the 90% Wald interval theta_hat -+ 1.645 sd. Nearly
    unbiased (no shrinkage toward the prior mean), finite for all-right or all-wrong answers."""
    seen = ~np.isnan(y)
    cols = np.flatnonzero(seen.any(axis=0))
    info = seen[:, cols].astype(float) @ np.asarray(kinds.information(grid, bank.params.subset(cols))).T  # (E, Q)
    obj = loglik + 0.5 * np.log(np.maximum(info, 1e-300))
    j = np.clip(np.argmax(obj, axis=1), 1, grid.size - 2)
    rows = np.arange(y.shape[0])
    y0, y1, y2 = obj[rows, j - 1], obj[rows, j], obj[rows, j + 1]
    curve = y0 - 2 * y1 + y2
    step = np.where(curve < 0, 0.5 * (y0 - y2) / np.where(curve < 0, curve, -1.0), 0.0)
    theta = grid[j] + np.clip(step, -0.5, 0.5) * (grid[1] - grid[0])
    sd = 1.0 / np.sqrt(np.maximum(np.array([np.interp(t, grid, row) for t, row in zip(theta, info)]), 1e-12))
    return {"theta": theta, "theta_sd": sd, "theta_low": theta - Z90 * sd, "theta_high": theta + Z90 * sd}


def _irt_prediction(y: np.ndarray, w: np.ndarray, p: np.ndarray, misfit_var: float, seed: int
                    ) -> dict[str, np.ndarray]:
    """Predicted whole-bank accuracy per model (module doc): mean, variance and 90% interval."""
    n = y.shape[1]
    seen = ~np.isnan(y)
    observed = np.nansum(y, axis=1)
    unseen = (~seen).astype(float)
    s = unseen @ p.T                                        # (E, Q) expected unseen score
    v = unseen @ (p * (1 - p)).T                            # (E, Q) its binomial variance
    mean_q = (observed[:, None] + s) / n
    var_q = v / n ** 2 + misfit_var
    mean = (w * mean_q).sum(axis=1)
    var = np.maximum((w * (var_q + mean_q ** 2)).sum(axis=1) - mean ** 2, 0.0)
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(w, axis=1)
    cdf[:, -1] = 1.0
    u = rng.random((y.shape[0], ACCURACY_DRAWS))
    pick = np.minimum(np.stack([np.searchsorted(c, uu) for c, uu in zip(cdf, u)]), w.shape[1] - 1)
    rows = np.arange(y.shape[0])[:, None]
    draws = mean_q[rows, pick] + np.sqrt(var_q[rows, pick]) * rng.standard_normal(pick.shape)
    low, high = np.quantile(np.clip(draws, 0.0, 1.0), [LOW_Q, HIGH_Q], axis=1)
    return {"accuracy": mean, "accuracy_var": var, "accuracy_low": low, "accuracy_high": high}


def _subset_accuracy(y: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted accuracy on the answered items and its finite-population sampling variance (module doc)."""
    n = y.shape[1]
    seen = ~np.isnan(y) & (weights[None, :] > 0)   # items of weight 0 are not in the subset
    u = np.where(seen, weights[None, :], 0.0)
    total = np.maximum(u.sum(axis=1), 1e-150)   # squared below: no underflow to 0 / 0 for a model without answers
    s = (u * np.nan_to_num(y)).sum(axis=1) / total
    k = seen.sum(axis=1)
    design = (u ** 2).sum(axis=1) / total ** 2 * np.where(n > 1, (n - k) / max(n - 1, 1), 0.0)
    # s (1 - s) with a half-item floor: a model with all answers right still has sampling error
    spread = np.maximum(s * (1 - s), 0.5 / np.maximum(k, 1) * (1 - 0.5 / np.maximum(k, 1)))
    return np.where(k > 0, s, np.nan), spread * design


def calibration_errors(bank: TinyBank, answered: np.ndarray, weights: np.ndarray, prior_mean: float = 0.0,
                       prior_sd: float = 1.0, seed: int = 0, item_draws: bool = False) -> dict[str, float] | None:
    """What the bank's own calibration models say about the two estimators on the items ``answered`` (N,):
    each calibration model that answered at least 90% of the bank (up to 500) is scored from its answers on those
    items only, and
    e_A = A - T, e_s = s - T against its actual whole-bank accuracy T. Returns ``misfit_var`` =
    max(mean e_A^2 - mean predictive var, 0), ``subset_bias2`` = max(mean e_s^2 - mean sampling var, 0), and
    ``correlation`` of (e_A, e_s); None without calibration responses (or fewer than 10 such models). T is the
    accuracy on the items a model answered; the prediction counts its unanswered items as unseen."""
    cal = bank.calibration
    if cal is None:
        return None
    complete = np.flatnonzero(np.isnan(cal).mean(axis=0) <= 0.1)
    if complete.size < 10 or answered.sum() == 0 or answered.all():
        return None
    if complete.size > MAX_CALIBRATION_MODELS:
        complete = np.sort(np.random.default_rng(0).choice(complete, MAX_CALIBRATION_MODELS, replace=False))
    full = cal[:, complete].T                               # (E, N), NaN where not answered
    truth = np.nanmean(full, axis=1)
    y = np.where(answered[None, :], full, np.nan)
    p = bank.prob()
    w = grid_posterior(answered_loglik(y, bank, item_draws=item_draws), prior_mean, prior_sd)
    irt = _irt_prediction(y, w, p, 0.0, seed)
    s, s_var = _subset_accuracy(y, weights)
    ok = np.isfinite(s)                                     # models that answered some of the items
    e_a, e_s = irt["accuracy"][ok] - truth[ok], s[ok] - truth[ok]
    irt["accuracy_var"], s_var = irt["accuracy_var"][ok], s_var[ok]
    corr = float(np.corrcoef(e_a, e_s)[0, 1]) if e_a.std() > 0 and e_s.std() > 0 else 0.0
    return {"misfit_var": float(max(np.mean(e_a ** 2) - np.mean(irt["accuracy_var"]), 0.0)),
            "subset_bias2": float(max(np.mean(e_s ** 2) - np.mean(s_var), 0.0)),
            "correlation": corr, "models": int(complete.size)}


def score_models(bank: Any, responses: Any, *, weights: Any = None, prior_mean: float = 0.0,
                 prior_sd: float = 1.0, misfit: bool = True, item_draws: bool = False, estimator: str = "eap",
                 seed: int = 0) -> pd.DataFrame:
    """Score many new models at once on a calibrated bank: abilities and whole-bank accuracy, with 90% intervals.

    Formulas in the module doc (:mod:`irtexam.bank.tiny`): theta by EAP on a 241-point grid (N(prior_mean,
    prior_sd^2) prior, the bank's scale); ``accuracy`` = (observed correct + sum over unseen items of
    P_i(theta)) / N with a predictive interval that propagates the ability posterior, the unseen items'
    binomial noise and (``misfit``, when the bank keeps calibration responses) the misfit variance measured on
    the calibration models; ``subset_accuracy`` = the (weighted) accuracy on the answered items;
    ``accuracy_blend`` = lambda accuracy + (1 - lambda) subset_accuracy with the error-variance weight lambda.

    Args:
        bank: a fit folder (``irtexam fit ... --out DIR``), a FitResult, an ItemBank, an items table or a
            :class:`TinyBank`.
        responses: the new models' answers: a ResponseMatrix, a long table path, or a DataFrame (wide: rows
            models, columns item ids; or long: item, examinee, response). Any subset of the bank's items;
            missing cells allowed.
        weights: per-item weights of the subset accuracy (tinyBenchmarks' anchor weights: a Series indexed by
            item id, a mapping, or the ``subset.csv`` written by :func:`irtexam.bank.subset.write_subset`, or the
            folder it was written into); default equal weights.
        prior_mean: the mean of the ability prior on the bank's scale (default 0, the calibration's).
        prior_sd: its sd (default 1).
        misfit: add the misfit measured on the calibration models (:func:`calibration_errors`).
        item_draws: integrate the answered items' parameters over the bank's posterior draws (50 draws of a fit;
            :func:`answered_loglik`) instead of using their point estimates. Off by default: on a leaderboard
            (200 models x 3,000 items) it widened the ability intervals by 1% and changed nothing else; on
            data/real_run (48 calibration models) the mixture over 50 draws is dominated by a few of them and
            made the abilities noisier (mean |theta error| 0.08 -> 0.12 at 50 info items).
        estimator: the reported ability: "eap" (default, the posterior mean with its 90% posterior interval;
            shrunk toward the prior mean by the reliability) or "wle" (Warm's weighted likelihood estimate with a
            90% Wald interval, :func:`wle_summary`: slope 1 on the true ability, noisier). The predicted
            accuracy always integrates the posterior.
        seed: seeds the accuracy draws.

    Returns:
        One row per model (index ``model``): n_answered, theta, theta_sd, theta_low, theta_high, accuracy,
        accuracy_sd, accuracy_low, accuracy_high, subset_accuracy (+ _sd, _low, _high), accuracy_blend
        (+ _sd, _low, _high), blend_weight (lambda). ``attrs["calibration"]`` holds the misfit numbers,
        ``attrs["slopes"]`` the empirical-Bayes slope prior (:func:`shrink_slopes`; empty when none).
    """
    tb = TinyBank.coerce(bank)
    if not prior_sd > 0:
        raise IrtexamError(f"tiny: prior_sd (--prior-sd) must be positive, got {prior_sd}")
    y, models, _ = align(tb, responses)
    unanswered = [m for m, row in zip(models, y) if np.isnan(row).all()]
    if unanswered:
        from ..warning_types import DataWarning, Message, emit

        emit([Message(f"{len(unanswered)} model(s) answered none of the bank's items (e.g. '{unanswered[0]}'): their "
                      "ability and accuracy are the prior's (n_answered 0)", DataWarning)])
    u = _item_weights(tb, weights)
    p = tb.prob()
    loglik = answered_loglik(y, tb, item_draws=item_draws)
    w = grid_posterior(loglik, prior_mean, prior_sd)
    if estimator not in ("eap", "wle"):
        raise IrtexamError(f"tiny: estimator (--estimator) must be eap or wle, got {estimator!r}")
    summary = posterior_summary(w) if estimator == "eap" else wle_summary(y, tb, loglik)
    out = pd.DataFrame(summary, index=pd.Index(models, name="model"))
    out.insert(0, "n_answered", (~np.isnan(y)).sum(axis=1))
    answered = (~np.isnan(y)).mean(axis=0) >= 0.5
    cal = calibration_errors(tb, answered, u, prior_mean, prior_sd, seed, item_draws) if misfit else None
    misfit_var = cal["misfit_var"] if cal else 0.0
    irt = _irt_prediction(y, w, p, misfit_var, seed)
    s, s_var = _subset_accuracy(y, u)
    s_var = s_var + (cal["subset_bias2"] if cal else 0.0)
    v_a = irt["accuracy_var"]
    cov = (cal["correlation"] if cal else 0.0) * np.sqrt(v_a * s_var)
    lam = np.clip((s_var - cov) / np.maximum(v_a + s_var - 2 * cov, 1e-300), 0.0, 1.0)
    blend = lam * irt["accuracy"] + (1 - lam) * np.nan_to_num(s, nan=0.0)
    blend = np.where(np.isnan(s), irt["accuracy"], blend)
    b_sd = np.sqrt(np.maximum(lam ** 2 * v_a + (1 - lam) ** 2 * s_var + 2 * lam * (1 - lam) * cov, 0.0))
    out["accuracy"] = irt["accuracy"]
    out["accuracy_sd"] = np.sqrt(v_a)
    out["accuracy_low"], out["accuracy_high"] = irt["accuracy_low"], irt["accuracy_high"]
    out["subset_accuracy"] = s
    out["subset_accuracy_sd"] = np.sqrt(s_var)
    out["subset_accuracy_low"] = np.clip(s - Z90 * np.sqrt(s_var), 0, 1)
    out["subset_accuracy_high"] = np.clip(s + Z90 * np.sqrt(s_var), 0, 1)
    out["accuracy_blend"] = blend
    out["accuracy_blend_sd"] = b_sd
    out["accuracy_blend_low"] = np.clip(blend - Z90 * b_sd, 0, 1)
    out["accuracy_blend_high"] = np.clip(blend + Z90 * b_sd, 0, 1)
    out["blend_weight"] = lam
    out.attrs["calibration"] = cal or {}
    out.attrs["slopes"] = tb.shrinkage or {}
    out.attrs["bank_items"] = tb.n_items
    out.attrs["answered_outside_weights"] = int(((~np.isnan(y)).any(axis=0) & (u == 0)).sum())  # 0 without weights
    return out


def _item_weights(bank: TinyBank, weights: Any) -> np.ndarray:
    """Per-item weights (N,) from None (ones), a Series / mapping item -> weight, or a subset.csv path (or the folder
    ``irtexam tiny select --out`` wrote it into). Items the weights do not name weigh 0: answered, they inform the
    ability and the IRT prediction but not the anchor-weighted subset accuracy (a model that answered the whole bank
    would otherwise have its anchors' cluster shares, which sum to 1, swamped by weights of 1)."""
    if weights is None:
        return np.ones(bank.n_items)
    source = "weights"
    if isinstance(weights, (str, Path)):
        source = str(weights)
        if Path(weights).is_dir():
            if not (Path(weights) / "subset.csv").is_file():
                raise IrtexamError(f"{source}: a folder without subset.csv; pass the folder `irtexam tiny select "
                                   f"--out` wrote, or its subset.csv")
            weights = Path(weights) / "subset.csv"
        try:
            frame = pd.read_csv(weights)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError, EOFError) as exc:
            raise IrtexamError(f"{source}: not a subset.csv of `irtexam tiny select` ({type(exc).__name__}: "
                               f"{' '.join(str(exc).split())[:120]})") from None
        if not {"item", "weight"} <= set(frame.columns):
            raise IrtexamError(f"{source}: needs columns item, weight (the subset.csv of `irtexam tiny select`)")
        weights = dict(zip(frame["item"].astype(str), frame["weight"].astype(float)))
    mapping = dict(weights.items()) if hasattr(weights, "items") else None
    if mapping is None:
        raise IrtexamError(f"{source}: weights must map item ids to numbers")
    out = np.array([float(mapping.get(i, 0.0)) for i in bank.ids])
    if not np.all(np.isfinite(out)) or (out < 0).any():
        bad = next(i for i, v in zip(bank.ids, out) if not (np.isfinite(v) and v >= 0))
        raise IrtexamError(f"{source}: item '{bad}': weight must be a non-negative number")
    return out

