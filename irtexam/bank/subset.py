"""Tiny benchmarks: choose k items of a calibrated bank, and write them as an exam a pipeline can take.

Rules (:func:`select_subset`, ``rule=``):

* ``"info"`` (default): greedy minimisation of the expected error variance of the predicted whole-bank
  accuracy over the abilities the calibration models occupy,
  sum_q g_q tau'(theta_q)^2 / (1 / prior_sd^2 + sum_{i in S} I_i(theta_q)), where tau(theta) = mean_i
  P_i(theta) is the bank's accuracy curve (so tau' theta's error is the accuracy's) and g_q the weights of a
  121-point grid's kernel density of the calibration abilities (bandwidth 0.3; N(0, 1) without them).
  Unlike the items' information at one ability (``"mfi"``) or summed over the population (additive, so the
  same high-a items near the centre), the reciprocal has diminishing returns: once the centre is measured,
  items that inform the tails win. Weights 1 / k.
* ``"anchors"``: tinyBenchmarks' anchor points: k-means (k clusters) of the items' correctness vectors over
  the calibration models, the item nearest each centroid, weight = its cluster's size / N (the anchor
  estimate of the whole-bank accuracy is sum_i w_i y_i). Needs the calibration responses.
* ``"stratified"``: one random item from each k-means cluster, weight = cluster size / N.
* ``"mfi"``: the k items of largest Fisher information at the calibration models' mean ability (the classic
  peak rule, for comparison). Weights 1 / k.
* ``"random"``: k items uniformly at random. Weights 1 / k.

:func:`write_subset` writes ``subset.csv`` (item, weight, a, b, c, cluster), ``items.txt`` (one id a line),
``exam.jsonl`` when the bank's exam file is given (its items for these ids: ``irtexam take`` takes it), and
``lm_eval_samples.json`` when the ids are ``<task>/<doc_id>`` as :mod:`irtexam.pipelines.lm_eval_import`
writes them ({task: [doc_id, ...]}, the form of lm-eval's ``--samples`` option).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..irt import kinds
from .tiny import TinyBank

RULES = ("info", "anchors", "stratified", "mfi", "random")
SELECT_GRID = np.linspace(-4.0, 4.0, 121)
BANDWIDTH = 0.3

__all__ = ["RULES", "select_subset", "write_subset", "ability_density"]


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


def select_subset(bank: Any, k: int, rule: str = "auto", seed: int = 0, prior_sd: float = 1.0,
                  progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """k items of the bank by ``rule`` (module doc: info, anchors, stratified, mfi, random), with weights.

    ``rule="auto"`` (the default) first validates info, anchors and stratified on the bank's calibration models
    (:func:`irtexam.bank.tiny_check.choose_rule`: three held-out folds, each a calibration; ``progress`` gets its
    messages) and takes the one that predicted held-out accuracy best; ``attrs`` then also holds
    ``rule_requested`` ("auto") and ``validation`` (its table's rows).

    Returns a table with one row per chosen item in the order chosen: item, weight (normalised to sum 1:
    the anchor weight, cluster size / N, for anchors and stratified; 1 / k for the others), cluster (-1 when
    none), a, b, c, and ``attrs`` rule, k, seed, bank_items.
    """
    source = None
    if rule == "auto" and isinstance(bank, (str, Path)):  # read the fit folder once: its answers are validated
        from .itembank import load_fit_checked

        source, bank = str(bank), load_fit_checked(bank)
    tb = TinyBank.coerce(bank)
    tb.source = source or tb.source
    if rule not in RULES + ("auto",):
        raise IrtexamError(f"unknown selection rule '{rule}'; choose one of {', '.join(RULES + ('auto',))}")
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= tb.n_items:
        raise IrtexamError(f"k (--k) must be an integer from 1 to the bank's {tb.n_items} items, got {k}")
    if rule == "auto":
        from .tiny_check import choose_rule

        chosen_rule, validation = choose_rule(bank, int(k), seed=seed, progress=progress)
        table = select_subset(tb, k, chosen_rule, seed=seed, prior_sd=prior_sd)
        table.attrs.update(rule_requested="auto", validation=validation.to_dict("records"))
        return table
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


def _lm_eval_samples(ids: list[str]) -> dict[str, list[int]] | None:
    """{task: [doc_id, ...]} when every id is ``<task>/<integer doc_id>`` (lm-eval import ids), else None."""
    out: dict[str, list[int]] = {}
    for item in ids:
        task, sep, doc = item.rpartition("/")
        if not sep or not task or not doc.isdigit():
            return None
        out.setdefault(task, []).append(int(doc))
    return {task: sorted(docs) for task, docs in out.items()}


def write_subset(subset: pd.DataFrame, out: str | Path, exam: str | Path | None = None) -> dict[str, str]:
    """Write the subset (module doc) into the folder ``out``: subset.csv, items.txt, exam.jsonl (with
    ``exam``: the bank's exam, every chosen id must be in it) and lm_eval_samples.json (lm-eval ids).
    Returns the paths written by name."""
    from ..exam.schema import read_exam, write_exam

    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    ids = [str(i) for i in subset["item"]]
    written = {"subset": directory / "subset.csv", "items": directory / "items.txt"}
    subset.to_csv(written["subset"], index=False)
    written["items"].write_text("".join(i + "\n" for i in ids))
    if exam is not None:
        by_id = {item.id: item for item in read_exam(exam)}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise IrtexamError(f"{exam}: {len(missing)} of the {len(ids)} chosen items are not in this exam "
                               f"(e.g. '{missing[0]}'): pass the exam the bank was calibrated on")
        written["exam"] = directory / "exam.jsonl"
        write_exam([by_id[i] for i in ids], written["exam"])
    samples = _lm_eval_samples(ids)
    if samples is not None:
        written["lm_eval_samples"] = directory / "lm_eval_samples.json"
        written["lm_eval_samples"].write_text(json.dumps(samples, indent=1))
    return {name: str(path) for name, path in written.items()}
