"""Run a grid of RAG pipelines (llm x retriever x icl) over an exam.

Output directory layout (``irtexam take SPEC --out DIR``):

* ``answers.jsonl``        append-only log, one line per finished (pipeline, item), flushed
                           per item; read back at start so a re-run resumes;
* ``answers.parquet``      the long answers table (facets, item, per-candidate scores, chosen,
                           correct, prompt hash, timings);
* ``responses.csv``        the ResponseMatrix long table (examinee = ``llm|retriever|iclK``,
                           facet columns llm, retriever, icl) for ``irtexam fit``;
* ``accuracy.csv``         pointwise accuracy, the paper's Table 2 layout (rows llm x retriever,
                           one column per ICL level and ``best``);
* ``retrieval_recall.csv`` recall@k of the source chunk per retriever;
* ``provenance.json``      models, versions, spec/exam/corpus/template hashes, seeds, counts;
* ``index/``               saved retrieval indexes (unless the spec sets ``index_dir``).

Work is organised per LLM (loaded once): items are taken in batches of
``batch_items``; the ScoreRequests of every pending (pipeline, item) pair of the batch
are deduplicated (identical prompt + continuations are scored once, e.g. closed-book
and a retriever that found nothing, or two retrievers returning the same passages).
"""

from __future__ import annotations

import hashlib
import json
import platform
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from ..exam.schema import ExamItem, read_exam
from ..grading.multiple_choice import DedupStats, check_not_uninformative, choose, score_deduplicated, top_tied
from ..grading.reply import ROUTES, GradedReply, grade_reply
from ..llm.base import LLM, GenerationParams, ScoreRequest
from ..llm.openai_compat import check_can_score
from ..paths import file_sha256
from ..retrieval.base import Hit, Passage, corpus_fingerprint, load_passages
from ..retrieval.evaluation import recall_at_k
from ..retrieval.registry import build_retriever
from .icl import draw_demonstrations
from .spec import GRID_FACETS, GridSpec
from .systems import ask_system, contexts_contain

LLMFactory = Callable[[Mapping[str, Any]], LLM]
LEVEL_KEYS = ("name", "label", "answer", "max_new_tokens")  # llm entry keys that are not load_llm options
GRADER_VERSION = 2  # recorded in provenance; logged replies are re-graded by the current grader on every run


@dataclass(frozen=True)
class Pipeline:
    """One examinee: an LLM, a retriever and a number of in-context demonstrations."""

    llm: str
    retriever: str
    icl: int
    top_k: int | None = None  # set only when the spec varies top_k
    prompt: str | None = None  # the prompt template's name, set only when the spec varies the prompt

    @property
    def id(self) -> str:
        """Examinee id, e.g. ``smollm2-135m|bm25|icl2`` (``...|icl2|k5|terse`` when top_k / prompt vary)."""
        extra = (f"|k{self.top_k}" if self.top_k is not None else "") + (f"|{self.prompt}" if self.prompt else "")
        return f"{self.llm}|{self.retriever}|icl{self.icl}{extra}"

    @property
    def facets(self) -> dict[str, str]:
        """Facet columns of the ResponseMatrix (top_k and prompt only when they vary)."""
        out = {"llm": self.llm, "retriever": self.retriever, "icl": f"icl{self.icl}"}
        if self.top_k is not None:
            out["top_k"] = f"k{self.top_k}"
        if self.prompt:
            out["prompt"] = self.prompt
        return out


@dataclass
class TakeResult:
    """What a run did: counts for the report, and where the artifacts are."""

    out_dir: Path
    n_items: int
    n_pipelines: int
    scored_pairs: int = 0
    resumed_pairs: int = 0
    stale_records: int = 0
    unreadable_lines: int = 0
    dedup: DedupStats = field(default_factory=DedupStats)
    oracle_missing: int = 0
    missing_pairs: int = 0
    tied_pairs: int = 0  # answers whose best candidates tie: logged, not scored (missing in responses.csv)
    seconds: float = 0.0
    grading: dict[str, dict[str, int]] = field(default_factory=dict)
    regraded: int = 0

    def summary(self) -> str:
        """One human-readable paragraph of counts."""
        return (f"{self.n_pipelines} pipelines x {self.n_items} items: {self.scored_pairs} answers scored now, "
                f"{self.resumed_pairs} resumed from the log, {self.stale_records} stale log records ignored "
                f"(other spec/template), {self.unreadable_lines} unreadable log lines skipped; "
                f"score requests {self.dedup.requested}, distinct {self.dedup.unique} "
                f"({self.dedup.saved} shared across pipelines); items without a usable oracle chunk: "
                f"{self.oracle_missing}; (pipeline, item) pairs not answered yet: {self.missing_pairs}; "
                f"tied candidates (not scored): {self.tied_pairs}; "
                f"{self.seconds:.1f} s" + self.grading_summary())

    def grading_summary(self) -> str:
        """Per free-text examinee: accuracy and how the replies were graded ("" when there are none)."""
        if not self.grading:
            return ""
        parts = []
        for label, c in self.grading.items():
            parts.append(f"{label}: {c['correct']}/{c['n']} correct, " + ", ".join(
                f"{c[r]} {'abstained' if r == 'abstain' else r}" for r in ROUTES))
        regraded = f" ({self.regraded} logged replies re-graded by the current grader)" if self.regraded else ""
        return ("\nfree-text replies graded (letter, text, embedding; abstentions and unparseable score 0)"
                f"{regraded}: " + "; ".join(parts))


