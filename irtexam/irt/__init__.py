"""Item response theory core: pure JAX likelihoods, NumPyro models, MAP and NUTS fits.

Imports neither torch nor transformers.
"""

from .fit import FitResult, fit
from .io import load_fit
from .likelihood import bernoulli_loglik, graded_category_logprobs, prob_correct
from .model import ModelSpec
from .simulate import simulate

__all__ = ["FitResult", "ModelSpec", "bernoulli_loglik", "fit", "graded_category_logprobs", "load_fit",
           "prob_correct", "simulate"]
