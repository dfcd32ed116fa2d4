"""Draw response matrices from known IRT parameters (tests, benchmarks, power analyses)."""

from __future__ import annotations

import itertools
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..responses import ResponseMatrix
from . import kinds


def _centred_levels(rng: np.random.Generator, n_levels: int, scale: float) -> np.ndarray:
    values = rng.normal(0.0, scale, size=n_levels)
    return values - values.mean()


def simulate(n_items: int = 100, n_examinees: int | None = 50, model: str = "3pl", seed: int = 0, *,
             facets: Mapping[str, int | Sequence[str]] | None = None, missing: float = 0.0,
             a: np.ndarray | None = None, b: np.ndarray | None = None, c: np.ndarray | None = None,
             theta: np.ndarray | None = None, facet_effects: Mapping[str, np.ndarray] | None = None,
             guessing: float | None = None, n_categories: int = 3, residual_sd: float = 0.0,
             facet_scale: float = 1.0) -> tuple[ResponseMatrix, dict[str, np.ndarray]]:
    """Simulate responses from a 1PL/2PL/3PL (or graded) model with known parameters.

    P(X_im = 1) = c_i + (1 - c_i) / (1 + exp(-a_i (theta_m - b_i))).
    Defaults: a ~ LogNormal(0, 0.35), b ~ N(0, 1), c ~ Beta(5, 15) (3PL; ``guessing``
    fixes it), theta ~ N(0, 1). With ``facets`` (name -> number of levels or level
    names) the examinees are the full grid of level combinations and
    theta_m = sum_f theta_f[level_f(m)] + residual_sd * e_m, each facet's levels
    drawn N(0, facet_scale^2) and centred to sum to zero. ``missing`` hides that
    fraction of cells at random. For model="grm", items get ``n_categories`` ordered
    categories (scores 0..n_categories-1) with P(X >= k) = sigmoid(a (theta - b_k)).

    Returns (responses, truth) where truth holds a, b, c (or thresholds), theta and
    theta_<facet> arrays aligned with the matrix's items / examinees / levels.
    """
    rng = np.random.default_rng(seed)
    model = model.lower()
    truth: dict[str, np.ndarray] = {}
    facet_frame = None
    if facets:
        level_names = {name: ([f"{name}{k}" for k in range(spec)] if isinstance(spec, (int, np.integer))
                              else [str(x) for x in spec]) for name, spec in facets.items()}
        combos = list(itertools.product(*level_names.values()))
        examinees = ["|".join(combo) for combo in combos]
        facet_frame = pd.DataFrame(combos, columns=list(level_names), index=examinees)
        theta = np.zeros(len(examinees))
        for position, (name, levels) in enumerate(level_names.items()):
            effects = (np.asarray(facet_effects[name], dtype=float) if facet_effects and name in facet_effects
                       else _centred_levels(rng, len(levels), facet_scale))
            truth[f"theta_{name}"] = effects
            index = np.array([levels.index(combo[position]) for combo in combos])
            theta = theta + effects[index]
        if residual_sd > 0:
            theta = theta + rng.normal(0.0, residual_sd, size=len(examinees))
        n_examinees = len(examinees)
    else:
        if n_examinees is None:
            raise IrtexamError("simulate: give n_examinees or facets")
        examinees = [f"m{m:0{len(str(n_examinees))}d}" for m in range(n_examinees)]
        theta = rng.normal(0.0, 1.0, size=n_examinees) if theta is None else np.asarray(theta, dtype=float)
    items = [f"q{i:0{max(len(str(n_items)), 3)}d}" for i in range(n_items)]

    a = (rng.lognormal(0.0, 0.35, size=n_items) if model != "1pl" else np.ones(n_items)) if a is None else np.asarray(a, float)
    if model == "grm":
        b = rng.normal(0.0, 1.0, size=n_items) if b is None else np.asarray(b, float)
        steps = rng.uniform(0.5, 1.5, size=(n_items, n_categories - 1))
        thresholds = b[:, None] + np.cumsum(steps, axis=1) - steps.sum(axis=1, keepdims=True) / 2
        values = kinds.simulate_responses(theta[None, :], kinds.ItemParams(
            a=a[:, None], b=thresholds.mean(axis=1)[:, None], thresholds=thresholds[:, None, :]), rng, pairwise=True)
        truth.update({"a": a, "thresholds": thresholds, "b": thresholds.mean(axis=1), "theta": theta})
    else:
        b = rng.normal(0.0, 1.0, size=n_items) if b is None else np.asarray(b, float)
        if c is None:
            c = (np.full(n_items, guessing) if guessing is not None else
                 rng.beta(5.0, 15.0, size=n_items) if model == "3pl" else np.zeros(n_items))
        c = np.asarray(c, float)
        item_params = kinds.ItemParams(a=a[:, None], b=b[:, None], c=c[:, None])
        p = np.asarray(kinds.prob_correct(theta[None, :], item_params, pairwise=True))
        values = kinds.simulate_responses(theta[None, :], item_params, rng, pairwise=True)
        truth.update({"a": a, "b": b, "c": c, "theta": theta, "p": p})
    if missing > 0:
        values[rng.uniform(size=values.shape) < missing] = np.nan
    responses = ResponseMatrix(values=values, items=tuple(items), examinees=tuple(examinees),
                               examinee_facets=facet_frame if facet_frame is not None else pd.DataFrame(),
                               max_score=(n_categories - 1) if model == "grm" else 1)
    return responses, truth
