"""Item and exam (test) information for every model kind, with posterior bands.

The 3PL item response function is

    P_i(theta) = c_i + (1 - c_i) * sigmoid(a_i (theta - b_i))

and its Fisher information about theta (Hambleton et al. 1991; paper eq. 3) is

    I_i(theta) = a_i^2 * ((P_i - c_i) / (1 - c_i))^2 * (1 - P_i) / P_i,

which reduces to the 2PL a^2 P (1 - P) only when c = 0. Exam information is the
sum (or, paper eq. 4, the mean) of item information over a subset of items, and
the standard error of an ability estimate is SE(theta) = 1 / sqrt(sum_i I_i(theta)).

Every function here is pure JAX/NumPy, vectorised over a theta grid and items:
with ``theta`` of shape (T,) and item parameters of shape (I,) the item
information has shape (T, I). Posterior bands come from ``jax.vmap`` over
parameter draws of shape (S, I).
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from ..errors import InputError
from ..irt import kinds

DEFAULT_GRID = (-4.0, 4.0, 161)


def theta_grid(low: float = DEFAULT_GRID[0], high: float = DEFAULT_GRID[1],
               n: int = DEFAULT_GRID[2]) -> np.ndarray:
    """An evenly spaced ability grid ``np.linspace(low, high, n)``."""
    if not high > low or n < 2:
        raise InputError(f"theta grid needs high > low and n >= 2; got ({low}, {high}, {n})")
    return np.linspace(low, high, int(n))


def _items(a, b, c=None) -> kinds.ItemParams:
    return kinds.ItemParams(a=a, b=b, c=c)


prob_correct = kinds.prob_correct  # the one definition: P(theta) = c + (1 - c) sigmoid(a (theta - b)) on theta x items


def item_information(theta, a, b, c=None):
    """3PL item Fisher information I(theta) on the outer grid theta x items.

    I(theta) = a^2 ((P - c)/(1 - c))^2 (1 - P)/P with P the 3PL probability.
    Computed stably with s = sigmoid(a (theta - b)): (P - c)/(1 - c) = s and
    1 - P = (1 - c)(1 - s), so I = a^2 s^2 (1 - c)(1 - s) / (c + (1 - c) s).
    ``c=None`` means c = 0 (2PL, where I = a^2 P (1 - P)). Output shape is
    theta.shape + a.shape (e.g. (T, I) for a grid of T abilities and I items).
    NumPy in, NumPy out; JAX arrays in (or tracers), JAX out. (One definition:
    :func:`irtexam.irt.kinds.information`.)
    """
    return kinds.information(theta, _items(a, b, c))


def graded_item_information(theta, a, thresholds):
    """Fisher information of Samejima graded-response items on the outer grid theta x items.

    With cumulative curves P*_k(theta) = sigmoid(a (theta - b_k)), k = 1..K
    (P*_0 = 1, P*_{K+1} = 0), category probabilities P_k = P*_k - P*_{k+1} and
    derivatives dP*_k/dtheta = a P*_k (1 - P*_k):

        I(theta) = sum_{k=0..K} (dP_k/dtheta)^2 / P_k
                 = a^2 sum_k (P*_k (1 - P*_k) - P*_{k+1} (1 - P*_{k+1}))^2 / P_k.

    ``thresholds`` has shape (items, K) (increasing); output theta.shape + (items,).
    With K = 1 this is the 2PL information a^2 P (1 - P).
    """
    return kinds.information(theta, kinds.ItemParams(a=a, b=None, thresholds=thresholds))


def table_information(theta, items: pd.DataFrame) -> np.ndarray:
    """Item information (T, I) of the items in a fit's items table, for any model kind
    (binary a, b, c columns or graded b_1..b_K; see :func:`irtexam.irt.kinds.from_table`)."""
    return np.asarray(kinds.information(np.asarray(theta, dtype=float), kinds.from_table(items)))


def exam_information(theta, a, b, c=None, items: np.ndarray | Sequence[int] | None = None,
                     reduce: str = "mean"):
    """Exam information over a subset R of items: sum_i I_i(theta) or (eq. 4) its mean.

    ``items`` is an integer index or boolean mask into the parameter arrays
    (default: all items); ``reduce`` is "mean" (paper eq. 4,
    I_R(theta) = (1/|R|) sum_{i in R} I_i(theta)) or "sum" (test information).
    Returns an array of shape theta.shape.
    """
    info = item_information(theta, a, b, c)
    if items is not None:
        info = info[..., np.asarray(items)]
    return _reduce(info, reduce)


def _reduce(info, reduce: str):
    if info.shape[-1] == 0:
        raise InputError("the item subset is empty; there is no exam information to compute")
    if reduce == "mean":
        return info.mean(axis=-1)
    if reduce == "sum":
        return info.sum(axis=-1)
    raise InputError(f"reduce must be 'mean' or 'sum', not {reduce!r}")


def standard_error(theta, a, b, c=None, items=None):
    """Standard error of the ability estimate: SE(theta) = 1 / sqrt(sum_i I_i(theta))."""
    return 1.0 / kinds._xp(theta, a, b, c).sqrt(exam_information(theta, a, b, c, items=items, reduce="sum"))


def information_draws(theta, a_draws, b_draws, c_draws=None, items=None,
                      reduce: str = "mean") -> jax.Array:
    """Exam information for every posterior draw, by ``jax.vmap`` over draws.

    Draw arrays have shape (S, I); returns (S,) + theta.shape.
    """
    a_draws = jnp.asarray(a_draws)
    b_draws = jnp.asarray(b_draws)
    c_draws = jnp.zeros_like(a_draws) if c_draws is None else jnp.asarray(c_draws)
    theta = jnp.asarray(theta)
    fn = jax.jit(jax.vmap(lambda a, b, c: exam_information(theta, a, b, c, items=items, reduce=reduce)))
    return fn(a_draws, b_draws, c_draws)


def band_around(estimate: np.ndarray, draws: np.ndarray, prob: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """A central ``prob`` interval of a curve placed around the fit's own estimate: the draws' spread below and
    above their median, added to ``estimate`` (T,), from ``draws`` (S, T):

        low = estimate - (median - q_(1-prob)/2),   high = estimate + (q_(1+prob)/2 - median).

    Exam information sums thousands of items' information, each a skewed function of its item's draws, so the
    draws' centre drifts from the plug-in curve by more than their spread (issue 42: 2PL 3,000 items x 250, mean
    item information at theta 0: the fit's 0.214, the draws' 90% interval [0.221, 0.226]); placed around the
    estimate the band has the draws' width and contains the fit's own curve."""
    q = (1.0 - prob) / 2.0
    median = np.quantile(draws, 0.5, axis=0)
    return (estimate - (median - np.quantile(draws, q, axis=0)),
            estimate + (np.quantile(draws, 1.0 - q, axis=0) - median))


def information_band(theta, a_draws, b_draws, c_draws=None, items=None, reduce: str = "mean",
                     prob: float = 0.9, estimate=None) -> pd.DataFrame:
    """Posterior mean and central ``prob`` interval of exam information on a theta grid.

    Returns a DataFrame with columns theta, mean, low, high (quantiles (1-prob)/2 and (1+prob)/2 over the
    draws). ``estimate``: the fit's point estimates (a, b, c) (c may be None); then a column ``estimate`` holds
    their information curve and the interval is the draws' spread placed around it (:func:`band_around`).
    """
    draws = np.asarray(information_draws(theta, a_draws, b_draws, c_draws, items, reduce))
    q = (1.0 - prob) / 2.0
    band = pd.DataFrame({
        "theta": np.asarray(theta, dtype=float),
        "mean": draws.mean(axis=0),
        "low": np.quantile(draws, q, axis=0),
        "high": np.quantile(draws, 1.0 - q, axis=0),
    })
    if estimate is not None:
        point = np.asarray(exam_information(jnp.asarray(theta), *estimate, items=items, reduce=reduce), dtype=float)
        band["estimate"] = point
        band["low"], band["high"] = band_around(point, draws, prob)
    band.attrs.update(reduce=reduce, prob=prob)  # read by plotting.plot_information_band for its labels
    return band


def split_labels(value) -> list[str]:
    """Category labels of one item: a list/tuple as is, a 'a|b' string split on '|'."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    if isinstance(value, (list, tuple, set, np.ndarray)):
        return [str(v) for v in value]
    text = str(value).strip()
    return [t for t in text.split("|") if t] if text else []


