"""The selection rules of tiny benchmarks (info, anchors, stratified, mfi, random: :mod:`irtexam.bank.subset`'s
doc), apart from :func:`irtexam.bank.subset.select_subset` so that the held-out validation its ``rule="auto"`` runs
(:mod:`irtexam.bank.tiny_check`) can use them without an import circle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..irt import kinds
from .tiny import TinyBank

RULES = ("info", "anchors", "stratified", "mfi", "random")
SELECT_GRID = np.linspace(-4.0, 4.0, 121)
BANDWIDTH = 0.3

__all__ = ["RULES", "SELECT_GRID", "select_by_rule", "check_k", "ability_density", "greedy_information"]


def ability_density(thetas: np.ndarray | None, grid: np.ndarray = SELECT_GRID, bandwidth: float = BANDWIDTH
                    ) -> np.ndarray:
    """Weights over ``grid`` (sum 1): a Gaussian kernel density of ``thetas`` (bandwidth ``bandwidth``),
    or the N(0, 1) density without them."""
    if thetas is None or np.size(thetas) == 0:
        g = np.exp(-0.5 * grid ** 2)
    else:
        t = np.asarray(thetas, float)
        t = t[np.isfinite(t)]
        g = np.exp(-0.5 * ((grid[:, None] - t[None, :]) / bandwidth) ** 2).sum(axis=1)
    return g / g.sum()


def greedy_information(info: np.ndarray, g: np.ndarray, k: int, prior_precision: float = 1.0) -> np.ndarray:
    """Greedy minimisation of sum_q g_q / (prior_precision + sum_{i in S} info[q, i]) over |S| = k (module
    doc): ``info`` (Q, N) item information on the grid, ``g`` (Q,) weights; the chosen item positions in order."""
    total = np.full(info.shape[0], float(prior_precision))
    free = np.ones(info.shape[1], bool)
    chosen = []
    for _ in range(min(k, info.shape[1])):
        objective = g @ (1.0 / (total[:, None] + info))      # (N,) after adding each item
        objective[~free] = np.inf
        j = int(np.argmin(objective))
        chosen.append(j)
        free[j] = False
        total = total + info[:, j]
    return np.array(chosen, dtype=int)


def _clusters(bank: TinyBank, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """k-means labels of the items' correctness vectors and the item nearest each centroid."""
    from .select import item_clusters

    if bank.calibration is None:
        raise IrtexamError("the anchors and stratified rules cluster the items' answers over the calibration "
                           "models: the bank has no calibration responses (a fit folder keeps them in "
                           "responses.npz); use --rule info or random")
    return item_clusters(bank.calibration, k, seed)


def check_k(bank: TinyBank, k: Any) -> None:
    """A one-line error unless k is an integer from 1 to the bank's size."""
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= bank.n_items:
        raise IrtexamError(f"k (--k) must be an integer from 1 to the bank's {bank.n_items} items, got {k}")


def select_by_rule(bank: Any, k: int, rule: str, seed: int = 0, prior_sd: float = 1.0) -> pd.DataFrame:
    """k items of the bank by one of :data:`RULES` (:mod:`irtexam.bank.subset`'s doc), with weights: a table with
    one row per chosen item in the order chosen: item, weight (normalised to sum 1: the anchor weight, cluster
    size / N, for anchors and stratified; 1 / k for the others), cluster (-1 when none), a, b, c, and ``attrs``
    rule, k, seed, bank_items."""
    tb = TinyBank.coerce(bank)
    if rule not in RULES:
        raise IrtexamError(f"unknown selection rule '{rule}'; choose one of {', '.join(RULES + ('auto',))}")
    check_k(tb, k)
    rng = np.random.default_rng(seed)
    n = tb.n_items
    cluster = None
    weight = None
    if rule == "random":
        chosen = rng.choice(n, k, replace=False)
    elif rule == "mfi":
        centre = float(np.nanmean(tb.thetas)) if tb.thetas is not None else 0.0
        info = np.asarray(kinds.information(np.array([centre]), tb.params))[0]
        chosen = np.argsort(-info, kind="stable")[:k]
    elif rule == "info":
        info = np.asarray(kinds.information(SELECT_GRID, tb.params))
        tau = np.gradient(np.asarray(kinds.prob_correct(SELECT_GRID, tb.params)).mean(axis=1), SELECT_GRID)
        g = ability_density(tb.thetas) * tau ** 2
        chosen = greedy_information(info, g / g.sum(), k, 1.0 / prior_sd ** 2)
    else:
        labels, nearest = _clusters(tb, k, seed)
        keep = np.flatnonzero(nearest >= 0)
        sizes = np.bincount(labels, minlength=nearest.size)
        if rule == "anchors":
            chosen = nearest[keep]
        else:
            chosen = np.array([rng.choice(np.flatnonzero(labels == c)) for c in keep], dtype=int)
        cluster = keep
        weight = sizes[keep] / n
        order = np.argsort(-weight, kind="stable")
        chosen, cluster, weight = chosen[order], cluster[order], weight[order]
    chosen = np.asarray(chosen, dtype=int)
    weight = np.full(chosen.size, 1.0 / chosen.size) if weight is None else weight / weight.sum()
    c = np.zeros(n) if tb.params.c is None else np.asarray(tb.params.c, float)
    table = pd.DataFrame({"item": [tb.ids[j] for j in chosen], "weight": weight,
                          "cluster": -1 if cluster is None else cluster,
                          "a": np.asarray(tb.params.a, float)[chosen], "b": np.asarray(tb.params.b, float)[chosen],
                          "c": c[chosen]})
    table.attrs.update(rule=rule, k=int(k), seed=int(seed), bank_items=n)
    return table
