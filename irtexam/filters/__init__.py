"""A-priori filters (each returns a keep mask + reasons), named chains, bias baselines."""

from .baselines import bias_baselines, fixed_answer_accuracy, longest_answer_accuracy, no_question_accuracy
from .core import (CHAINS, FILTERS, PAPER_SELF_CONTAINMENT, ChainReport, FilterResult, extra_candidate_filter,
                   format_filter, intra_candidate_filter, length_filter, run_chain, self_containment_filter,
                   verify_filter)
from .similarity import jaccard, load_embedder, mean_candidate_ngram, ngrams, tokens

__all__ = ["CHAINS", "FILTERS", "PAPER_SELF_CONTAINMENT", "ChainReport", "FilterResult", "bias_baselines",
           "extra_candidate_filter", "fixed_answer_accuracy", "format_filter", "intra_candidate_filter", "jaccard",
           "length_filter", "load_embedder", "longest_answer_accuracy", "mean_candidate_ngram", "ngrams",
           "no_question_accuracy", "run_chain", "self_containment_filter", "tokens", "verify_filter"]
