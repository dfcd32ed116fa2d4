"""Live adaptive testing: one pipeline of a grid spec answers the items the CAT chooses.

Each chosen item is answered exactly as :func:`irtexam.pipelines.take.take_exam` answers it
(same retrieval, demonstrations, prompt, scoring and answer record, with the same config
hash), one item at a time: the LLM, the retriever and the corpus are loaded once, every
LLM call goes through the on-disk call cache (``OUT/take/llm_cache``), and each answer is
appended to ``OUT/take/answers.jsonl``, which a re-run (or a later ``irtexam take`` of the
same spec into the same folder) reads back instead of scoring again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from ..errors import IrtexamError


class LiveAnswerer:
    """Callable item id -> 0/1 that asks one pipeline through take_exam (module doc)."""

    def __init__(self, spec: Any, items: list, pipeline_id: str, out_dir: Path, progress: bool) -> None:
        self.spec, self.pipeline_id, self.out_dir = spec, pipeline_id, Path(out_dir)
        self.items = {it.id: it for it in items}
        self.item_ids = list(self.items)
        self.progress = progress
        self._llm = None
        self._passages = None
        self.scored = self.resumed = 0
        self._bar = None

    def _factory(self, entry: Mapping[str, Any]) -> Any:
        if self._llm is None:
            from ..pipelines.take import default_llm_factory

            self._llm = default_llm_factory(entry)
        return self._llm

    def _prepare(self) -> None:
        from ..exam.schema import read_exam
        from ..paths import file_sha256
        from ..pipelines.take import AnswerLog, Pipeline, config_hash, read_log
        from ..retrieval.base import corpus_fingerprint, load_passages
        from ..retrieval.registry import build_retriever

        spec = self.spec
        self.out_dir.mkdir(parents=True, exist_ok=True)
        passages = load_passages(spec.corpus) if spec.corpus is not None else []
        self.config = config_hash(spec, file_sha256(spec.exam), corpus_fingerprint(passages) if passages else None)
        self.pool = read_exam(spec.icl_pool) if spec.icl_pool else read_exam(spec.exam)
        rspec = spec.retrievers[0]
        self.retriever = build_retriever(rspec, passages, index_dir=spec.index_dir or self.out_dir / "index",
                                         _shared={})
        self.done, _, _ = read_log(self.out_dir / "answers.jsonl", self.config)
        self.log = AnswerLog(self.out_dir / "answers.jsonl")
        entry = spec.llms[0]
        self.pipeline = Pipeline(entry.get("label", entry["name"]), rspec["name"], spec.icl[0])

    def __call__(self, item_id: str) -> float | None:
        import time

        from ..grading.multiple_choice import score_deduplicated
        from ..llm.base import ScoreRequest
        from ..pipelines.icl import draw_demonstrations
        from ..pipelines.take import answer_record

        if self._passages is None:
            self._prepare()
            self._passages = True
        key = (self.pipeline.id, item_id)
        if key in self.done:
            self.resumed += 1
            correct = self.done[key]["correct"]
            return None if correct is None else float(correct)  # None: tied candidates, not scored
        spec, it = self.spec, self.items[item_id]
        if hasattr(self.retriever, "prepare"):
            self.retriever.prepare([it.question])
        hits = self.retriever.retrieve(it.question, spec.top_k, chunk_id=it.chunk_id)
        demos = draw_demonstrations(it, self.pool, max(spec.icl), seed=spec.seed)[:self.pipeline.icl]
        request = ScoreRequest(spec.prompt.render(it, [h.passage for h in hits], demos), spec.prompt.continuations(it))
        llm = self._factory(spec.llms[0])
        started = time.perf_counter()
        scores = score_deduplicated(llm, [request], dedup=spec.dedup)[0]
        record = answer_record(self.pipeline, it, hits, demos, request, scores, normalisation=spec.normalisation,
                               seconds=time.perf_counter() - started, shared=False, config=self.config,
                               template_sha=spec.prompt.sha256)
        self.log.write(record)
        self.done[key] = record
        self.scored += 1
        return None if record["correct"] is None else float(record["correct"])  # None: tied, not scored

    def tick(self, n: int) -> None:
        """Progress line per administered item."""
        if self.progress:
            if self._bar is None:
                from tqdm.auto import tqdm

                self._bar = tqdm(desc=f"adapt {self.pipeline_id}", unit="item")
            self._bar.update(1)

    def stats(self) -> dict[str, Any]:
        """LLM answers scored now and answers resumed from the log."""
        return {"answers_scored_now": self.scored, "answers_resumed": self.resumed,
                "answer_log": str(self.out_dir / "answers.jsonl")}

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        if getattr(self, "log", None) is not None:
            self.log.close()


def live_answerer(exam: str | Path, spec_path: str | Path, pipeline: str, out_dir: Path,
                  progress: bool = True) -> LiveAnswerer:
    """A :class:`LiveAnswerer` for ``pipeline`` (``llm|retriever|iclK``) of the grid spec, on ``exam``."""
    from ..exam.schema import read_exam
    from ..pipelines.spec import load_spec

    spec = load_spec(spec_path)
    parts = str(pipeline).split("|")
    if len(parts) != 3 or not parts[2].startswith("icl") or not parts[2][3:].isdigit():
        raise IrtexamError(f"--pipeline '{pipeline}': expected LLM|RETRIEVER|iclK, e.g. "
                           f"'{spec.llms[0].get('label', spec.llms[0]['name'])}|{spec.retrievers[0]['name']}|icl0'")
    llm, retriever, icl = parts[0], parts[1], int(parts[2][3:])
    llms = [e for e in spec.llms if e.get("label", e["name"]) == llm]
    rets = [r for r in spec.retrievers if r["name"] == retriever]
    if not llms or not rets:
        raise IrtexamError(f"{spec_path}: pipeline '{pipeline}' is not in the spec (llms: "
                           f"{[e.get('label', e['name']) for e in spec.llms]}, retrievers: "
                           f"{[r['name'] for r in spec.retrievers]})")
    exam_path = Path(exam)
    entry = dict(llms[0])
    entry.setdefault("cache_dir", str(Path(out_dir) / "llm_cache"))   # every LLM call cached on disk
    one = dataclasses.replace(spec, exam=exam_path, llms=[entry], retrievers=rets[:1], icl=[icl])
    return LiveAnswerer(one, read_exam(exam_path), pipeline, out_dir, progress)
