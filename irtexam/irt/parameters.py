"""Parameters declared once: every site of an IRT model with its prior and bijector.

A :class:`Site` says what one named parameter array is (in the style of dynamax's
``ParameterProperties``): the bijector from the unconstrained value the estimators move
(log a, d, logit c, log gap, ...) to the reported one, its prior, the hyperparameter that
locates that prior (``item_prior="hierarchical"``), and how many trailing axes form one
event (the GRM's gaps). Everything the estimators need is derived from the sites:

* the log prior of the unconstrained values, Jacobians included (:meth:`Site.log_prior`),
  and its elementwise gradient and precision (:meth:`Site.prior_terms`, used by the
  alternating MAP solver, the Laplace step and the marginal EM);
* constrain / unconstrain (:meth:`Site.constrain`, :meth:`Site.unconstrain`);
* the NumPyro sample statements (:meth:`Site.distribution`), whose potential energy equals
  the negative log prior above (tested: ``tests/test_irt_likelihood.py``).

The sites of a model come from its kind object (:meth:`irtexam.irt.kinds.Kind.item_sites`)
and :func:`hyper_sites` / :func:`person_sites` below. This module imports neither the kinds
nor the model: it is the bottom of ``irt/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

LOG_2PI = float(np.log(2.0 * np.pi))


def _xp(*arrays: Any) -> Any:
    """jax.numpy when any input is a JAX array (or tracer), else NumPy."""
    return jnp if any(isinstance(x, jax.Array) for x in arrays if x is not None) else np


# ----------------------------------------------------------------------------- densities
def normal_logpdf(x: Any, loc: Any, scale: Any) -> Any:
    """Elementwise log N(x | loc, scale^2) = -((x - loc) / scale)^2 / 2 - log scale - log(2 pi) / 2."""
    xp = _xp(x, loc, scale)
    return -0.5 * ((x - loc) / scale) ** 2 - xp.log(scale) - 0.5 * LOG_2PI


def _log_sigmoid(xp: Any, u: Any) -> Any:
    """log sigmoid(u) = -softplus(-u), without overflow."""
    return jax.nn.log_sigmoid(u) if xp is jnp else -np.logaddexp(0.0, -u)


def log_beta_function(alpha: Any, beta: Any) -> Any:
    """log B(alpha, beta) = lgamma(alpha) + lgamma(beta) - lgamma(alpha + beta)."""
    from jax.scipy.special import gammaln
    return gammaln(alpha) + gammaln(beta) - gammaln(alpha + beta)


def logit_beta_logpdf(u: Any, alpha: Any, beta: Any) -> Any:
    """Log density of u = logit(c) when c ~ Beta(alpha, beta) (Jacobian c (1 - c) included).

    log p(u) = alpha log c + beta log(1 - c) - log B(alpha, beta),  c = sigmoid(u).
    """
    xp = _xp(u, alpha, beta)
    log_normaliser = log_beta_function(alpha, beta)  # first: the order of the gradient's sums follows the trace
    return alpha * _log_sigmoid(xp, u) + beta * _log_sigmoid(xp, -u) - log_normaliser


def half_normal_log_logpdf(log_sigma: Any, scale: float) -> Any:
    """Log density of log(sigma) when sigma ~ HalfNormal(scale) (Jacobian sigma included):
    log 2 + log N(sigma | 0, scale^2) + log sigma."""
    xp = _xp(log_sigma)
    return np.log(2.0) + normal_logpdf(xp.exp(log_sigma), 0.0, scale) + log_sigma


# ----------------------------------------------------------------------------- bijectors
@dataclass(frozen=True)
class Bijector:
    """A map from the unconstrained real line to a parameter's support, and its inverse.

    ``forward(u, xp)`` gives the reported value, ``inverse(x, xp)`` the unconstrained one.
    """

    name: str
    forward: Callable[[Any, Any], Any]
    inverse: Callable[[Any, Any], Any]


IDENTITY = Bijector("identity", lambda u, xp: u, lambda x, xp: x)
EXP = Bijector("exp", lambda u, xp: xp.exp(u), lambda x, xp: xp.log(x))
SIGMOID = Bijector("sigmoid", lambda u, xp: 1.0 / (1.0 + xp.exp(-u)), lambda x, xp: xp.log(x) - xp.log1p(-x))


# ----------------------------------------------------------------------------- priors
@dataclass(frozen=True)
class Normal:
    """u ~ N(loc, scale^2) on the unconstrained value (with an exp bijector: LogNormal on the reported one).

    The location is ``loc`` or, for a site with a hyperparameter, the hyperparameter's value.
    Gradient -(u - loc) / scale^2, precision 1 / scale^2.
    """

    loc: float
    scale: float

    def location(self, hyper_value: Any = None) -> Any:
        """The prior's centre: the hyperparameter's value when there is one."""
        return self.loc if hyper_value is None else hyper_value

    def log_density(self, u: Any, location: Any) -> Any:
        """log N(u | location, scale^2), elementwise."""
        return normal_logpdf(u, location, self.scale)

    def terms(self, u: Any, location: Any, xp: Any) -> tuple[Any, Any]:
        """Gradient and precision (-d2/du2) of the log density, elementwise."""
        return -(u - location) / self.scale ** 2, xp.full_like(u, 1.0 / self.scale ** 2)

    def distribution(self, location: Any, bijector: Bijector) -> Any:
        """The NumPyro distribution of the reported value: Normal, or LogNormal under an exp bijector."""
        import numpyro.distributions as dist
        if bijector is EXP:
            return dist.LogNormal(location, self.scale)
        return dist.Normal(location, self.scale)


@dataclass(frozen=True)
class LogitBeta:
    """c ~ Beta(kappa m, kappa (1 - m)) with mean m, on u = logit c (Jacobian included).

    m = ``mean`` or, for a site with a hyperparameter mu, sigmoid(mu). Gradient
    alpha - (alpha + beta) c, precision (alpha + beta) c (1 - c).
    """

    concentration: float
    mean: float

    def location(self, hyper_value: Any = None) -> tuple[Any, Any]:
        """(alpha, beta) of the Beta prior: kappa m, kappa (1 - m)."""
        if hyper_value is None:
            m: Any = self.mean
        else:
            xp = _xp(hyper_value) if not isinstance(hyper_value, float) else np
            m = 1.0 / (1.0 + xp.exp(-hyper_value))
        return self.concentration * m, self.concentration * (1.0 - m)

    def log_density(self, u: Any, location: tuple[Any, Any]) -> Any:
        """alpha log c + beta log(1 - c) - log B(alpha, beta), c = sigmoid(u)."""
        return logit_beta_logpdf(u, *location)

    def terms(self, u: Any, location: tuple[Any, Any], xp: Any) -> tuple[Any, Any]:
        """Gradient and precision of the log density in u, elementwise."""
        alpha, beta = location
        c = 1.0 / (1.0 + xp.exp(-u))
        return alpha - (alpha + beta) * c, (alpha + beta) * c * (1.0 - c)

    def distribution(self, location: tuple[Any, Any], bijector: Bijector) -> Any:
        """NumPyro's Beta(alpha, beta) on c."""
        import numpyro.distributions as dist
        return dist.Beta(*location)