def portable_path(path: str | Path | None) -> str | None:
    """A path as recorded in provenance: relative to the working directory when inside it.

    Artifacts are committed and shared, so they should not carry one machine's
    absolute paths; the sha256 next to each path identifies the file anyway.
    """
    if path is None:
        return None
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path.name if path.is_absolute() else str(path)


def portable_model_dir(path: str | Path) -> str:
    """A model folder for provenance: cache folders as $IRTEXAM_CACHE/..., others as portable_path."""
    from ..llm.registry import cache_root

    path = Path(path).resolve()
    try:
        return "$IRTEXAM_CACHE/" + str(path.relative_to(cache_root().resolve()))
    except ValueError:
        return portable_path(path) or str(path)


def config_hash(spec: GridSpec, exam_sha: str, corpus_sha: str | None) -> str:
    """Hash of everything that changes an answer besides the pipeline itself.

    A log record whose hash differs (other exam, corpus, template, top_k, seed, pool,
    generation settings) is stale: it is ignored and the pair is taken again.
    """
    axes = grid_axes(spec)
    template = spec.prompt.sha256 if len(axes["prompt"]) == 1 else [(n, t.sha256) for n, t in axes["prompt"]]
    top_k = spec.top_k if len(axes["top_k"]) == 1 else axes["top_k"]
    parts = {"exam": exam_sha, "corpus": corpus_sha, "template": template, "top_k": top_k,
             "seed": spec.seed, "pool": file_sha256(spec.icl_pool) if spec.icl_pool else None,
             "generate": spec.generate, "retrievers": spec.retrievers,
             "llms": [{k: v for k, v in e.items() if not (k == "answer" and v == "loglik")} for e in spec.llms]}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def read_log(path: Path, config: str | Iterable[str]) -> tuple[dict[tuple[str, str], dict], int, int]:
    """Records of the answers log keyed by (pipeline, item); plus counts of stale and unreadable lines.

    ``config`` is the current config hash, or several (the grid's and each system's).

    A line cut short by a crash is unreadable: it is counted and its pair taken again.
    """
    configs = {config} if isinstance(config, str) else set(config)
    records: dict[tuple[str, str], dict] = {}
    stale = unreadable = 0
    if not path.exists():
        return records, 0, 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                key = (rec["pipeline"], rec["item"])
            except (json.JSONDecodeError, KeyError, TypeError):
                unreadable += 1
                continue
            if rec.get("config") not in configs:
                stale += 1
                continue
            records[key] = rec
    return records, stale, unreadable


class AnswerLog:
    """Append-only JSONL writer, flushed after every record."""

    def __init__(self, path: Path) -> None:
        """Open ``path`` for appending; repairs a last line cut short by a crash."""
        path.parent.mkdir(parents=True, exist_ok=True)
        needs_newline = path.exists() and path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
        self.handle = open(path, "a", encoding="utf-8")
        if needs_newline:
            self.handle.write("\n")

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record and flush it to the OS."""
        self.handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.handle.flush()

    def close(self) -> None:
        """Close the file."""
        self.handle.close()


def default_llm_factory(entry: Mapping[str, Any]) -> LLM:
    """Load an LLM from a spec entry with :func:`irtexam.llm.load_llm` (options passed through)."""
    from ..llm import load_llm

    return load_llm(entry["name"], **{k: v for k, v in entry.items() if k not in LEVEL_KEYS})


def retrieve_all(retriever: Any, items: Sequence[ExamItem], k: int) -> dict[str, list[Hit]]:
    """Top-``k`` hits of every item's question (batched query encoding where supported)."""
    if hasattr(retriever, "prepare"):
        retriever.prepare([it.question for it in items])
    return {it.id: retriever.retrieve(it.question, k, chunk_id=it.chunk_id) for it in items}


