"""Every arviz call of irtexam lives here (arviz 0.x on Python 3.11, 1.x later).

MAP and NUTS fits share one container: the ``posterior`` group holds a, b, c
(dim ``item``), theta (dim ``examinee``), theta_<facet> (dim <facet>) and, for the
GRM, thresholds (dims ``item``, ``threshold``). A MAP fit is one chain of its corrected
Laplace draws (:mod:`irtexam.irt.draws`), a NUTS fit its chains. ``log_likelihood`` holds
log p(y_im | draw) for every observed cell (dim ``cell``, "item|examinee"), so
``arviz.loo`` and ``arviz.compare`` work on fits of different structures; NUTS fits add
``sample_stats`` (diverging, tree_depth, step_size).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, NamedTuple, Protocol

import numpy as np


class FitLike(Protocol):
    """What this module reads of a fit (a :class:`irtexam.irt.result.FitResult`; not imported: the result
    module uses this one, not the other way round)."""

    spec: Any
    design: Any
    method: str
    params: Mapping[str, np.ndarray]
    samples: Mapping[str, np.ndarray] | None
    sample_stats: Mapping[str, np.ndarray] | None
    chains: int
    seed: int


def _arviz() -> Any:
    """Import arviz without its import-time FutureWarning banner."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


LOGLIK_VALUE_LIMIT = 50_000_000  # draws x observed cells stored in the log_likelihood group


def _posterior_arrays(result: FitLike) -> dict[str, np.ndarray]:
    """Reported-scale draws shaped (chain, draw, ...) for the posterior group (a MAP point when no draws)."""
    chains = max(result.chains, 1)
    names = _variable_names(result)
    if result.samples is not None:
        return {k: np.asarray(v).reshape((chains, -1) + np.shape(v)[1:]) for k, v in result.samples.items()
                if k in names}
    import jax.numpy as jnp
    from . import model as mdl
    constrained = mdl.constrain({k: jnp.asarray(v) for k, v in result.params.items()}, result.spec, result.design)
    return {k: np.asarray(v, dtype=np.float64)[None, None] for k, v in constrained.items() if k in names}


def pointwise_loglik(result: FitLike) -> np.ndarray | None:
    """log p(y_im | draw s) for every draw and observed cell, (chain, draw, cell); None above the size limit.

    Cells are the observed (item, examinee) pairs in row-major order, so ``arviz.loo``
    gives PSIS-LOO over held-out cells.
    """
    if result.samples is None:
        return None
    mask = result.design.mask
    n_draws = next(iter(result.samples.values())).shape[0]
    if n_draws * int(mask.sum()) > LOGLIK_VALUE_LIMIT:
        return None
    if result.spec.kind_object.graded:
        out = _graded_loglik(result)
    else:
        out = _binary_loglik(result.samples, result.design.y, mask)
    chains = max(result.chains, 1)
    return out.reshape((chains, -1, out.shape[-1]))


