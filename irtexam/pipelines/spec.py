"""The grid spec: which pipelines take which exam, declared as data (YAML or TOML).

Example (YAML; TOML has the same keys)::

    exam: exam.jsonl                 # paths are relative to the spec file
    corpus: corpus.jsonl             # chunked passages (id, doc_id, text); not needed for closed-book only
    icl_pool: pool.jsonl             # optional held-out demonstration pool (default: the exam, leave-one-out)
    llms: [smollm2-135m]             # names for irtexam.llm.load_llm, or tables {name: ..., label: ..., options}
                                     # (label = the llm facet level, default the name; e.g. for a server URL)
    retrievers: [closed-book, bm25, dense-minilm, hybrid-rrf, oracle]
    icl: [0, 1, 2]
    top_k: 3                         # or a list, [2, 5]: a top_k facet column
    seed: 0
    normalisation: char              # char (default: per character, lm-eval acc_norm) | token | sum
    prompt: {context: "Context:\\n{passages}\\n\\n"}   # optional template overrides; or a list of
                                     # tables each with a 'name': a prompt facet column
    generate: false                  # or {max_new_tokens: 64}: also keep a free-form answer
    batch_items: 4                   # items scored per LLM call batch
    dedup: true                      # score identical prompts once across pipelines
    systems:                         # black-box RAG systems graded from their free-text reply
      - {label: assistant-v1, url: "http://localhost:9000/answer", facets: {version: v1}}
      - {label: assistant-v2, python: "my_rag:answer", facets: {version: v2}}

An llm entry may set ``answer: generate`` (ask for a letter through chat / generation and
grade the reply; ``max_new_tokens`` per entry, default 48) instead of the default
``answer: loglik``. A spec may hold only
``exam`` and ``systems``. Every validation error names the spec file and the key.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import IrtexamError, reading
from ..grading.multiple_choice import NORMALISATIONS
from ..retrieval.registry import normalise_retriever_spec
from .prompt import PromptTemplate


class SpecError(IrtexamError):
    """A problem in a grid spec, naming the file and key."""

    def __init__(self, message: str, *, path: str | None, key: str | None = None) -> None:
        where = str(path) if path else "spec"
        if key:
            where += f", key '{key}'"
        super().__init__(f"{where}: {message}")
        self.path, self.key = path, key


KNOWN_KEYS = {"exam", "corpus", "icl_pool", "llms", "retrievers", "icl", "top_k", "seed", "normalisation",
              "prompt", "generate", "batch_items", "dedup", "index_dir", "name", "systems"}
SYSTEM_KEYS = {"label", "facets", "url", "python", "api_key_env", "timeout", "max_retries", "max_concurrency"}
ANSWER_MODES = ("loglik", "generate")
GRID_FACETS = ("llm", "retriever", "icl")


@dataclass
class GridSpec:
    """A validated grid spec with paths resolved against the spec's directory."""

    exam: Path
    llms: list[dict[str, Any]]
    retrievers: list[dict[str, Any]]
    icl: list[int]
    corpus: Path | None = None
    icl_pool: Path | None = None
    top_k: int = 3
    seed: int = 0
    normalisation: str = "char"
    prompt: PromptTemplate = field(default_factory=PromptTemplate)
    top_ks: list[int] = field(default_factory=list)  # the top_k axis (one level: [top_k])
    prompts: list[tuple[str, PromptTemplate]] = field(default_factory=list)  # the prompt axis: (name, template)
    generate: dict[str, Any] | None = None
    batch_items: int = 4
    dedup: bool = True
    index_dir: Path | None = None
    name: str = "grid"
    systems: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """sha256 of the canonical JSON of the raw spec."""
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode()).hexdigest()