GENERATION_INSTRUCTION = ("Answer the multiple-choice question below with the letter of the correct choice. "
                          "If you cannot tell, say that you don't know.\n\n")


def generation_prompt(prompt: str) -> str:
    """The prompt an ``answer: generate`` level is asked: an instruction, then the multiple-choice prompt."""
    return GENERATION_INSTRUCTION + prompt


def generation_params(settings: Mapping[str, Any] | None) -> GenerationParams:
    """Decoding settings from the spec's ``generate`` table (default: greedy, 48 new tokens)."""
    settings = dict(settings or {})
    settings.setdefault("max_new_tokens", 48)
    return GenerationParams(**{k: (tuple(v) if k == "stop" else v) for k, v in settings.items()})


def system_config(entry: Mapping[str, Any], exam_sha: str) -> str:
    """Config hash of a black-box system's answers: the exam and the system's target (url / python).

    Call options (timeout, retries, concurrency) and facets do not change an answer, so
    they are left out: changing them keeps the logged answers.
    """
    parts = {"exam": exam_sha, "url": entry.get("url"), "python": entry.get("python")}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


class LazyEncoder:
    """The packaged MiniLM encoder, loaded on the first reply that reaches the embedding route."""

    def __init__(self) -> None:
        self._encoder: Any = None
        self._lock = threading.Lock()
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> Any:
        """L2-normalised sentence vectors (see :mod:`irtexam.grading.embeddings`)."""
        with self._lock:
            if self._encoder is None:
                from ..grading.embeddings import load_encoder

                self._encoder = load_encoder()
            self.calls += 1
            return self._encoder.encode(texts)


@dataclass
class _Run:
    """State shared by the jobs of one take: the log, the finished pairs, the counters, the stop flag."""

    log: "AnswerLog"
    done: dict
    result: TakeResult
    progress: bool
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, key: tuple[str, str], rec: Mapping[str, Any], bar: Any) -> None:
        """Log one finished answer (thread-safe) and advance its progress bar."""
        with self.lock:
            self.log.write(rec)
            self.done[key] = rec
            self.result.scored_pairs += 1
            bar.update(1)

    def bar(self, desc: str, total: int, initial: int, position: int) -> Any:
        """One tqdm bar at a fixed screen line (one display for all concurrent jobs)."""
        from tqdm.auto import tqdm

        return tqdm(total=total, initial=initial, desc=desc, position=position, leave=True,
                    disable=not self.progress, dynamic_ncols=True)


def is_served(entry: Mapping[str, Any]) -> bool:
    """True for an llm entry served over HTTP (its calls can overlap with other levels')."""
    return str(entry.get("name", "")).startswith(("http://", "https://"))


def run_jobs(spec: GridSpec, llm_job: Callable[[Mapping[str, Any], int], None],
             system_job: Callable[[Mapping[str, Any], int], None], run: _Run) -> None:
    """Run every llm level and system: served levels and systems concurrently, local levels in turn.

    Each served endpoint keeps its own ``max_concurrency``; local models run one after
    another in this thread while the served ones proceed. The first failure stops the
    others at their next batch (what finished is logged) and is raised after all stopped.
    """
    positions, n = {}, 0
    for entry in spec.llms:
        positions[id(entry)] = n
        n += len(spec.retrievers) * len(spec.icl)
    for entry in spec.systems:
        positions[id(entry)] = n
        n += 1
    threaded = [(llm_job, e) for e in spec.llms if is_served(e)] + [(system_job, e) for e in spec.systems]
    local = [e for e in spec.llms if not is_served(e)]
    errors: list[BaseException] = []

    def guarded(job: Callable[[Mapping[str, Any], int], None], entry: Mapping[str, Any]) -> None:
        try:
            job(entry, positions[id(entry)])
        except BaseException as exc:
            run.stop.set()
            errors.append(exc)

    with ThreadPoolExecutor(max_workers=max(1, len(threaded))) as pool:
        futures = [pool.submit(guarded, job, entry) for job, entry in threaded]
        for entry in local:
            if run.stop.is_set():
                break
            guarded(llm_job, entry)
        for future in futures:
            future.result()
    if errors:
        raise errors[0]


def regrade_logged(done: Mapping[tuple[str, str], dict], items: Sequence[ExamItem], encoder: Any) -> int:
    """Grade every logged free-text reply again with the current grader; returns how many changed.

    The raw reply is kept in the log, so a better grader never needs the system or the
    model again: the tables always reflect the current :func:`grade_reply`.
    """
    by_id = {it.id: it for it in items}
    changed = 0
    for rec in done.values():
        it = by_id.get(rec.get("item"))
        if it is None or rec.get("answer_mode") not in ("generate", "system"):
            continue
        graded = grade_reply(rec.get("reply"), it.choices, encoder=encoder, question=it.question)
        if graded.choice != rec.get("chosen") or graded.route != rec.get("grading"):
            rec.update(graded.to_json(), correct=int(graded.choice == it.answer))
            changed += 1
    return changed


