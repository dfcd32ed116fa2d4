"""Output folders that never lose a user's files (issue 41).

A command that writes a folder (``fit``, ``info``, ``prune``, ``link``, ``adapt``, ``take``, the
``<stem>_files`` folder of ``report``) marks it with a hidden file, :data:`MARKER`, holding the command,
a run id and the names of the entries that run wrote. An existing folder is used only when it is empty
or carries the marker of the same command (or, for folders written before markers existed, the files
that identify the command's output: a fit's ``meta.json``, a take's ``answers.jsonl``); anything else is
refused with one line naming what is there, before any work.

A finished run replaces only the entries the earlier run wrote: the new files are written into a hidden
sibling folder which is exchanged with the folder in one atomic step (irtexam's own files are always one
complete run), and every entry irtexam did not write (notes, a report, an ``info`` sub-folder, the input
table of a refit) is moved back at once. Nothing that was not written by irtexam is ever deleted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Iterator

from .errors import InputError

MARKER = ".irtexam-out.json"
# folders written before the marker existed: the entries that identify a command's output
LEGACY_SIGNS = {"fit": ("meta.json",), "take": ("answers.jsonl", "provenance.json")}
# names a pre-marker fit folder owns besides the ones its meta.json lists
LEGACY_FIT_FILES = ("meta.json", "items.csv", "examinees.csv", "facets.csv", "contrasts.csv", "diagnostics.csv",
                    "draws.npz", "sample_stats.npz", "params.npz", "fit.nc", "responses.parquet",
                    "responses.csv.gz")


def hidden_sibling(final: Path, tag: str) -> Path:
    """A hidden name beside ``final`` for staging, locks and checkpoints, short whatever the length of
    ``final``'s name (a name near the file system's 255-byte limit plus a suffix would not fit)."""
    name = final.name
    if len(name.encode()) > 40:
        name = name.encode()[:32].decode(errors="ignore") + "-" + hashlib.sha1(final.name.encode()).hexdigest()[:8]
    return final.parent / f".{name}.{tag}"


def read_marker(folder: Path) -> dict | None:
    """The marker of ``folder`` ({'command', 'run_id', 'owned'}), or None where there is none or it is damaged."""
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or not isinstance(marker.get("owned"), list):
        return None
    return marker


def _legacy_owned(folder: Path, command: str) -> set[str] | None:
    """The entries a pre-marker output of ``command`` owns, or None where ``folder`` is not one."""
    signs = LEGACY_SIGNS.get(command, ())
    if not any((folder / s).exists() for s in signs):
        return None
    if command != "fit":
        return {p.name for p in folder.iterdir()}  # a take folder: everything it has is take's own log
    owned = set(LEGACY_FIT_FILES)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        owned |= set(json.loads((folder / "meta.json").read_text(encoding="utf-8")).get("files") or ())
    return owned


def _describe(names: list[str], folder: Path) -> str:
    """The first few of ``names`` (folders with a trailing /, hidden names last) and how many more."""
    ordered = sorted(names, key=lambda n: (n.startswith("."), n))  # hidden names (irtexam's locks) last
    shown = [n + ("/" if (folder / n).is_dir() else "") for n in ordered[:4]]
    return ", ".join(shown) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def owned_entries(folder: Path, command: str, option: str = "--out") -> set[str]:
    """The entries of an existing ``folder`` that an earlier run of ``command`` wrote (empty for an empty or
    missing folder), or :class:`InputError` where the folder is not ``command``'s to reuse."""
    if not folder.exists():
        return set()
    if not folder.is_dir():
        raise InputError(f"exists and is a file, not a folder; {option} takes a folder", path=str(folder))
    entries = [p.name for p in folder.iterdir()]
    if not entries:
        return set()
    marker = read_marker(folder)
    if marker is not None:
        if marker.get("command") != command:
            raise InputError(f"holds the output of `irtexam {marker.get('command')}`, not of `irtexam {command}`; "
                             f"choose another {option} (nothing was changed)", path=str(folder))
        return {str(n) for n in marker["owned"]}
    legacy = _legacy_owned(folder, command)
    if legacy is not None:
        return legacy
    raise InputError(f"is not empty and was not written by `irtexam {command}` (it holds "
                     f"{_describe(entries, folder)}); choose a new or empty folder for {option}, or move those "
                     f"files out (nothing was changed)", path=str(folder))


