"""FitResult: a fitted IRT model, its tables, its posterior draws, and what can be computed from them.

Every interval a fit reports comes from one set of posterior draws (NUTS: the MCMC
draws; MAP: the corrected joint Laplace draws of :mod:`irtexam.irt.draws`): the item,
examinee and facet tables, the contrasts and their ``prob_greater``, the information
bands and the posterior predictive checks. They therefore agree with each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..responses import ResponseMatrix
from . import io as fit_io
from . import kinds
from . import model as mdl
from .draws import DrawDiagnostics
from .laplace import LaplaceCovariance

LOW_Q, HIGH_Q = 0.05, 0.95  # 90% central intervals


@dataclass
class FitResult:
    """A fitted IRT model: point estimates, posterior draws, tables and InferenceData.

    Tables (pandas DataFrames):
      ``items``: index item; a, b, c (GRM: a, b = mean threshold, b_1..b_K) with _sd, _low, _high (90%).
      ``examinees``: index examinee; theta, theta_sd, theta_low, theta_high, facet columns.
      ``facets``: facet, level, theta, theta_sd, theta_low, theta_high, n_examinees (None without facets).
      ``contrasts``: every ordered pair of levels within a facet: facet, level, reference, diff, sd, low,
      high, prob_greater = P(level > reference).
    Estimates are the MAP (method="map") or the posterior mean (method="nuts"); sd and
    intervals come from ``samples`` (reported-scale draws, chain-major for NUTS).
    """

    spec: mdl.ModelSpec
    design: mdl.Design
    method: str
    responses: ResponseMatrix
    params: dict[str, np.ndarray]
    items: pd.DataFrame
    examinees: pd.DataFrame
    facets: pd.DataFrame | None
    contrasts: pd.DataFrame | None
    fit_stats: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    samples: dict[str, np.ndarray] | None = None
    laplace: LaplaceCovariance | None = None
    diagnostics: pd.DataFrame | None = None
    chains: int = 1
    seed: int = 0
    draw_diagnostics: DrawDiagnostics | None = None
    sample_stats: dict[str, np.ndarray] | None = None
    _idata: Any = None

    # ------------------------------------------------------------------ basics
    @property
    def model(self) -> str:
        """Model kind: '1pl', '2pl', '3pl' or 'grm'."""
        return self.spec.kind

    @property
    def idata(self) -> Any:
        """arviz InferenceData: posterior draws, log_likelihood per cell, observed data (built on first access)."""
        if self._idata is None:
            from .idata import to_inference_data
            self._idata = to_inference_data(self)
        return self._idata

    def item_params(self) -> kinds.ItemParams:
        """Point estimates of the item parameters, in the items' order (see :mod:`irtexam.irt.kinds`)."""
        return mdl.item_params({k: np.asarray(v, dtype=np.float64) for k, v in self.params.items()
                                if k in ("a", "d", "c", "b1", "gap")}, self.spec, self.design.n_items)

    def __repr__(self) -> str:
        """At most a screen: model, estimator, sizes, log-likelihood, the top abilities, facets, warnings."""
        return fit_repr(self)

    def theta(self, as_frame: bool = False) -> "np.ndarray | pd.DataFrame":
        """Point estimates of the examinees' abilities, in the examinees' order.

        ``as_frame=True``: a DataFrame indexed by examinee with theta, its sd and 90% interval
        and the facet columns (the same as ``fit.examinees``).
        """
        if as_frame:
            return self.examinees.reindex(list(self.design.examinees))
        return self.examinees["theta"].reindex(list(self.design.examinees)).to_numpy(dtype=float)

    def predict(self, theta: Any = None) -> np.ndarray:
        """Expected score: (I, E) for the fitted examinees, or (T, I) at abilities ``theta`` (T,).

        Binary models: P(X = 1); GRM: E[X] = sum_k P(X >= k).
        """
        items = self.item_params()
        if theta is None:
            return np.asarray(kinds.expected_score(self.theta()[None, :], items.column(), pairwise=True))
        return np.asarray(kinds.expected_score(np.asarray(theta, dtype=float), items))

    def information(self, theta: Any, draws: int | None = None, seed: int = 0) -> "pd.DataFrame | Any":
        """Item Fisher information on an ability grid, labelled. Every model kind
        (:func:`irtexam.irt.kinds.information`).

        At the point estimates: a DataFrame, one row per theta (index ``theta``), one column per
        item (columns ``item``); ``.mean(axis=1)`` is the mean exam information, ``.sum(axis=1)``
        the test information. With ``draws``: an xarray DataArray with dims (draw, theta, item)
        over that many posterior draws. ``information_array`` gives the bare arrays.
        """
        theta = np.atleast_1d(np.asarray(theta, dtype=float))
        values = self.information_array(theta, draws, seed)
        items = pd.Index(self.design.items, name="item")
        if draws is None:
            return pd.DataFrame(values, index=pd.Index(theta, name="theta"), columns=items)
        import xarray as xr

        return xr.DataArray(values, dims=("draw", "theta", "item"),
                            coords={"draw": np.arange(values.shape[0]), "theta": theta, "item": list(items)},
                            name="information")

    def information_array(self, theta: Any, draws: int | None = None, seed: int = 0) -> np.ndarray:
        """Item Fisher information as a bare array: (T, I) at the point estimates, or (S, T, I) over
        ``draws`` posterior draws (items in ``fit.items`` order)."""
        theta = np.asarray(theta, dtype=float)
        if draws is None:
            return np.asarray(kinds.information(theta, self.item_params()))
        return np.stack(list(self.information_draws(theta, draws, seed)))

    def information_draws(self, theta: Any, draws: int | None = 200, seed: int = 0) -> Iterator[np.ndarray]:
        """The (T, I) item information of each posterior draw in :meth:`information_array`, one at a time: over
        200 draws a 161-point grid and 12,032 items would be 3 GB at once."""
        theta = np.asarray(theta, dtype=float)
        items = self.item_draws(draws, seed)
        for s in range(items.n):
            yield np.asarray(kinds.information(theta, items.subset_draw(s)))

    def item_draws(self, n: int | None = None, seed: int = 0) -> "ItemDraws":
        """Posterior draws of the item parameters (``n`` of them; all when None)."""
        names = self.spec.kind_object.reported_names
        pick = self._pick(n, seed)
        return ItemDraws(self.spec.kind, {k: self._all_draws(k)[pick] for k in names})

    def draws(self, name: str, n: int | None = 200, seed: int = 0,
              as_frame: bool = False) -> "np.ndarray | pd.DataFrame":
        """Posterior draws (n, ...) of 'a', 'b', 'c', 'thresholds', 'theta' or 'theta_<facet>'.

        MAP: the corrected joint Laplace draws; NUTS: the MCMC draws. Draws of different
        names taken with the same ``n`` and ``seed`` belong together (the same joint draws).
        ``as_frame=True``: a DataFrame, one row per draw (index ``draw``), one column per item,
        examinee or facet level (GRM thresholds: columns (item, k)).
        """
        values = self._all_draws(name)[self._pick(n, seed)]
        if not as_frame:
            return values
        return pd.DataFrame(values.reshape(values.shape[0], -1), index=pd.RangeIndex(values.shape[0], name="draw"),
                            columns=self._draw_columns(name, values.shape[1:]))

    def _draw_columns(self, name: str, shape: tuple[int, ...]) -> pd.Index:
        """Labels of the columns of :meth:`draws` with ``as_frame=True``."""
        if name == "theta":
            return pd.Index(self.design.examinees, name="examinee")
        if name.startswith("theta_") and name[len("theta_"):] in self.design.facet_levels:
            return pd.Index(list(self.design.facet_levels[name[len("theta_"):]]), name="level")
        if name == "thresholds":
            return pd.MultiIndex.from_product([list(self.design.items), range(1, shape[-1] + 1)], names=["item", "k"])
        if shape and shape[0] == len(self.design.items):
            return pd.Index(self.design.items, name="item")
        return pd.RangeIndex(int(np.prod(shape)), name=name)

    def _all_draws(self, name: str) -> np.ndarray:
        if self.samples is None:
            raise IrtexamError("this fit has no posterior draws (it was fitted with se=False)")
        if name not in self.samples:
            raise IrtexamError(f"no draws of '{name}'; choose one of {', '.join(sorted(self.samples))}")
        return self.samples[name]

    def _pick(self, n: int | None, seed: int) -> np.ndarray:
        total = next(iter(self.samples.values())).shape[0] if self.samples else 0
        if n is None or n >= total:
            return np.arange(total)
        return np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))

    def predictive_draws(self, n: int | None = 200, seed: int = 0) -> np.ndarray:
        """Expected score per cell for each posterior draw, (S, I, E)."""
        pick = self._pick(n, seed)
        theta = self._all_draws("theta")[pick]
        items = ItemDraws(self.spec.kind, {k: self._all_draws(k)[pick] for k in self.spec.kind_object.reported_names})
        return np.stack([np.asarray(kinds.expected_score(theta[s][None, :], items.subset_draw(s).column(),
                                                         pairwise=True)) for s in range(len(pick))])

    def replicate(self, n: int = 200, seed: int = 0) -> np.ndarray:
        """Posterior predictive replicates of the response matrix, (S, I, E) (missing cells kept missing)."""
        return np.stack(list(self.replicates(n, seed)))

    def replicates(self, n: int = 200, seed: int = 0) -> Iterator[np.ndarray]:
        """The replicates of :meth:`replicate` one at a time, (I, E) each (the same draws and numbers): a
        leaderboard's 200 replicates of 26.6 million cells would be 43 GB at once."""
        rng = np.random.default_rng(seed)
        pick = self._pick(n, seed)
        theta = self._all_draws("theta")[pick]
        names = self.spec.kind_object.reported_names
        items = ItemDraws(self.spec.kind, {k: self._all_draws(k)[pick] for k in names})
        for s in range(len(pick)):
            out = kinds.simulate_responses(theta[s][None, :], items.subset_draw(s).column(), rng, pairwise=True)
            yield np.where(self.design.mask, out, np.nan)

    def summary(self) -> pd.DataFrame:
        """One table of every estimated quantity: kind, parameter, id, estimate, sd, low, high."""
        frames = []
        for name in [c for c in self.items.columns if f"{c}_sd" in self.items]:
            t = self.items
            frames.append(pd.DataFrame({"kind": "item", "parameter": name, "id": t.index, "estimate": t[name],
                                        "sd": t[f"{name}_sd"], "low": t[f"{name}_low"], "high": t[f"{name}_high"]}))
        t = self.examinees
        frames.append(pd.DataFrame({"kind": "examinee", "parameter": "theta", "id": t.index, "estimate": t["theta"],
                                    "sd": t["theta_sd"], "low": t["theta_low"], "high": t["theta_high"]}))
        if self.facets is not None:
            t = self.facets
            frames.append(pd.DataFrame({"kind": "facet", "parameter": "theta_" + t["facet"], "id": t["level"],
                                        "estimate": t["theta"], "sd": t["theta_sd"], "low": t["theta_low"],
                                        "high": t["theta_high"]}))
        return pd.concat(frames, ignore_index=True)

    # ------------------------------------------------------------------ persistence
    def save(self, directory: str | Path, idata: bool = True) -> Path:
        """Write the fit to ``directory`` (created if needed) and return its path.

        Always: items.csv, examinees.csv, facets.csv and contrasts.csv (hierarchical fits),
        draws.npz, params.npz, meta.json, responses.npz (see :mod:`irtexam.irt.io`);
        :func:`irtexam.load_fit` reads them back. ``idata=True`` (the default, as ``irtexam fit
        --out``) also writes fit.nc, the arviz InferenceData, whose log_likelihood group holds
        one float per draw and observed response: about 4 bytes x draws x responses, e.g.
        27 MB for 202 items x 60 examinees (12,120 responses) x 500 draws, against about
        2 MB for everything else. ``idata=False`` skips it (``fit.idata`` rebuilds it in memory).
        :meth:`saved_size` reports what a folder holds.
        """
        return fit_io.save_fit(self, directory, netcdf=idata)

    @staticmethod
    def saved_size(directory: str | Path) -> dict[str, int]:
        """Bytes per file in a fit folder written by :meth:`save`, plus ``"total"``."""
        files = {p.name: p.stat().st_size for p in sorted(Path(directory).iterdir()) if p.is_file()}
        return {**files, "total": sum(files.values())}

    @classmethod
    def load(cls, directory: str | Path) -> "FitResult":
        """Read a fit folder written by :meth:`save`."""
        parts = fit_io.read_fit(directory)
        idata = parts.pop("_idata", None)
        result = cls(**parts)
        result._idata = idata
        return result