def generated_record(pipeline: Pipeline, item: ExamItem, hits: Sequence[Hit], demos: Sequence[ExamItem],
                     request: ScoreRequest, reply: str, graded: GradedReply, *, seconds: float, config: str,
                     template_sha: str) -> dict[str, Any]:
    """One answers row of an ``answer: generate`` level: the raw reply and how it was graded."""
    return {
        "pipeline": pipeline.id, **pipeline.facets, "icl_k": pipeline.icl, "item": item.id, "answer": item.answer,
        **graded.to_json(), "correct": int(graded.choice == item.answer), "answer_mode": "generate",
        "reply": reply, "normalisation": None, "n_passages": len(hits), "passage_ids": [h.passage.id for h in hits],
        "oracle_in_context": bool(item.chunk_id) and any(h.passage.id == item.chunk_id for h in hits),
        "demo_ids": [d.id for d in demos],
        "prompt_sha": hashlib.sha256(request.prompt.encode("utf-8")).hexdigest()[:16],
        "prompt_chars": len(request.prompt), "template_sha": template_sha, "seconds": seconds,
        "shared_request": False, "config": config,
    }


def system_record(entry: Mapping[str, Any], item: ExamItem, reply: Mapping[str, Any], graded: GradedReply, *,
                  seconds: float, config: str, source_found: bool | None) -> dict[str, Any]:
    """One answers row of a black-box system: its facets, the raw reply, the contexts, the grading."""
    contexts = reply.get("contexts")
    return {
        "pipeline": entry["label"], **entry.get("facets", {}), "item": item.id, "answer": item.answer,
        **graded.to_json(), "correct": int(graded.choice == item.answer), "answer_mode": "system",
        "reply": reply["answer"], "contexts": contexts, "n_passages": None if contexts is None else len(contexts),
        "oracle_in_context": source_found, "normalisation": None, "seconds": seconds, "config": config,
    }


def answer_record(pipeline: Pipeline, item: ExamItem, hits: Sequence[Hit], demos: Sequence[ExamItem],
                  request: ScoreRequest, scores: Sequence[Any], *, normalisation: str, seconds: float,
                  shared: bool, config: str, template_sha: str) -> dict[str, Any]:
    """One row of the answers table (JSON-serialisable)."""
    chosen = {n: choose(scores, n) for n in ("token", "char", "sum")}
    tied = {n: top_tied(scores, n) for n in ("token", "char", "sum")}
    pick = chosen[normalisation]
    return {
        "pipeline": pipeline.id, **pipeline.facets, "icl_k": pipeline.icl, "item": item.id,
        # an item whose best candidates tie is not scored: no pick would be an answer (issue 27)
        "answer": item.answer, "chosen": pick, "correct": None if tied[normalisation] else int(pick == item.answer),
        "tied": tied[normalisation], "tied_token": tied["token"], "tied_char": tied["char"], "tied_sum": tied["sum"],
        "chosen_token": chosen["token"], "chosen_char": chosen["char"], "chosen_sum": chosen["sum"],
        "normalisation": normalisation,
        "logprob_sum": [s.logprob for s in scores], "logprob_token": [s.per_token for s in scores],
        "logprob_char": [s.per_char for s in scores], "n_tokens": [s.n_tokens for s in scores],
        "n_passages": len(hits), "passage_ids": [h.passage.id for h in hits],
        "oracle_in_context": bool(item.chunk_id) and any(h.passage.id == item.chunk_id for h in hits),
        "demo_ids": [d.id for d in demos],
        "prompt_sha": hashlib.sha256(request.prompt.encode("utf-8")).hexdigest()[:16],
        "prompt_chars": len(request.prompt), "template_sha": template_sha,
        "seconds": seconds, "shared_request": shared, "config": config,
    }


