"""Question categories: Bloom's revised taxonomy by keyword, and question word.

Bloom levels are found by keyword (the lists of Table 6, appendix C of Guinet et
al. 2024), matched on lemmas: a question's tokens and the keywords are both
lemmatised with ``simplemma`` (pure PyPI package, data bundled, nothing
downloaded), so "troubleshooting" matches "troubleshoot" and "chose" matches
"choose". A question may fall in several levels; a question with no keyword is
"uncategorised". Users can pass their own keyword table (dict, or a YAML/JSON
file mapping category -> list of keywords).

The question word is the first of what/which/how/when/where/why/who (whom,
whose -> who) in the last interrogative sentence (the one ending in "?"), so
that scenario preambles ("You are an engineer ... when you deploy ...") do not
decide it; falling back to the whole text, else "other".

Categories are stored as item metadata: a ``bloom`` column ('|'-joined levels)
and a ``question_word`` column.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..errors import InputError, reading

BLOOM_LEVELS: tuple[str, ...] = ("remember", "understand", "apply", "analyze", "evaluate", "create")
UNCATEGORISED = "uncategorised"

#: Keyword lists of the paper's Table 6 (duplicates within a level removed).
BLOOM_KEYWORDS: dict[str, list[str]] = {
    "remember": ["list", "identify", "name", "define", "state", "mention", "recall", "label",
                 "repeat", "recognize"],
    "understand": ["explain", "describe", "summarize", "predict", "interpret", "paraphrase",
                   "translate", "illustrate", "rephrase", "clarify", "check", "find", "experience",
                   "suspect", "review", "notice", "assume", "interact", "observe", "understand"],
    "apply": ["demonstrate", "apply", "use", "write", "illustrate", "solve", "show", "execute",
              "implement", "operate", "practice", "set", "configure", "try", "follow", "take",
              "run", "serve", "task", "read", "work", "enable", "exist"],
    "analyze": ["analyze", "distinguish", "compare", "differentiate", "examine", "test", "question",
                "inspect", "debate", "investigate", "manage", "optimize", "troubleshoot", "resolve"],
    "evaluate": ["evaluate", "rate", "justify", "critique", "decide", "rank", "measure", "validate",
                 "test", "assess", "choose", "verify", "monitor", "recommend"],
    "create": ["design", "construct", "produce", "invent", "devise", "formulate", "originate",
               "assemble", "generate", "create", "develop", "compose", "implement", "build",
               "customize"],
}

QUESTION_WORDS: tuple[str, ...] = ("what", "which", "how", "when", "where", "why", "who")
_QW_ALIASES = {"whom": "who", "whose": "who"}
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'-]*")
# British / American spelling variants that simplemma lemmatises apart.
_SPELLING = {"analyse": "analyze", "summarise": "summarize", "recognise": "recognize",
             "optimise": "optimize", "customise": "customize", "organise": "organize",
             "criticise": "criticize"}


@lru_cache(maxsize=65536)
def lemma(word: str) -> str:
    """Lower-cased English lemma of one word (simplemma), British -ise unified to -ize."""
    import simplemma

    w = word.lower().strip("'-")
    lem = simplemma.lemmatize(w, lang="en").lower()
    return _SPELLING.get(lem, lem)


def lemmas(text: str) -> set[str]:
    """The set of lemmas (and lower-cased surface forms) of the words in ``text``."""
    out: set[str] = set()
    for tok in _TOKEN.findall(text or ""):
        low = tok.lower()
        out.add(_SPELLING.get(low, low))
        out.add(lemma(tok))
    return out


def load_keyword_table(source: str | Path | Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Read a user keyword table: a mapping category -> keywords, or a YAML/JSON file of one.

    Raises InputError naming the file and category when the shape is wrong.
    """
    path = None
    if isinstance(source, (str, Path)):
        path = str(source)
        with reading(path, "keywords file"):
            text = Path(source).read_text(encoding="utf-8")
        if path.endswith(".json"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg}, line {exc.lineno})", path=path) from exc
        else:
            import yaml

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise InputError(f"not valid YAML: {exc}", path=path) from exc
    else:
        data = source
    if not isinstance(data, Mapping) or not data:
        raise InputError("a keyword table must map each category name to a list of keywords, "
                         "e.g. {remember: [list, define], apply: [use, configure]}", path=path)
    table: dict[str, list[str]] = {}
    for cat, words in data.items():
        if isinstance(words, str):
            words = [w.strip() for w in words.split(",")]
        if not isinstance(words, (list, tuple)) or not all(isinstance(w, str) for w in words):
            raise InputError("keywords must be a list of strings", path=path, column=str(cat))
        table[str(cat)] = [w for w in words if w.strip()]
    return table