def claim(folder: Path, command: str, owned: tuple[str, ...] = ()) -> None:
    """Mark ``folder`` (created if needed) as ``command``'s before a command writes into it directly (take's
    log, adapt's live answers): a later run resumes there, any other command is refused."""
    previous = owned_entries(folder, command)
    folder.mkdir(parents=True, exist_ok=True)
    run_id = (read_marker(folder) or {}).get("run_id") or uuid.uuid4().hex
    write_marker(folder, command, sorted(previous | set(owned)), run_id)


def write_marker(folder: Path, command: str, owned: list[str], run_id: str | None = None) -> None:
    """Write the marker of ``folder``: ``command``, a run id and the entries the run wrote."""
    from . import __version__

    (folder / MARKER).write_text(json.dumps({"command": command, "run_id": run_id or uuid.uuid4().hex,
                                             "owned": owned, "irtexam_version": __version__}, indent=1),
                                 encoding="utf-8")


@contextlib.contextmanager
def folder_lock(directory: Path) -> Iterator[None]:
    """An exclusive lock on a hidden file beside ``directory``: a second writer waits for the first."""
    import fcntl

    with open(hidden_sibling(directory, "lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _move_back(foreign: list[str], retired: Path, final: Path) -> None:
    """Put the user's entries from the retired folder back into the new one (renames: nothing copied)."""
    for name in foreign:
        with contextlib.suppress(FileNotFoundError):
            os.rename(retired / name, final / name)


def _retire(retired: Path, owned: set[str]) -> None:
    """Delete the earlier run's own entries and the marker; the folder itself only if then empty (an entry
    nobody listed is left in place rather than deleted)."""
    for name in owned | {MARKER}:
        path = retired / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                path.unlink()
    with contextlib.suppress(OSError):
        retired.rmdir()


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two existing paths atomically (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system or
    file system cannot, and the caller falls back to renames."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def put_in_place(staging: Path, final: Path, command: str) -> None:
    """Make the finished folder ``staging`` the output ``final`` of ``command``.

    ``final`` missing: one rename. Otherwise ``final`` must be ``command``'s (:func:`owned_entries`); the two
    folders are exchanged atomically (two renames where the system cannot), the entries irtexam did not
    write are renamed back into the new folder, and only the earlier run's own entries are deleted. A new
    file whose name a user's entry already has is refused before anything moves.
    """
    new = sorted(p.name for p in staging.iterdir())
    try:
        old = owned_entries(final, command)
        foreign = sorted({p.name for p in final.iterdir()} - old - {MARKER}) if final.exists() else []
        clash = sorted(set(foreign) & set(new))
        if clash:
            raise InputError(f"holds {_describe(clash, final)}, which irtexam did not write and this run would "
                             f"overwrite; move it out and run again (nothing was changed)", path=str(final))
        write_marker(staging, command, new)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if not final.exists():
        os.rename(staging, final)
        return
    if exchange_paths(staging, final):
        retired = staging
    else:
        retired = hidden_sibling(final, f"replaced-{uuid.uuid4().hex[:8]}")
        os.rename(final, retired)
        os.rename(staging, final)
    _move_back(foreign, retired, final)
    _retire(retired, old)


def check_own_file(path: Path, command: str, companion: Path, option: str = "--out") -> None:
    """Refuse to overwrite an existing file ``path`` that ``command`` did not write, told by its companion: the
    ``<out>.truth.json`` beside a simulated table, the marked ``<stem>_files`` folder beside a report. A user's
    ``data/responses.csv`` given as ``simulate --out`` is not replaced."""
    if not path.is_file():
        return
    own = companion.is_file() if companion.suffix == ".json" else (read_marker(companion) or {}).get("command")
    if own is True or own == command:
        return
    raise InputError(f"exists and was not written by `irtexam {command}` (no {companion.name} beside it); choose "
                     f"another {option} or remove the file (nothing was changed)", path=str(path))
