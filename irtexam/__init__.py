"""irtexam: evaluate RAG pipelines with generated exams and item response theory.

The statistics core (ResponseMatrix, fit, simulate, information, pruning, plots)
imports neither torch nor transformers; the LLM stack is in ``irtexam[llm]``.
Heavy submodules are imported lazily on first attribute access.

Every call that takes responses (``fit``, ``prune``) takes a ResponseMatrix, a path to
a long table, or a pandas DataFrame, wide (rows examinees, columns items) or long
(item, examinee, response + facet columns): see :meth:`ResponseMatrix.coerce`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "ResponseMatrix": ("irtexam.responses", "ResponseMatrix"),
    "fit": ("irtexam.irt.fit", "fit"),
    "FitResult": ("irtexam.irt.result", "FitResult"),
    "ModelSpec": ("irtexam.irt.model", "ModelSpec"),
    "load_fit": ("irtexam.irt.result", "load_fit"),
    "simulate": ("irtexam.irt.simulate", "simulate"),
    "prob_correct": ("irtexam.irt.kinds", "prob_correct"),
    "EstimatorOptions": ("irtexam.config", "EstimatorOptions"),
    "OutputOptions": ("irtexam.config", "OutputOptions"),
    "IrtexamError": ("irtexam.errors", "IrtexamError"),
    "IrtexamWarning": ("irtexam.warning_types", "IrtexamWarning"),
    "DataWarning": ("irtexam.warning_types", "DataWarning"),
    "ConvergenceWarning": ("irtexam.warning_types", "ConvergenceWarning"),
    "IdentificationWarning": ("irtexam.warning_types", "IdentificationWarning"),
    "PriorWarning": ("irtexam.warning_types", "PriorWarning"),
    "UncertaintyWarning": ("irtexam.warning_types", "UncertaintyWarning"),
    "item_information": ("irtexam.analysis.information", "item_information"),
    "exam_information": ("irtexam.analysis.information", "exam_information"),
    "prune": ("irtexam.analysis.pruning", "prune"),
    "adapt": ("irtexam.bank.adapt", "adapt"),
    "link": ("irtexam.bank.link", "link"),
    "score_models": ("irtexam.bank.tiny", "score_models"),
    "select_subset": ("irtexam.bank.subset", "select_subset"),
    "validate_tiny": ("irtexam.bank.tiny_check", "validate_tiny"),
    "ExamItem": ("irtexam.exam.schema", "ExamItem"),
    "read_exam": ("irtexam.exam.schema", "read_exam"),
    "write_exam": ("irtexam.exam.schema", "write_exam"),
    "categorize": ("irtexam.analysis.categories", "categorize"),
    "exam_table": ("irtexam.analysis.categories", "exam_table"),
}

# sub-packages reachable as attributes after a plain `import irtexam` (irtexam.analysis.categorize(...))
_SUBMODULES = ("analysis", "plotting", "irt", "bank", "exam", "grading", "responses")

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module_name, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module_name), attribute)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"irtexam.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'irtexam' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__ + list(_SUBMODULES)