def fit_repr(fit: FitResult, top: int = 5, max_lines: int = 24) -> str:
    """A summary of a fit in at most ``max_lines`` lines (a screen): model, estimator, sizes,
    log-likelihood, the ``top`` highest abilities, facet levels, the number of warnings."""
    stats = fit.fit_stats or {}
    responses = fit.responses
    facets = f", facets {', '.join(fit.spec.facets)}" if fit.spec.facets else ""
    lines = [f"FitResult: {fit.spec.kind.upper()} by {fit.method.upper()} on {responses.n_items} items x "
             f"{responses.n_examinees} examinees ({stats.get('n_observed', int(responses.observed.sum()))} responses)"
             f"{facets}"]
    loglik = stats.get("loglik")
    if loglik is not None:
        extra = "".join(f", {k.upper()} {float(stats[k]):.1f}" for k in ("aic", "bic") if stats.get(k) is not None)
        kind = "marginal " if fit.method == "em" else ""
        abilities = f"; abilities by {stats['abilities'].upper()}" if stats.get("abilities") in ("eap", "map") else ""
        lines.append(f"  {kind}log-likelihood {float(loglik):.1f}{extra}{abilities}")
    table = fit.examinees.sort_values("theta", ascending=False)
    interval = "theta_low" in table and table["theta_low"].notna().any()
    lines.append(f"  top abilities (of {len(table)})" + (" with 90% intervals:" if interval else ":"))
    for name, row in table.head(top).iterrows():
        lines.append(f"    {_short(str(name))}  {row['theta']:+.2f}"
                     + (f"  [{row['theta_low']:+.2f}, {row['theta_high']:+.2f}]" if interval else ""))
    if fit.facets is not None:
        for facet, group in fit.facets.groupby("facet", sort=False):
            best = group.sort_values("theta", ascending=False)
            shown = ", ".join(f"{_short(str(r.level), 20)} {r.theta:+.2f}" for r in best.head(4).itertuples())
            more = f", ... {len(best) - 4} more" if len(best) > 4 else ""
            lines.append(f"  {facet}: {shown}{more}")
    lines = lines[:max_lines - 2]
    if fit.warnings:
        lines.append(f"  {len(fit.warnings)} warning(s): see fit.warnings")
    lines.append("  tables: fit.items, fit.examinees" + (", fit.facets, fit.contrasts" if fit.facets is not None
                                                         else "") + "; fit.summary(), fit.idata")
    return "\n".join(lines)


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def load_fit(directory: str | Path) -> FitResult:
    """Read a fit folder written by :meth:`FitResult.save` (or ``irtexam fit --out DIR``)."""
    return FitResult.load(directory)


