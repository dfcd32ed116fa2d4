"""Exam generation: prompt an LLM with each chunk, parse, shuffle, record provenance.

For every selected chunk and every k in 0..K-1 the prompt template is filled with the
task domain and the chunk text; question k=0 is decoded greedily, k>0 sampled at
``extra_temperature`` with seed ``seed + k`` (otherwise the K questions would be
identical). Calls go through :class:`~irtexam.llm.CachedLLM`, so a re-run after a crash
resumes without repeating finished generations; prompts are sent shortest document
first, so a batching backend (``TransformersLLM(batch_size=...)``) pads each batch
little. Raw outputs and their parse outcome
are written next to the exam (``<out>.raw.jsonl``); every rejection is counted by
reason in the :class:`GenerationReport`.

Candidates are shuffled with ``random.Random(sha256(seed, chunk_id, k))``: the order of
an item does not depend on which other items were generated.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import tomllib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..corpus.chunking import Chunk
from ..errors import InputError, reading
from ..llm.base import LLM, GenerationParams
from .parse import try_parse
from .schema import ExamItem

# Appendix A.1 of Guinet et al. (2024), without the "Human:/Assistant:" turn markers
# (chat models get their own chat template); "paper-raw" keeps them verbatim.
PAPER_TEMPLATE = (
    "Here is some documentation from {task_domain}: {documentation}. From this, generate a difficult "
    "multi-form question for an exam. It should have 4 candidates, 1 correct answer and explanations. "
    "Syntax should be:\nQuestion: {{question}}\nA) {{candidate A}}\nB) {{candidate B}}\nC) {{candidate C}}\n"
    "D) {{candidate D}}\nCorrect Answer: {{correct answer}}\n")
# The paper's prompt preceded by one worked example: small models copy the format.
ONE_SHOT_TEMPLATE = (
    "Example documentation: The pg_dump utility dumps a single database; pg_dumpall dumps all databases "
    "of a cluster, including roles and tablespaces.\n"
    "Example output:\nQuestion: Which utility also dumps roles and tablespaces?\nA) pg_dump\nB) pg_dumpall\n"
    "C) pg_restore\nD) initdb\nCorrect Answer: B\n\n" + PAPER_TEMPLATE)
TEMPLATES = {"paper": PAPER_TEMPLATE, "paper-raw": "Human: " + PAPER_TEMPLATE + "\nAssistant:",
             "paper-1shot": ONE_SHOT_TEMPLATE}


@dataclass
class GenerationConfig:
    """What to generate; loadable from YAML or TOML (same keys)."""

    template: str = PAPER_TEMPLATE
    task_domain: str = "the PostgreSQL 15 manual"
    questions_per_chunk: int = 1
    max_chunks: int | None = None
    seed: int = 0
    max_new_tokens: int = 320
    temperature: float = 0.0
    extra_temperature: float = 0.7
    max_doc_chars: int = 4500
    # Decoding ends at the first of these strings (the text before it is kept). ["\nExplanation"]
    # skips the explanation the paper's prompt asks for after the answer line: on the 300 generations
    # of data/real_run it changes no parsed question, choice or key and saves 53% of the characters
    # (the item's ``explanation`` metadata is then empty). Off by default (the paper keeps it).
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.template in TEMPLATES:
            self.template = TEMPLATES[self.template]
        if "{documentation}" not in self.template:
            raise InputError("the generation template must contain {documentation} (and may use {task_domain}); "
                             "write literal braces as {{ and }}", column="template")
        if isinstance(self.stop, str):
            self.stop = (self.stop,)
        self.stop = tuple(str(x) for x in self.stop)
        if self.questions_per_chunk < 1:
            raise InputError("questions_per_chunk must be >= 1", column="questions_per_chunk")

    @property
    def prompt_sha(self) -> str:
        """sha256[:16] of the template and domain: identifies the prompt in provenance."""
        return hashlib.sha256(f"{self.template}\x00{self.task_domain}".encode()).hexdigest()[:16]

    def prompt(self, chunk: Chunk) -> str:
        """The filled template for one chunk."""
        try:
            return self.template.format(task_domain=self.task_domain, documentation=chunk.text[:self.max_doc_chars])
        except (KeyError, IndexError, ValueError) as exc:
            raise InputError(f"cannot fill the generation template ({exc!r}); the only fields are "
                             "{task_domain} and {documentation}, write other braces as {{ }}",
                             column="template") from None


def load_generation_config(path: str | Path, **overrides: Any) -> GenerationConfig:
    """Read a :class:`GenerationConfig` from ``.yaml``/``.yml``/``.toml``; unknown keys are an error."""
    path = Path(path)
    with reading(path, "generation config"):
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        elif path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            raise InputError("generation config must be .yaml, .yml or .toml", path=str(path))
    if not isinstance(data, dict):
        raise InputError("the generation config must be a mapping of keys", path=str(path))
    data = data.get("generation", data)
    if not isinstance(data, dict):
        raise InputError("'generation' must be a mapping of keys", path=str(path))
    data = dict(data)
    known = set(GenerationConfig.__dataclass_fields__)
    unknown = set(data) - known
    if unknown:
        raise InputError(f"unknown keys {sorted(unknown)}; allowed: {sorted(known)}", path=str(path))
    data.update({k: v for k, v in overrides.items() if v is not None})
    return GenerationConfig(**data)


def select_chunks(chunks: Sequence[Chunk], max_chunks: int | None, seed: int) -> list[Chunk]:
    """A seeded random sample of ``max_chunks`` chunks (all when None), in corpus order."""
    if max_chunks is None or max_chunks >= len(chunks):
        return list(chunks)
    picked = sorted(random.Random(seed).sample(range(len(chunks)), max_chunks))
    return [chunks[i] for i in picked]


def item_rng(seed: int, chunk_id: str, k: int) -> random.Random:
    """A random generator determined by (seed, chunk, question number) only."""
    digest = hashlib.sha256(f"{seed}\x00{chunk_id}\x00{k}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def shuffle_choices(choices: Sequence[str], answer: int, rng: random.Random) -> tuple[list[str], int]:
    """Permute the choices; returns (new order, new index of the correct choice)."""
    order = list(range(len(choices)))
    rng.shuffle(order)
    return [choices[i] for i in order], order.index(answer)


@dataclass
class GenerationReport:
    """The generation half of the paper's Table 4."""

    model: str
    prompt_sha: str
    seed: int
    chunks_used: int = 0
    generated: int = 0
    parsed: int = 0
    parse_failures: dict[str, int] = field(default_factory=dict)
    duplicate_questions: int = 0
    surviving: int = 0
    avg_question_chars: float = 0.0
    baselines: dict[str, Any] = field(default_factory=dict)
    llm_calls_cached: int = 0
    llm_calls_run: int = 0

    def to_json(self) -> dict[str, Any]:
        """Plain dict."""
        return asdict(self)


