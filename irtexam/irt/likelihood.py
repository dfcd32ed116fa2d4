"""Public names of the response functions and log-likelihoods (kept for their import paths).

Each name here is the one definition it re-exports: the response functions of
:mod:`irtexam.irt.kinds`, the fused kernels of :mod:`irtexam.irt.fused` and the prior densities
of :mod:`irtexam.irt.parameters`. ``tests/test_irt_redesign.py`` checks that they are the same
objects.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .fused import binary_loglik, graded_category_logprobs, graded_loglik
from .kinds import ItemParams, cell_loglik, prob_correct
from .parameters import half_normal_log_logpdf, logit_beta_logpdf, normal_logpdf

Array = jax.Array

__all__ = ["bernoulli_loglik", "bernoulli_loglik_cells", "binary_loglik", "graded_category_logprobs",
           "graded_loglik", "half_normal_log_logpdf", "logit_beta_logpdf", "normal_logpdf", "prob_correct"]


def bernoulli_loglik_cells(y: Array, theta: Array, a: Array, b: Array, c: Array | float = 0.0) -> Array:
    """Per-cell log-likelihood y log P + (1 - y) log(1 - P) for 0/1 ``y`` (no masking), broadcast as given:
    :func:`irtexam.irt.kinds.cell_loglik` of the 3PL items (a, b, c) (c a Python zero: the 2PL)."""
    no_guessing = isinstance(c, (int, float)) and c == 0.0
    return cell_loglik(y, theta, ItemParams(a=a, b=b, c=None if no_guessing else c), pairwise=True)


def bernoulli_loglik(y: Array, mask: Array, theta: Array, a: Array, b: Array, c: Array | float = 0.0) -> Array:
    """Total log-likelihood over observed cells (paper eq. 2).

    L = sum_{i, m observed} r_im log p_i(theta_m) + (1 - r_im) log(1 - p_i(theta_m)).
    ``y`` and ``mask`` are (n_items, n_examinees); missing cells have mask 0.
    """
    return jnp.sum(jnp.where(mask, bernoulli_loglik_cells(y, theta, a, b, c), 0.0))
