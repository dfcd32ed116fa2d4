"""EXAM++ / RUBRIC answerability grading (Farzi & Dietz 2024; Dietz 2024).

Phase 1, question banks: per query, a list of free-text exam questions (optionally with
answer keys), given in a JSONL file or generated with an LLM (Table 1 prompt).

Phase 2, grading: every passage of every system response is graded against every
question of its query, separately per passage:

* self-rating (RUBRIC): the LLM rates answerability 0-5 with the Table 2 prompt; a reply
  without a rating gets 1, or 0 when it is an "unanswerable" expression;
* answer extraction: the LLM extracts an answer (Table 2 QA prompt); with an answer key
  the answer is correct when, after lower-casing, stopword removal and stemming, the
  edit distance to a key answer is < 20% of the longer string; unanswerable expressions
  and ill-formed answers ("a.", "(iii)") are wrong (grade 0). Optional LLM verification.

Phase 3, evaluation:

* EXAM-Cover_tau(P) = |U_{p in P_k} {r : grade(p, r) >= tau}| / |R_q| over the first k
  passages, averaged over the queries of the bank;
* EXAM-Qrels: label(p) = max_r grade(p, r), exported as trec_eval qrels and evaluated
  with ir-measures (MAP, NDCG@20, R-precision at relevance threshold tau);
* leaderboards and Spearman / Kendall rank correlation between any two of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..errors import InputError
from ..llm.base import LLM, GenerationParams, ScoreRequest
from .text import levenshtein, verification_normalize

# ----------------------------------------------------------------------------- prompts
# Verbatim from Farzi & Dietz (2024), Tables 1 and 2.
QUESTION_BANK_PROMPT = (
    "Explore the connection between '{query_title}' with a specific focus on the subtopic "
    "'{query_subtopic}'. Generate insightful questions that delve into advanced aspects of "
    "'{query_subtopic}', showcasing a deep understanding of the subject matter. Avoid basic or "
    "introductory-level inquiries. Give the question set in the following JSON format:\n"
    "```json\n{{\"questions\":[question_text_1, question_text_2,...]}}\n```"
)
QA_PROMPT = ("provide a complete and concise answer to the question based on the context. "
             "Question: {question} Context: {context}")
VERIFY_PROMPT = ('For the question "{question}" the correct answer is "{correct_answer}". '
                 'Is "{answer}" an equally correct response to this question? Answer yes or no.')
SELF_RATING_PROMPT = (
    "Can the question be answered based on the available context? choose one:\n"
    "- 5: The answer is highly relevant, complete, and accurate.\n"
    "- 4: The answer is mostly relevant and complete but may have minor gaps or inaccuracies.\n"
    "- 3: The answer is partially relevant and complete, with noticeable gaps or inaccuracies.\n"
    "- 2: The answer has limited relevance and completeness, with significant gaps or inaccuracies.\n"
    "- 1: The answer is minimally relevant or complete, with substantial shortcomings.\n"
    "- 0: The answer is not relevant or complete at all.\n"
    "Question: {question} Context: {context}"
)

#: Expressions that mean "unanswerable" (section 4.2.1); they grade 0.
UNANSWERABLE_EXPRESSIONS = frozenset({
    "unanswerable", "no", "no answer", "not enough information", "unknown",
    "it is not possible to tell", "it does not say", "no relevant information",
})
_ILL_FORMED = re.compile(r"^\(?([a-z]|[ivxlc]+|\d+)\)?\.?$")


# ----------------------------------------------------------------------------- data
@dataclass
class BankQuestion:
    """One exam question of a query's bank; ``answers`` is the optional answer key."""

    question_id: str
    question: str
    answers: list[str] = field(default_factory=list)


@dataclass
class Passage:
    """One passage of a system's response to a query, at 1-based ``rank``."""

    query_id: str
    system: str
    passage_id: str
    text: str
    rank: int
    facets: dict[str, Any] = field(default_factory=dict)


