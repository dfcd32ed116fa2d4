"""Small pure text helpers shared by the graders (no heavy dependencies).

Normalisation follows the SQuAD / MT-RAG convention (lower-case, drop punctuation,
drop the articles a/an/the, collapse whitespace); answer verification for EXAM++
additionally removes stopwords and stems (Porter), as Farzi & Dietz (2024) describe.
"""

from __future__ import annotations

import html
import re
import string
from collections import Counter

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_TAG = re.compile(r"<[^>]+>")

#: English stopwords used for answer verification (a standard short list; NLTK's
#: corpus is not available offline, so the list is shipped here).
STOPWORDS: frozenset[str] = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves
""".split())


def normalize_text(text: str) -> str:
    """Lower-case, remove punctuation and articles, collapse whitespace (MT-RAG / SQuAD)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def word_tokens(text: str) -> list[str]:
    """Whitespace tokens of :func:`normalize_text`."""
    return normalize_text(text).split()


def token_recall(prediction: str, reference: str) -> float:
    """MT-RAG ``Recall``: |common tokens (multiset)| / |reference tokens|, after normalisation.

    recall = sum_w min(c_pred(w), c_ref(w)) / n_ref, and 0 when nothing is shared.
    """
    pred, ref = word_tokens(prediction), word_tokens(reference)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    return common / len(ref)


def strip_non_words(text: str) -> str:
    """Newlines to spaces, drop every non-word non-space character, lower-case."""
    text = text.replace("\n", " ")
    return re.sub(r"[^\w\s]", "", text).lower()


def strip_html(text: str) -> str:
    """Unescape HTML entities and remove tags (a light stand-in for BeautifulSoup.get_text)."""
    return _TAG.sub("", html.unescape(text))


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions, each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def verification_normalize(text: str) -> str:
    """EXAM++ answer normalisation: lower-case, drop punctuation and stopwords, Porter-stem."""
    from nltk.stem import PorterStemmer  # nltk's stemmer needs no downloaded data

    stemmer = PorterStemmer()
    words = "".join(ch if ch not in _PUNCT else " " for ch in text.lower()).split()
    return " ".join(stemmer.stem(w) for w in words if w not in STOPWORDS)


def word_count(text: str) -> int:
    """Number of whitespace-separated words."""
    return len(text.split())