def under_normalisation(record: Mapping[str, Any], normalisation: str) -> dict[str, Any]:
    """``record`` with its pick and correctness read under ``normalisation``.

    Every logged answer carries the pick of each rule (``chosen_token``, ``chosen_char``,
    ``chosen_sum``), so changing the spec's rule re-reads the log instead of scoring again.
    """
    out = dict(record)
    pick = record.get(f"chosen_{normalisation}")
    if pick is not None and record.get("normalisation") != normalisation:
        tied = bool(record.get(f"tied_{normalisation}", False))
        out.update(chosen=pick, correct=None if tied else int(pick == record["answer"]), tied=tied,
                   normalisation=normalisation)
    return out


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("irtexam", "torch", "transformers", "sentence-transformers", "bm25s", "numpy", "pandas"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def take_exam(spec: GridSpec, out_dir: str | Path, *, llm_factory: LLMFactory | None = None,
              progress: bool = True, items: Sequence[ExamItem] | None = None,
              passages: Sequence[Passage] | None = None, score_pending: bool = True) -> TakeResult:
    """Let every pipeline of ``spec`` take the exam; writes the artifacts listed in the module doc.

    Resumable: finished (pipeline, item) pairs are read back from ``answers.jsonl``
    and never scored again. With ``score_pending=False`` no LLM is loaded: the tables
    are rebuilt from the answers logged so far (a partial grid; ``missing_pairs`` in
    provenance.json counts what is still to do).
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    llm_factory = llm_factory or default_llm_factory
    items = list(items) if items is not None else read_exam(spec.exam)
    exam_sha = file_sha256(spec.exam) if spec.exam.exists() else hashlib.sha256(
        json.dumps([i.to_json() for i in items], sort_keys=True).encode()).hexdigest()
    if passages is None and spec.corpus is not None:
        passages = load_passages(spec.corpus)
    passages = list(passages or [])
    corpus_sha = corpus_fingerprint(passages) if passages else None
    if spec.icl_pool:
        pool = read_exam(spec.icl_pool)
    else:  # leave-one-out over the whole exam file (even when only some items are taken)
        pool = read_exam(spec.exam) if spec.exam.exists() else items
    config = config_hash(spec, exam_sha, corpus_sha)
    axes = grid_axes(spec)
    templates = dict(axes["prompt"])
    llm_names = [e.get("label", e["name"]) for e in spec.llms]
    varied_k = axes["top_k"] if len(axes["top_k"]) > 1 else [None]
    varied_prompt = [n for n, _ in axes["prompt"]] if len(axes["prompt"]) > 1 else [None]
    pipelines = [Pipeline(l, r["name"], k, top_k, prompt) for l in llm_names for r in spec.retrievers
                 for k in spec.icl for top_k in varied_k for prompt in varied_prompt]

    def context(p: Pipeline, it: ExamItem) -> list[Hit]:
        """The pipeline's hits: the first top_k of the retriever's ranking at the largest top_k."""
        return hits[p.retriever][it.id][:p.top_k or spec.top_k]

    def template_of(p: Pipeline) -> Any:
        """The pipeline's prompt template (the only one when the prompt does not vary)."""
        return templates[p.prompt] if p.prompt else axes["prompt"][0][1]

    result = TakeResult(out, len(items), len(pipelines) + len(spec.systems))

    # retrieval: once per retriever, shared by every LLM and ICL level
    index_dir = spec.index_dir or out / "index"
    shared: dict = {}
    hits: dict[str, dict[str, list[Hit]]] = {}
    recall_rows = []
    chunk_of = {it.id: it.chunk_id for it in items}
    for rspec in spec.retrievers:
        retriever = build_retriever(rspec, passages, index_dir=index_dir, _shared=shared)
        hits[rspec["name"]] = retrieve_all(retriever, items, spec.top_k)
        for k in axes["top_k"]:  # recall at each top_k level (prefixes of the largest ranking)
            rep = recall_at_k(rspec["name"], hits[rspec["name"]], chunk_of, k)
            recall_rows.append({"retriever": rep.retriever, "kind": rspec["kind"], "k": rep.k,
                                "n_items": rep.n_items, "n_with_chunk": rep.n_with_chunk, "n_found": rep.n_found,
                                "recall": rep.recall, "mean_passages": rep.mean_passages})
        if rspec["kind"] == "oracle":
            result.oracle_missing = sum(1 for h in hits[rspec["name"]].values() if not h)

    # demonstrations: the largest level per item; smaller levels are its prefixes
    max_k = max(spec.icl)
    demos = {it.id: draw_demonstrations(it, pool, max_k, seed=spec.seed) for it in items}

    log_path = out / "answers.jsonl"
    system_configs = {e["label"]: system_config(e, exam_sha) for e in spec.systems}
    done, result.stale_records, result.unreadable_lines = read_log(log_path, {config, *system_configs.values()})
    wanted = {(p.id, it.id) for p in pipelines for it in items} | {(e["label"], it.id) for e in spec.systems
                                                                   for it in items}
    result.resumed_pairs = sum(1 for key in done if key in wanted)
    encoder = LazyEncoder()
    result.regraded = regrade_logged(done, items, encoder)
    run = _Run(log=AnswerLog(log_path), done=done, result=result, progress=progress)
    models: dict[str, Any] = {}

    def llm_job(entry: Mapping[str, Any], position: int) -> None:
        label = entry.get("label", entry["name"])
        mine = [p for p in pipelines if p.llm == label]
        pending_items = [it for it in items if any((p.id, it.id) not in done for p in mine)]
        if not pending_items:
            return
        llm = llm_factory(entry)
        generate_mode = entry.get("answer", "loglik") == "generate"
        if not generate_mode:
            check_can_score(llm, label)  # a served LLM that cannot score stops here, before any answer
        options = {k: v for k, v in entry.items() if k not in LEVEL_KEYS}
        models[label] = {"backend_name": llm.name, "source": entry["name"], "answer": entry.get("answer", "loglik"),
                         "options": options,
                         **({"model_dir": portable_model_dir(llm.model_dir)} if hasattr(llm, "model_dir") else {}),
                         **({"dtype": llm.dtype_name} if hasattr(llm, "dtype_name") else {})}
        bars = {p.id: run.bar(p.id, len(items), sum((p.id, it.id) in done for it in items), position + i)
                for i, p in enumerate(mine)}
        params = generation_params({**(spec.generate or {}), **({"max_new_tokens": entry["max_new_tokens"]}
                                                                 if "max_new_tokens" in entry else {})})
        try:
            for start in range(0, len(pending_items), spec.batch_items):
                if run.stop.is_set():
                    return
                batch = pending_items[start:start + spec.batch_items]
                todo = [(p, it) for it in batch for p in mine if (p.id, it.id) not in done]
                requests = [ScoreRequest(template_of(p).render(it, [h.passage for h in context(p, it)],
                                                               demos[it.id][:p.icl]), template_of(p).continuations(it))
                            for p, it in todo]
                t0 = time.perf_counter()
                if generate_mode:
                    prompts = [generation_prompt(r.prompt) for r in requests]
                    unique = list(dict.fromkeys(prompts))
                    replies = dict(zip(unique, llm.generate(unique, params)))
                    per = (time.perf_counter() - t0) / max(len(unique), 1)
                    for (p, it), req, prompt in zip(todo, requests, prompts):
                        graded = grade_reply(replies[prompt], it.choices, encoder=encoder, question=it.question)
                        rec = generated_record(p, it, context(p, it), demos[it.id][:p.icl], req,
                                               replies[prompt], graded, seconds=per, config=config,
                                               template_sha=template_of(p).sha256)
                        run.record((p.id, it.id), rec, bars[p.id])
                    continue
                scores = score_deduplicated(llm, requests, result.dedup, dedup=spec.dedup)
                models[label]["tied_items"] = models[label].get("tied_items", 0) + check_not_uninformative(
                    scores, spec.normalisation, f"LLM {label!r}")
                texts: list[str | None] = [None] * len(todo)
                if spec.generate is not None:
                    unique_prompts = list(dict.fromkeys(r.prompt for r in requests))
                    gen = dict(zip(unique_prompts, llm.generate(unique_prompts, params)))
                    texts = [gen[r.prompt] for r in requests]
                per = (time.perf_counter() - t0) / max(len(set(requests)) if spec.dedup else len(requests), 1)
                counts: dict[ScoreRequest, int] = {}
                for r in requests:
                    counts[r] = counts.get(r, 0) + 1
                for (p, it), req, sc, text in zip(todo, requests, scores, texts):
                    rec = answer_record(p, it, context(p, it), demos[it.id][:p.icl], req, sc,
                                        normalisation=spec.normalisation, seconds=per,
                                        shared=spec.dedup and counts[req] > 1, config=config,
                                        template_sha=template_of(p).sha256)
                    if text is not None:
                        rec["generated"] = text
                    run.record((p.id, it.id), rec, bars[p.id])
        finally:
            for bar in bars.values():
                bar.close()
            if isinstance(getattr(llm, "prefix_stats", None), dict):  # prompt tokens run / reused this run
                models[label]["prefix_stats"] = dict(llm.prefix_stats)

    passage_text = {p.id: p.text for p in passages}

    def system_job(entry: Mapping[str, Any], position: int) -> None:
        label = entry["label"]
        pending = [it for it in items if (label, it.id) not in done]
        models[label] = {"system": {k: v for k, v in entry.items() if k != "label"}}
        if not pending:
            return
        bar = run.bar(label, len(items), len(items) - len(pending), position)
        functions: dict[str, Callable[..., Any]] = {}

        def one(it: ExamItem) -> None:
            if run.stop.is_set():
                return
            t0 = time.perf_counter()
            reply = ask_system(entry, it, functions)
            graded = grade_reply(reply["answer"], it.choices, encoder=encoder, question=it.question)
            rec = system_record(entry, it, reply, graded, seconds=time.perf_counter() - t0,
                                config=system_configs[label],
                                source_found=contexts_contain(reply["contexts"], passage_text.get(it.chunk_id or "")))
            run.record((label, it.id), rec, bar)

        try:
            with ThreadPoolExecutor(max_workers=min(int(entry["max_concurrency"]), len(pending))) as pool:
                futures = [pool.submit(one, it) for it in pending]
                for future in futures:
                    try:
                        future.result()
                    except BaseException:
                        run.stop.set()  # the first failure stops this run; finished items stay logged
                        for f in futures:
                            f.cancel()
                        raise
        finally:
            bar.close()

    try:
        if score_pending:
            run_jobs(spec, llm_job, system_job, run)
    finally:
        run.log.close()

    result.seconds = time.perf_counter() - started
    write_outputs(spec, out, items, pipelines, done, recall_rows, models, result,
                  {"exam": exam_sha, "corpus": corpus_sha, "config": config})
    return result


def answers_frame(records: Iterable[Mapping[str, Any]]):
    """The answers table as a DataFrame (one row per pipeline x item)."""
    import pandas as pd

    return pd.DataFrame(list(records))


def accuracy_table(answers) -> "Any":
    """Table 2 layout: rows (llm, retriever), columns ``ICL@k`` accuracies and ``best`` (max over ICL)."""
    index = ["llm", "retriever"] + [c for c in ("top_k", "prompt") if c in answers.columns]
    table = answers.pivot_table(index=index, columns="icl_k", values="correct", aggfunc="mean")
    table.columns = [f"ICL@{k}" for k in table.columns]
    table["best"] = table.max(axis=1)
    table["n_items"] = answers.groupby(index)["item"].nunique()
    return table.reset_index()


FACET_NOT_APPLICABLE = "-"
RECALL_COLUMNS = ["retriever", "kind", "k", "n_items", "n_with_chunk", "n_found", "recall", "mean_passages"]


def grid_axes(spec: GridSpec) -> dict[str, list]:
    """The levels of the top_k and prompt axes (one level each unless the spec gives lists)."""
    top_ks = sorted(set(spec.top_ks)) if len(set(spec.top_ks)) > 1 else [spec.top_k]
    prompts = list(spec.prompts) if len(spec.prompts) > 1 else [(spec.prompts[0][0] if spec.prompts else "default",
                                                                  spec.prompt)]
    return {"top_k": top_ks, "prompt": prompts}


def facet_columns(spec: GridSpec) -> list[str]:
    """Facet columns of responses.csv: llm, retriever, icl (when the spec has a grid), then the systems' facets.

    An examinee without a facet gets the level ``"-"`` (e.g. a system that declares no retriever).
    """
    axes = grid_axes(spec)
    columns = list(GRID_FACETS) if spec.llms else []
    if spec.llms and len(axes["top_k"]) > 1:
        columns.append("top_k")
    if spec.llms and len(axes["prompt"]) > 1:
        columns.append("prompt")
    for entry in spec.systems:
        columns += [f for f in entry.get("facets", {}) if f not in columns]
    return columns


def grading_counts(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per examinee answering in free text: n, correct and the count of each grading route."""
    out: dict[str, dict[str, int]] = {}
    for r in records:
        if r.get("answer_mode") not in ("generate", "system"):
            continue
        c = out.setdefault(r["pipeline"], {"n": 0, "correct": 0, **{k: 0 for k in ROUTES}})
        c["n"] += 1
        c["correct"] += int(r["correct"])
        c[r["grading"]] = c.get(r["grading"], 0) + 1
    return out


def system_recall_rows(spec: GridSpec, records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """recall rows for systems that report their contexts: was the item's source passage among them."""
    rows = []
    for entry in spec.systems:
        mine = [r for r in records if r["pipeline"] == entry["label"]]
        known = [r for r in mine if r.get("oracle_in_context") is not None]
        if not known:
            continue
        found = sum(bool(r["oracle_in_context"]) for r in known)
        rows.append({"retriever": entry["label"], "kind": "system", "k": None, "n_items": len(mine),
                     "n_with_chunk": len(known), "n_found": found, "recall": found / len(known),
                     "mean_passages": sum(r["n_passages"] or 0 for r in known) / len(known)})
    return rows


def write_outputs(spec: GridSpec, out: Path, items: Sequence[ExamItem], pipelines: Sequence[Pipeline],
                  done: Mapping[tuple[str, str], Mapping[str, Any]], recall_rows: list[dict],
                  models: Mapping[str, Any], result: TakeResult, hashes: Mapping[str, Any]) -> None:
    """Write answers.parquet, responses.csv, accuracy.csv, retrieval_recall.csv and provenance.json."""
    import pandas as pd

    from ..responses import ResponseMatrix

    ids = [p.id for p in pipelines] + [e["label"] for e in spec.systems]
    order = {pid: i for i, pid in enumerate(ids)}
    item_order = {it.id: i for i, it in enumerate(items)}
    logged = [r for key, r in done.items() if key[0] in order and key[1] in item_order]
    reread = sum(1 for r in logged if r.get(f"chosen_{spec.normalisation}") is not None
                 and r.get("normalisation") != spec.normalisation)
    records = sorted((under_normalisation(r, spec.normalisation) for r in logged),
                     key=lambda r: (order[r["pipeline"]], item_order[r["item"]]))
    answers = answers_frame(records)
    recall_rows = list(recall_rows) + system_recall_rows(spec, records)
    pd.DataFrame(recall_rows, columns=RECALL_COLUMNS).to_csv(out / "retrieval_recall.csv", index=False)
    n_missing = result.missing_pairs = len(ids) * len(items) - len(answers)
    result.tied_pairs = sum(bool(r.get("tied")) for r in records)
    result.grading = grading_counts(records)
    if len(answers):
        facets = facet_columns(spec)
        for column in facets:
            if column not in answers.columns:
                answers[column] = None
        answers[facets] = answers[facets].astype(object).where(answers[facets].notna(), FACET_NOT_APPLICABLE)
        answers.to_parquet(out / "answers.parquet", index=False)
        long = answers[["item", "pipeline", "correct", *facets]].rename(
            columns={"pipeline": "examinee", "correct": "response"})
        ResponseMatrix.from_long(long).save(out / "responses.csv")
        grid = answers[answers["pipeline"].isin({p.id for p in pipelines})]
        if len(grid):
            accuracy_table(grid).to_csv(out / "accuracy.csv", index=False)
        if result.grading:
            pd.DataFrame([{"examinee": k, **v, "accuracy": v["correct"] / max(v["n"], 1)}
                          for k, v in result.grading.items()]).to_csv(out / "grading.csv", index=False)
    provenance = {
        "spec": {"path": portable_path(spec.source), "sha256": spec.sha256, "content": spec.raw},
        "exam": {"path": portable_path(spec.exam), "sha256": hashes["exam"], "n_items": len(items)},
        "corpus": {"path": portable_path(spec.corpus), "fingerprint": hashes["corpus"]},
        "icl_pool": portable_path(spec.icl_pool) if spec.icl_pool else "exam (leave-one-out)",
        "config_hash": hashes["config"],
        "prompt_template": {"sha256": spec.prompt.sha256, **spec.prompt.__dict__},
        "prompt_templates": {n: {"sha256": t.sha256, **t.__dict__} for n, t in grid_axes(spec)["prompt"]},
        "top_ks": grid_axes(spec)["top_k"],
        "seed": spec.seed, "top_k": spec.top_k, "normalisation": spec.normalisation, "dedup": spec.dedup,
        "generate": spec.generate, "models": dict(models), "retrievers": spec.retrievers,
        "pipelines": [p.id for p in pipelines], "systems": [e["label"] for e in spec.systems],
        "grading": {"counts": result.grading, "routes": list(ROUTES), "grader_version": GRADER_VERSION,
                    "rule": "explicit letter, else one candidate's text, else abstention, else MiniLM cosine "
                            "with a margin; abstained and unparseable replies score 0"},
        "versions": _versions(),
        "counts": {"scored_now": result.scored_pairs, "resumed": result.resumed_pairs,
                   "stale_log_records": result.stale_records, "unreadable_log_lines": result.unreadable_lines,
                   "missing_pairs": n_missing, "tied_not_scored": result.tied_pairs,
                   "score_requests": result.dedup.requested,
                   "distinct_score_requests": result.dedup.unique, "oracle_missing": result.oracle_missing,
                   "answers_reread_under_normalisation": reread, "replies_regraded": result.regraded},
        "seconds": result.seconds,
    }
    previous = out / "provenance.json"
    if previous.exists():  # a resumed run keeps the model details of LLMs loaded by earlier runs
        try:
            old_models = json.loads(previous.read_text(encoding="utf-8")).get("models", {})
            keep = {e.get("label", e["name"]) for e in spec.llms} | {e["label"] for e in spec.systems}
            provenance["models"] = {**{k: v for k, v in old_models.items() if k in keep},
                                    **provenance["models"]}
        except (OSError, json.JSONDecodeError):
            pass
    tmp = out / "provenance.json.tmp"
    tmp.write_text(json.dumps(provenance, indent=2, default=str), encoding="utf-8")
    tmp.replace(out / "provenance.json")
