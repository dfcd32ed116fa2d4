"""irtexam.analysis: exam analytics on top of a fitted IRT model.

- :mod:`.information`: 3PL item/exam information, SE(theta), category aggregates, posterior bands.
- :mod:`.categories`: Bloom's revised taxonomy (keyword lemmas) and question-word categories.
- :mod:`.pruning`: iterative pruning of the least discriminative / informative items.
- :mod:`.diagnostics`: infit/outfit, posterior predictive checks, RMSE, Yen's Q3, flags.

Imports jax, numpy, scipy, pandas only (never torch or transformers).
"""

from .categories import (BLOOM_KEYWORDS, BLOOM_LEVELS, add_categories, bloom_levels, categorize, categorize_exam,
                         exam_table, question_texts, question_word)
from .diagnostics import diagnose
from .information import (category_information, exam_information, graded_item_information, information_band,
                          item_information,
                          mean_information, standard_error, theta_grid)
from .pruning import TIE_RULE, PruneResult, prune, uninformative_items

__all__ = [
    "BLOOM_KEYWORDS", "BLOOM_LEVELS", "add_categories", "bloom_levels", "categorize", "categorize_exam",
    "exam_table", "question_texts", "question_word",
    "diagnose", "category_information", "exam_information", "graded_item_information", "information_band", "item_information",
    "mean_information", "standard_error", "theta_grid", "PruneResult", "prune",
    "TIE_RULE", "uninformative_items",
]