def read_question_bank(records: Iterable[dict[str, Any]], path: str | None = None
                       ) -> dict[str, list[BankQuestion]]:
    """Question banks from JSONL records.

    Either one line per query ``{"query_id", "questions": [str | {"question_id",
    "question", "answers"}]}`` or one line per question ``{"query_id", "question_id",
    "question", "answers"}``. Question ids default to ``<query_id>/q<i>``.
    """
    banks: dict[str, list[BankQuestion]] = {}
    for rec in records:
        row = rec.get("_row")
        if "query_id" not in rec:
            raise InputError("a question-bank line needs query_id", path=path, row=row, column="query_id")
        qid = str(rec["query_id"])
        bank = banks.setdefault(qid, [])
        entries = rec["questions"] if "questions" in rec else [rec]
        if not isinstance(entries, list):
            raise InputError("questions must be a list", path=path, row=row, column="questions")
        for entry in entries:
            if isinstance(entry, str):
                entry = {"question": entry}
            if not isinstance(entry, dict) or not isinstance(entry.get("question"), str):
                raise InputError("each question needs a \"question\" string", path=path, row=row,
                                 column="question")
            answers = entry.get("answers", entry.get("answer", []))
            answers = [answers] if isinstance(answers, str) else [str(a) for a in answers or []]
            qq = str(entry.get("question_id", f"{qid}/q{len(bank) + 1}"))
            bank.append(BankQuestion(qq, entry["question"], answers))
    return banks


def segment_response(text: str, max_words: int = 120) -> list[str]:
    """Split a long response into paragraph-sized passages (blank lines, then word windows)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    out: list[str] = []
    for p in paragraphs:
        words = p.split()
        for i in range(0, len(words), max_words):
            out.append(" ".join(words[i:i + max_words]))
    return out


def read_passages(records: Iterable[dict[str, Any]], path: str | None = None) -> list[Passage]:
    """System responses from JSONL records, one passage per line or one response per line.

    Per passage: ``{"query_id", "system" | "run", "passage_id" | "paragraph_id", "text",
    "rank"?}``; per response: ``{"query_id", "system", "response": long text}`` (segmented
    by :func:`segment_response`) or ``"passages": [str | {"passage_id", "text"}]``.
    Missing ranks follow file order. ``facets`` (a dict) describes the system.
    """
    out: list[Passage] = []
    next_rank: dict[tuple[str, str], int] = {}
    for rec in records:
        row = rec.get("_row")
        for name in ("query_id",):
            if name not in rec:
                raise InputError(f"a passage line needs {name}", path=path, row=row, column=name)
        system = rec.get("system", rec.get("run"))
        if system is None:
            raise InputError("a passage line needs system (or run)", path=path, row=row, column="system")
        qid, system = str(rec["query_id"]), str(system)
        facets = dict(rec.get("facets") or {})
        if "response" in rec or "passages" in rec:
            if "response" in rec:
                items: list[Any] = segment_response(str(rec["response"]))
            else:
                items = rec["passages"]
            for i, entry in enumerate(items):
                if isinstance(entry, str):
                    entry = {"text": entry}
                if not isinstance(entry, dict) or not isinstance(entry.get("text"), str):
                    raise InputError("each passage needs a \"text\" string", path=path, row=row,
                                     column="passages")
                rank = next_rank.get((system, qid), 0) + 1
                next_rank[(system, qid)] = rank
                pid = str(entry.get("passage_id", f"{system}/{qid}/{rank}"))
                out.append(Passage(qid, system, pid, entry["text"], rank, facets))
            continue
        text = rec.get("text")
        pid = rec.get("passage_id", rec.get("paragraph_id"))
        if not isinstance(text, str):
            raise InputError("a passage line needs a \"text\" string", path=path, row=row, column="text")
        if pid is None:
            raise InputError("a passage line needs passage_id (or paragraph_id)", path=path, row=row,
                             column="passage_id")
        rank = rec.get("rank")
        if rank is None:
            rank = next_rank.get((system, qid), 0) + 1
        next_rank[(system, qid)] = max(int(rank), next_rank.get((system, qid), 0))
        out.append(Passage(qid, system, str(pid), text, int(rank), facets))
    return out


# ----------------------------------------------------------------------------- parsing
def is_unanswerable(text: str) -> bool:
    """Whether an LLM reply is one of the paper's unanswerable expressions (after cleanup)."""
    cleaned = " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
    return cleaned in UNANSWERABLE_EXPRESSIONS


