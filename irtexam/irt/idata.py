"""Every arviz call of irtexam lives here (arviz 0.x on Python 3.11, 1.x later).

MAP and NUTS fits share one container: the ``posterior`` group holds a, b, c
(dim ``item``), theta (dim ``examinee``), theta_<facet> (dim <facet>) and, for the
GRM, thresholds (dims ``item``, ``threshold``); a MAP fit is one chain with one draw.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .fit import FitResult


def _arviz() -> Any:
    """Import arviz without its import-time FutureWarning banner."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def _posterior_arrays(result: "FitResult") -> dict[str, np.ndarray]:
    """Constrained draws shaped (chain, draw, ...) for the posterior group."""
    import jax.numpy as jnp
    from . import model as mdl

    if result.samples is not None:
        chains = max(result.chains, 1)
        return {k: v.reshape((chains, -1) + v.shape[1:]) for k, v in result.samples.items()
                if k in _variable_names(result)}
    constrained = mdl.constrain({k: jnp.asarray(v) for k, v in result.params.items()}, result.spec, result.design)
    return {k: np.asarray(v, dtype=np.float64)[None, None] for k, v in constrained.items()
            if k in _variable_names(result)}


def _variable_names(result: "FitResult") -> set[str]:
    names = {"a", "b", "c", "d", "theta", "sigma_resid"} | {f"theta_{f}" for f in result.spec.facets}
    if result.spec.kind == "grm":
        names |= {"thresholds"}
        names.discard("c")
    return names


def _dims(result: "FitResult") -> tuple[dict[str, list[str]], dict[str, Any]]:
    dims: dict[str, list[str]] = {"a": ["item"], "b": ["item"], "c": ["item"], "d": ["item"], "theta": ["examinee"],
                                  "thresholds": ["item", "threshold"]}
    coords: dict[str, Any] = {"item": list(result.design.items), "examinee": list(result.design.examinees)}
    for facet in result.spec.facets:
        dims[f"theta_{facet}"] = [facet]
        coords[facet] = list(result.design.facet_levels[facet])
    if result.spec.kind == "grm":
        coords["threshold"] = list(range(1, result.design.max_score + 1))
    return dims, coords


def to_inference_data(result: "FitResult") -> Any:
    """Build an arviz InferenceData (posterior + observed_data + sample_stats attributes)."""
    az = _arviz()

    dims, coords = _dims(result)
    posterior = _posterior_arrays(result)
    used_dims = {k: v for k, v in dims.items() if k in posterior}
    observed = {"response": np.where(result.design.mask, result.design.y, np.nan)}
    idata = az.from_dict(posterior=posterior, observed_data=observed,
                         coords={**coords}, dims={**used_dims, "response": ["item", "examinee"]},
                         attrs={"model": result.spec.kind, "method": result.method,
                                "facets": ",".join(result.spec.facets), "seed": result.seed})
    return idata


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