@dataclass(frozen=True)
class HalfNormal:
    """sigma ~ HalfNormal(scale) on the reported value, u = log sigma (Jacobian included)."""

    scale: float

    def location(self, hyper_value: Any = None) -> None:
        """No location: the half-normal is anchored at 0."""
        return None

    def log_density(self, u: Any, location: Any) -> Any:
        """log 2 + log N(e^u | 0, scale^2) + u."""
        return half_normal_log_logpdf(u, self.scale)

    def terms(self, u: Any, location: Any, xp: Any) -> tuple[Any, Any]:
        """Gradient 1 - e^(2u) / scale^2 and precision 2 e^(2u) / scale^2."""
        ratio = xp.exp(2.0 * u) / self.scale ** 2
        return 1.0 - ratio, 2.0 * ratio

    def distribution(self, location: Any, bijector: Bijector) -> Any:
        """NumPyro's HalfNormal(scale)."""
        import numpyro.distributions as dist
        return dist.HalfNormal(self.scale)


Prior = Normal | LogitBeta | HalfNormal


# ----------------------------------------------------------------------------- sites
@dataclass(frozen=True)
class Site:
    """One named parameter array: bijector, prior, the hyperparameter locating the prior, event axes.

    ``role`` is "item" (one value, or one event, per item), "hyper" (a scalar centre of an item
    prior) or "person" (abilities, facet coordinates, residuals). ``event_size`` > 0 makes each
    item's value a vector of that length (the GRM's K - 1 gaps), summed as one event.
    """

    name: str
    bijector: Bijector
    prior: Prior
    role: str = "item"
    hyper: str | None = None
    event_size: int = 0

    def constrain(self, u: Any, xp: Any = None) -> Any:
        """The reported value of the unconstrained ``u``."""
        return self.bijector.forward(u, xp or _xp(u))

    def unconstrain(self, x: Any, xp: Any = None) -> Any:
        """The unconstrained value of the reported ``x``."""
        return self.bijector.inverse(x, xp or _xp(x))

    def location(self, hyper: Mapping[str, Any] | None = None) -> Any:
        """The prior's location given the hyperparameters (the fixed one without them)."""
        value = (hyper or {}).get(self.hyper) if self.hyper else None
        return self.prior.location(value)

    def log_prior(self, u: Any, hyper: Mapping[str, Any] | None = None) -> Any:
        """Log prior density of ``u`` per item (events summed), Jacobian included."""
        density = self.prior.log_density(u, self.location(hyper))
        return density.sum(axis=-1) if self.event_size else density

    def prior_terms(self, u: Any, hyper: Mapping[str, Any] | None = None, xp: Any = None) -> tuple[Any, Any]:
        """Elementwise gradient and precision (-d2/du2) of the log prior of ``u``."""
        return self.prior.terms(u, self.location(hyper), xp or _xp(u))

    def distribution(self, hyper: Mapping[str, Any] | None = None) -> Any:
        """The NumPyro distribution of the reported value (events folded into one event)."""
        dist = self.prior.distribution(self.location(hyper), self.bijector)
        return dist.expand([self.event_size]).to_event(1) if self.event_size else dist


def hyper_site(site: Site, prior: Normal) -> Site:
    """The scalar hyperparameter site that locates ``site``'s prior."""
    if not site.hyper:
        raise ValueError(f"site '{site.name}' has no hyperparameter")
    return Site(site.hyper, IDENTITY, prior, role="hyper")


def sample_numpyro(site: Site, hyper: Mapping[str, Any] | None = None) -> Any:
    """``numpyro.sample`` of a site; returns its unconstrained value (the estimators' coordinates)."""
    import numpyro
    value = numpyro.sample(site.name, site.distribution(hyper))
    return site.unconstrain(value, jnp)
