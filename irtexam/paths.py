"""Output paths (and memory) checked before any work: a command that will write a file refuses, with one
line and before it computes anything, a path it could not write (under a file, a folder where a file is
meant, an unwritable place), a path that is one of its own inputs (the input would be lost), or work whose
arrays would not fit in the memory the machine has free."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import InputError, IrtexamError

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


def check_memory(cells: int, bytes_per_cell: int, what: str) -> None:
    """Refuse, before allocating, work whose arrays would not fit in the memory this machine has free."""
    need = cells * bytes_per_cell
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not on this platform: do not guess
        return
    if need > free:
        raise IrtexamError(f"{what} = {cells:,} cells would need about {need / 2**30:,.1f} GiB of memory; "
                           f"{free / 2**30:,.1f} GiB is free (use fewer items or examinees)")


# a fit computes on every cell of the items x examinees matrix, observed or not: a large matrix that is almost
# empty costs the time of a full one for the information of a few responses (10^5 items x 300 examinees with
# one response an item ran past 90 s with no output)
SPARSE_CELLS = 10**6
SPARSE_FRACTION = 0.01


def check_density(values: Any, what: str) -> None:
    """Refuse, before a fit, a matrix of at least :data:`SPARSE_CELLS` cells of which under
    :data:`SPARSE_FRACTION` hold a response, naming its size (counted a block of rows at a time)."""
    import numpy as np

    from .memory import row_blocks

    n_items, n_examinees = values.shape
    cells = n_items * n_examinees
    if cells < SPARSE_CELLS:
        return
    from .scores import float_scores

    observed = sum(int(np.count_nonzero(~np.isnan(float_scores(values[rows]))))
                   for rows in row_blocks(n_items, n_examinees))
    if observed < SPARSE_FRACTION * cells:
        raise IrtexamError(f"{what} = {cells:,} cells hold {observed:,} responses ({100 * observed / cells:.2g}%; "
                           f"{observed / max(n_items, 1):,.1f} an item, {observed / max(n_examinees, 1):,.1f} an "
                           f"examinee): a fit computes on every cell, so it would take the time of a full matrix "
                           f"for almost no information; keep the items and examinees with enough responses "
                           f"(at least {SPARSE_FRACTION:.0%} of the cells observed)")


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


def check_output_dir(path: str | Path, option: str = "--out", *, inputs: Iterable[str | Path | None] = (),
                     command: str | None = None) -> Path:
    """``path`` as a folder a command may write into, or :class:`InputError` before any work: an existing
    file, a path under a file, an unwritable place, a folder that is one of the inputs, and with ``command``
    a non-empty folder that is not that command's earlier output (:func:`irtexam.outdirs.owned_entries`:
    a user's files are never overwritten or deleted)."""
    from .outdirs import owned_entries

    path = Path(path)
    resolved = path.resolve()
    if resolved.exists() and not resolved.is_dir():
        raise InputError(f"exists and is a file; {option} takes a folder", path=str(path))
    for source in inputs:
        if source is not None and Path(source).resolve() == resolved:
            raise InputError(f"is also an input of this command; choose another {option}", path=str(path))
    _writable_parent(resolved, option)
    if command is not None:
        owned_entries(resolved, command, option)
    return path


@contextlib.contextmanager
def atomic_output_dir(path: str | Path, command: str) -> Iterator[Path]:
    """Write ``command``'s multi-file output into a hidden sibling folder and put it in place only when the
    block finishes (:func:`irtexam.outdirs.put_in_place`): irtexam's files in ``path`` are always one
    complete run (an interrupted run leaves the earlier folder as it was, never a mix), and the entries of
    ``path`` irtexam did not write stay where they are.

    ``with atomic_output_dir(args.out, "info") as staging: write_tables(staging)``; paths the block returns
    that point into ``staging`` are mapped to ``path`` by :func:`relocate`.
    """
    import shutil
    import tempfile

    from .outdirs import folder_lock, hidden_sibling, owned_entries, put_in_place

    final = Path(path)
    owned_entries(final, command)  # before any work: a folder that is not this command's is refused now
    final.parent.mkdir(parents=True, exist_ok=True)
    prefix = hidden_sibling(final, "").name
    staging = Path(tempfile.mkdtemp(prefix=prefix, suffix=".partial", dir=final.parent))
    try:
        yield staging
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    with folder_lock(final):
        put_in_place(staging, final, command)


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