def category_membership(labels: pd.Series, order: Iterable[str] | None = None) -> pd.DataFrame:
    """Boolean items x categories table from per-item labels (multi-label allowed).

    ``labels`` is indexed by item and holds lists or '|'-joined strings.
    Items without a label fall in "uncategorised". Columns follow ``order``
    when given (categories not in it come after, sorted).
    """
    per_item = [split_labels(v) or ["uncategorised"] for v in labels.to_numpy()]   # in the rows' order
    seen = sorted({lab for labs in per_item for lab in labs})
    cats = [c for c in (order or []) if c in seen] + [c for c in seen if c not in set(order or [])]
    column = {c: k for k, c in enumerate(cats)}
    member = np.zeros((len(labels), len(cats)), dtype=bool)  # by position: one numpy write, not a .loc per item
    rows = [r for r, labs in enumerate(per_item) for _ in labs]
    member[rows, [column[lab] for labs in per_item for lab in labs]] = True
    return pd.DataFrame(member, index=labels.index, columns=cats)


def category_information(theta, items: pd.DataFrame, labels: pd.Series,
                         order: Iterable[str] | None = None, reduce: str = "mean") -> pd.DataFrame:
    """Aggregated information per category (paper eq. 4) on a theta grid.

    I_cat(theta) = (1/|R_cat|) sum_{i in R_cat} I_i(theta), where R_cat holds the
    items labelled ``cat`` (an item with several labels counts in each).
    ``items`` is indexed by item with columns a, b and optionally c; ``labels``
    is indexed by item. Returns a DataFrame indexed by theta with one column per
    category; the number of items per category is in ``.attrs['n_items']``.
    """
    missing = [i for i in labels.index if i not in items.index]
    if missing:
        raise InputError(f"{len(missing)} labelled items have no fitted parameters "
                         f"(first: {missing[:3]}); categorise the items of the fit")
    member = category_membership(labels, order)
    info = table_information(theta, items.loc[member.index])
    out = {}
    for cat in member.columns:
        mask = member[cat].to_numpy()
        out[cat] = info[:, mask].mean(axis=1) if reduce == "mean" else info[:, mask].sum(axis=1)
    df = pd.DataFrame(out, index=pd.Index(np.asarray(theta, dtype=float), name="theta"))
    df.attrs["n_items"] = {cat: int(member[cat].sum()) for cat in member.columns}
    df.attrs["reduce"] = reduce
    return df