def is_ill_formed(answer: str) -> bool:
    """Ill-formed extracted answers such as "a.", "(iii)" or an empty string."""
    cleaned = answer.strip().lower()
    return not cleaned or bool(_ILL_FORMED.match(cleaned))


def parse_self_rating(reply: str) -> tuple[int, bool]:
    """(grade, parsed): the first digit 0-5 in the reply; else 0 for an unanswerable
    expression and 1 otherwise (section 4.2.2); ``parsed`` is False for the defaults."""
    match = re.search(r"(?<!\d)([0-5])(?!\d)", reply)
    if match:
        return int(match.group(1)), True
    return (0 if is_unanswerable(reply) else 1), False


def answers_match(predicted: str, gold: str, tolerance: float = 0.2) -> bool:
    """Heuristic verification: normalised edit distance < tolerance x length of the longer string."""
    a, b = verification_normalize(predicted), verification_normalize(gold)
    longer = max(len(a), len(b))
    if longer == 0:
        return False
    return levenshtein(a, b) < tolerance * longer


def verify_answer(answer: str, gold_answers: Sequence[str]) -> bool:
    """Correct iff the answer is well-formed, not an unanswerable phrase, and matches a key."""
    if is_unanswerable(answer) or is_ill_formed(answer):
        return False
    return any(answers_match(answer, g) for g in gold_answers)


