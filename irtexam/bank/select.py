"""Item selection rules of the adaptive test, one :class:`Selector` object per rule.

``"stratified"`` (default, :class:`Stratified`): stratified random sampling of items: the bank is cut into
k = ``max_items`` strata (k-means of the items' correctness vectors over the calibration examinees, or
difficulty quantiles without them) and one random item is drawn from each, largest stratum first;
``"mfi"`` (:class:`MaxInformation`) maximum Fisher information I_j(theta_hat) at the current estimate
(:func:`irtexam.irt.kinds.information`); ``"astrat"`` (:class:`AStratified`) a-stratified selection;
``"accuracy"`` (:class:`ExpectedAccuracy`) the item whose answer is expected to shrink the posterior
variance of the predicted whole-exam accuracy most; ``"random"`` (:class:`RandomItem`) uniform;
``"anchors"`` (:class:`Anchors`) a fixed tinyBenchmarks-style set of representative items (k-means of the
items' correctness vectors in the calibration data, k = ``max_items``, largest cluster first).

A selector scores every item (higher is better); :func:`choose_item` then applies exposure control
(randomesque: pick uniformly among the :meth:`Selector.pool` best items) and content balancing (with item
levels, e.g. Bloom levels, the next item comes from the level whose share of administered items lags its
share of the bank most: Kingsbury-Zara). A rule with a fixed order (anchors, stratified) returns its
scores once from :meth:`Selector.start`. Write a new rule by subclassing :class:`Selector` and pass the
object as ``run_cat(..., selection=MyRule())``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np

from ..errors import IrtexamError
from ..irt import kinds
from .cat import CatState, resolve
from .itembank import ItemBank


@dataclass(frozen=True)
class Selector:
    """An item selection rule: :meth:`scores` of every item as the next one (higher is better).

    ``reports_information``: the scores are Fisher informations (written to the trajectory's
    ``information`` column).
    """

    name: ClassVar[str] = "custom"
    reports_information: ClassVar[bool] = False

    def start(self, bank: ItemBank, *, max_items: int, seed: int, rng: np.random.Generator) -> np.ndarray | None:
        """Per-run set-up, before the first item: fixed scores for the whole test (a fixed order), or None to
        call :meth:`scores` before every item (the default)."""
        return None

    def scores(self, state: CatState, bank: ItemBank, theta: float, *, max_items: int) -> np.ndarray:
        """Score (I,) of every item given the posterior ``state`` and the current estimate ``theta``;
        administered items are excluded by the caller."""
        raise NotImplementedError(f"{type(self).__name__} scores no items: define scores() or start()")

    def pool(self, bank: ItemBank, randomesque: int) -> int:
        """How many of the best items the next one is drawn from (exposure control)."""
        return randomesque


@dataclass(frozen=True)
class MaxInformation(Selector):
    """Maximum Fisher information: score_j = I_j(theta_hat) at the point estimates (kinds.information)."""

    name: ClassVar[str] = "mfi"
    reports_information: ClassVar[bool] = True

    def scores(self, state: CatState, bank: ItemBank, theta: float, *, max_items: int) -> np.ndarray:
        """I_j(theta_hat)."""
        return np.asarray(kinds.information(np.array([theta]), bank.params))[0]


def astrat_scores(a: np.ndarray, b: np.ndarray, theta: float, n_given: int, max_items: int, strata: int
                  ) -> np.ndarray:
    """a-stratified scores (Chang & Ying 1999): the items are cut into ``strata`` strata by discrimination;
    stage k = min(floor(n_given strata / max_items), strata - 1) uses stratum k (lowest a first) and scores
    -|b_j - theta|; the other strata's items come after all of its own (score -1e6 - |b_j - theta|)."""
    stage = min(n_given * strata // max(max_items, 1), strata - 1)
    rank = np.argsort(np.argsort(a, kind="stable"), kind="stable") * strata // a.size
    distance = np.abs(b - theta)
    return np.where(rank == stage, -distance, -1e6 - distance)   # other strata only when the stage's is used up


@dataclass(frozen=True)
class AStratified(Selector):
    """a-stratified selection with ``strata`` strata (:func:`astrat_scores`)."""

    name: ClassVar[str] = "astrat"
    strata: int = 3

    def scores(self, state: CatState, bank: ItemBank, theta: float, *, max_items: int) -> np.ndarray:
        """:func:`astrat_scores` at the current stage."""
        return astrat_scores(np.asarray(bank.params.a, float), np.asarray(bank.params.b, float), theta,
                             len(state.administered), max_items, self.strata)


def accuracy_scores(w: np.ndarray, p: np.ndarray, total: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Minus the expected posterior variance of the whole-exam score after answering item j:

        E_y[Var(R_j | y)] + E[sum_{k not in A, k != j} P_k (1 - P_k)],   R_j = sum_{k not in A, k != j} P_k,

    from the posterior weights ``w`` (C,) of the (draw, grid) cells, P(correct) ``p`` (C, I), and per cell
    ``total`` = sum_{k not in A} P_k and ``noise`` = sum_{k not in A} P_k (1 - P_k) (C,). Cells with
    posterior mass under 1e-6 of the largest are left out.
    """
    keep = w > w.max() * 1e-6                              # cells with posterior mass
    w = w[keep] / w[keep].sum()
    p, total, noise = p[keep], total[keep], noise[keep]
    r = total[:, None] - p                                 # (C, I): remaining score without j
    expected = 0.0
    for like in (p, 1.0 - p):                              # y = 1, y = 0
        wy = w[:, None] * like                             # unnormalised posterior after y
        py = np.maximum(wy.sum(axis=0), 1e-300)
        m1 = (wy * r).sum(axis=0) / py
        m2 = (wy * r ** 2).sum(axis=0) / py
        expected = expected + py * (m2 - m1 ** 2)
    expected = expected + w @ (noise[:, None] - p * (1 - p))
    return -expected


@dataclass(frozen=True)
class ExpectedAccuracy(Selector):
    """The item expected to shrink the posterior variance of the predicted whole-exam accuracy most
    (:func:`accuracy_scores`)."""

    name: ClassVar[str] = "accuracy"

    def scores(self, state: CatState, bank: ItemBank, theta: float, *, max_items: int) -> np.ndarray:
        """:func:`accuracy_scores` over the state's (draw, grid) cells."""
        return accuracy_scores(state.weights().reshape(-1), state.p.reshape(-1, bank.n_items),
                               state.rest_total.reshape(-1), state.rest_noise.reshape(-1))


@dataclass(frozen=True)
class RandomItem(Selector):
    """Uniform random selection (every item scores 0, drawn among all)."""

    name: ClassVar[str] = "random"

    def scores(self, state: CatState, bank: ItemBank, theta: float, *, max_items: int) -> np.ndarray:
        """Zeros."""
        return np.zeros(bank.n_items)

    def pool(self, bank: ItemBank, randomesque: int) -> int:
        """All items."""
        return bank.n_items


def order_scores(order: np.ndarray, n_items: int) -> np.ndarray:
    """Scores that give the items in ``order`` first to last (-position), the others after all of them."""
    fixed = np.full(n_items, -1e9)
    fixed[order] = -np.arange(order.size, dtype=float)
    return fixed


@dataclass(frozen=True)
class FixedOrder(Selector):
    """A rule that orders the items once per run (:meth:`order`) and gives them in that order."""

    def order(self, bank: ItemBank, *, max_items: int, seed: int, rng: np.random.Generator) -> np.ndarray:
        """Item positions, first to give first (items left out come after them)."""
        raise NotImplementedError(f"{type(self).__name__} defines no order()")

    def start(self, bank: ItemBank, *, max_items: int, seed: int, rng: np.random.Generator) -> np.ndarray:
        """:func:`order_scores` of this run's :meth:`order`."""
        return order_scores(self.order(bank, max_items=max_items, seed=seed, rng=rng), bank.n_items)

    def pool(self, bank: ItemBank, randomesque: int) -> int:
        """The next item of the order."""
        return 1


@dataclass(frozen=True)
class Anchors(FixedOrder):
    """tinyBenchmarks-style representative items in a fixed order (:func:`anchor_order`, k = max_items)."""

    name: ClassVar[str] = "anchors"

    def order(self, bank: ItemBank, *, max_items: int, seed: int, rng: np.random.Generator) -> np.ndarray:
        """The anchor order (cached on the bank)."""
        if bank.calibration is None:
            raise IrtexamError("--selection anchors needs the calibration responses (the responses the fit "
                               "folder keeps); refit with `irtexam fit RESPONSES --out DIR`")
        key = ("order", "anchors", int(max_items), int(seed))
        if key not in bank.cache:
            bank.cache[key] = anchor_order(bank.calibration, max_items, seed)
        return bank.cache[key]


@dataclass(frozen=True)
class Stratified(FixedOrder):
    """Stratified random sampling: one random item per stratum (:func:`item_strata`, k = max_items), largest
    stratum first, then the rest in random order (:func:`stratified_order`)."""

    name: ClassVar[str] = "stratified"

    def order(self, bank: ItemBank, *, max_items: int, seed: int, rng: np.random.Generator) -> np.ndarray:
        """This run's random order."""
        return stratified_order(item_strata(bank, max_items), rng)


SELECTOR_TYPES: dict[str, type[Selector]] = {rule.name: rule for rule in (
    MaxInformation, AStratified, ExpectedAccuracy, RandomItem, Anchors, Stratified)}
SELECTIONS = tuple(SELECTOR_TYPES)
DEFAULT_SELECTION = "stratified"


def get_selector(selection: str | Selector) -> Selector:
    """The :class:`Selector` for a name in :data:`SELECTIONS` (or the object itself)."""
    return resolve(selection, SELECTOR_TYPES, "selection")


def selection_scores(state: CatState, bank: ItemBank, theta: float, selection: str | Selector, max_items: int = 30,
                     strata: int = 3) -> np.ndarray:
    """Score of every item as the next one under a per-item rule (``mfi``, ``astrat`` with ``strata`` strata,
    ``accuracy``, ``random`` or a :class:`Selector`); administered items are not excluded here."""
    rule = AStratified(strata) if selection == "astrat" else get_selector(selection)
    return rule.scores(state, bank, theta, max_items=max_items)


# ----------------------------------------------------------------------------- item orders and the choice
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
