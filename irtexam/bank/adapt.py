"""Computerised adaptive testing (CAT) on a calibrated item bank.

A calibrated fit (``irtexam fit ... --out FITDIR``) is an item bank: its item
parameters (and their posterior draws) let a new examinee (a new RAG pipeline) be
measured with a few items (chosen by `selection`: by default one random item per stratum of similar items).

Ability posterior (exact, on a grid): with prior theta ~ N(0, 1) (the fit's ability
scale has mean 0 and sd 1 across its examinees) and S joint posterior draws of the
item parameters, the posterior after answers y_1..y_n is

    p(theta, s | y) ∝ phi(theta) * prod_j P_j(y_j | theta, item_s),   s = 1..S,

on a grid of abilities, so the item-parameter uncertainty is integrated out (the
marginal over s). The estimate is the EAP (posterior mean) or the MAP (posterior
mode on the grid); ``theta_sd`` is the posterior sd and the 90% interval its 5% and
95% quantiles.

Item selection: ``"stratified"`` (default) stratified random sampling of items: the bank is cut
into k = ``max_items`` strata (k-means of the items' correctness vectors over the calibration
examinees, or difficulty quantiles without them) and one random item is drawn from each, largest
stratum first; ``"mfi"`` maximum Fisher information I_j(theta_hat) at the current
estimate (:func:`irtexam.irt.kinds.information`); ``"accuracy"`` the item whose answer
is expected to shrink the posterior variance of the predicted whole-exam accuracy
most; ``"random"`` uniform; ``"anchors"`` a fixed tinyBenchmarks-style set of representative items
(k-means of the items' correctness vectors in the calibration data, k = ``max_items``, largest
cluster first), scored by the same predictor. Exposure control: randomesque (pick uniformly among the
``randomesque`` best items). Content balancing: with item levels (e.g. Bloom levels)
the next item comes from the level whose share of administered items lags its share
of the bank most (Kingsbury-Zara).

Stopping: posterior sd <= ``se_target`` (after ``min_items``), ``max_items`` reached,
or no item left.

Predicted whole-exam accuracy (N bank items, administered set A):

    acc = (sum_{j in A} y_j + sum_{j not in A} X_j) / N,   X_j ~ Bernoulli(P_j(theta)),

whose predictive distribution mixes, over the posterior of (theta, s), the mean
m(theta, s) = (sum_A y_j + sum_{not A} P_j) / N and the binomial variance
sum_{not A} P_j (1 - P_j) / N^2, plus a misfit variance v_k (below); the 90% interval is taken
from draws of that mixture.

Model misfit: an examinee's whole-exam score need not lie on the test characteristic curve at its
ability (on data/real_run the prediction from all 202 answers is off by 0.037 on average for a
held-out pipeline: the pipelines of one LLM share item-level deviations a unidimensional model does
not have), and adaptive selection by information amplifies it. :func:`misfit_curve` replays the same
procedure on the bank's calibration examinees and takes v_k = mean squared error of their predicted
accuracy after k items minus the mean predictive variance (floored at 0).

Why stratified is the default: in the leave-one-pipeline-out replay on data/real_run, maximum
information gives a whole-exam accuracy MAE of about 0.05 at 10-30 items (worse than k random items,
about 0.03): its items (high a, near the ability) fit the ability but carry the examinee's misfit, and
the prediction of the other ~170 items inherits it. Items drawn at random from strata of the bank
spread the misfit like the exam does (experiments/adapt_replay.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..irt import kinds

SELECTIONS = ("mfi", "astrat", "accuracy", "random", "anchors", "stratified")
DEFAULT_SELECTION = "stratified"
ESTIMATORS = ("eap", "map")
LOW_Q, HIGH_Q = 0.05, 0.95


# ----------------------------------------------------------------------------- the bank
@dataclass
class ItemBank:
    """Calibrated binary items: ids, point estimates and (S, I) joint posterior draws.

    ``draws`` is an :class:`~irtexam.irt.kinds.ItemParams` whose arrays have shape (S, I)
    (S = 1 when the fit has no draws: the point estimates only).
    """

    ids: tuple[str, ...]
    params: kinds.ItemParams
    draws: kinds.ItemParams
    source: str | None = None
    calibration: np.ndarray | None = None     # (I, E) calibration responses (NaN missing), for ``anchors``
    cache: dict = field(default_factory=dict, repr=False, compare=False)   # misfit curves, item orders

    @property
    def n_items(self) -> int:
        return len(self.ids)

    @property
    def n_draws(self) -> int:
        return int(np.shape(self.draws.a)[0])

    def point(self) -> "ItemBank":
        """The same bank with the point estimates only (one 'draw')."""
        stacked = kinds.ItemParams(*(None if v is None else np.asarray(v, float)[None] for v in self.params))
        return ItemBank(self.ids, self.params, stacked, self.source, self.calibration)

    @classmethod
    def from_fit(cls, fit: Any, draws: int | None = 100, seed: int = 0, source: str | None = None) -> "ItemBank":
        """The bank of a :class:`~irtexam.irt.result.FitResult` (``draws`` item draws; 0/None: point estimates)."""
        if fit.model == "grm":
            raise IrtexamError(f"{source or 'the fit'}: adaptive testing needs binary items (1PL/2PL/3PL); "
                               f"this fit is a graded response model: refit with --model 3pl")
        ids = tuple(str(i) for i in fit.items.index)
        point = kinds.from_table(fit.items)
        if draws and fit.samples is not None:
            d = fit.item_draws(draws, seed).values
            stacked = kinds.ItemParams(a=np.asarray(d["a"], float), b=np.asarray(d["b"], float),
                                       c=np.asarray(d["c"], float))
        else:
            stacked = kinds.ItemParams(*(None if v is None else np.asarray(v, float)[None] for v in point))
        calibration = None
        if getattr(fit, "responses", None) is not None and set(ids) <= set(fit.responses.items):
            calibration = fit.responses.subset(items=list(ids)).values
        return cls(ids, point, stacked, source, calibration)

    @classmethod
    def load(cls, directory: str | Path, draws: int | None = 100, seed: int = 0) -> "ItemBank":
        """The bank of a fit folder; a one-line error when it has no item parameters."""
        fit = load_fit_checked(directory)
        return cls.from_fit(fit, draws=draws, seed=seed, source=str(directory))


def load_fit_checked(directory: str | Path) -> Any:
    """``load_fit(directory)`` after checking it holds item parameters (items.csv with a, b)."""
    from ..irt.result import load_fit

    directory = Path(directory)
    items = directory / "items.csv"
    if not directory.is_dir():
        raise IrtexamError(f"{directory}: no such fit folder; create it with `irtexam fit RESPONSES --out {directory}`")
    if not items.exists():
        raise IrtexamError(f"{items}: missing, the fit folder has no item parameters; "
                           f"run `irtexam fit RESPONSES --out {directory}` first")
    columns = pd.read_csv(items, nrows=0).columns
    if "b" not in columns and "b_1" not in columns:
        raise IrtexamError(f"{items}: no item parameter columns (a, b, c); it is not an item table written by "
                           f"`irtexam fit`: refit with `irtexam fit RESPONSES --out {directory}`")
    return load_fit(directory)


# ----------------------------------------------------------------------------- the engine
@dataclass
class CatState:
    """Posterior state on a (draw, grid) lattice; all arrays are NumPy."""

    grid: np.ndarray                 # (Q,)
    log_prior: np.ndarray            # (Q,)
    p: np.ndarray                    # (S, Q, I) P(correct)
    loglik: np.ndarray               # (S, Q)
    administered: list[int] = field(default_factory=list)
    responses: list[float] = field(default_factory=list)
    rest_total: np.ndarray | None = None   # (S, Q) sum of P over items not administered
    rest_noise: np.ndarray | None = None   # (S, Q) sum of P (1 - P) over items not administered

    def __post_init__(self) -> None:
        if self.rest_total is None:
            self.rest_total = self.p.sum(axis=-1)
            self.rest_noise = (self.p * (1.0 - self.p)).sum(axis=-1)

    def weights(self) -> np.ndarray:
        """Joint posterior weights over (draw, grid point), (S, Q), summing to 1."""
        logw = self.loglik + self.log_prior[None, :]
        w = np.exp(logw - logw.max())
        return w / w.sum()

    def update(self, j: int, y: float) -> None:
        """Add answer ``y`` (0/1) to item ``j``."""
        pj = self.p[:, :, j]
        self.loglik += np.log(np.maximum(pj if y > 0.5 else 1.0 - pj, 1e-300))
        self.rest_total = self.rest_total - pj
        self.rest_noise = self.rest_noise - pj * (1.0 - pj)
        self.administered.append(j)
        self.responses.append(float(y))


def make_state(bank: ItemBank, grid: np.ndarray | None = None) -> CatState:
    """Initial state: P(correct) for every draw, grid point and item, flat likelihood, N(0, 1) prior."""
    grid = np.linspace(-5.0, 5.0, 161) if grid is None else np.asarray(grid, float)
    d = bank.draws
    p = np.stack([np.asarray(kinds.prob_correct(grid, kinds.ItemParams(d.a[s], d.b[s], d.c[s])))
                  for s in range(bank.n_draws)])
    return CatState(grid, -0.5 * grid ** 2, p, np.zeros((bank.n_draws, grid.size)))


def ability(state: CatState, estimator: str = "eap") -> dict[str, float]:
    """theta (EAP or grid MAP), theta_sd (posterior sd), theta_low/high (90% posterior quantiles)."""
    marginal = state.weights().sum(axis=0)
    mean = float(marginal @ state.grid)
    sd = float(np.sqrt(max(marginal @ (state.grid - mean) ** 2, 0.0)))
    cdf = np.cumsum(marginal)
    low, high = (float(np.interp(q, cdf, state.grid)) for q in (LOW_Q, HIGH_Q))
    theta = mean if estimator == "eap" else float(state.grid[int(np.argmax(marginal))])
    return {"theta": theta, "theta_sd": sd, "theta_low": low, "theta_high": high}


def predicted_accuracy(state: CatState, n_samples: int = 4000, seed: int = 0, misfit_var: float = 0.0
                       ) -> dict[str, float]:
    """Predicted whole-exam accuracy (module doc): mean, sd and 90% predictive interval.

    ``misfit_var``: variance of the model-misfit error added to the predictive distribution (normal,
    independent of the rest); :func:`misfit_curve` estimates it from the calibration examinees.
    """
    w = state.weights().ravel()
    n_items = state.p.shape[-1]
    mean_cell = (sum(state.responses) + state.rest_total).ravel() / n_items
    var_cell = np.maximum(state.rest_noise.ravel(), 0.0) / n_items ** 2 + max(float(misfit_var), 0.0)
    mean = float(w @ mean_cell)
    sd = float(np.sqrt(max(w @ (var_cell + mean_cell ** 2) - mean ** 2, 0.0)))
    rng = np.random.default_rng(seed)
    pick = rng.choice(w.size, size=n_samples, p=w / w.sum())
    sample = np.clip(mean_cell[pick] + np.sqrt(var_cell[pick]) * rng.standard_normal(n_samples), 0.0, 1.0)
    low, high = np.quantile(sample, [LOW_Q, HIGH_Q])
    return {"accuracy": mean, "accuracy_sd": sd, "accuracy_low": float(low), "accuracy_high": float(high)}


def selection_scores(state: CatState, bank: ItemBank, theta: float, selection: str, max_items: int = 30,
                     strata: int = 3) -> np.ndarray:
    """Score of every item as the next one (higher is better); administered items are not excluded here.

    ``mfi``: I_j(theta_hat) at the point estimates. ``astrat`` (a-stratified, Chang & Ying 1999):
    the items are cut into ``strata`` strata by discrimination; stage k of the test (k = floor(n strata /
    max_items)) uses stratum k, lowest a first, and takes the item with b nearest theta_hat. ``accuracy``: minus the expected posterior
    variance of the whole-exam score after answering j,
    E_y[Var(R_j | y)] + E[sum_{k not in A, k != j} P_k (1 - P_k)], R_j = sum_{k not in A, k != j} P_k.
    """
    if selection == "mfi":
        return np.asarray(kinds.information(np.array([theta]), bank.params))[0]
    if selection == "random":
        return np.zeros(bank.n_items)
    if selection == "astrat":
        a = np.asarray(bank.params.a, float)
        stage = min(len(state.administered) * strata // max(max_items, 1), strata - 1)
        rank = np.argsort(np.argsort(a, kind="stable"), kind="stable") * strata // bank.n_items
        distance = np.abs(np.asarray(bank.params.b, float) - theta)
        return np.where(rank == stage, -distance, -1e6 - distance)  # other strata only when the stage's is used up
    w = state.weights().reshape(-1)                        # (SQ,)
    keep = w > w.max() * 1e-6                              # cells with posterior mass
    w = w[keep] / w[keep].sum()
    p = state.p.reshape(-1, bank.n_items)[keep]            # (SQ', I)
    total = state.rest_total.reshape(-1)[keep]             # (SQ',)
    noise = state.rest_noise.reshape(-1)[keep]
    r = total[:, None] - p                                 # (SQ, I): remaining score without j
    expected = 0.0
    for like in (p, 1.0 - p):                              # y = 1, y = 0
        wy = w[:, None] * like                             # unnormalised posterior after y
        py = np.maximum(wy.sum(axis=0), 1e-300)
        m1 = (wy * r).sum(axis=0) / py
        m2 = (wy * r ** 2).sum(axis=0) / py
        expected = expected + py * (m2 - m1 ** 2)
    expected = expected + w @ (noise[:, None] - p * (1 - p))
    return -expected


def item_clusters(calibration: np.ndarray, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """k-means (k clusters) of the items' correctness vectors over the calibration examinees (missing = item
    mean): the cluster label of every item and the item nearest each centroid (-1 for an empty cluster)."""
    from scipy.cluster.vq import kmeans2

    x = np.where(np.isnan(calibration), np.nanmean(calibration, axis=1, keepdims=True), calibration)
    x = np.nan_to_num(x, nan=0.5)
    k = int(min(max(k, 1), x.shape[0]))
    centroids, labels = kmeans2(x, k, seed=seed, minit="++")
    nearest = np.full(k, -1)
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if members.size:
            nearest[c] = members[np.argmin(((x[members] - centroids[c]) ** 2).sum(axis=1))]
    return labels, nearest


def anchor_order(calibration: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """tinyBenchmarks-style anchor items: k-means (k clusters) of the items' correctness vectors over the
    calibration examinees (missing = item mean); the item nearest each centroid, largest cluster first."""
    labels, nearest = item_clusters(calibration, k, seed)
    keep = np.flatnonzero(nearest >= 0)
    sizes = np.bincount(labels, minlength=nearest.size)[keep]
    return nearest[keep][np.argsort(-sizes, kind="stable")]


def item_strata(bank: ItemBank, k: int) -> np.ndarray:
    """Stratum of every item for ``stratified`` selection, numbered largest stratum first: k-means (k clusters)
    of the calibration correctness vectors as for the anchors, or without calibration responses k quantile
    groups of the items' difficulty b. Cached on the bank."""
    key = ("strata", int(k))
    if key not in bank.cache:
        n = bank.n_items
        k = int(min(max(k, 1), n))
        if bank.calibration is not None:
            labels, _ = item_clusters(bank.calibration, k, 0)
        else:
            rank = np.argsort(np.argsort(np.asarray(bank.params.b, float), kind="stable"), kind="stable")
            labels = rank * k // n
        sizes = np.bincount(labels)
        renumber = np.empty(sizes.size, int)
        renumber[np.argsort(-sizes, kind="stable")] = np.arange(sizes.size)
        bank.cache[key] = renumber[labels]
    return bank.cache[key]


