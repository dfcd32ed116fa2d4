"""The ability scale: abilities from the raw ability sites, standardised so the scale is fixed exactly.

The likelihood is invariant under theta -> s theta, a -> a / s; irtexam pins the scale by
reporting abilities divided by the standard deviation of the raw ones across examinees
(except in the 1PL, where a = 1 fixes the unit). These functions read ``spec.facets``,
``spec.residual`` and ``spec.has_discrimination`` of a :class:`~irtexam.irt.model.ModelSpec` and
the facet layout of a :class:`~irtexam.irt.design.Design`; NumPy or JAX, any leading draw axes.
"""

from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

from .design import Design
from .parameters import _xp as _array_xp
from .parameters import normal_logpdf


def _xp(params: Mapping[str, Any]) -> Any:
    """jax.numpy for JAX inputs (traceable), NumPy otherwise (no eager JAX, no compilation)."""
    return _array_xp(*params.values())


def _raw_facet_thetas(params: Mapping[str, jax.Array], spec: Any, design: Design) -> dict[str, jax.Array]:
    """Raw level values basis_f z_f of each facet term; z may carry leading draw dimensions."""
    xp = _xp(params)
    return {facet: params[f"z_{facet}"] @ xp.asarray(design.facet_basis[facet].T, dtype=params[f"z_{facet}"].dtype)
            for facet in spec.facets}


def _raw_examinee_theta(params: Mapping[str, jax.Array], spec: Any, design: Design) -> jax.Array:
    if not spec.facets:
        return params["theta_raw"]
    levels = _raw_facet_thetas(params, spec, design)
    theta = 0.0
    for facet in spec.facets:
        theta = theta + levels[facet][..., design.facet_index[facet]]
    if spec.residual:
        xp = _xp(params)
        theta = theta + xp.exp(params["sigma_resid"])[..., None] * params["resid"]
    return theta


def ability_scale(params: Mapping[str, jax.Array], spec: Any, design: Design) -> jax.Array:
    """Standard deviation of the raw examinee abilities; dividing by it fixes the ability scale.

    The likelihood is invariant under theta -> s theta, a -> a / s, so the scale must be
    pinned. irtexam pins it exactly: reported abilities have standard deviation 1 across
    the examinees (and, without facets, mean 0). Leaving it to the priors lets the joint
    mode shrink the scale (about 0.8 of the truth on a 300 x 500 2PL). Leading (draw)
    dimensions are kept: the sd is over the last axis.
    """
    xp = _xp(params)
    raw = _raw_examinee_theta(params, spec, design)
    return xp.sqrt(xp.mean((raw - raw.mean(axis=-1, keepdims=True)) ** 2, axis=-1) + 1e-12)


def fixes_scale(spec: Any) -> bool:
    """True when reported abilities are standardised (sd 1): every model with discriminations.

    In the 1PL every a is 1, which already fixes the unit of theta (the logit); its
    abilities keep their own spread, estimated from the data under the N(0, theta_scale^2)
    prior (the Rasch model with a normal ability prior), and are only centred.
    """
    return spec.has_discrimination


def _scale(params: Mapping[str, jax.Array], spec: Any, design: Design) -> Any:
    """The ability scale with a trailing axis for broadcasting ((..., 1)), or 1.0 for the 1PL."""
    return ability_scale(params, spec, design)[..., None] if fixes_scale(spec) else 1.0


def facet_thetas(params: Mapping[str, jax.Array], spec: Any, design: Design) -> dict[str, jax.Array]:
    """Level abilities of each facet on the fixed ability scale: theta_f = basis_f z_f / s (1PL: s = 1)."""
    scale = _scale(params, spec, design)
    return {facet: value / scale for facet, value in _raw_facet_thetas(params, spec, design).items()}


def examinee_theta(params: Mapping[str, jax.Array], spec: Any, design: Design) -> jax.Array:
    """Ability of each examinee on the fixed scale (sd 1 across examinees).

    Without facets: theta_m = (raw_m - mean(raw)) / sd(raw). With facets:
    theta_m = (sum_f theta_f[level_f(m)] + sigma e_m) / s, the location fixed by the
    facet identification (sum-to-zero or reference level) and s = sd of the raw sum.
    1PL: s = 1 (the unit is fixed by a = 1; see :func:`fixes_scale`). NumPy or JAX,
    with any leading (draw) dimensions.
    """
    raw = _raw_examinee_theta(params, spec, design)
    scale = _scale(params, spec, design)
    if not spec.facets:
        return (raw - raw.mean(axis=-1, keepdims=True)) / scale
    return raw / scale


SCALE_ANCHOR_SD = 0.1


def scale_anchor(params: Mapping[str, jax.Array], spec: Any, design: Design) -> jax.Array:
    """log N(log s | 0, 0.1^2) for the raw ability scale s (see :func:`ability_scale`).

    Reported abilities are raw / s, so neither the likelihood nor any reported
    quantity depends on s; but the N(0, 1) prior on the raw values alone would pull s
    to 0 (an unbounded, ill-conditioned MAP direction). This term gives that nuisance
    direction a finite mode. It is part of the NumPyro model too.
    """
    if not fixes_scale(spec):
        return jnp.zeros(())  # 1PL: the raw scale is the reported one, its prior alone sets it
    return normal_logpdf(jnp.log(ability_scale(params, spec, design)), 0.0, SCALE_ANCHOR_SD)
