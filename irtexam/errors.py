"""Exceptions that carry a message meant for the user.

Every error a user can cause (bad file, bad option, bad spec) is raised as an
:class:`IrtexamError` whose message names the file, row and field and says what to
do. The CLI prints it as one line and exits non-zero, without a traceback.
"""

from __future__ import annotations


class IrtexamError(Exception):
    """An error caused by input the user can fix; the message says how."""


class InputError(IrtexamError, ValueError):
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
