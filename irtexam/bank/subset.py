"""Tiny benchmarks: choose k items of a calibrated bank, and write them as an exam a pipeline can take.

Rules (:func:`select_subset`, ``rule=``):

* ``"auto"`` (default): the best of info, anchors and stratified on held-out folds of the bank's own calibration
  models (:func:`irtexam.bank.tiny_check.choose_rule`).
* ``"info"``: greedy minimisation of the expected error variance of the predicted whole-bank
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

import pandas as pd

from ..errors import IrtexamError
from .subset_rules import (BANDWIDTH, RULES, SELECT_GRID, ability_density, check_k, greedy_information,
                           select_by_rule)
from .tiny import TinyBank

__all__ = ["RULES", "select_subset", "write_subset", "ability_density", "greedy_information", "SELECT_GRID",
           "BANDWIDTH"]


def select_subset(bank: Any, k: int, rule: str = "auto", seed: int = 0, prior_sd: float = 1.0,
                  progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """k items of the bank by ``rule`` (module doc: auto, info, anchors, stratified, mfi, random), with weights.

    ``rule="auto"`` (the default) first validates info, anchors and stratified on the bank's calibration models
    (:func:`irtexam.bank.tiny_check.choose_rule`: three held-out folds, each a calibration; ``progress`` gets its
    messages) and takes the one that predicted held-out accuracy best; ``attrs`` then also holds
    ``rule_requested`` ("auto") and ``validation`` (its table's rows).

    Returns a table with one row per chosen item in the order chosen: item, weight (normalised to sum 1:
    the anchor weight, cluster size / N, for anchors and stratified; 1 / k for the others), cluster (-1 when
    none), a, b, c, and ``attrs`` rule, k, seed, bank_items.
    """
    if rule != "auto":
        return select_by_rule(bank, k, rule, seed=seed, prior_sd=prior_sd)
    from .tiny_check import choose_rule

    source = None
    if isinstance(bank, (str, Path)):  # read the fit folder once: its answers are validated
        from .itembank import load_fit_checked

        source, bank = str(bank), load_fit_checked(bank)
    tb = TinyBank.coerce(bank)
    tb.source = source or tb.source
    check_k(tb, k)
    chosen_rule, validation = choose_rule(bank, int(k), seed=seed, progress=progress)
    table = select_by_rule(tb, k, chosen_rule, seed=seed, prior_sd=prior_sd)
    table.attrs.update(rule_requested="auto", validation=validation.to_dict("records"))
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