def mean_information(items: pd.DataFrame, theta_range: tuple[float, float] = (-2.0, 2.0),
                     n: int = 81) -> pd.Series:
    """Each item's information averaged over a uniform theta grid on ``theta_range``.

    mean_k I_i(theta_k), theta_k = linspace(low, high, n); indexed like ``items``.
    """
    grid = theta_grid(theta_range[0], theta_range[1], n)
    info = table_information(grid, items)
    return pd.Series(info.mean(axis=0), index=items.index, name="information")


def information_table(items: pd.DataFrame, theta: np.ndarray) -> pd.DataFrame:
    """Long table (item, theta, information) of every item's curve on the grid."""
    info = table_information(theta, items)
    return pd.DataFrame({
        "item": np.tile(np.asarray(items.index), len(theta)),
        "theta": np.repeat(np.asarray(theta, dtype=float), len(items)),
        "information": info.reshape(-1),
    })


def exam_information_summary(items: pd.DataFrame, theta: np.ndarray,
                             abilities: Mapping[str, float] | pd.Series | None = None) -> pd.DataFrame:
    """Exam information (mean, sum) and SE(theta) on a grid, plus values at given abilities.

    Returns columns theta, mean_information, test_information, se, kind
    ("grid" for grid points, "examinee:<id>" for each ability in ``abilities``,
    the crosses of the paper's figures).
    """
    rows = [("grid", np.asarray(theta, dtype=float))]
    if abilities is not None:
        ab = pd.Series(abilities)
        rows += [(f"examinee:{k}", np.array([float(v)])) for k, v in ab.items()]
    frames = []
    for kind, th in rows:
        total = table_information(th, items).sum(axis=-1)
        frames.append(pd.DataFrame({"theta": th, "mean_information": total / len(items),
                                    "test_information": total, "se": 1.0 / np.sqrt(total),
                                    "kind": kind}))
    return pd.concat(frames, ignore_index=True)
