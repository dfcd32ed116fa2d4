"""Output paths checked before any work: a command that will write a file refuses, with one line and
before it computes anything, a path it could not write (under a file, a folder where a file is
meant, an unwritable place) or a path that is one of its own inputs (the input would be lost)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import InputError

SUFFIXES_BY_FORMAT = {"json": (".json",), "csv": (".csv",), "jsonl": (".jsonl", ".jsonl.gz"),
                      "html": (".html", ".htm"), "md": (".md", ".markdown")}


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


@contextlib.contextmanager
def atomic_output_dir(path: str | Path) -> Iterator[Path]:
    """Write a multi-file output into a hidden sibling folder and put it in place only when the block
    finishes: ``path`` is always one complete run (an earlier run there is replaced whole, an interrupted
    one leaves the earlier folder as it was, never a mix).

    ``with atomic_output_dir(args.out) as staging: write_tables(staging)``; paths the block returns that
    point into ``staging`` are mapped to ``path`` by :func:`relocate`.
    """
    import shutil
    import tempfile
    import uuid

    from .irt.io import exchange_paths

    final = Path(path)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".partial", dir=final.parent))
    try:
        yield staging
        if final.exists():
            if exchange_paths(staging, final):
                shutil.rmtree(staging, ignore_errors=True)
            else:
                retired = final.parent / f".{final.name}.replaced-{uuid.uuid4().hex[:8]}"
                os.rename(final, retired)
                os.rename(staging, final)
                shutil.rmtree(retired, ignore_errors=True)
        else:
            os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def relocate(value: Any, staging: Path, final: Path) -> Any:
    """``value`` (nested dicts/lists/strings/paths) with every path inside ``staging`` moved to ``final``."""
    if isinstance(value, dict):
        return {k: relocate(v, staging, final) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(relocate(v, staging, final) for v in value)
    if isinstance(value, (str, Path)):
        text = str(value)
        if text == str(staging) or text.startswith(str(staging) + os.sep):
            moved = str(final) + text[len(str(staging)):]
            return Path(moved) if isinstance(value, Path) else moved
    return value
