"""One configuration for a fit: the option table from which ``fit()``'s checks and ``irtexam fit``'s flags come.

A fit has three kinds of settings, kept apart as scikit-learn keeps ``_parameter_constraints``:

* the **model** (:class:`irtexam.irt.model.ModelSpec`): ``model`` (the kind), ``facets``, ``guessing``,
  ``n_choices``, ``identify``, ``residual``, ``item_prior``, ``slope_centre``, ``guessing_centre``;
* the **estimator** (:class:`EstimatorOptions`): ``method`` and how it runs (seed, held-out cells,
  NUTS chains, EM tolerance, ...);
* the **output** (:class:`OutputOptions`): how many posterior draws a fit keeps, progress bars.

Every option is one row of :data:`OPTIONS` (:class:`Option`): its default, its allowed values (a
:class:`irtexam.options.Number`, a tuple of choices, ``bool``, or free), its help text and its CLI flag.
``irtexam fit``'s arguments, choices, defaults and help are generated from the table
(:func:`add_arguments`), and every value given to ``fit()`` is checked against it with one error
template (:func:`check`): ``fit: OPTION must be ALLOWED, got VALUE``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any, Mapping

from .errors import IrtexamError
from .options import GUESSING, HELDOUT, N_CHOICES, NONNEG_INT, POSITIVE_FLOAT, POSITIVE_INT, PROBABILITY_OPEN, SEED, \
    Number

METHODS = ("em", "map", "nuts")
ANY = None


@dataclass(frozen=True)
class Option:
    """One setting of a fit: name, group, default, allowed values, help, and whether ``irtexam fit`` has a flag.

    ``allowed``: a :class:`~irtexam.options.Number`; a tuple of strings (choices); ``bool``; or None
    (anything, checked where it is used: data such as ``fixed_items``). ``none_ok``: None is allowed too.
    """

    name: str
    group: str
    default: Any
    allowed: Any
    help: str
    cli: bool = True
    none_ok: bool = False

    @property
    def flag(self) -> str:
        """The command-line flag: ``--n-choices`` for ``n_choices``."""
        return "--" + self.name.replace("_", "-")

    def describe(self) -> str:
        """The allowed values in words."""
        if isinstance(self.allowed, Number):
            text = self.allowed.describe()
        elif isinstance(self.allowed, tuple):
            text = "one of " + ", ".join(repr(v) for v in tuple(self.allowed))
        elif self.allowed is bool:
            text = "True or False"
        else:
            text = "any value"
        return text + (" (or None)" if self.none_ok else "")


class KindChoices(tuple):
    """The registered model kinds (:data:`irtexam.irt.kinds.REGISTRY`), read when first needed: importing the
    kinds imports JAX, which ``irtexam --help`` and the commands that fit nothing should not pay for."""

    def _names(self) -> tuple[str, ...]:
        from .irt.kinds import REGISTRY
        return tuple(REGISTRY)

    def __iter__(self):  # type: ignore[override]
        return iter(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


OPTIONS: tuple[Option, ...] = (
    # model
    Option("model", "model", "3pl", KindChoices(), "the model kind: 1PL, 2PL, 3PL (binary) or the graded "
           "response model (scores 0..K)"),
    Option("guessing", "model", None, GUESSING, "fix the guessing parameter c of every item (e.g. 0.25); None lets the "
           "3PL estimate it", none_ok=True),
    Option("n_choices", "model", 4, N_CHOICES, "answer choices per item; the prior on c is centred on 1 / n_choices"),
    Option("identify", "model", "sum-to-zero", ("sum-to-zero", "reference"), "how facet levels are identified: "
           "their levels sum to 0, or the first level is 0"),
    Option("residual", "model", False, bool, "add a per-examinee residual to the facet sum (sigma e_m, "
           "sigma ~ HalfNormal(1))"),
    Option("item_prior", "model", None, ("hierarchical", "fixed", "none"), "hierarchical (the default): the centres "
           "of the priors on log a, d and c are learned from the exam by empirical Bayes (the c centre as "
           "guessing_centre says); fixed: centred on d = 0, c = 1/n_choices, the centre of log a following "
           "slope_centre; none: flat priors, pure marginal maximum likelihood as mirt (em only)", none_ok=True),
    Option("slope_centre", "model", None, ("learned", "fixed"), "the centre of the prior on log a: learned (the "
           "default of em) from the items by empirical Bayes, as BILOG's floating prior, so slopes far from 1 are not "
           "pulled towards it; fixed: a = 1 (BILOG's default; the only choice of map and nuts, whose ability prior "
           "sets the scale)", none_ok=True),
    Option("guessing_centre", "model", None, ("auto", "learned", "fixed"), "the centre of the prior on the 3PL's "
           "c under item_prior hierarchical: auto (the default of em) learns it where the data can inform it (a "
           "median of at least 300 responses per item, and then the responses carry at least 5 percent of the c's "
           "precision) and holds it at 1/n_choices otherwise; learned; fixed: 1/n_choices (map and nuts learn it)",
           none_ok=True),
    # estimator
    Option("method", "estimator", "auto", ("auto",) + METHODS, "auto (default): the marginal estimator (em) without "
           "facets, or the joint mode (map) where the median examinee answered 500 items or more (leaderboards); "
           "with facets NUTS below 50 items, where the joint mode's facet intervals under-cover, the joint "
           "mode (map) otherwise. em: item parameters by marginal likelihood (Bock-Aitkin EM, abilities "
           "integrated out), abilities afterwards by EAP (or abilities=map)"),
    Option("seed", "estimator", 0, SEED, "seeds the held-out split, NUTS and the posterior draws"),
    Option("heldout", "estimator", 0.0, HELDOUT, "fraction of observed cells hidden from the fit and scored "
           "afterwards (0: none)"),
    Option("abilities", "estimator", "eap", ("eap", "map"), "how an em fit estimates abilities given the items"),
    Option("groups", "estimator", None, ANY, "em only: examinee groups with their own ability mean and sd (a facet "
           "column, one label per examinee, or a mapping examinee -> label); the first group is N(0, 1)",
           none_ok=True),
    Option("reference_group", "estimator", None, ANY, "em only: the group whose ability distribution is N(0, 1) "
           "(default: the first)", cli=False, none_ok=True),
    Option("fixed_items", "estimator", None, ANY, "em only: an items table (a, b, c or b_1..b_K by item id) whose "
           "items are held at these values (fixed-item calibration onto a bank's scale)", cli=False, none_ok=True),
    Option("init", "estimator", None, ANY, "a previous FitResult (or unconstrained parameter dict) to start from, "
           "matched by id", cli=False, none_ok=True),
    Option("se", "estimator", True, (True, False, "full", "blockwise", "auto"), "uncertainty of the estimates: True "
           "(every method; map: its Laplace covariance, 'auto'), False (point estimates only); map only: 'full' (items "
           "coupled to abilities) or 'blockwise' (each block alone, too narrow)", cli=False),
    Option("chains", "estimator", 4, POSITIVE_INT, "NUTS chains"),
    Option("warmup", "estimator", 500, NONNEG_INT, "NUTS warm-up iterations per chain"),
    Option("samples", "estimator", 500, POSITIVE_INT, "NUTS draws kept per chain"),
    Option("target_accept", "estimator", 0.9, PROBABILITY_OPEN, "NUTS target acceptance probability"),
    Option("max_iter", "estimator", 5000, POSITIVE_INT, "iteration limit of the MAP optimiser or of the EM cycles",
           cli=False),
    Option("tol", "estimator", 1e-4, POSITIVE_FLOAT, "em only: stop when no parameter moves more than tol in a "
           "cycle", cli=False),
    Option("correct_draws", "estimator", True, bool, "importance-correct the MAP's Laplace draws (True) or keep "
           "them Gaussian", cli=False),
    # output
    Option("draws", "output", None, POSITIVE_INT, "posterior draws a MAP or EM fit keeps (NUTS keeps chains x "
           "samples); default 500, an EM fit of more than 100,000 examinees fewer (50,000,000 / examinees, at "
           "least 100: their ability draws stay near 200 MB)", cli=False, none_ok=True),
    Option("progress", "output", False, bool, "show progress: the sampler's bar (NUTS), a line every 2 s (the "
           "joint mode without facets)", cli=False),
)
BY_NAME: dict[str, Option] = {option.name: option for option in OPTIONS}
MODEL_OPTIONS = tuple(o.name for o in OPTIONS if o.group == "model")


def check(name: str, value: Any, where: str = "fit") -> Any:
    """``value`` of option ``name`` if allowed, else :class:`IrtexamError` ``fit: NAME must be ALLOWED, got VALUE``."""
    option = BY_NAME[name]
    if value is None and option.none_ok:
        return None
    allowed = option.allowed
    ok = True
    if isinstance(allowed, Number):
        try:
            return allowed.check(value, f"{where}: {name}")
        except IrtexamError:
            ok = False
    elif isinstance(allowed, tuple):
        lowered = value.lower() if isinstance(value, str) else value
        ok = any(lowered == choice and type(lowered) is type(choice) for choice in tuple(allowed))
        value = lowered
    elif allowed is bool:
        ok = isinstance(value, bool)
    if not ok:
        raise IrtexamError(f"{where}: {name} must be {option.describe()}, got {value!r}")
    return value


@dataclass(frozen=True)
class EstimatorOptions:
    """How the estimator runs (every field checked against :data:`OPTIONS` when made).

    ``irtexam.fit(responses, model="2pl", method="em", options=EstimatorOptions(tol=1e-5))``; the
    same names are accepted as keywords of :func:`irtexam.fit`. See :data:`OPTIONS` for each one's
    allowed values and meaning.
    """

    seed: int = 0
    heldout: float = 0.0
    abilities: str = "eap"
    groups: Any = None
    reference_group: Any = None
    fixed_items: Any = None
    init: Any = None
    se: bool | str = True
    chains: int = 4
    warmup: int = 500
    samples: int = 500
    target_accept: float = 0.9
    max_iter: int = 5000
    tol: float = 1e-4
    correct_draws: bool = True

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, check(f.name, getattr(self, f.name)))


@dataclass(frozen=True)
class OutputOptions:
    """What a fit keeps and shows: ``draws`` (posterior draws of a MAP or EM fit), ``progress`` (NUTS bar)."""

    draws: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        for f in fields(self):
            object.__setattr__(self, f.name, check(f.name, getattr(self, f.name)))


def split_options(given: Mapping[str, Any], estimator: EstimatorOptions | None = None,
                  output: OutputOptions | None = None) -> tuple[dict[str, Any], EstimatorOptions, OutputOptions]:
    """Keyword options of ``fit()`` sorted into model settings (checked), estimator and output options.

    Unknown names raise ``TypeError`` naming the options there are. A keyword given together with an
    options object overrides the object's value.
    """
    unknown = [name for name in given if name not in BY_NAME or name in ("model", "method")]
    if unknown:
        raise TypeError(f"fit() got unexpected option(s) {', '.join(map(repr, unknown))}; options are: "
                        + ", ".join(o.name for o in OPTIONS if o.name not in ("model", "method")))
    model = {k: check(k, v) for k, v in given.items() if BY_NAME[k].group == "model"}
    estimator_values = {f.name: getattr(estimator, f.name) for f in fields(EstimatorOptions)} if estimator else {}
    estimator_values.update({k: v for k, v in given.items() if BY_NAME[k].group == "estimator"})
    output_values = {f.name: getattr(output, f.name) for f in fields(OutputOptions)} if output else {}
    output_values.update({k: v for k, v in given.items() if BY_NAME[k].group == "output"})
    return model, EstimatorOptions(**estimator_values), OutputOptions(**output_values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``irtexam fit`` flags of every option with ``cli=True``: choices, defaults, types and help from the table."""
    for option in OPTIONS:
        if not option.cli:
            continue
        kwargs: dict[str, Any] = {"default": option.default, "help": option.help}
        if option.allowed is bool:
            kwargs = {"action": "store_true", "help": option.help}
        elif isinstance(option.allowed, Number):
            kwargs["type"] = option.allowed
        elif isinstance(option.allowed, KindChoices):
            # a metavar, and the choices named in the help only when it is shown: argparse would otherwise list
            # them (importing the kinds, so JAX) while the parser is built, for every command
            kwargs.update(choices=option.allowed, metavar=option.name.upper(), help=option.help + ": %(choices)s")
        elif isinstance(option.allowed, tuple):
            kwargs["choices"] = option.allowed
        if option.name == "groups":
            kwargs["metavar"] = "COLUMN"
        parser.add_argument(option.flag, **kwargs)
