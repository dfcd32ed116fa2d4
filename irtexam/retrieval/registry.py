"""Build retrievers from names or small option dicts (as written in a grid spec).

Known kinds: ``closed-book``, ``bm25``, ``dense`` (``dense-minilm`` = packaged MiniLM;
any sentence-transformers dir with ``model_path``), ``hybrid-rrf`` (BM25 + dense,
reciprocal-rank fusion) and ``oracle``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import IrtexamError
from .base import Passage, Retriever

KINDS = ("closed-book", "bm25", "dense", "hybrid-rrf", "oracle")
ALIASES = {"closed_book": "closed-book", "closedbook": "closed-book", "none": "closed-book",
           "dense-minilm": "dense", "hybrid": "hybrid-rrf", "rrf": "hybrid-rrf"}
_OPTIONS = {"closed-book": set(), "oracle": set(), "bm25": {"k1", "b", "stopwords"},
            "dense": {"model_path", "batch_size"}, "hybrid-rrf": {"depth", "k0", "model_path", "k1", "b", "stopwords"}}


def normalise_retriever_spec(entry: str | Mapping[str, Any]) -> dict[str, Any]:
    """Turn ``"bm25"`` or ``{"name": ..., "kind": ..., options}`` into a full dict.

    Raises ``ValueError`` with a message naming the unknown kind or option.
    """
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, Mapping) or "name" not in entry:
        raise ValueError("each retriever is a name or a table with a 'name' (and optional 'kind' and options)")
    spec = dict(entry)
    kind = str(spec.pop("kind", spec["name"])).lower()
    kind = ALIASES.get(kind, kind)
    if kind not in KINDS:
        raise ValueError(f"unknown retriever kind {kind!r}; use one of {', '.join(KINDS)} "
                         f"(or give 'kind' for a custom name)")
    name = str(spec.pop("name"))
    if name == "dense" and kind == "dense" and not spec.get("model_path"):
        name = "dense-minilm"
    unknown = set(spec) - _OPTIONS[kind]
    if unknown:
        raise ValueError(f"retriever {name!r} ({kind}) has unknown option(s) {sorted(unknown)}; "
                         f"allowed: {sorted(_OPTIONS[kind]) or 'none'}")
    return {"name": name, "kind": kind, **spec}


def needs_corpus(spec: Mapping[str, Any]) -> bool:
    """True for every kind except closed-book."""
    return spec["kind"] != "closed-book"


def build_retriever(spec: Mapping[str, Any], passages: Sequence[Passage], *, index_dir: str | Path | None = None,
                    _shared: dict | None = None) -> Retriever:
    """Instantiate one retriever from a normalised spec; indexes are saved under ``index_dir``."""
    from .dense import DenseRetriever
    from .hybrid import HybridRRF
    from .lexical import BM25Retriever
    from .simple import ClosedBook, OracleRetriever

    shared = _shared if _shared is not None else {}
    kind, name = spec["kind"], spec["name"]
    if kind != "closed-book" and not passages:
        raise IrtexamError(f"retriever {name!r} needs a corpus: set 'corpus' in the spec to a chunked JSONL file")

    def bm25(**opt: Any) -> BM25Retriever:
        key = ("bm25", opt.get("k1", 1.5), opt.get("b", 0.75), bool(opt.get("stopwords", True)))
        if key not in shared:
            shared[key] = BM25Retriever(passages, index_dir=index_dir, k1=key[1], b=key[2], stopwords=key[3])
        return shared[key]

    def dense(model_path: str | None = None, batch_size: int = 64) -> DenseRetriever:
        key = ("dense", model_path)
        if key not in shared:
            shared[key] = DenseRetriever(passages, model_path=model_path, index_dir=index_dir, batch_size=batch_size)
        return shared[key]

    if kind == "closed-book":
        r: Any = ClosedBook()
        if name != r.name:
            r.name = name
        return r
    if kind == "oracle":
        r = OracleRetriever(passages)
        r.name = name
        return r
    if kind == "bm25":
        base = bm25(**{k: spec[k] for k in ("k1", "b", "stopwords") if k in spec})
        return base if name == base.name else _Renamed(base, name)
    if kind == "dense":
        base = dense(spec.get("model_path"), spec.get("batch_size", 64))
        return base if name == base.name else _Renamed(base, name)
    lex = bm25(**{k: spec[k] for k in ("k1", "b", "stopwords") if k in spec})
    den = dense(spec.get("model_path"))
    return HybridRRF([lex, den], name=name, depth=int(spec.get("depth", 50)), k0=float(spec.get("k0", 60.0)))


class _Renamed:
    """The same retriever under another facet name (e.g. ``dense-mpnet``)."""

    def __init__(self, inner: Any, name: str) -> None:
        self.inner, self.name = inner, name

    def prepare(self, queries: Sequence[str]) -> None:
        if hasattr(self.inner, "prepare"):
            self.inner.prepare(queries)

    def retrieve(self, query: str, k: int, *, chunk_id: str | None = None):
        return self.inner.retrieve(query, k, chunk_id=chunk_id)