def stratified_order(strata: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Stratified random sampling of items: one item drawn at random from each stratum (stratum 0 first),
    then the remaining items in random order."""
    first = np.array([rng.choice(np.flatnonzero(strata == c)) for c in np.unique(strata)], dtype=int)
    return np.concatenate([first, rng.permutation(np.setdiff1d(np.arange(strata.size), first))])


def choose_item(scores: np.ndarray, available: np.ndarray, rng: np.random.Generator, randomesque: int,
                levels: np.ndarray | None, administered: Sequence[int]) -> int:
    """Best available item by ``scores`` (random among the ``randomesque`` best), content-balanced by ``levels``."""
    candidates = np.flatnonzero(available)
    if levels is not None:
        present = np.unique(levels[candidates])
        target = {lv: float(np.mean(levels == lv)) for lv in present}
        n = max(len(administered), 1)
        given = levels[list(administered)] if administered else np.array([], dtype=levels.dtype)
        lag = {lv: float(np.sum(given == lv)) / n - target[lv] for lv in present}
        chosen_level = min(present, key=lambda lv: (lag[lv], -target[lv]))
        candidates = candidates[levels[candidates] == chosen_level]
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    top = order[:max(int(randomesque), 1)]
    return int(rng.choice(top)) if top.size > 1 else int(top[0])


MISFIT_MIN_EXAMINEES = 10


def misfit_curve(bank: ItemBank, selection: str, max_items: int, *, estimator: str = "eap", randomesque: int = 1,
                 levels: Mapping[str, str] | None = None, max_examinees: int = 200) -> np.ndarray | None:
    """Variance of the model-misfit error of the predicted accuracy after k = 0..max_items items, (max_items + 1,).

    The same procedure (selection, estimator) is replayed on the calibration examinees with complete
    answers (up to ``max_examinees``; the bank's point estimates), and at each k the mean squared error of
    the predicted whole-exam accuracy against their actual accuracy, minus the mean predictive variance,
    is the variance that the IRT model does not explain (an examinee's total score off the test
    characteristic curve: multidimensionality, misfit of the selected items). None when the bank has no
    calibration responses or fewer than 10 complete examinees. A property of the procedure, not of one
    run: the replays use seeds 1, 2, ... whatever the run's seed. Cached on the bank.
    """
    key = ("misfit", selection, int(max_items), estimator, int(randomesque), bool(levels))
    if key in bank.cache:
        return bank.cache[key]
    curve = None
    y = bank.calibration
    if y is not None:
        complete = np.flatnonzero(~np.isnan(y).any(axis=0))
        if complete.size > max_examinees:
            complete = np.sort(np.random.default_rng(0).choice(complete, max_examinees, replace=False))
        if complete.size >= MISFIT_MIN_EXAMINEES:
            point = bank.point()
            point.cache.update({k: v for k, v in bank.cache.items() if k[0] in ("order", "strata")})
            steps = min(int(max_items), bank.n_items)
            sq = np.zeros(steps + 1)
            var = np.zeros(steps + 1)
            before = predicted_accuracy(make_state(point), n_samples=10)   # k = 0: the same for every examinee
            for e in complete:
                answers = dict(zip(bank.ids, y[:, e]))
                actual = float(np.mean(y[:, e]))
                t = run_cat(point, answers.get, se_target=1e-12, max_items=steps, min_items=0, seed=1 + int(e),
                            selection=selection, randomesque=randomesque, levels=levels, estimator=estimator,
                            misfit=False).trajectory
                sq[1:] += (t["accuracy"].to_numpy() - actual) ** 2
                var[1:] += t["accuracy_sd"].to_numpy() ** 2
                sq[0] += (before["accuracy"] - actual) ** 2
                var[0] += before["accuracy_sd"] ** 2
            curve = np.maximum(sq - var, 0.0) / complete.size
            curve = np.concatenate([curve, np.zeros(max(int(max_items) - steps, 0))])
            bank.cache[("misfit_examinees",) + key[1:]] = int(complete.size)
    bank.cache[key] = curve
    return curve


@dataclass
class AdaptResult:
    """Outcome of an adaptive run: ``trajectory`` (step, item, response, theta, theta_sd, ...) and ``summary``."""

    trajectory: pd.DataFrame
    summary: dict[str, Any]

    def save(self, directory: str | Path) -> dict[str, str]:
        """Write trajectory.csv and summary.json into ``directory`` (replaced whole: never a mix of two runs)."""
        from ..paths import atomic_output_dir

        out = Path(directory)
        with atomic_output_dir(out) as staging:
            self.trajectory.to_csv(staging / "trajectory.csv", index=False)
            (staging / "summary.json").write_text(json.dumps(self.summary, indent=2, default=_json_default))
        return {"trajectory": str(out / "trajectory.csv"), "summary": str(out / "summary.json")}


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    raise TypeError(type(value).__name__)


def check_options(se_target: float, max_items: int, min_items: int, selection: str, estimator: str) -> None:
    """One-line errors for impossible options."""
    if not (se_target > 0) or not math.isfinite(se_target):
        raise IrtexamError(f"--se-target must be a positive standard error (e.g. 0.3), got {se_target}")
    if max_items < 1 or min_items < 0 or min_items > max_items:
        raise IrtexamError(f"need 0 <= --min-items <= --max-items and --max-items >= 1, got min {min_items}, "
                           f"max {max_items}")
    if selection not in SELECTIONS:
        raise IrtexamError(f"unknown selection '{selection}'; choose one of {', '.join(SELECTIONS)}")
    if estimator not in ESTIMATORS:
        raise IrtexamError(f"unknown estimator '{estimator}'; choose one of {', '.join(ESTIMATORS)}")


def run_cat(bank: ItemBank, answer: Callable[[str], float | None], *, available: Sequence[str] | None = None,
            se_target: float = 0.3, max_items: int = 30, min_items: int = 5, seed: int = 0,
            selection: str = DEFAULT_SELECTION, randomesque: int = 1, levels: Mapping[str, str] | None = None,
            estimator: str = "eap", state: CatState | None = None, progress: Callable[[int], None] | None = None,
            misfit: bool = True) -> AdaptResult:
    """Adaptive test: select, ask ``answer(item_id)`` (0/1; None = could not be answered, skipped), update, stop.

    ``available``: the items that may be given (default: the whole bank). ``misfit``: widen the accuracy
    interval by the misfit variance that :func:`misfit_curve` measures on the calibration examinees (when
    the bank has them). Returns the trajectory (one row per administered item, with the estimate and
    predicted accuracy after it) and the summary (module doc for the formulas).
    """
    check_options(se_target, max_items, min_items, selection, estimator)
    rng = np.random.default_rng(seed)
    state = state or make_state(bank)
    position = {item: j for j, item in enumerate(bank.ids)}
    usable = np.zeros(bank.n_items, bool)
    usable[[position[i] for i in (available if available is not None else bank.ids) if i in position]] = True
    fixed_scores = None
    if selection == "anchors":
        if bank.calibration is None:
            raise IrtexamError("--selection anchors needs the calibration responses (responses.parquet in the fit "
                               "folder); refit with `irtexam fit RESPONSES --out DIR`")
        key = ("order", "anchors", int(max_items), int(seed))
        if key not in bank.cache:
            bank.cache[key] = anchor_order(bank.calibration, max_items, seed)
        order = bank.cache[key]
        fixed_scores = np.full(bank.n_items, -1e9)
        fixed_scores[order] = -np.arange(order.size, dtype=float)
    elif selection == "stratified":
        order = stratified_order(item_strata(bank, max_items), rng)
        fixed_scores = np.empty(bank.n_items)
        fixed_scores[order] = -np.arange(order.size, dtype=float)
    curve = None
    if misfit:
        curve = misfit_curve(bank, selection, max_items, estimator=estimator, randomesque=randomesque,
                             levels=levels)

    def extra(k: int) -> float:
        return float(curve[min(k, curve.size - 1)]) if curve is not None else 0.0

    level_array = None
    if levels:
        level_array = np.array([str(levels.get(i, "uncategorised")) for i in bank.ids], dtype=object)
    rows, skipped, reason = [], [], "no items left"
    current = ability(state, estimator)
    while usable.any():
        if len(state.administered) >= max_items:
            reason = "max_items"
            break
        if len(state.administered) >= max(min_items, 1) and current["theta_sd"] <= se_target:
            reason = "se_target"
            break
        scores = fixed_scores if fixed_scores is not None else \
            selection_scores(state, bank, current["theta"], selection, max_items)
        j = choose_item(scores, usable, rng, randomesque if selection in ("mfi", "astrat", "accuracy") else
                        (bank.n_items if selection == "random" else 1), level_array, state.administered)
        usable[j] = False
        y = answer(bank.ids[j])
        if y is None or (isinstance(y, float) and math.isnan(y)):
            skipped.append(bank.ids[j])
            continue
        state.update(j, float(y))
        current = ability(state, estimator)
        acc = predicted_accuracy(state, n_samples=1000, seed=seed, misfit_var=extra(len(state.administered)))
        rows.append({"step": len(state.administered), "item": bank.ids[j], "response": float(y), **current,
                     "information": float(scores[j]) if selection == "mfi" else float("nan"),
                     "level": None if level_array is None else level_array[j], **acc})
        if progress is not None:
            progress(len(state.administered))
    trajectory = pd.DataFrame(rows, columns=["step", "item", "response", "theta", "theta_sd", "theta_low",
                                             "theta_high", "information", "level", "accuracy", "accuracy_sd",
                                             "accuracy_low", "accuracy_high"])
    k = len(state.administered)
    acc = predicted_accuracy(state, seed=seed, misfit_var=extra(k))
    summary = {**ability(state, estimator), **acc, "items_used": k,
               "exam_items": bank.n_items, "calls_saved": bank.n_items - k - len(skipped),
               "calls_spent": k + len(skipped), "skipped_items": skipped,
               "observed_correct": float(sum(state.responses)), "stop_reason": reason, "se_target": se_target,
               "max_items": max_items, "min_items": min_items, "selection": selection, "randomesque": randomesque,
               "estimator": estimator, "item_draws": bank.n_draws, "seed": seed,
               "content_balancing": bool(levels), "bank": bank.source,
               "misfit_sd": math.sqrt(extra(k)) if curve is not None else None,
               "misfit_examinees": bank.cache.get(("misfit_examinees", selection, int(max_items), estimator,
                                                   int(randomesque), bool(levels)), 0)
               if curve is not None else 0}
    return AdaptResult(trajectory, summary)


# ----------------------------------------------------------------------------- replay and the entry point
def replay_answers(responses: Any, examinee: str) -> tuple[dict[str, float], str]:
    """The recorded answers {item: score} of ``examinee`` (observed cells only) and the source name."""
    from ..responses import ResponseMatrix

    if not isinstance(responses, ResponseMatrix):
        responses = ResponseMatrix.read(responses)
    source = responses.source or "the replay responses"
    if str(examinee) not in responses.examinees:
        raise IrtexamError(f"{source}: no examinee '{examinee}'; pick one of {', '.join(responses.examinees[:5])}"
                           + (" ..." if responses.n_examinees > 5 else ""))
    column = responses.values[:, responses.examinees.index(str(examinee))]
    return {item: float(v) for item, v in zip(responses.items, column) if not np.isnan(v)}, source


def item_levels(exam: str | Path | Sequence[Any], category: str = "bloom") -> dict[str, str]:
    """First Bloom level (or question word) of each exam item, for content balancing."""
    from ..analysis.categories import bloom_levels, question_word
    from ..exam.schema import read_exam

    items = read_exam(exam) if isinstance(exam, (str, Path)) else list(exam)
    out = {}
    for it in items:
        given = (getattr(it, "categories", None) or {}).get(category)
        if given:
            out[it.id] = given[0] if isinstance(given, (list, tuple)) else str(given)
        elif category == "bloom":
            out[it.id] = (bloom_levels(it.question) or ["uncategorised"])[0]
        else:
            out[it.id] = question_word(it.question)
    return out


def check_exam_ids(bank: ItemBank, exam_ids: Sequence[str], exam_source: str, fit_source: str | None) -> list[str]:
    """Bank items that the exam has; a one-line error when none (or under half) of the fit's items are in it."""
    have = set(map(str, exam_ids))
    common = [i for i in bank.ids if i in have]
    if len(common) < max(1, bank.n_items // 2):
        example = next(iter(have), "?")
        raise IrtexamError(f"{exam_source}: only {len(common)} of the {bank.n_items} items of {fit_source or 'the fit'}"
                           f" have an id in this exam (fit ids look like '{bank.ids[0]}', exam ids like "
                           f"'{example}'); pass the exam the fit was calibrated on")
    return common


def adapt(fit: Any, *, replay: Any = None, examinee: str | None = None, exam: str | Path | None = None,
          spec: str | Path | None = None, pipeline: str | None = None, se_target: float = 0.3,
          max_items: int = 30, min_items: int = 5, seed: int = 0, selection: str = DEFAULT_SELECTION,
          randomesque: int = 1, balance: str | Mapping[str, str] | None = None, estimator: str = "eap",
          draws: int | None = 100, out: str | Path | None = None, progress: bool = True, misfit: bool = True
          ) -> AdaptResult:
    """Adaptive evaluation of one examinee against a calibrated fit (FitResult, fit folder or ItemBank).

    Offline (``replay``: a ResponseMatrix or long table, ``examinee``: its column) the answers
    are read from the recorded responses (the examinee need not be in the fit); live
    (``exam``, ``spec``: a grid spec, ``pipeline``: ``llm|retriever|iclK``) the pipeline answers
    each chosen item through :func:`irtexam.pipelines.take.take_exam` (its answer log and the
    LLM call cache make an interrupted run resume). ``balance``: ``"bloom"`` (levels from the
    exam's questions), or a mapping item -> level. Writes trajectory.csv and summary.json to
    ``out`` when given. The summary's formulas are in the module doc.
    """
    check_options(se_target, max_items, min_items, selection, estimator)
    if isinstance(fit, ItemBank):
        bank = fit
    elif isinstance(fit, (str, Path)):
        bank = ItemBank.load(fit, draws=draws, seed=seed)
    else:
        bank = ItemBank.from_fit(fit, draws=draws, seed=seed)
    levels = None
    if isinstance(balance, Mapping):
        levels = dict(balance)
    elif balance:
        if exam is None:
            raise IrtexamError(f"--balance {balance} needs --exam EXAM (the questions' {balance} levels)")
        levels = item_levels(exam, str(balance))
    if replay is not None:
        if examinee is None:
            raise IrtexamError("--replay needs --examinee ID (the recorded examinee to replay)")
        answers, source = replay_answers(replay, examinee)
        check_exam_ids(bank, list(answers), source, bank.source)
        result = run_cat(bank, answers.get, available=[i for i in bank.ids if i in answers], se_target=se_target,
                         max_items=max_items, min_items=min_items, seed=seed, selection=selection,
                         randomesque=randomesque, levels=levels, estimator=estimator, misfit=misfit)
        observed = [answers[i] for i in bank.ids if i in answers]
        result.summary.update(mode="replay", replay=source, examinee=str(examinee),
                              actual_accuracy=float(np.mean(observed)) if observed else float("nan"),
                              bank_items_unanswered=bank.n_items - len(observed))
    else:
        if exam is None or spec is None or pipeline is None:
            raise IrtexamError("give either --replay RESPONSES --examinee ID, or --exam EXAM --spec GRID "
                               "--pipeline LLM|RETRIEVER|iclK")
        from .live import live_answerer

        answerer = live_answerer(exam, spec, pipeline, out_dir=Path(out or ".") / "take", progress=progress)
        check_exam_ids(bank, answerer.item_ids, str(exam), bank.source)
        try:
            result = run_cat(bank, answerer, available=[i for i in bank.ids if i in set(answerer.item_ids)],
                             se_target=se_target, max_items=max_items, min_items=min_items, seed=seed,
                             selection=selection, randomesque=randomesque, levels=levels, estimator=estimator,
                             progress=answerer.tick, misfit=misfit)
        finally:
            answerer.close()
        result.summary.update(mode="live", exam=str(exam), spec=str(spec), pipeline=pipeline,
                              **answerer.stats())
    if out is not None:
        result.save(out)
    return result
