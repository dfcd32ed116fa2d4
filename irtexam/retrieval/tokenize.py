"""A small, dependency-free word tokenizer for lexical retrieval (BM25).

Lowercases, splits on every character that is not a letter or digit (so punctuation
and underscores separate tokens: ``max_connections`` -> ``max``, ``connections``),
and optionally removes English stopwords.
"""

from __future__ import annotations

import re
from typing import Iterable

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

# A standard English stopword list (the common core of the SMART / NLTK lists).
ENGLISH_STOPWORDS: frozenset[str] = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves
""".split())


def tokenize(text: str, *, stopwords: Iterable[str] | None = ENGLISH_STOPWORDS) -> list[str]:
    """Lowercase ``text``, split on non-alphanumerics, drop ``stopwords`` (None keeps all)."""
    tokens = _WORD.findall(text.lower())
    if stopwords:
        stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords)
        tokens = [t for t in tokens if t not in stop]
    return tokens
