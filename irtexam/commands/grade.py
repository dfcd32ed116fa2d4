"""``irtexam grade avert|exampp|mtrag|correlate``: the non-multiple-choice graders.

* ``avert``: free-form answers vs an exam -> binary responses + margins (A-VERT);
* ``exampp``: EXAM++ / RUBRIC grading of system passages against question banks,
  EXAM-Cover, EXAM-Qrels (ir-measures), leaderboard, graded responses;
* ``mtrag``: MT-RAG algorithmic metrics, IDK judge and IDK conditioning;
* ``correlate``: Spearman / Kendall between two leaderboard columns.

Every command reads and writes JSONL (plus CSV/parquet response tables), prints what
it counted (skips, parse failures, defaults), and resumes after a crash: finished
output records are kept and LLM calls are cached with ``--cache-dir``.
"""

from __future__ import annotations

import argparse
import json
import os

from ..options import FINITE_FLOAT, GRADE, POSITIVE_INT


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``grade`` sub-command and its four sub-sub-commands."""
    p = subparsers.add_parser("grade", help="grade free-form answers and RAG outputs (A-VERT, EXAM++, MT-RAG)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="grader", metavar="GRADER")

    a = sub.add_parser("avert", help="verify free-form answers by embedding ranking (A-VERT)")
    a.add_argument("--exam", required=True, help="exam JSONL (id, question, choices, answer)")
    a.add_argument("--answers", required=True, help="answers JSONL: item, examinee, answer, facets {...}")
    a.add_argument("--output", required=True, help="graded JSONL to write (response, margin, scores)")
    a.add_argument("--responses", default=None, help="also write the ResponseMatrix long table (.csv/.parquet)")
    a.add_argument("--aggregate", choices=["max", "topk"], default="max", help="group score (default max)")
    a.add_argument("--top-k", type=POSITIVE_INT, default=3, help="k for --aggregate topk")
    a.add_argument("--no-enhance", action="store_true", help="do not add the paper's enhanced phrasings")
    a.add_argument("--no-letters", action="store_true", help="targets without letter forms (no-choices prompts)")
    a.add_argument("--no-refusals", action="store_true", help="no refusal / IDK targets in the wrong group")
    a.add_argument("--encoder", default=None, help="sentence-transformers dir (default: packaged MiniLM)")
    a.set_defaults(func=run_avert)

    e = sub.add_parser("exampp", help="EXAM++ / RUBRIC answerability grading, EXAM-Cover, EXAM-Qrels")
    bank = e.add_mutually_exclusive_group(required=True)
    bank.add_argument("--bank", help="question bank JSONL (query_id, questions[, answers])")
    bank.add_argument("--generate-bank", metavar="QUERIES", help="queries JSONL (query_id, query[, subtopic]): "
                      "generate the banks with --llm (Table 1 prompt) and write them to --bank-out")
    e.add_argument("--bank-out", default=None, help="where generated banks go (default <graded>.bank.jsonl)")
    e.add_argument("--runs", required=True, help="system responses JSONL (query_id, system, passages/text)")
    e.add_argument("--graded", required=True, help="graded passages JSONL (written; resumed if present)")
    e.add_argument("--llm", default=None, help="grader LLM (packaged name, GGUF, dir or URL); omit to only "
                   "evaluate an existing --graded file")
    e.add_argument("--cache-dir", default=None, help="cache every LLM call here (resumable)")
    e.add_argument("--rating", choices=["generate", "score"], default="generate",
                   help="self-rating by reading the reply (paper) or by the likeliest of ' 0'..' 5'")
    e.add_argument("--no-extract", action="store_true", help="skip the answer-extraction prompt")
    e.add_argument("--llm-verify", action="store_true", help="ask the LLM to verify answers the heuristic rejects")
    e.add_argument("--grade-mode", choices=["self_rating", "answer"], default="self_rating",
                   help="grades used for evaluation: 0-5 self-ratings or verified answers (0/1)")
    e.add_argument("--tau", type=GRADE, default=4, help="minimum grade for cover / relevance (default 4)")
    e.add_argument("--k", type=POSITIVE_INT, default=20, help="passage budget for EXAM-Cover (default 20)")
    e.add_argument("--qrels", default=None, help="write EXAM-Qrels (trec_eval format) here")
    e.add_argument("--run-file", default=None, help="write the systems' rankings as a trec_eval run file")
    e.add_argument("--leaderboard", default=None, help="write the leaderboard CSV here")
    e.add_argument("--responses", default=None, help="write graded responses (item=question, examinee=system)")
    e.set_defaults(func=run_exampp)

    m = sub.add_parser("mtrag", help="MT-RAG metrics with IDK conditioning (records in, records + metrics out)")
    m.add_argument("--input", required=True, help="MT-RAG or flat JSONL records")
    m.add_argument("--output", required=True, help="JSONL with a metrics object per record (resumed if present)")
    m.add_argument("--encoder", default=None, help="sentence-transformers dir for BERTScore (default: packaged MiniLM)")
    m.add_argument("--no-bertscore", action="store_true", help="skip BertscoreP/R and BertKPrec (no encoder)")
    m.add_argument("--bertscore-baseline", type=FINITE_FLOAT, default=None,
                   help="rescale BERTScore as (s - b)/(1 - b) with this baseline b")
    m.add_argument("--idk", choices=["lexical", "llm"], default="lexical", help="IDK detector (default lexical)")
    m.add_argument("--llm", default=None, help="judge LLM for --idk llm")
    m.add_argument("--idk-method", choices=["score", "generate"], default="score",
                   help="LLM judge by label likelihood (default) or by reading a generated label")
    m.add_argument("--cache-dir", default=None, help="cache every LLM call here (resumable)")
    m.add_argument("--zero-idk-on-answerable", action="store_true",
                   help="give 0 to a full IDK on an answerable question, as the MT-RAG scripts do; by "
                        "default answerable questions keep their score (the metrics reference)")
    m.set_defaults(func=run_mtrag)

    c = sub.add_parser("correlate", help="Spearman and Kendall rank correlation of two leaderboards")
    c.add_argument("a", help="leaderboard CSV (a 'system' column, else the first column)")
    c.add_argument("b", help="leaderboard CSV")
    c.add_argument("--a-col", required=True, help="score column of A")
    c.add_argument("--b-col", required=True, help="score column of B")
    c.set_defaults(func=run_correlate)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _load_llm(name: str, cache_dir: str | None):
    from ..llm import CachedLLM, load_llm

    llm = load_llm(name)
    return CachedLLM(llm, cache_dir, progress=False) if cache_dir else llm


def _print_counts(title: str, counts: dict) -> None:
    print(title)
    for k, v in sorted(counts.items()):
        print(f"  {k}: {v}")


def run_avert(args: argparse.Namespace) -> int:
    """Grade answers with A-VERT; write graded JSONL (+ response table); print agreement."""
    from ..errors import InputError
    from ..exam.schema import read_exam
    from ..grading.avert import agreement, grade_answer_records, results_to_long
    from ..grading.embeddings import load_encoder
    from ..grading.records import read_jsonl, write_jsonl

    items = read_exam(args.exam)
    records = read_jsonl(args.answers)
    encoder = load_encoder(args.encoder)
    refusals = () if args.no_refusals else None
    kwargs = {} if refusals is None else {"refusals": refusals}
    rows, counts = grade_answer_records(items, records, encoder, aggregate=args.aggregate, top_k=args.top_k,
                                        enhance=not args.no_enhance, with_letters=not args.no_letters,
                                        path=args.answers, progress=True, **kwargs)
    if not rows:
        raise InputError("no answer could be graded (see the counts above: unknown items or missing text)",
                         path=args.answers)
    write_jsonl(rows, args.output)
    agree, n = agreement([r["response"] for r in rows], [r["exact_letter"] for r in rows])
    _print_counts(f"a-vert with {encoder.name}:", counts)
    print(f"  accuracy (A-VERT): {sum(r['response'] for r in rows) / len(rows):.3f}")
    print(f"  agreement with exact-letter matching: {agree:.3f} on {n} answers with an extractable letter")
    print(f"wrote {args.output}")
    if args.responses:
        from ..responses import ResponseMatrix

        rm = ResponseMatrix.from_long(results_to_long(rows))
        print(f"wrote {rm.save(args.responses)}: {rm.n_items} items x {rm.n_examinees} examinees")
    return 0


def run_exampp(args: argparse.Namespace) -> int:
    """Grade passages (if --llm), then EXAM-Cover, EXAM-Qrels measures and the leaderboard."""
    from ..errors import InputError
    from ..grading import exampp as ex
    from ..grading.records import ResumableWriter, read_jsonl, write_jsonl

    passages = ex.read_passages(read_jsonl(args.runs), path=args.runs)
    if args.generate_bank:
        if not args.llm:
            raise InputError("--generate-bank needs --llm to write the questions")
        queries = read_jsonl(args.generate_bank)
        for q in queries:
            if "query_id" not in q or "query" not in q:
                raise InputError("a query line needs query_id and query", path=args.generate_bank,
                                 row=q.get("_row"))
        llm = _load_llm(args.llm, args.cache_dir)
        banks, failed = ex.generate_question_bank(llm, {str(q["query_id"]): q["query"] for q in queries},
                                                  {str(q["query_id"]): q["subtopic"] for q in queries
                                                   if "subtopic" in q})
        out = args.bank_out or os.path.splitext(args.graded)[0] + ".bank.jsonl"
        write_jsonl([{"query_id": q, "questions": [{"question_id": b.question_id, "question": b.question}
                                                  for b in bank]} for q, bank in banks.items()], out)
        print(f"generated question banks for {len(banks)} queries -> {out}; "
              f"unparseable replies (query left without a bank): {len(failed)} {failed[:5]}")
    else:
        banks = ex.read_question_bank(read_jsonl(args.bank), path=args.bank)
    if not banks:
        raise InputError("no question bank: every generated reply failed to parse; use a bigger --llm or --bank")

    key = lambda r: f"{r['query_id']}\x00{r['passage_id']}"  # noqa: E731
    if args.llm:
        llm = _load_llm(args.llm, args.cache_dir)
        grader = ex.ExamGrader(llm, rating_method=args.rating, extract_answers=not args.no_extract,
                               llm_verify=args.llm_verify)
        with ResumableWriter(args.graded, key) as writer:
            _, counts = ex.grade_passages(grader, passages, banks, done=writer.done, write=writer.write,
                                          progress=True)
            graded = list(writer.finished.values())
        _print_counts(f"exampp grading with {llm.name}:", counts)
    else:
        if not os.path.exists(args.graded):
            raise InputError("no grader: give --llm to grade, or an existing --graded file", path=args.graded)
        graded = read_jsonl(args.graded)
    table = ex.grade_table(graded, mode=args.grade_mode)
    runs = ex.rankings(passages)
    missing = sum(1 for p in passages if (p.query_id, p.passage_id) not in table and p.query_id in banks)
    if missing:
        from ..cli import print_warning

        print_warning(f"{missing} ranked passages have no grades (count as grade 0)")
    cover = ex.exam_cover(table, runs, banks, tau=args.tau, k=args.k)
    qrels = ex.exam_qrels(table)
    measures = ex.qrels_measures(qrels, runs, tau=args.tau)
    board = ex.leaderboard({s: {f"EXAM-Cover@tau{args.tau},k{args.k}": cover[s], **measures[s]} for s in runs})
    print(board.to_string(float_format=lambda v: f"{v:.4f}"))
    if args.qrels:
        ex.write_qrels(qrels, args.qrels)
        print(f"wrote {args.qrels} ({len(qrels)} judged passages)")
    if args.run_file:
        ex.write_run(runs, args.run_file)
        print(f"wrote {args.run_file}")
    if args.leaderboard:
        board.to_csv(args.leaderboard)
        print(f"wrote {args.leaderboard}")
    if args.responses:
        import pandas as pd

        from ..responses import ResponseMatrix

        rows = ex.graded_responses(table, passages, banks, k=args.k)
        graded_mode = args.grade_mode == "self_rating"
        rm = ResponseMatrix.from_long(pd.DataFrame(rows), graded=graded_mode, max_score=5 if graded_mode else None)
        print(f"wrote {rm.save(args.responses)}: {rm.n_items} questions x {rm.n_examinees} systems "
              f"({'graded 0-5' if graded_mode else 'binary'})")
    return 0


def run_mtrag(args: argparse.Namespace) -> int:
    """MT-RAG metrics for every record; resumable; prints counts and metric means."""
    from ..errors import InputError
    from ..grading.embeddings import load_encoder
    from ..grading.idk import LLMIdkJudge
    from ..grading.mtrag import grade_records, parse_record
    from ..grading.records import ResumableWriter, read_jsonl

    records = read_jsonl(args.input)
    encoder = None if args.no_bertscore else load_encoder(args.encoder)
    judge = None
    if args.idk == "llm":
        if not args.llm:
            raise InputError("--idk llm needs --llm (a packaged name, GGUF, model dir or server URL)")
        judge = LLMIdkJudge(_load_llm(args.llm, args.cache_dir), method=args.idk_method)
    key = lambda r: str(r.get("task_id", r.get("id", r.get("_row"))))  # noqa: E731
    keys = [key(r) for r in records]
    if len(set(keys)) != len(keys):
        raise InputError("record ids (task_id / id) are not unique; resuming needs unique ids", path=args.input)
    with ResumableWriter(args.output, key) as writer:
        todo = [r for r in records if not writer.done(r)]
        info = {"encoder": encoder.name if encoder else None, "bertscore_baseline": args.bertscore_baseline,
                "idk_detector": judge.name if judge else "lexical",
                "idk_conditioning": "mtrag-scripts" if args.zero_idk_on_answerable else "reference"}

        def write(rec: dict) -> None:
            rec["metrics_info"] = info
            writer.write(rec)

        for r in todo:
            parse_record(r, args.input, r.get("_row"))  # fail early, before any model work
        grade_records(todo, encoder, idk_fn=judge.judge if judge else None, baseline=args.bertscore_baseline,
                      answerable_idk_zero=args.zero_idk_on_answerable, path=args.input, write=write,
                      progress=True)
        out = [writer.finished[k] for k in keys]
    counts = {"records": len(records), "already_done": len(records) - len(todo), "scored_now": len(todo)}
    if judge is not None:
        counts["idk_judge_unreadable_replies(lexical fallback)"] = judge.parse_failures
    counts["no_reference(RB_agg not computed)"] = sum("RB_agg" not in r["metrics"] for r in out)
    counts["no_passages(BertKPrec null)"] = sum(r["metrics"].get("Extractiveness_RougeL") is None for r in out)
    counts["RB_agg_zero_denominator"] = sum(bool((r["metrics"].get("RB_agg_zero_denominator") or [False])[0])
                                            for r in out)
    _print_counts(f"mtrag metrics (encoder {info['encoder']}, IDK {info['idk_detector']}):", counts)
    for name in ("Recall", "RougeL_stemFalse", "BertscoreR", "RB_agg", "idk_eval", "RB_agg_idk"):
        vals = [r["metrics"][name][0] for r in out if r["metrics"].get(name)]
        if vals:
            print(f"  mean {name}: {sum(vals) / len(vals):.4f} (n={len(vals)})")
    print(f"wrote {args.output}")
    return 0


def run_correlate(args: argparse.Namespace) -> int:
    """Print Spearman and Kendall correlations between two leaderboard columns."""
    import pandas as pd

    from ..errors import InputError, reading
    from ..grading.exampp import rank_correlation

    def load(path: str, col: str) -> dict:
        try:
            with reading(path, "leaderboard CSV"):
                df = pd.read_csv(path)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise InputError(f"not a readable CSV table ({' '.join(str(exc).split())})", path=path) from None
        index = "system" if "system" in df.columns else df.columns[0]
        if col not in df.columns:
            raise InputError(f"no column {col!r}; columns are {list(df.columns)}", path=path, column=col)
        return dict(zip(df[index].astype(str), df[col].astype(float)))

    res = rank_correlation(load(args.a, args.a_col), load(args.b, args.b_col))
    print(json.dumps(res, indent=2))
    return 0