@dataclass
class ItemDraws:
    """Posterior draws of item parameters: arrays (S, I) (thresholds (S, I, K))."""

    kind: str
    values: dict[str, np.ndarray]

    @property
    def n(self) -> int:
        return next(iter(self.values.values())).shape[0]

    def subset_draw(self, s: int) -> kinds.ItemParams:
        """The item parameters of draw ``s``."""
        v = self.values
        if "thresholds" in v:
            return kinds.ItemParams(a=v["a"][s], b=v["thresholds"][s].mean(axis=-1), thresholds=v["thresholds"][s])
        return kinds.ItemParams(a=v["a"][s], b=v["b"][s], c=v["c"][s])


# ----------------------------------------------------------------------------- tables from draws
def interval_columns(name: str, estimate: np.ndarray, draws: np.ndarray) -> dict[str, np.ndarray]:
    """{name, name_sd, name_low, name_high}: estimate, posterior sd and 90% quantile interval of draws (S, ...)."""
    low, high = draw_quantiles(draws, (LOW_Q, HIGH_Q))
    return {name: estimate, f"{name}_sd": draw_sd(draws), f"{name}_low": low, f"{name}_high": high}


def _column_blocks(draws: np.ndarray) -> tuple[np.ndarray, list[slice]]:
    """The draws as (S, n) and blocks of columns of about 2^20 values: where the summaries go a block at a
    time, so that no float64 copy of all the draws is made (500 draws of 12,032 items: 48 MB each)."""
    flat = np.asarray(draws).reshape(np.shape(draws)[0], -1)
    width = max(1, (1 << 20) // max(flat.shape[0], 1))
    return flat, [slice(start, start + width) for start in range(0, flat.shape[1], width)]


def draw_sd(draws: np.ndarray) -> np.ndarray:
    """Posterior sd over the first axis (ddof 1), in float64 whatever the draws' type (they are kept as float32),
    a block of columns at a time: sqrt(sum (x_s - mean)^2 / (S - 1))."""
    flat, blocks = _column_blocks(draws)
    out = np.empty(flat.shape[1], dtype=np.float64)
    for block in blocks:
        out[block] = np.std(flat[:, block], axis=0, ddof=1, dtype=np.float64)
    return out.reshape(np.shape(draws)[1:])


def draw_quantiles(draws: np.ndarray, probs: Sequence[float]) -> list[np.ndarray]:
    """Quantiles over the first axis, numpy's default (linear) rule, in float64.

    For S sorted values x_(0..S-1) and probability q: h = (S - 1) q,
    Q(q) = x_(floor h) + (h - floor h) (x_(floor h + 1) - x_(floor h)); NaN where any draw is NaN. The order
    statistics come from one partial sort (``np.partition``) of a block of columns at a time.
    """
    flat, blocks = _column_blocks(draws)
    n = flat.shape[0]
    ranks = []
    for q in probs:
        h = (n - 1) * float(q)
        lo = int(np.floor(h))
        ranks.append((lo, min(lo + 1, n - 1), h - lo))
    kth = sorted({r for lo, hi, _ in ranks for r in (lo, hi)})
    out = [np.empty(flat.shape[1], dtype=np.float64) for _ in probs]
    for block in blocks:
        part = np.partition(flat[:, block], kth, axis=0)  # a copy of the block
        bad = np.isnan(flat[:, block]).any(axis=0)
        for target, (lo, hi, frac) in zip(out, ranks):
            low_value = part[lo].astype(np.float64)
            target[block] = low_value + frac * (part[hi].astype(np.float64) - low_value)
            if bad.any():  # np.quantile's answer where any draw is NaN
                target[block][bad] = np.nan
    return [o.reshape(np.shape(draws)[1:]) for o in out]


def item_table(point: Mapping[str, np.ndarray], draws: Mapping[str, np.ndarray] | None, spec: mdl.ModelSpec,
               design: mdl.Design) -> pd.DataFrame:
    """items.csv: a, b, c (binary) or a, b, b_1..b_K (GRM) with sd and 90% intervals from ``draws``."""
    columns: dict[str, np.ndarray] = {}

    def add(name: str, estimate: np.ndarray, values: np.ndarray | None) -> None:
        if values is None:
            nan = np.full_like(estimate, np.nan, dtype=float)
            columns.update({name: estimate, f"{name}_sd": nan, f"{name}_low": nan, f"{name}_high": nan})
        else:
            columns.update(interval_columns(name, estimate, values))

    get = (lambda k: None if draws is None else draws[k])  # noqa: E731
    add("a", point["a"], get("a"))
    if spec.kind_object.graded:
        thresholds = point["thresholds"]
        add("b", thresholds.mean(axis=-1), None if draws is None else draws["thresholds"].mean(axis=-1))
        for k in range(thresholds.shape[-1]):
            add(f"b_{k + 1}", thresholds[:, k], None if draws is None else draws["thresholds"][..., k])
    else:
        add("b", point["b"], get("b"))
        add("c", point["c"], get("c"))
    return pd.DataFrame(columns, index=pd.Index(design.items, name="item"))


def examinee_table(point: Mapping[str, np.ndarray], draws: Mapping[str, np.ndarray] | None, design: mdl.Design,
                   responses: ResponseMatrix) -> pd.DataFrame:
    """examinees.csv: theta with sd and 90% interval, plus the examinees' facet columns."""
    theta = point["theta"]
    if draws is None:
        nan = np.full_like(theta, np.nan)
        columns = {"theta": theta, "theta_sd": nan, "theta_low": nan, "theta_high": nan}
    else:
        columns = interval_columns("theta", theta, draws["theta"])
    table = pd.DataFrame(columns, index=pd.Index(design.examinees, name="examinee"))
    for facet in responses.facet_names:
        table[facet] = responses.examinee_facets[facet].reindex(table.index).to_numpy()
    return table


def facet_tables(point: Mapping[str, np.ndarray], draws: Mapping[str, np.ndarray] | None, spec: mdl.ModelSpec,
                 design: mdl.Design) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """facets.csv (level abilities) and contrasts.csv (every ordered pair within a facet), from draws.

    diff = theta_level - theta_reference; prob_greater = share of draws with diff > 0.
    """
    if not spec.facets:
        return None, None
    level_rows, contrast_rows = [], []
    for facet in spec.facets:
        levels = design.facet_levels[facet]
        counts = np.bincount(design.facet_index[facet], minlength=len(levels))
        estimate = point[f"theta_{facet}"]
        values = None if draws is None else draws[f"theta_{facet}"]
        cols = interval_columns("theta", estimate, values) if values is not None else \
            {"theta": estimate, "theta_sd": estimate * np.nan, "theta_low": estimate * np.nan,
             "theta_high": estimate * np.nan}
        level_rows.append(pd.DataFrame({"facet": facet, "level": list(levels), **cols, "n_examinees": counts}))
        j, k = np.meshgrid(np.arange(len(levels)), np.arange(len(levels)), indexing="ij")
        j, k = j[j != k], k[j != k]
        diff = estimate[k] - estimate[j]
        if values is None:
            stats = {"sd": diff * np.nan, "low": diff * np.nan, "high": diff * np.nan, "prob_greater": diff * np.nan}
        else:
            d = values[:, k] - values[:, j]
            low, high = draw_quantiles(d, (LOW_Q, HIGH_Q))
            stats = {"sd": d.std(axis=0, ddof=1), "low": low, "high": high, "prob_greater": (d > 0).mean(axis=0)}
        contrast_rows.append(pd.DataFrame({"facet": facet, "level": np.asarray(levels)[k],
                                           "reference": np.asarray(levels)[j], "diff": diff, **stats}))
    return pd.concat(level_rows, ignore_index=True), pd.concat(contrast_rows, ignore_index=True)