def _lemmatised_table(table: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    return {cat: {lemma(w) for w in words} | {w.lower() for w in words} for cat, words in table.items()}


def bloom_levels(question: str, keywords: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Bloom levels (or user categories) whose keywords occur in ``question``, by lemma.

    Returns the matching categories in table order, or ["uncategorised"].
    """
    table = _lemmatised_table(keywords or BLOOM_KEYWORDS)
    found = lemmas(question)
    hits = [cat for cat, words in table.items() if words & found]
    return hits or [UNCATEGORISED]


def question_word(question: str) -> str:
    """The interrogative word of a question: what/which/how/when/where/why/who or "other".

    Looks in the last sentence that ends with "?" first, then in the whole text.
    """
    text = question or ""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s.strip().endswith("?")]
    for scope in ([sentences[-1]] if sentences else []) + [text]:
        for tok in _TOKEN.findall(scope):
            w = _QW_ALIASES.get(tok.lower(), tok.lower())
            if w in QUESTION_WORDS:
                return w
    return "other"


def question_texts(questions: Any) -> pd.Series:
    """Question text per item id, from what a user holds.

    Accepts the exam items :func:`irtexam.read_exam` returns (their ``question`` field only,
    indexed by ``id``), a path to an exam JSONL, a Series or mapping item id -> text, or a list
    of strings (indexed 0..n-1). Raises InputError for anything else.
    """
    if isinstance(questions, (str, Path)):
        from ..exam.schema import read_exam

        questions = read_exam(questions)
    if isinstance(questions, pd.Series):
        return questions.astype(object)
    if isinstance(questions, Mapping):
        return pd.Series(dict(questions), dtype=object)
    if isinstance(questions, pd.DataFrame):
        if "question" not in questions.columns:
            raise InputError("a DataFrame of questions needs a 'question' column (indexed by item id)",
                             column="question")
        return questions["question"].astype(object)
    if isinstance(questions, (list, tuple)):
        if all(hasattr(q, "question") and hasattr(q, "id") for q in questions):
            return pd.Series([q.question for q in questions], index=[str(q.id) for q in questions], dtype=object)
        if all(isinstance(q, str) for q in questions):
            return pd.Series(list(questions), dtype=object)
    raise InputError(f"cannot categorise a {type(questions).__name__}; pass the items irtexam.read_exam returns, "
                     "a Series or dict item id -> question text, or a list of question strings")


def categorize(questions: Any,
               keywords: Mapping[str, Iterable[str]] | str | Path | None = None) -> pd.DataFrame:
    """Categorise questions: DataFrame indexed by item id with ``bloom`` and ``question_word``.

    ``questions``: the exam items :func:`irtexam.read_exam` returns (only the question
    text is categorised, never the choices or the source passage), a path to an exam
    JSONL, a Series or dict item id -> text, or a list of strings (indexed 0..n-1).
    Join the result onto a fit's item table with ``fit.items.join(categorize(exam))``.

    ``bloom`` holds the '|'-joined matching levels (e.g. "apply|analyze") or
    "uncategorised"; ``keywords`` replaces the Bloom table (mapping or YAML/JSON
    path). ``.attrs['counts']`` holds the number of items per level and per
    question word, including how many were uncategorised.
    """
    series = question_texts(questions)
    table = BLOOM_KEYWORDS if keywords is None else load_keyword_table(keywords)
    lem_table = _lemmatised_table(table)
    bloom, qword = [], []
    for text in series.fillna("").astype(str):
        found = lemmas(text)
        hits = [cat for cat, words in lem_table.items() if words & found] or [UNCATEGORISED]
        bloom.append("|".join(hits))
        qword.append(question_word(text))
    out = pd.DataFrame({"bloom": bloom, "question_word": qword}, index=series.index)
    out.index.name = "item"
    exploded = out["bloom"].str.split("|").explode()
    out.attrs["counts"] = {"bloom": exploded.value_counts().to_dict(),
                           "question_word": out["question_word"].value_counts().to_dict()}
    return out


def bloom_order(table: Mapping[str, Iterable[str]] | None = None) -> list[str]:
    """Display order of categories: table order then "uncategorised"."""
    return list((table or BLOOM_KEYWORDS).keys()) + [UNCATEGORISED]


def add_categories(item_meta: pd.DataFrame, question_column: str = "question",
                   keywords=None) -> pd.DataFrame:
    """Return a copy of ``item_meta`` with ``bloom`` and ``question_word`` columns added.

    Needs a ``question`` column (the question text); raises InputError otherwise.
    """
    if question_column not in item_meta.columns:
        raise InputError(f"item metadata has no '{question_column}' column; pass the exam "
                         "(--exam EXAM.jsonl) so questions can be categorised",
                         column=question_column)
    cats = categorize(item_meta[question_column], keywords)
    out = item_meta.copy()
    out["bloom"] = cats["bloom"]
    out["question_word"] = cats["question_word"]
    out.attrs["counts"] = cats.attrs["counts"]
    return out


def categorize_exam(items: list, keywords=None) -> list:
    """Set ``categories['bloom']`` (list) and ``categories['question_word']`` on exam items.

    Returns new ExamItem objects (the inputs are not modified); other category
    keys are kept.
    """
    from dataclasses import replace

    table = BLOOM_KEYWORDS if keywords is None else load_keyword_table(keywords)
    out = []
    for it in items:
        cats = dict(it.categories)
        cats["bloom"] = bloom_levels(it.question, table)
        cats["question_word"] = question_word(it.question)
        out.append(replace(it, categories=cats))
    return out


def categorize_responses(responses, questions: pd.Series | Mapping[str, str] | None = None, keywords=None):
    """A copy of a ResponseMatrix with ``bloom`` and ``question_word`` item metadata.

    Question text comes from ``questions`` (item id -> text) or the matrix's
    ``question`` item metadata; items without text get "unknown" (counted in
    ``.item_meta.attrs['counts']['unknown']``).
    """
    meta = responses.item_meta
    text = pd.Series(index=list(responses.items), dtype=object)
    if "question" in meta.columns:
        text = meta["question"].reindex(list(responses.items)).astype(object)
    if questions is not None:
        text = text.fillna(pd.Series(questions, dtype=object).reindex(list(responses.items)))
    missing = text.isna()
    cats = categorize(text.fillna(""), keywords)
    cats.loc[missing, ["bloom", "question_word"]] = "unknown"
    drop = [c for c in ("bloom", "question_word") if c in meta.columns]
    base = responses if not drop else type(responses)(
        values=responses.values, items=responses.items, examinees=responses.examinees,
        examinee_facets=responses.examinee_facets, item_meta=meta.drop(columns=drop),
        max_score=responses.max_score, source=responses.source)
    out = base.with_item_meta(cats)
    out.item_meta.attrs["counts"] = {**cats.attrs["counts"], "unknown": int(missing.sum())}
    return out


def exam_table(exam: Any) -> pd.DataFrame:
    """The exam's metadata as a DataFrame indexed by item id, to join onto ``fit.items``.

    ``exam``: a path to an exam JSONL or the items :func:`irtexam.read_exam` returns.
    Columns: question, correct (the text of the right choice), n_choices, doc_id, chunk_id,
    and one column per key of the items' ``categories`` (lists joined by '|').
    Usage: ``fit.items.join(exam_table("exam.jsonl"))`` (items of the exam that were not
    fitted are not in ``fit.items``; fitted items missing from the exam get NaN).
    """
    from ..exam.schema import read_exam

    items = read_exam(exam) if isinstance(exam, (str, Path)) else list(exam)
    if not all(hasattr(it, "question") and hasattr(it, "id") for it in items):
        raise InputError("exam_table needs an exam JSONL path or the items irtexam.read_exam returns")
    rows = []
    for it in items:
        row = {"question": it.question, "correct": it.choices[it.answer], "n_choices": len(it.choices),
               "doc_id": it.doc_id, "chunk_id": it.chunk_id}
        for key, value in (it.categories or {}).items():
            row[str(key)] = "|".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index([str(it.id) for it in items], name="item"))
