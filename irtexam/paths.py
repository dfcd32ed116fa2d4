"""Output paths checked before any work: a command that will write a file refuses, with one line and
before it computes anything, a path it could not write (under a file, a folder where a file is
meant, an unwritable place) or a path that is one of its own inputs (the input would be lost)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from .errors import InputError

SUFFIXES_BY_FORMAT = {"json": (".json",), "csv": (".csv",), "jsonl": (".jsonl", ".jsonl.gz"),
                      "html": (".html", ".htm"), "md": (".md",)}


def _writable_parent(path: Path, option: str) -> None:
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot be written: {parent} is a file, not a folder; choose another {option}",
                         path=str(path))
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot be written: {parent} is not writable; choose another {option}", path=str(path))


def check_output_file(path: str | Path, option: str = "--out", *, inputs: Iterable[str | Path | None] = (),
                      formats: Iterable[str] = ()) -> Path:
    """``path`` as a file a command may write, or :class:`InputError` before any work.

    Refused: an existing folder, a path under a file or in an unwritable place, one of the
    command's ``inputs`` (the same file, by resolved path), and with ``formats`` a name whose
    suffix is none of theirs (``--report r.xlsx`` for a JSON report).
    """
    path = Path(path)
    resolved = path.resolve()
    if resolved.is_dir():
        raise InputError(f"is a folder; {option} takes a file name", path=str(path))
    for source in inputs:
        if source is not None and Path(source).resolve() == resolved:
            raise InputError(f"is also an input of this command; writing {option} there would overwrite it "
                             "(choose another name)", path=str(path))
    formats = list(formats)
    if formats:
        allowed = [s for f in formats for s in SUFFIXES_BY_FORMAT.get(f, ("." + f,))]
        if not path.name.lower().endswith(tuple(allowed)):
            raise InputError(f"{option} must end in {' or '.join(allowed)}", path=str(path))
    _writable_parent(resolved, option)
    return path


def check_output_dir(path: str | Path, option: str = "--out", *, inputs: Iterable[str | Path | None] = ()) -> Path:
    """``path`` as a folder a command may write into, or :class:`InputError` before any work: an existing
    file, a path under a file, an unwritable place, or a folder that is one of the inputs."""
    path = Path(path)
    resolved = path.resolve()
    if resolved.exists() and not resolved.is_dir():
        raise InputError(f"exists and is a file; {option} takes a folder", path=str(path))
    for source in inputs:
        if source is not None and Path(source).resolve() == resolved:
            raise InputError(f"is also an input of this command; choose another {option}", path=str(path))
    _writable_parent(resolved, option)
    return path
