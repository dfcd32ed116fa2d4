"""MT-RAG algorithmic metrics, IDK judging and IDK conditioning (records in, records out).

Input records follow the MT-RAG layout::

    {"task_id": "...", "input": [{"speaker": "user", "text": "..."}, ...],
     "targets": [{"text": "reference answer"}], "contexts": [{"text": "passage"}, ...],
     "predictions": [{"text": "model response"}], "answerability": ["ANSWERABLE"]}

or a flat one: ``{"id", "question", "response", "reference" | "references", "passages",
"answerability"}``. Each output record is the input plus a ``metrics`` object whose
values are lists, as in MT-RAG's files: one value per reference for Recall, RougeL_stemFalse,
BertscoreP, BertscoreR; one per passage for BertKPrec and Extractiveness_RougeL (``null``
when there are no passages); one value for Length, RB_agg, RB_agg_zero_denominator,
idk_eval and the *_idk metrics. ``metrics_info`` says which encoder and IDK detector ran.

Formulas (MT-RAG metrics reference and ``run_algorithmic.py``):

* Recall = |common normalised tokens| / |reference tokens|
* RougeL_stemFalse = ROUGE-L F-measure (rouge-score, no stemming)
* BertscoreP / BertscoreR = BERTScore over MiniLM token embeddings (see embeddings.py)
* BertKPrec = BERTScore precision of the response against each passage
* Extractiveness_RougeL = 1 if the passage (words only, spaces removed) is contained in
  the response, else ROUGE-L F between response and passage
* Length = number of words of the response (the reference text says words; the MT-RAG
  script counts characters, ``len(text)``)
* RB_agg = 3 r g e / (r g + r e + g e) with r = (BertscoreR[0] + 1)/2 (or Recall[0] when
  BERTScore is missing), g = RougeL_stemFalse[0], e = (max(BertKPrec) + 1)/2 or 0 when
  there are no passages; when the denominator is 0, RB_agg = 0 and the flag is true.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..errors import InputError
from .embeddings import Encoder, greedy_match, rescale
from .idk import UNANSWERABLE_LABELS, idk_condition, lexical_idk
from .text import strip_html, strip_non_words, token_recall, word_count

CONDITIONED = {"RB_agg": "RB_agg_idk", "RB_llm": "RB_llm_idk", "RL_F": "RL_F_idk"}


@dataclass
class MtragRecord:
    """The fields the metrics need, extracted from one input record."""

    key: str
    inquiry: str
    prediction: str
    targets: list[str]
    contexts: list[str]
    answerability: str | None
    metrics: dict[str, Any] = field(default_factory=dict)


def _texts(value: Any, path: str | None, row: int | None, column: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise InputError("expected a string or a list of strings / {\"text\": ...} objects",
                         path=path, row=row, column=column)
    out = []
    for v in value:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict) and isinstance(v.get("text"), str):
            out.append(v["text"])
        else:
            raise InputError("each entry must be a string or an object with a \"text\" string",
                             path=path, row=row, column=column)
    return out


def format_conversation(turns: Any) -> str:
    """MT-RAG ``input`` turns as "User: ...\\nAgent: ..." lines (a string is returned as is)."""
    if isinstance(turns, str):
        return turns
    lines = []
    for t in turns or []:
        if isinstance(t, dict):
            speaker = str(t.get("speaker", "user")).lower()
            lines.append(f"{'User' if speaker == 'user' else 'Agent'}: {t.get('text', '')}")
    return "\n".join(lines)


def parse_record(record: dict[str, Any], path: str | None = None, row: int | None = None) -> MtragRecord:
    """Read an MT-RAG or flat record; raises :class:`InputError` naming the missing field."""
    preds = _texts(record.get("predictions", record.get("response", record.get("prediction"))),
                   path, row, "predictions")
    if not preds:
        raise InputError("no model response: give \"predictions\": [{\"text\": ...}] or \"response\"",
                         path=path, row=row, column="predictions")
    targets = _texts(record.get("targets", record.get("references", record.get("reference"))), path, row, "targets")
    contexts = _texts(record.get("contexts", record.get("passages")), path, row, "contexts")
    inquiry = format_conversation(record.get("input", record.get("question", "")))
    ans = record.get("answerability")
    if isinstance(ans, list):
        ans = ans[0] if ans else None
    key = str(record.get("task_id", record.get("id", row)))
    metrics = dict(record.get("metrics") or {})
    return MtragRecord(key, inquiry, preds[0], targets, contexts, ans, metrics)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score's tokenizer, no stemming)."""
    from rouge_score import rouge_scorer

    scorer = _rouge_scorer_cache.get("r")
    if scorer is None:
        scorer = _rouge_scorer_cache.setdefault("r", rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False))
    return float(scorer.score(reference, prediction)["rougeL"].fmeasure)


_rouge_scorer_cache: dict[str, Any] = {}


def extractiveness(prediction: str, passage: str) -> float:
    """Extractiveness_RougeL: 1 if the cleaned passage is inside the cleaned response, else ROUGE-L F."""
    text = strip_html(strip_non_words(prediction))
    target = strip_html(strip_non_words(passage))
    if target.replace(" ", "") in text.replace(" ", ""):
        return 1.0
    return rouge_l(text, target)


