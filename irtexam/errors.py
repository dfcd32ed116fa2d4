"""Exceptions that carry a message meant for the user.

Every error a user can cause (bad file, bad option, bad spec) is raised as an
:class:`IrtexamError` whose message names the file, row and field and says what to
do. The CLI prints it as one line and exits non-zero, without a traceback.
"""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path
from typing import Iterator


class IrtexamError(ValueError):
    """An error caused by input the user can fix; the message says how (a ``ValueError``, as a bad
    argument is in the libraries irtexam's users know)."""


class DivergedError(IrtexamError):
    """An estimator's iterations left the finite numbers; the caller may name a cause in the data."""


class InputError(IrtexamError):
    """Bad input data: names the file, row and column where possible."""

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 column: str | None = None) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if row is not None:
            where.append(f"row {row}")
        if column is not None:
            where.append(f"column '{column}'")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
        self.path, self.row, self.column = path, row, column


# OSError numbers a user's environment causes (paths, permissions, space), reported as one line.
_USER_ERRNOS = frozenset({errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT,
                          errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENAMETOOLONG, errno.ENOTEMPTY,
                          errno.ELOOP, errno.EXDEV})


def user_error_message(exc: BaseException) -> str | None:
    """The one-line message for an error the user caused, or None for a bug (whose traceback is kept).

    User-caused: :class:`IrtexamError` (raised where the cause is known, naming the file, row or
    option) and the operating system's path, permission and space errors that carry a file name
    (``PATH: Permission denied``), wherever they surface.
    """
    if isinstance(exc, IrtexamError):
        return " ".join(str(exc).split("\n"))
    if isinstance(exc, OSError) and exc.errno in _USER_ERRNOS and (exc.filename or exc.filename2):
        names = " -> ".join(str(n) for n in (exc.filename, exc.filename2) if n)
        if exc.errno == errno.ENOENT:
            return f"file not found: {names} (check the path)"
        hint = {errno.ENOENT: "check the path", errno.ENOSPC: "free some disk space",
                errno.EROFS: "choose a writable place", errno.EACCES: "check its permissions",
                errno.ENOTDIR: "a part of the path is a file, not a folder",
                errno.EISDIR: "a folder where a file was expected"}.get(exc.errno, "")
        return f"{names}: {exc.strerror or exc}" + (f" ({hint})" if hint else "")
    return None


@contextlib.contextmanager
def reading(path: str | Path, what: str = "file") -> Iterator[None]:
    """Translate the errors of reading ``path`` (not UTF-8, a damaged or truncated gzip, a folder,
    unparsable YAML/TOML/JSON) into :class:`InputError` naming the file.

    ``with reading(path, "exam"): rows = list(iter_json_lines(path))``
    """
    import gzip
    import json
    import zlib

    try:
        yield
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         f"save the {what} as UTF-8", path=str(path)) from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputError(f"damaged or truncated gzip ({type(exc).__name__}: {exc}); re-create the {what}",
                         path=str(path)) from None
    except IsADirectoryError:
        raise InputError(f"is a folder; give the {what} file", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg}, line {exc.lineno})", path=str(path)) from None
    except Exception as exc:
        if type(exc).__module__.startswith(("yaml", "tomllib")) or type(exc).__name__ == "TOMLDecodeError":
            first = " ".join(str(exc).split())[:200]
            raise InputError(f"not valid {'TOML' if 'TOML' in type(exc).__name__ else 'YAML'} ({first})",
                             path=str(path)) from None
        raise