def _norm_question(q: str) -> str:
    return re.sub(r"\W+", " ", q.lower()).strip()


def generation_params(config: GenerationConfig, k: int) -> GenerationParams:
    """Decoding settings of question ``k`` of every chunk (greedy for k=0, seeded sampling after)."""
    return GenerationParams(max_new_tokens=config.max_new_tokens,
                            temperature=config.temperature if k == 0 else config.extra_temperature,
                            seed=config.seed + k, stop=tuple(config.stop))


def generate_exam(chunks: Sequence[Chunk], llm: LLM, config: GenerationConfig = GenerationConfig(),
                  raw_path: str | Path | None = None) -> tuple[list[ExamItem], GenerationReport]:
    """Generate, parse and shuffle questions for the selected chunks.

    ``llm`` should be a :class:`~irtexam.llm.CachedLLM` for resumability. Returns the
    items and the report; with ``raw_path`` every raw output is written as JSONL with
    its chunk id, question number and parse outcome.
    """
    from ..filters.baselines import bias_baselines

    selected = select_chunks(chunks, config.max_chunks, config.seed)
    jobs = [(c, k) for c in selected for k in range(config.questions_per_chunk)]
    report = GenerationReport(model=llm.name, prompt_sha=config.prompt_sha, seed=config.seed,
                              chunks_used=len(selected))
    outputs: list[str] = [""] * len(jobs)
    for k in range(config.questions_per_chunk):
        # shortest documents first: a batching backend then pads each batch little
        idx = sorted((i for i, (_, kk) in enumerate(jobs) if kk == k), key=lambda i: len(jobs[i][0].text))
        params = generation_params(config, k)
        texts = llm.generate([config.prompt(jobs[i][0]) for i in idx], params)
        for i, t in zip(idx, texts):
            outputs[i] = t
    report.llm_calls_cached = int(getattr(llm, "hits", 0))
    report.llm_calls_run = int(getattr(llm, "misses", len(jobs)))
    failures: Counter[str] = Counter()
    items: list[ExamItem] = []
    seen: set[str] = set()
    raw_records = []
    for (chunk, k), raw in zip(jobs, outputs):
        report.generated += 1
        parsed, reason = try_parse(raw)
        if parsed is not None:
            report.parsed += 1
            key = _norm_question(parsed.question)
            if key in seen:
                reason = "duplicate_question"
                report.duplicate_questions += 1
            else:
                seen.add(key)
                choices, answer = shuffle_choices(parsed.choices, parsed.answer, item_rng(config.seed, chunk.chunk_id, k))
                items.append(ExamItem(
                    id=f"{chunk.chunk_id}/q{k}", question=parsed.question, choices=choices, answer=answer,
                    doc_id=chunk.doc_id, chunk_id=chunk.chunk_id,
                    provenance={"generator": llm.name, "prompt_sha": config.prompt_sha, "seed": config.seed,
                                "k": k, "explanation": parsed.explanation, "generated_answer_index": parsed.answer,
                                "document": chunk.text[:config.max_doc_chars]}))
        else:
            failures[str(reason)] += 1
        raw_records.append({"chunk_id": chunk.chunk_id, "k": k, "ok": reason is None, "reason": reason, "raw": raw})
    report.parse_failures = dict(sorted(failures.items()))
    report.surviving = len(items)
    report.avg_question_chars = sum(len(i.question) for i in items) / max(len(items), 1)
    report.baselines = bias_baselines(items) if items else {}
    if raw_path is not None:
        raw_path = Path(raw_path)
        raw_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = raw_path.with_name(raw_path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for rec in raw_records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        tmp.replace(raw_path)
    return items, report