def _binary_loglik(samples: dict[str, np.ndarray], y: np.ndarray, mask: np.ndarray,
                   chunk_values: int = 2 ** 18) -> np.ndarray:
    """log p(y_im | a, b, c, theta of each draw) of binary items at the observed cells, (draws, cells) float32.

    :func:`irtexam.irt.kinds.cell_loglik` (no cancellation in log(1 - p)) in float32, the
    precision that is stored, over blocks of draws of ``chunk_values`` cells (cache-sized).
    """
    from . import kinds

    a, b, c, theta = (np.asarray(samples[k], dtype=np.float32) for k in ("a", "b", "c", "theta"))
    n_draws = a.shape[0]
    flat_mask = mask.reshape(-1)
    full = bool(flat_mask.all())
    out = np.empty((n_draws, int(flat_mask.sum())), dtype=np.float32)
    step = max(1, chunk_values // max(mask.size, 1))
    for start in range(0, n_draws, step):
        sl = slice(start, min(start + step, n_draws))
        items = kinds.ItemParams(a=a[sl, :, None], b=b[sl, :, None], c=c[sl, :, None])
        cells = kinds.cell_loglik(y[None], theta[sl, None, :], items, pairwise=True).reshape(sl.stop - sl.start, -1)
        out[sl] = cells if full else cells[:, flat_mask]
    return out


def _graded_loglik(result: FitLike) -> np.ndarray:
    """log p(y_im | draw) of graded items at the observed cells, (draws, cells) float32."""
    from . import kinds

    mask = result.design.mask
    n_draws = next(iter(result.samples.values())).shape[0]
    theta = result.samples["theta"]
    y = result.design.y
    out = np.empty((n_draws, int(mask.sum())), dtype=np.float32)
    step = max(1, int(2e7 // max(mask.size, 1)))
    for start in range(0, n_draws, step):
        sl = slice(start, min(start + step, n_draws))
        a = result.samples["a"][sl][..., None]
        thresholds = result.samples["thresholds"][sl][:, :, None, :]
        items = kinds.ItemParams(a=a, b=thresholds.mean(axis=-1), thresholds=thresholds)
        cells = np.asarray(kinds.cell_loglik(y[None], theta[sl][:, None, :], items, pairwise=True))
        out[sl] = cells[:, mask]
    return out


def _variable_names(result: FitLike) -> set[str]:
    names = {"a", "b", "c", "d", "theta", "sigma_resid"} | {f"theta_{f}" for f in result.spec.facets}
    if result.spec.kind_object.graded:
        names |= {"thresholds"}
        names.discard("c")
    return names


def _dims(result: FitLike) -> tuple[dict[str, list[str]], dict[str, Any]]:
    dims: dict[str, list[str]] = {"a": ["item"], "b": ["item"], "c": ["item"], "d": ["item"], "theta": ["examinee"],
                                  "thresholds": ["item", "threshold"]}
    coords: dict[str, Any] = {"item": list(result.design.items), "examinee": list(result.design.examinees)}
    for facet in result.spec.facets:
        dims[f"theta_{facet}"] = [facet]
        coords[facet] = list(result.design.facet_levels[facet])
    if result.spec.kind_object.graded:
        coords["threshold"] = list(range(1, result.design.max_score + 1))
    return dims, coords


Variables = dict[str, tuple[list[str], np.ndarray]]


def group_layout(result: FitLike, *, stored: bool = False) -> tuple[dict[str, Variables], dict[str, Any],
                                                                     dict[str, Any]]:
    """The InferenceData groups of a fit, once for both writers: {group: {variable: (dims, values)}}, coords, attrs.

    posterior (chain, draw, ...), log_likelihood ``y`` (chain, draw, cell) per observed response,
    sample_stats (NUTS), observed_data ``response`` (item, examinee; NaN where missing; ``stored``: as
    :func:`observed_responses` gives it). Dimensions without a name are arviz's ``<variable>_dim_<i>``.
    """
    dims, coords = _dims(result)
    chains = max(result.chains, 1)
    coords = {**coords, "chain": np.arange(chains)}
    chain_draw = ["chain", "draw"]
    groups: dict[str, Variables] = {
        "posterior": {k: (chain_draw + dims.get(k, [f"{k}_dim_{i}" for i in range(v.ndim - 2)]), v)
                      for k, v in _posterior_arrays(result).items()}}
    loglik = pointwise_loglik(result)
    if loglik is not None:
        rows, cols = np.nonzero(result.design.mask)
        items, examinees = result.design.items, result.design.examinees
        coords["cell"] = np.array([f"{items[i]}|{examinees[m]}" for i, m in zip(rows.tolist(), cols.tolist())],
                                  dtype=object)
        groups["log_likelihood"] = {"y": (chain_draw + ["cell"], loglik)}
    if result.sample_stats:
        groups["sample_stats"] = {k: (chain_draw, np.asarray(v).reshape((chains, -1)))
                                  for k, v in result.sample_stats.items()}
    groups["observed_data"] = {"response": (["item", "examinee"], observed_responses(result, stored=stored))}
    attrs = {"inference_library": "irtexam", "model": result.spec.kind, "method": result.method,
             "facets": ",".join(result.spec.facets), "seed": int(result.seed)}
    return groups, coords, attrs


def observed_responses(result: FitLike, *, stored: bool = False) -> np.ndarray:
    """The observed data, (item, examinee) float32 with NaN where missing: the fit's ResponseMatrix values
    themselves where they are the design's (no copy: 10^8 cells are 400 MB), else built from the design.
    ``stored``: the matrix as the ResponseMatrix keeps it (:attr:`~irtexam.responses.ResponseMatrix.cells`:
    integer codes, -1 missing, for a matrix read from a plain long table), for a writer that takes either."""
    responses = getattr(result, "responses", None)
    values = getattr(responses, "cells" if stored else "values", None)
    if values is not None and values.shape == result.design.mask.shape:
        return values
    return np.where(result.design.mask, result.design.y, np.nan).astype(np.float32)


def to_inference_data(result: FitLike) -> Any:
    """Build an arviz InferenceData from :func:`group_layout`: posterior, log_likelihood (per observed cell),
    sample_stats, observed_data."""
    az = _arviz()
    groups, coords, attrs = group_layout(result)
    values = {group: {name: value for name, (_, value) in variables.items()} for group, variables in groups.items()}
    dims = {name: list(d[2:]) if group != "observed_data" else list(d)
            for group, variables in groups.items() for name, (d, _) in variables.items()}
    coords = {k: (list(v) if k == "cell" else v) for k, v in coords.items()}
    return az.from_dict(**values, coords=coords, dims=dims, attrs=attrs)


def _write_group(file: Any, name: str, variables: dict[str, tuple[list[str], np.ndarray]],
                 coords: dict[str, Any], attrs: dict[str, Any], dim_ids: list[int]) -> None:
    """One InferenceData group as a netCDF-4 group, written with h5py: dimension coordinates, then the variables.

    The layout is the one h5netcdf (and netCDF-C) writes: every dimension is a dimension-scale
    dataset (CLASS/NAME) with a file-unique ``_Netcdf4Dimid``; every variable has its dimension
    scales attached (DIMENSION_LIST) and ``_Netcdf4Coordinates`` listing their ids. h5netcdf
    itself spends ~0.15 s of Python per fit on the same file (dimension bookkeeping per variable).
    """
    import h5py

    group = file.create_group(name)
    sizes: dict[str, int] = {}
    for dims, values in variables.values():
        sizes.update(dict(zip(dims, np.shape(values.scores if isinstance(values, FilledScores) else values))))
    scales = {}
    for dim in sorted(sizes):
        values = np.asarray(coords.get(dim, np.arange(sizes[dim])))
        if values.dtype.kind in "OUS":
            scale = group.create_dataset(dim, data=values.astype(object), dtype=h5py.string_dtype())
        else:
            scale = group.create_dataset(dim, data=values)
        scale.make_scale(dim)
        scale.attrs["_Netcdf4Dimid"] = np.int32(dim_ids[0])
        scale.attrs["_Netcdf4Coordinates"] = np.array([dim_ids[0]], dtype=np.int32)
        scales[dim] = (scale, dim_ids[0])
        dim_ids[0] += 1
    for var_name, (dims, values) in variables.items():
        if isinstance(values, FilledScores):  # netCDF's missing values: a fill value, decoded to NaN on reading
            fill = np.asarray(values.fill, dtype=values.scores.dtype)
            variable = group.create_dataset(var_name, data=values.scores, fillvalue=fill)
            variable.attrs["_FillValue"] = fill
        else:
            variable = _dataset_by_blocks(group, var_name, np.asarray(values))
        for axis, dim in enumerate(dims):
            variable.dims[axis].attach_scale(scales[dim][0])
        ids = [scales[dim][1] for dim in dims]
        variable.attrs["_Netcdf4Coordinates"] = np.array(ids, dtype=np.int32)
        variable.attrs["_Netcdf4Dimid"] = np.int32(ids[0])
    for key, value in attrs.items():
        group.attrs[key] = np.atleast_1d(value) if isinstance(value, (int, float, np.number)) else value


def _dataset_by_blocks(group: Any, name: str, values: np.ndarray, max_values: int = 1 << 20) -> Any:
    """``group[name]`` holding ``values``, written a block of ``max_values`` along its first axis longer than 1:
    h5py copies a strided array whole before writing it (the reported a, c and d draws are views of one block of item
    draws: 23 MB each at 500 draws of 12,032 items), and only a block at a time here."""
    if values.size <= max_values or values.flags.c_contiguous:
        return group.create_dataset(name, data=values)
    dataset = group.create_dataset(name, shape=values.shape, dtype=values.dtype)
    axis = next(k for k, n in enumerate(values.shape) if n > 1)
    step = max(1, max_values * values.shape[axis] // values.size)
    for start in range(0, values.shape[axis], step):
        index = (slice(None),) * axis + (slice(start, start + step),)
        dataset[index] = np.ascontiguousarray(values[index])
    return dataset


class FilledScores(NamedTuple):
    """Integer scores with ``fill`` where missing, written as a netCDF variable with that _FillValue."""
    scores: np.ndarray
    fill: int


def compact_observed(values: np.ndarray) -> np.ndarray | FilledScores:
    """Observed scores (NaN where missing, or integer codes with -1) as the smallest netCDF form readers decode
    back to them: int8 with
    _FillValue -1 (:class:`FilledScores`; xarray and arviz read float32 with NaN) where every score is a whole number
    in 0..127 (a quarter of the float32 bytes: 27 MB instead of 106 MB at 12,032 x 2,211), else unchanged."""
    from ..io_tables import missing_coded, whole_scores_fit

    if not whole_scores_fit(values, 127):
        return values
    return FilledScores(missing_coded(values, np.int8), -1)


def write_netcdf(result: FitLike, path: str | Path) -> None:
    """Write the fit's InferenceData to netCDF-4 without importing arviz or h5netcdf (h5py directly).

    The groups and names are arviz's (posterior, log_likelihood, sample_stats,
    observed_data, each with chain/draw and labelled dims), so ``arviz.from_netcdf``
    reads the file back as InferenceData; importing arviz costs seconds a CLI fit
    should not pay.
    """
    import h5py

    groups, coords, attrs = group_layout(result, stored=True)
    groups["posterior"] = {k: (d, np.asarray(v, dtype=np.float32)) for k, (d, v) in groups["posterior"].items()}
    dims, observed = groups["observed_data"]["response"]
    groups["observed_data"]["response"] = (dims, compact_observed(observed))
    dim_ids = [0]
    with h5py.File(str(path), "w") as file:
        file.attrs["_NCProperties"] = np.bytes_(f"version=2,irtexam,hdf5={h5py.version.hdf5_version},"
                                                f"h5py={h5py.version.version}")
        for name, variables in groups.items():
            _write_group(file, name, variables, coords, attrs, dim_ids)


def save_netcdf(idata: Any, path: str | Path) -> None:
    """Write InferenceData to a netCDF file (h5netcdf engine)."""
    idata.to_netcdf(str(path), engine="h5netcdf")


def load_netcdf(path: str | Path) -> Any:
    """Read InferenceData written by :func:`save_netcdf`."""
    az = _arviz()

    return az.from_netcdf(str(path), engine="h5netcdf")


def posterior_draws(idata: Any) -> dict[str, np.ndarray]:
    """Posterior variables as arrays (chain * draw, ...), chain-major."""
    out = {}
    for name, array in idata.posterior.data_vars.items():
        values = np.asarray(array.values)
        out[name] = values.reshape((-1,) + values.shape[2:])
    return out


def rhat_ess(idata: Any) -> Any:
    """arviz summary with R-hat and ESS for every posterior variable."""
    az = _arviz()

    return az.summary(idata, kind="diagnostics")