def parse_generated_questions(reply: str) -> list[str] | None:
    """Questions from a Table 1 reply: the JSON {"questions": [...]}, else lines ending in '?'.

    None when nothing usable was found (counted by the caller).
    """
    for match in re.finditer(r"\{.*?\}", reply, flags=re.DOTALL):
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        qs = obj.get("questions") if isinstance(obj, dict) else None
        if isinstance(qs, list) and all(isinstance(q, str) for q in qs) and qs:
            return [q.strip() for q in qs if q.strip()]
    lines = [re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", ln).strip().strip('",') for ln in reply.splitlines()]
    qs = [ln for ln in lines if ln.endswith("?") and len(ln.split()) >= 3]
    return qs or None


# ----------------------------------------------------------------------------- grading
@dataclass
class ExamGrader:
    """Grades passages against a question bank with an LLM backend.

    ``rating_method="generate"`` reads the rating from the reply (the paper);
    ``"score"`` picks the most likely of the continuations " 0" .. " 5" (never
    unparseable; suited to small local models). ``extract_answers`` runs the QA prompt
    (answers are verified when the question has a key); ``llm_verify`` additionally asks
    the LLM the verification prompt when the heuristic match fails. Counters record
    defaulted ratings and verification outcomes.
    """

    llm: LLM
    rating_method: str = "generate"
    extract_answers: bool = True
    llm_verify: bool = False
    max_new_tokens: int = 48
    counts: dict[str, int] = field(default_factory=dict)

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def self_ratings(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[int, bool, str]]:
        """(grade, parsed, raw reply) for (question, context) pairs."""
        prompts = [SELF_RATING_PROMPT.format(question=q, context=c) for q, c in pairs]
        if self.rating_method == "score":
            conts = tuple(f" {g}" for g in range(6))
            scores = self.llm.score([ScoreRequest(p, conts) for p in prompts])
            out = []
            for row in scores:
                g = max(range(6), key=lambda i: row[i].logprob)
                out.append((g, True, f"score:{g}"))
            return out
        if self.rating_method != "generate":
            raise ValueError(f"unknown rating method {self.rating_method!r}; use 'generate' or 'score'")
        replies = self.llm.generate(prompts, GenerationParams(max_new_tokens=8, temperature=0.0))
        out = []
        for reply in replies:
            grade, parsed = parse_self_rating(reply)
            if not parsed:
                self._count("self_rating_defaulted")
            out.append((grade, parsed, reply))
        return out

    def extract(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """Extracted answers for (question, context) pairs (QA prompt)."""
        prompts = [QA_PROMPT.format(question=q, context=c) for q, c in pairs]
        replies = self.llm.generate(prompts, GenerationParams(max_new_tokens=self.max_new_tokens, temperature=0.0))
        return [r.strip().split("\n")[0].strip() for r in replies]

    def llm_verifies(self, question: str, gold: Sequence[str], answer: str) -> bool:
        """LLM answer verification (Table 2, middle): yes for any key answer."""
        prompts = [VERIFY_PROMPT.format(question=question, correct_answer=g, answer=answer) for g in gold]
        replies = self.llm.generate(prompts, GenerationParams(max_new_tokens=3, temperature=0.0))
        return any(r.strip().lower().startswith("yes") for r in replies)

    def grade_passage(self, passage: Passage, bank: Sequence[BankQuestion]) -> dict[str, Any]:
        """RUBRIC-style record for one passage with ``exam_grades`` for every question."""
        pairs = [(q.question, passage.text) for q in bank]
        ratings = self.self_ratings(pairs)
        answers = self.extract(pairs) if self.extract_answers else [None] * len(bank)
        grades = []
        for q, (grade, parsed, raw), answer in zip(bank, ratings, answers):
            entry: dict[str, Any] = {"question_id": q.question_id, "self_rating": grade,
                                     "self_rating_parsed": parsed, "self_rating_reply": raw}
            if answer is not None:
                entry["answer"] = answer
                if q.answers:
                    ok = verify_answer(answer, q.answers)
                    if not ok and self.llm_verify and not is_unanswerable(answer) and not is_ill_formed(answer):
                        ok = self.llm_verifies(q.question, q.answers, answer)
                        self._count("llm_verified_correct" if ok else "llm_verified_wrong")
                    entry["correct"] = ok
                    self._count("answers_correct" if ok else "answers_wrong")
            grades.append(entry)
        return {"query_id": passage.query_id, "passage_id": passage.passage_id, "text": passage.text,
                "llm": self.llm.name, "rating_method": self.rating_method, "exam_grades": grades}


def generate_question_bank(llm: LLM, queries: Mapping[str, str], subtopics: Mapping[str, str] | None = None,
                           max_new_tokens: int = 256) -> tuple[dict[str, list[BankQuestion]], list[str]]:
    """Generate banks with the Table 1 prompt; returns (banks, query ids that failed to parse)."""
    ids = list(queries)
    prompts = [QUESTION_BANK_PROMPT.format(query_title=queries[q],
                                           query_subtopic=(subtopics or {}).get(q, queries[q])) for q in ids]
    replies = llm.generate(prompts, GenerationParams(max_new_tokens=max_new_tokens, temperature=0.0))
    banks: dict[str, list[BankQuestion]] = {}
    failed: list[str] = []
    for qid, reply in zip(ids, replies):
        qs = parse_generated_questions(reply)
        if qs is None:
            failed.append(qid)
            continue
        banks[qid] = [BankQuestion(f"{qid}/q{i + 1}", q) for i, q in enumerate(qs)]
    return banks, failed


# ----------------------------------------------------------------------------- evaluation
GradeTable = dict[tuple[str, str], dict[str, int]]  # (query_id, passage_id) -> question_id -> grade


def grade_table(graded: Iterable[dict[str, Any]], mode: str = "self_rating") -> GradeTable:
    """(query_id, passage_id) -> {question_id: grade} from graded records.

    ``mode="self_rating"``: the 0-5 self-rating; ``"answer"``: 1 if the extracted answer was
    verified correct else 0 (questions without a key are left out).
    """
    table: GradeTable = {}
    for rec in graded:
        cell = table.setdefault((str(rec["query_id"]), str(rec["passage_id"])), {})
        for g in rec.get("exam_grades", []):
            if mode == "self_rating":
                cell[g["question_id"]] = int(g["self_rating"])
            elif mode == "answer":
                if "correct" in g:
                    cell[g["question_id"]] = int(bool(g["correct"]))
            else:
                raise ValueError(f"unknown grade mode {mode!r}; use 'self_rating' or 'answer'")
    return table


def rankings(passages: Iterable[Passage]) -> dict[str, dict[str, list[str]]]:
    """system -> query_id -> passage ids ordered by rank."""
    tmp: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for p in passages:
        tmp.setdefault(p.system, {}).setdefault(p.query_id, []).append((p.rank, p.passage_id))
    return {s: {q: [pid for _, pid in sorted(v)] for q, v in qs.items()} for s, qs in tmp.items()}


def exam_cover_query(grades: GradeTable, query_id: str, passage_ids: Sequence[str],
                     question_ids: Sequence[str], tau: int, k: int) -> float:
    """EXAM-Cover_tau for one query: fraction of its questions with grade >= tau in the top k."""
    if not question_ids:
        raise ValueError(f"query {query_id} has an empty question bank")
    covered = set()
    for pid in list(passage_ids)[:k]:
        for qq, g in grades.get((query_id, pid), {}).items():
            if g >= tau:
                covered.add(qq)
    return len(covered & set(question_ids)) / len(question_ids)


def exam_cover(grades: GradeTable, runs: Mapping[str, Mapping[str, Sequence[str]]],
               banks: Mapping[str, Sequence[BankQuestion]], tau: int = 4, k: int = 20) -> dict[str, float]:
    """System -> mean over the bank's queries of EXAM-Cover_tau (a query with no passages scores 0)."""
    out = {}
    for system, per_query in runs.items():
        vals = [exam_cover_query(grades, q, per_query.get(q, []), [b.question_id for b in bank], tau, k)
                for q, bank in banks.items()]
        out[system] = sum(vals) / len(vals) if vals else float("nan")
    return out


def exam_qrels(grades: GradeTable) -> list[tuple[str, str, int]]:
    """EXAM-Label(p) = max_r grade(p, r) for every graded passage: (query_id, passage_id, label)."""
    return [(q, p, max(cell.values()) if cell else 0) for (q, p), cell in sorted(grades.items())]


def write_qrels(qrels: Iterable[tuple[str, str, int]], path: str | Path) -> None:
    """trec_eval qrels: ``query_id 0 doc_id relevance`` per line."""
    with open(path, "w", encoding="utf-8") as handle:
        for q, p, label in qrels:
            handle.write(f"{q} 0 {p} {int(label)}\n")


def write_run(runs: Mapping[str, Mapping[str, Sequence[str]]], path: str | Path) -> None:
    """trec_eval run file: ``query_id Q0 doc_id rank score system`` (score = -rank)."""
    with open(path, "w", encoding="utf-8") as handle:
        for system, per_query in runs.items():
            for q, pids in per_query.items():
                for rank, pid in enumerate(pids, start=1):
                    handle.write(f"{q} Q0 {pid} {rank} {-rank} {system}\n")


def qrels_measures(qrels: Sequence[tuple[str, str, int]], runs: Mapping[str, Mapping[str, Sequence[str]]],
                   tau: int = 4) -> dict[str, dict[str, float]]:
    """System -> {MAP, NDCG@20, Rprec} with ir-measures; binary measures use relevance >= tau."""
    import ir_measures
    from ir_measures import AP, Qrel, Rprec, ScoredDoc, nDCG

    measures = {"MAP": AP(rel=tau), "NDCG@20": nDCG @ 20, "Rprec": Rprec(rel=tau)}
    qrel_objs = [Qrel(q, p, int(label)) for q, p, label in qrels]
    out: dict[str, dict[str, float]] = {}
    for system, per_query in runs.items():
        run = [ScoredDoc(q, pid, float(-rank)) for q, pids in per_query.items()
               for rank, pid in enumerate(pids, start=1)]
        agg = ir_measures.calc_aggregate(list(measures.values()), qrel_objs, run)
        out[system] = {name: float(agg.get(m, float("nan"))) for name, m in measures.items()}
    return out


def leaderboard(scores: Mapping[str, Mapping[str, float]], sort_by: str | None = None) -> "Any":
    """A DataFrame indexed by system with one column per measure, best first."""
    import pandas as pd

    df = pd.DataFrame.from_dict({s: dict(v) for s, v in scores.items()}, orient="index")
    df.index.name = "system"
    if sort_by is None and len(df.columns):
        sort_by = df.columns[0]
    return df.sort_values(sort_by, ascending=False) if sort_by else df


def rank_correlation(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    """Spearman's rho and Kendall's tau (with p-values) between two leaderboards on shared systems."""
    from scipy.stats import kendalltau, spearmanr

    shared = sorted(set(a) & set(b))
    if len(shared) < 3:
        raise InputError(f"rank correlation needs at least 3 systems present in both leaderboards; "
                         f"found {len(shared)} ({', '.join(shared) or 'none'}); check the system names")
    x, y = [a[s] for s in shared], [b[s] for s in shared]
    rho, p_rho = spearmanr(x, y)
    tau, p_tau = kendalltau(x, y)
    return {"spearman": float(rho), "spearman_p": float(p_rho), "kendall": float(tau),
            "kendall_p": float(p_tau), "n_systems": len(shared)}


def graded_responses(grades: GradeTable, passages: Sequence[Passage],
                     banks: Mapping[str, Sequence[BankQuestion]], k: int = 20,
                     tau: int | None = None) -> list[dict[str, Any]]:
    """ResponseMatrix long rows: item = question id, examinee = system, response = the best
    grade of that question over the system's top-k passages (0..5, or 0/1 with ``tau``)."""
    runs = rankings(passages)
    facets = {p.system: p.facets for p in passages}
    rows = []
    for system, per_query in runs.items():
        for q, bank in banks.items():
            top = per_query.get(q, [])[:k]
            for bq in bank:
                best = max((grades.get((q, pid), {}).get(bq.question_id, 0) for pid in top), default=0)
                value = int(best >= tau) if tau is not None else int(best)
                rows.append({"item": bq.question_id, "examinee": system, "response": value,
                             "item_query_id": q, **facets.get(system, {})})
    return rows


def grade_passages(grader: ExamGrader, passages: Sequence[Passage], banks: Mapping[str, Sequence[BankQuestion]],
                   done: Callable[[dict[str, Any]], bool] | None = None,
                   write: Callable[[dict[str, Any]], None] | None = None, progress: bool = False
                   ) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Grade every pooled passage (each (query_id, passage_id) once); returns (records, counts).

    Passages of queries without a bank are skipped and counted; ``done`` lets a resumed
    run skip passages already written.
    """
    counts: dict[str, int] = {}
    pool: dict[tuple[str, str], Passage] = {}
    for p in passages:
        pool.setdefault((p.query_id, p.passage_id), p)
    counts["passages_in_runs"] = len(passages)
    counts["pooled_passages"] = len(pool)
    todo = []
    for key, p in pool.items():
        if p.query_id not in banks:
            counts["skipped_no_question_bank"] = counts.get("skipped_no_question_bank", 0) + 1
            continue
        if done is not None and done({"query_id": key[0], "passage_id": key[1]}):
            counts["already_graded"] = counts.get("already_graded", 0) + 1
            continue
        todo.append(p)
    iterator: Iterable[Passage] = todo
    if progress:
        from tqdm import tqdm

        iterator = tqdm(todo, desc="exampp grading", unit="passage")
    out = []
    for p in iterator:
        rec = grader.grade_passage(p, banks[p.query_id])
        out.append(rec)
        if write is not None:
            write(rec)
    counts["graded_now"] = len(out)
    for k2, v in grader.counts.items():
        counts[k2] = v
    return out, counts
