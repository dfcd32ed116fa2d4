"""Item response theory core: pure JAX likelihoods, NumPyro models, MAP and NUTS fits.

Imports neither torch nor transformers.
"""

from .compile_cache import enable_compilation_cache

enable_compilation_cache()

from .fit import fit  # noqa: E402
from .result import FitResult, load_fit  # noqa: E402
from .likelihood import bernoulli_loglik, graded_category_logprobs, prob_correct  # noqa: E402
from .model import ModelSpec  # noqa: E402
from .simulate import simulate  # noqa: E402

__all__ = ["FitResult", "ModelSpec", "bernoulli_loglik", "fit", "graded_category_logprobs", "load_fit",
           "prob_correct", "simulate"]
