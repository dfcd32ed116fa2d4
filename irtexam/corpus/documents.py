"""Documents: load JSONL(.gz) files and folders of text / markdown / reST / HTML files.

A document has a stable ``doc_id``: the ``doc_id`` field of a JSONL record, or for a
folder the file's path relative to the folder, without extension, in POSIX form
(``sql/select.html`` -> ``sql/select``). Bad input raises :class:`InputError` naming
the file, row and field.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterable

from ..errors import InputError
from ..jsonl import iter_json_lines

TEXT_SUFFIXES = (".txt", ".md", ".markdown", ".rst", ".html", ".htm")


@dataclass
class Document:
    """One source document."""

    doc_id: str
    text: str
    title: str | None = None
    source: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain dict for JSONL (``meta`` omitted when empty)."""
        d = asdict(self)
        if not d["meta"]:
            del d["meta"]
        return d


_BLOCK_TAGS = {"p", "div", "br", "li", "ul", "ol", "dl", "dt", "dd", "tr", "table", "h1", "h2", "h3", "h4",
               "h5", "h6", "pre", "blockquote", "section", "article", "title", "hr", "td", "th", "caption"}
_SKIP_TAGS = {"script", "style", "head", "nav", "noscript", "template", "svg"}
_VOID_TAGS = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "wbr"}


class _TextExtractor(HTMLParser):
    def __init__(self, skip_classes: Iterable[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.skip_classes = set(skip_classes)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self._stack: list[tuple[str, bool]] = []  # (tag, skipping)
        self._in_title = False
        self._pre = 0

    @property
    def _skipping(self) -> bool:
        return bool(self._stack) and self._stack[-1][1]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _VOID_TAGS:
            if tag in ("br", "hr") and not self._skipping:
                self.parts.append("\n")
            return
        classes = set((dict(attrs).get("class") or "").split())
        skip = self._skipping or tag in _SKIP_TAGS or bool(classes & self.skip_classes)
        self._stack.append((tag, skip))
        if tag == "pre":
            self._pre += 1
        if tag in _BLOCK_TAGS and not skip:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _VOID_TAGS:
            return
        # pop to the matching tag (tolerates unclosed inner tags)
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i][0] == tag:
                skip = self._stack[i][1]
                del self._stack[i:]
                if tag == "pre":
                    self._pre = max(0, self._pre - 1)
                if tag in _BLOCK_TAGS and not skip:
                    self.parts.append("\n")
                return

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title_parts.append(data)
        if self._skipping:
            return
        self.parts.append(data if self._pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str, skip_classes: Iterable[str] = ("navheader", "navfooter", "toc")) -> tuple[str, str | None]:
    """Strip HTML to plain text; returns (text, <title> or None).

    Scripts, styles, ``<head>``, ``<nav>`` and elements whose class is in
    ``skip_classes`` are dropped; block elements become line breaks; ``<pre>`` keeps
    its whitespace; runs of blank lines collapse to one.
    """
    parser = _TextExtractor(skip_classes)
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    # a single leading space is an artefact of whitespace collapsing; deeper indents are <pre>
    lines = [line.rstrip()[1:] if line.startswith(" ") and not line.startswith("  ") else line.rstrip()
             for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(line if line.strip() else "" for line in lines)).strip()
    title = " ".join("".join(parser.title_parts).split()) or None
    return text, title


def load_jsonl(path: str | Path) -> list[Document]:
    """Read documents from JSONL (optionally gzipped): ``doc_id``, ``text``, optional ``title``, ``source``."""
    path = Path(path)
    docs: list[Document] = []
    seen: dict[str, int] = {}
    for row, rec in iter_json_lines(path):
        for name in ("doc_id", "text"):
            if name not in rec or rec[name] is None:
                raise InputError("a corpus record needs 'doc_id' and 'text'", path=str(path), row=row,
                                 column=name)
        if not isinstance(rec["text"], str):
            raise InputError("text must be a string", path=str(path), row=row, column="text")
        doc_id = str(rec["doc_id"])
        if doc_id in seen:
            raise InputError(f"duplicate doc_id {doc_id!r} (first on row {seen[doc_id]})", path=str(path),
                             row=row, column="doc_id")
        seen[doc_id] = row
        meta = {k: v for k, v in rec.items() if k not in {"doc_id", "text", "title", "source", "meta"}}
        meta.update(rec.get("meta") or {})
        docs.append(Document(doc_id, rec["text"], rec.get("title"), rec.get("source"), meta))
    if not docs:
        raise InputError("the corpus file holds no documents", path=str(path))
    return docs


def _load_file(p: Path, root: Path) -> Document:
    try:
        raw = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raw = p.read_text(encoding="latin-1")
    rel = p.relative_to(root)
    if p.suffix.lower() in (".html", ".htm"):
        text, title = html_to_text(raw)
    else:
        text = raw.strip()
        title = next((line.strip("# =-*").strip() for line in text.splitlines() if line.strip()), None)
    return Document(rel.with_suffix("").as_posix(), text, title, rel.as_posix())


def load_folder(folder: str | Path, suffixes: tuple[str, ...] = TEXT_SUFFIXES) -> list[Document]:
    """Read every text/markdown/reST/HTML file under ``folder`` (recursively, sorted).

    HTML is stripped to text and its ``<title>`` kept; other files keep their text and
    the title is the first non-empty line.
    """
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in suffixes)
    if not files:
        raise InputError(f"no {', '.join(suffixes)} files found; point to a folder of documents or a .jsonl file",
                         path=str(folder))
    docs = [_load_file(p, folder) for p in files]
    return docs


def load_corpus(path: str | Path) -> list[Document]:
    """Load a corpus from a ``.jsonl``/``.jsonl.gz`` file, a folder, or one text/HTML file."""
    path = Path(path)
    if not path.exists():
        raise InputError("corpus path does not exist", path=str(path))
    if path.is_dir():
        return load_folder(path)
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")):
        return load_jsonl(path)
    if path.suffix.lower() in TEXT_SUFFIXES:
        return [_load_file(path, path.parent)]
    raise InputError("unsupported corpus file; use .jsonl(.gz) or a folder of .txt/.md/.rst/.html files",
                     path=str(path))


def write_jsonl(docs: Iterable[Document], path: str | Path) -> None:
    """Write documents as (gzipped if the name ends in .gz) JSONL, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(tmp, "wt", encoding="utf-8") as handle:  # type: ignore[operator]
        for d in docs:
            handle.write(json.dumps(d.to_json(), ensure_ascii=False) + "\n")
    tmp.replace(path)
