"""Live adaptive testing: one pipeline of a grid spec answers the items the CAT chooses.

Each chosen item is taken with :func:`irtexam.pipelines.take.take_exam` restricted to that
item and that pipeline, into ``OUT/take`` (its ``answers.jsonl`` log is read back on a
re-run, so an interrupted run resumes without scoring an answered item again; the LLM
is loaded once and kept). The correctness of the logged answer is the response.
"""

from __future__ import annotations

import dataclasses
import json
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

    def __call__(self, item_id: str) -> float | None:
        from ..pipelines.take import take_exam
        from ..retrieval.base import load_passages

        if self._passages is None:
            self._passages = load_passages(self.spec.corpus) if self.spec.corpus is not None else []
        result = take_exam(self.spec, self.out_dir, llm_factory=self._factory, progress=False,
                           items=[self.items[item_id]], passages=self._passages)
        self.scored += result.scored_pairs
        self.resumed += result.resumed_pairs
        for line in (self.out_dir / "answers.jsonl").read_text().splitlines()[::-1]:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if rec.get("item") == item_id and rec.get("pipeline") == self.pipeline_id:
                return float(rec["correct"])
        return None

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
    one = dataclasses.replace(spec, exam=exam_path, llms=llms[:1], retrievers=rets[:1], icl=[icl])
    return LiveAnswerer(one, read_exam(exam_path), pipeline, out_dir, progress)