def _read_raw(path: Path) -> dict[str, Any]:
    suffix = path.suffix.lower()
    with reading(path, "spec"):
        text = path.read_text(encoding="utf-8")
    try:
        if suffix == ".toml":
            data = tomllib.loads(text)
        elif suffix in (".yaml", ".yml", ".json"):
            import yaml

            data = yaml.safe_load(text)
        else:
            raise SpecError("unknown spec format; use a .yaml, .yml, .toml or .json file", path=str(path))
    except SpecError:
        raise
    except Exception as exc:  # yaml.YAMLError, tomllib.TOMLDecodeError
        raise SpecError(f"cannot parse the file: {exc}", path=str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("the spec must be a mapping of keys (exam, llms, retrievers, icl, ...)", path=str(path))
    return data


# Options of an llm entry besides its level keys, by backend: load_llm's own and the HTTP client's.
LOCAL_LLM_OPTIONS = ("dtype", "device", "cache_dir", "chat", "num_threads")
HTTP_LLM_OPTIONS = ("cache_dir", "chat", "model", "api_key_env", "max_concurrency", "timeout", "max_retries",
                    "backoff", "max_backoff", "score_max_tokens", "batch_candidates", "progress")
LLM_LEVEL_KEYS = ("name", "label", "answer", "max_new_tokens")


def _check_llm_options(entry: dict[str, Any], key: str, src: str | None, base_dir: Path) -> None:
    """An llm entry's options: known to its backend (the allowed names in the message), numbers in bounds,
    ``cache_dir`` resolved against the spec's folder (as ``exam`` and ``corpus`` are)."""
    from ..options import NONNEG_INT, POSITIVE_FLOAT, POSITIVE_INT, THREADS

    served = str(entry["name"]).startswith(("http://", "https://"))
    allowed = HTTP_LLM_OPTIONS if served else LOCAL_LLM_OPTIONS
    unknown = sorted(set(entry) - set(LLM_LEVEL_KEYS) - set(allowed))
    if unknown:
        raise SpecError(f"unknown option(s) {unknown} for {'a served' if served else 'a local'} LLM; allowed: "
                        f"{sorted(set(LLM_LEVEL_KEYS) | set(allowed))}", path=src, key=key)
    bounds = {"max_concurrency": POSITIVE_INT, "timeout": POSITIVE_FLOAT, "max_retries": NONNEG_INT,
              "backoff": POSITIVE_FLOAT, "max_backoff": POSITIVE_FLOAT, "num_threads": THREADS,
              "score_max_tokens": NONNEG_INT}
    for name, kind in bounds.items():
        if name in entry:
            try:
                entry[name] = kind.check(entry[name], f"{key}.{name}")
            except IrtexamError as exc:
                raise SpecError(str(exc).split(": ", 1)[1], path=src, key=f"{key}.{name}") from None
    for name in ("chat", "progress", "batch_candidates"):
        if name in entry and entry[name] is not None and not isinstance(entry[name], bool):
            raise SpecError(f"must be true or false, got {entry[name]!r}", path=src, key=f"{key}.{name}")
    if entry.get("cache_dir") is not None:
        if not isinstance(entry["cache_dir"], str):
            raise SpecError(f"must be a folder path string, got {entry['cache_dir']!r}", path=src,
                            key=f"{key}.cache_dir")
        folder = Path(entry["cache_dir"]).expanduser()
        entry["cache_dir"] = str(folder if folder.is_absolute() else base_dir / folder)


def _int(value: Any, key: str, src: str | None, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"must be an integer >= {minimum}, got {value!r}", path=src, key=key)
    return value


def _as_list(value: Any, key: str, src: str | None) -> list:
    if isinstance(value, (str, int, dict)):
        value = [value]
    if not isinstance(value, list) or not value:
        raise SpecError("must be a non-empty list", path=src, key=key)
    return value


def parse_spec(data: Mapping[str, Any], *, base_dir: Path, source: str | None = None,
               check_files: bool = True) -> GridSpec:
    """Validate a spec mapping; raises :class:`SpecError` naming ``source`` and the key."""
    src = source
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise SpecError(f"unknown key(s) {unknown}; allowed keys: {sorted(KNOWN_KEYS)}", path=src, key=unknown[0])
    required = ("exam",) if "systems" in data and "llms" not in data else ("exam", "llms", "retrievers")
    for key in required:
        if key not in data:
            raise SpecError("is required" + ("" if key == "exam" else " (or give only 'systems')"), path=src, key=key)

    def path_of(key: str) -> Path | None:
        if data.get(key) is None:
            return None
        if not isinstance(data[key], str):
            raise SpecError(f"must be a file path string, got {data[key]!r}", path=src, key=key)
        p = Path(data[key]).expanduser()
        p = p if p.is_absolute() else base_dir / p
        if check_files and key != "index_dir" and not p.exists():
            raise SpecError(f"file {p} does not exist", path=src, key=key)
        return p

    llms = []
    for i, entry in enumerate(_as_list(data["llms"], "llms", src) if "llms" in data else []):
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise SpecError("each llm is a model name or a table with a 'name'", path=src, key=f"llms[{i}]")
        entry = dict(entry)
        if not isinstance(entry.setdefault("label", entry["name"]), str) or not entry["label"]:
            raise SpecError("'label' (the llm facet level) must be a non-empty string", path=src, key=f"llms[{i}]")
        if "|" in entry["label"]:
            raise SpecError(f"llm label {entry['label']!r} must not contain '|'; set 'label' to a short name",
                            path=src, key=f"llms[{i}]")
        if entry.setdefault("answer", "loglik") not in ANSWER_MODES:
            raise SpecError(f"'answer' must be one of {list(ANSWER_MODES)}, got {entry['answer']!r}",
                            path=src, key=f"llms[{i}]")
        if "max_new_tokens" in entry:
            if entry["answer"] != "generate":
                raise SpecError("'max_new_tokens' applies to 'answer: generate' levels only", path=src, key=f"llms[{i}]")
            _int(entry["max_new_tokens"], f"llms[{i}].max_new_tokens", src, minimum=1)
        _check_llm_options(entry, f"llms[{i}]", src, base_dir)
        llms.append(entry)
    retrievers = []
    for i, entry in enumerate(_as_list(data["retrievers"], "retrievers", src) if llms else []):
        try:
            retrievers.append(normalise_retriever_spec(entry))
        except ValueError as exc:
            raise SpecError(str(exc), path=src, key=f"retrievers[{i}]") from None
    for key, items, field_name in (("llms", llms, "label"), ("retrievers", retrievers, "name")):
        names = [x[field_name] for x in items]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SpecError(f"duplicate name(s) {dupes}; give each level a distinct 'name'", path=src, key=key)
    systems = parse_systems(data.get("systems"), src)
    top_ks = sorted({_int(v, "top_k", src, minimum=1) for v in _as_list(data.get("top_k", 3), "top_k", src)})
    icl = [_int(v, "icl", src, minimum=0) for v in _as_list(data.get("icl", [0]), "icl", src)]
    if len(set(icl)) != len(icl):
        raise SpecError(f"duplicate ICL levels in {icl}", path=src, key="icl")
    normalisation = data.get("normalisation", "char")
    if normalisation not in NORMALISATIONS:
        raise SpecError(f"must be one of {list(NORMALISATIONS)}, got {normalisation!r}", path=src, key="normalisation")
    try:
        prompts = parse_prompts(data.get("prompt"))
    except (ValueError, TypeError) as exc:
        raise SpecError(str(exc), path=src, key="prompt") from None
    generate = data.get("generate", False)
    if generate is True:
        generate = {}
    elif generate is False or generate is None:
        generate = None
    elif not isinstance(generate, dict):
        raise SpecError("must be true/false or a table of generation settings (max_new_tokens, ...)",
                        path=src, key="generate")
    elif set(generate) - {"max_new_tokens", "temperature", "top_p", "seed", "stop"}:
        raise SpecError(f"unknown generation setting(s) {sorted(set(generate) - {'max_new_tokens', 'temperature', 'top_p', 'seed', 'stop'})}",
                        path=src, key="generate")
    dedup = data.get("dedup", True)
    if not isinstance(dedup, bool):
        raise SpecError(f"must be true or false, got {dedup!r}", path=src, key="dedup")
    corpus = path_of("corpus")
    if corpus is None and any(r["kind"] != "closed-book" for r in retrievers):
        need = [r["name"] for r in retrievers if r["kind"] != "closed-book"]
        raise SpecError(f"retrievers {need} need a corpus: add 'corpus: <chunked passages .jsonl>'",
                        path=src, key="corpus")
    return GridSpec(exam=path_of("exam"), llms=llms, retrievers=retrievers, icl=sorted(icl), corpus=corpus,
                    icl_pool=path_of("icl_pool"), top_k=max(top_ks), top_ks=top_ks, prompts=prompts,
                    seed=_int(data.get("seed", 0), "seed", src, minimum=0), normalisation=normalisation,
                    prompt=prompts[0][1], generate=generate,
                    batch_items=_int(data.get("batch_items", 4), "batch_items", src, minimum=1), dedup=dedup,
                    index_dir=path_of("index_dir"), name=str(data.get("name", "grid")), systems=systems,
                    source=src, raw=dict(data))


def parse_prompts(value: Any) -> list[tuple[str, PromptTemplate]]:
    """The prompt axis: one table of template overrides, or a list of tables each with a distinct ``name``.

    Raises ``ValueError`` / ``TypeError`` (reported against the key ``prompt``).
    """
    if value is None or isinstance(value, dict) and "name" not in value:
        return [("default", PromptTemplate.from_mapping(value))]
    entries = value if isinstance(value, list) else [value]
    out: list[tuple[str, PromptTemplate]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"] \
                or "|" in entry["name"]:
            raise ValueError(f"prompt[{i}] must be a table with a 'name' (no '|') and template overrides")
        out.append((entry["name"], PromptTemplate.from_mapping({k: v for k, v in entry.items() if k != "name"})))
    names = [n for n, _ in out]
    if len(set(names)) != len(names) or not out:
        raise ValueError(f"prompt names must be distinct and non-empty, got {names}")
    return out


def parse_systems(value: Any, src: str | None) -> list[dict[str, Any]]:
    """Validate the ``systems`` list: label, facets, exactly one of url / python, call options.

    Labels have no '|', so they never collide with a grid pipeline id (``llm|retriever|iclK``).
    """
    if value is None:
        return []
    out: list[dict[str, Any]] = []
    for i, entry in enumerate(_as_list(value, "systems", src)):
        key = f"systems[{i}]"
        if not isinstance(entry, dict):
            raise SpecError("each system is a table with 'label' and one of 'url' / 'python'", path=src, key=key)
        unknown = sorted(set(entry) - SYSTEM_KEYS)
        if unknown:
            raise SpecError(f"unknown key(s) {unknown}; allowed: {sorted(SYSTEM_KEYS)}", path=src, key=key)
        label = entry.get("label")
        if not isinstance(label, str) or not label or "|" in label:
            raise SpecError("'label' (the examinee id) must be a non-empty string without '|'", path=src, key=key)
        targets = [k for k in ("url", "python") if k in entry]
        if len(targets) != 1:
            raise SpecError("give exactly one of 'url' (an HTTP endpoint) or 'python' (module:function)",
                            path=src, key=key)
        entry = dict(entry)
        if "url" in entry and (not isinstance(entry["url"], str) or not entry["url"].startswith(("http://", "https://"))):
            raise SpecError(f"'url' must start with http:// or https://, got {entry['url']!r}", path=src, key=key)
        if "python" in entry and (not isinstance(entry["python"], str)
                                  or not re.fullmatch(r"[\w.]+:[A-Za-z_]\w*", entry["python"])):
            raise SpecError(f"'python' must be 'module:function', got {entry['python']!r}", path=src, key=key)
        facets = entry.get("facets", {})
        if not isinstance(facets, dict) or not all(isinstance(k, str) and isinstance(v, (str, int)) and str(v)
                                                    for k, v in facets.items()):
            raise SpecError("'facets' must map facet names to levels (strings or integers)", path=src, key=key)
        entry["facets"] = {k: str(v) for k, v in facets.items()}
        timeout = entry.setdefault("timeout", 120.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise SpecError(f"'timeout' must be a positive number of seconds, got {timeout!r}", path=src, key=key)
        entry["max_retries"] = _int(entry.get("max_retries", 2), f"{key}.max_retries", src, minimum=0)
        entry["max_concurrency"] = _int(entry.get("max_concurrency", 4), f"{key}.max_concurrency", src, minimum=1)
        out.append(entry)
    labels = [e["label"] for e in out]
    dupes = sorted({n for n in labels if labels.count(n) > 1})
    if dupes:
        raise SpecError(f"duplicate label(s) {dupes}", path=src, key="systems")
    return out


def load_spec(path: str | Path, *, check_files: bool = True) -> GridSpec:
    """Read and validate a YAML/TOML/JSON grid spec file."""
    path = Path(path)
    if not path.exists():
        raise SpecError("file not found", path=str(path))
    return parse_spec(_read_raw(path), base_dir=path.parent, source=str(path), check_files=check_files)
