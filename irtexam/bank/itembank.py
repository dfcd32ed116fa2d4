"""The calibrated item bank: a fit's binary item parameters and their posterior draws.

A calibrated fit (``irtexam fit ... --out FITDIR``) is an item bank: its point estimates, S joint
posterior draws of the item parameters (integrated out by the adaptive test, :mod:`.cat`) and, when
the fit folder keeps them, the calibration responses (for the ``anchors`` and ``stratified`` item
selection rules, :mod:`.select`, and the misfit curve of :func:`irtexam.bank.adapt.misfit_curve`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import IrtexamError
from ..irt import kinds


def stack_point(params: kinds.ItemParams) -> kinds.ItemParams:
    """Point estimates (I,) as a single 'draw' (1, I)."""
    return kinds.ItemParams(*(None if v is None else np.asarray(v, float)[None] for v in params))


@dataclass
class ItemBank:
    """Calibrated binary items: ids, point estimates and (S, I) joint posterior draws.

    ``draws`` is an :class:`~irtexam.irt.kinds.ItemParams` whose arrays have shape (S, I)
    (S = 1 when the fit has no draws: the point estimates only).
    """

    ids: tuple[str, ...]
    params: kinds.ItemParams
    draws: kinds.ItemParams
    source: str | None = None
    calibration: np.ndarray | None = None     # (I, E) calibration responses (NaN missing), for ``anchors``
    cache: dict = field(default_factory=dict, repr=False, compare=False)   # misfit curves, item orders

    @property
    def n_items(self) -> int:
        """Number of items I."""
        return len(self.ids)

    def __repr__(self) -> str:
        calibration = "" if self.calibration is None else f", calibrated on {np.shape(self.calibration)[1]} examinees"
        return (f"ItemBank: {describe_items(self.params)}; {self.n_draws} posterior draw(s){calibration}"
                f"{'' if self.source is None else ', from ' + self.source}")

    @property
    def n_draws(self) -> int:
        """Number of item-parameter draws S."""
        return int(np.shape(self.draws.a)[0])

    def point(self) -> "ItemBank":
        """The same bank with the point estimates only (one 'draw')."""
        return ItemBank(self.ids, self.params, stack_point(self.params), self.source, self.calibration)

    @classmethod
    def from_params(cls, params: kinds.ItemParams, ids: Sequence[str] | None = None) -> "ItemBank":
        """A bank of known binary item parameters (no posterior draws); ids q0, q1, ... unless given."""
        n = int(np.size(params.a))
        return cls(tuple(map(str, ids)) if ids is not None else tuple(f"q{j}" for j in range(n)), params,
                   stack_point(kinds.ItemParams(*params[:3])))

    @classmethod
    def from_fit(cls, fit: Any, draws: int | None = 100, seed: int = 0, source: str | None = None) -> "ItemBank":
        """The bank of a :class:`~irtexam.irt.result.FitResult` (``draws`` item draws; 0/None: point estimates)."""
        point = kinds.from_table(fit.items)
        if point.graded:
            raise IrtexamError(f"{source or 'the fit'}: adaptive testing needs binary items (1PL/2PL/3PL); "
                               f"this fit is a graded response model: refit with --model 3pl")
        ids = tuple(str(i) for i in fit.items.index)
        if draws and fit.samples is not None:
            d = fit.item_draws(draws, seed).values
            stacked = kinds.ItemParams(a=np.asarray(d["a"], float), b=np.asarray(d["b"], float),
                                       c=np.asarray(d["c"], float))
        else:
            stacked = stack_point(point)
        calibration = None
        if getattr(fit, "responses", None) is not None and set(ids) <= set(fit.responses.items):
            calibration = fit.responses.subset(items=list(ids)).values
        return cls(ids, point, stacked, source, calibration)

    @classmethod
    def load(cls, directory: str | Path, draws: int | None = 100, seed: int = 0) -> "ItemBank":
        """The bank of a fit folder; a one-line error when it has no item parameters."""
        fit = load_fit_checked(directory)
        return cls.from_fit(fit, draws=draws, seed=seed, source=str(directory))


def describe_items(params: kinds.ItemParams) -> str:
    """One line on a bank's item parameters: how many, which model they are, the range of a and b (and c), for
    the banks' reprs (their arrays would fill a screen)."""
    a, b = np.asarray(params.a, float).ravel(), np.asarray(params.b, float).ravel()
    if a.size == 0:
        return "0 items"
    c = None if params.c is None else np.asarray(params.c, float).ravel()
    free_guessing = not params.graded and c is not None and bool(np.any(c != c[0]))
    if params.graded:
        name = f"graded, {params.n_categories} categories"
    elif free_guessing:
        name = "3PL"
    else:
        name = ("1PL" if np.allclose(a, a[0]) else "2PL") + ("" if c is None or c[0] == 0 else f", c = {c[0]:g}")
    line = f"{a.size} items ({name}), a {a.min():.2f} to {a.max():.2f}, b {b.min():.2f} to {b.max():.2f}"
    return line + (f", c {c.min():.2f} to {c.max():.2f}" if free_guessing else "")


def load_fit_checked(directory: str | Path) -> Any:
    """``load_fit(directory)`` after checking it holds item parameters (items.csv with a, b)."""
    from ..irt.result import load_fit

    directory = Path(directory)
    items = directory / "items.csv"
    if not directory.is_dir():
        raise IrtexamError(f"{directory}: no such fit folder; create it with `irtexam fit RESPONSES --out {directory}`")
    if not items.exists():
        raise IrtexamError(f"{items}: missing, the fit folder has no item parameters; "
                           f"run `irtexam fit RESPONSES --out {directory}` first")
    columns = pd.read_csv(items, nrows=0).columns
    if "b" not in columns and "b_1" not in columns:
        raise IrtexamError(f"{items}: no item parameter columns (a, b, c); it is not an item table written by "
                           f"`irtexam fit`: refit with `irtexam fit RESPONSES --out {directory}`")
    return load_fit(directory)