def rb_agg(rouge: float, bertscore_r: float | None = None, recall: float | None = None,
           bertkprec: Sequence[float | None] | None = None) -> tuple[float, bool]:
    """RB_agg and its zero-denominator flag.

    r = (BertscoreR + 1)/2 (Recall if BERTScore is missing), g = ROUGE-L,
    e = (max(BertKPrec) + 1)/2 (None entries count as 0; e = 0 without passages);
    RB_agg = 3 r g e / (r g + r e + g e), and (0, True) when the denominator is 0.
    """
    if bertscore_r is not None:
        r = (bertscore_r + 1.0) / 2.0
    elif recall is not None:
        r = recall
    else:
        raise ValueError("rb_agg needs BertscoreR or Recall")
    if bertkprec:
        e = (max(0.0 if v is None else v for v in bertkprec) + 1.0) / 2.0
    else:
        e = 0.0
    g = rouge
    denominator = r * g + r * e + g * e
    if denominator == 0:
        return 0.0, True
    return 3.0 * r * g * e / denominator, False


def algorithmic_metrics(prediction: str, targets: Sequence[str], contexts: Sequence[str],
                        encoder: Encoder | None, baseline: float | None = None) -> dict[str, Any]:
    """MT-RAG step 1 for one response. Without an encoder the BERTScore metrics are omitted
    (RB_agg then uses Recall, as the MT-RAG script does when BertscoreR is missing)."""
    m: dict[str, Any] = {}
    if targets:
        m["Recall"] = [token_recall(prediction, t) for t in targets]
        m["RougeL_stemFalse"] = [rouge_l(prediction, t) for t in targets]
    if encoder is not None:
        mats = encoder.token_embeddings([prediction, *targets, *contexts])
        cand, refs, pas = mats[0], mats[1:1 + len(targets)], mats[1 + len(targets):]
        if targets:
            pr = [greedy_match(cand, ref) for ref in refs]
            m["BertscoreP"] = [rescale(p, baseline) for p, _ in pr]
            m["BertscoreR"] = [rescale(r, baseline) for _, r in pr]
        m["BertKPrec"] = [rescale(greedy_match(cand, p)[0], baseline) for p in pas] if contexts else None
    else:
        m["BertKPrec"] = None  # no encoder: not computed
    m["Extractiveness_RougeL"] = [extractiveness(prediction, c) for c in contexts] if contexts else None
    m["Length"] = [word_count(prediction)]
    if targets:
        agg, zero = rb_agg(m["RougeL_stemFalse"][0],
                           bertscore_r=m["BertscoreR"][0] if "BertscoreR" in m else None,
                           recall=m["Recall"][0], bertkprec=m["BertKPrec"])
        m["RB_agg"] = [agg]
        m["RB_agg_zero_denominator"] = [zero]
    return m


def first_value(metrics: dict[str, Any], name: str) -> Any:
    """A metric's first value whether stored as a list (MT-RAG files) or a scalar."""
    value = metrics.get(name)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def condition_metrics(metrics: dict[str, Any], answerability: str | None,
                      answerable_idk_zero: bool = False) -> dict[str, Any]:
    """Add RB_agg_idk, RB_llm_idk, RL_F_idk for the base metrics present (needs idk_eval).

    RB_agg_idk is also set for unanswerable questions without a reference (it is 1 or 0
    from idk_eval alone); RB_llm_idk / RL_F_idk only when RB_llm / RL_F are in the input.
    """
    idk = first_value(metrics, "idk_eval")
    if idk is None:
        raise ValueError("IDK conditioning needs idk_eval; run the IDK judge first")
    out = {}
    unanswerable = (answerability or "").upper() in UNANSWERABLE_LABELS
    for base, name in CONDITIONED.items():
        # an unanswerable question's RB_agg_idk depends only on idk_eval (no reference needed)
        if base in metrics or (base == "RB_agg" and unanswerable):
            out[name] = [idk_condition(first_value(metrics, base), idk, answerability, answerable_idk_zero)]
    return out


def grade_records(records: Sequence[dict[str, Any]], encoder: Encoder | None,
                  idk_fn: Callable[[list[str], list[str]], list[float]] | None = None,
                  baseline: float | None = None, answerable_idk_zero: bool = False,
                  path: str | None = None, write: Callable[[dict[str, Any]], None] | None = None,
                  progress: bool = False, batch_size: int = 16) -> list[dict[str, Any]]:
    """Run steps 1 (algorithmic), 2 (IDK; lexical when ``idk_fn`` is None) and 5 (conditioning).

    Returns the output records; ``write`` (e.g. a ResumableWriter's) receives each one as
    soon as it is finished. IDK judging is batched ``batch_size`` records at a time.
    """
    parsed = [parse_record(r, path, r.get("_row")) for r in records]
    out: list[dict[str, Any]] = []
    iterator = range(0, len(parsed), batch_size)
    if progress:
        from tqdm import tqdm

        iterator = tqdm(iterator, desc="mtrag", unit="batch")
    for start in iterator:
        batch = parsed[start:start + batch_size]
        raws = records[start:start + batch_size]
        if idk_fn is None:
            idks = [lexical_idk(p.prediction) for p in batch]
        else:
            idks = idk_fn([p.inquiry for p in batch], [p.prediction for p in batch])
        for raw, rec, idk in zip(raws, batch, idks):
            metrics = dict(rec.metrics)
            metrics.update(algorithmic_metrics(rec.prediction, rec.targets, rec.contexts, encoder, baseline))
            metrics["idk_eval"] = [idk]
            metrics.update(condition_metrics(metrics, rec.answerability, answerable_idk_zero))
            result = {k: v for k, v in raw.items() if k != "_row"}
            result["metrics"] = metrics
            out.append(result)
            if write is not None:
                write(result)
    return out
