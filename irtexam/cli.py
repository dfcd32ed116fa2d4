"""The ``irtexam`` command line: one sub-command per pipeline stage, plus ``demo``.

Each sub-command lives in ``irtexam/commands/<name>.py`` and exposes
``register(subparsers)``; that function adds its parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit code. Command modules
import heavy dependencies (jax, torch) inside their ``run`` function so that
``irtexam --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from typing import Sequence

from .errors import IrtexamError, user_error_message
from .options import OneLineArgumentParser

# Order here is the order in `irtexam --help`.
COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "corpus",
    "generate",
    "filter",
    "verify",
    "take",
    "import_lm_eval",
    "fit",
    "simulate",
    "info",
    "prune",
    "adapt",
    "tiny",
    "link",
    "report",
    "grade",
)


def split_list(text: str | None) -> list[str]:
    """A comma-separated option value as a list: ``"llm, retriever,icl"`` -> ``["llm", "retriever", "icl"]``.

    Every list option of every sub-command (``--facets``, ``--llms``, ``--retrievers``,
    ``--icl``, ...) takes this one form; blank entries are dropped.
    """
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def print_warning(message: str) -> None:
    """Print a warning for the user as one line, ``warning: MESSAGE``, on stderr (every command's form)."""
    print("warning: " + " ".join(str(message).split()), file=sys.stderr, flush=True)


_DEVELOPER_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """``warnings.showwarning`` for the CLI: one ``warning: ...`` line, no source path or code line.

    Deprecation and future warnings raised by other packages (arviz, jax, ...) are
    meant for developers and are not shown.
    """
    if issubclass(category, _DEVELOPER_WARNINGS) and "irtexam" not in str(filename):
        return
    print_warning(str(message))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Build the argument parser with every available sub-command registered.

    With ``command`` (a sub-command name such as ``fit`` or ``import-lm-eval``) only that
    sub-command's module is imported and registered, when it exists: importing every
    command module costs ~0.1 s, a noticeable part of a quick ``irtexam fit``. Returns
    the full parser when ``command`` names no sub-command.
    """
    module_name = None if command is None else command.replace("-", "_")
    if module_name in COMMAND_MODULES:
        parser = _new_parser()
        sub = parser._subparsers._group_actions[0]  # the action add_subparsers returned
        if _register(sub, module_name) and command in sub.choices:
            return parser
    parser = _new_parser()
    sub = parser._subparsers._group_actions[0]
    for name in COMMAND_MODULES:
        _register(sub, name)
    return parser


def _new_parser() -> argparse.ArgumentParser:
    parser = OneLineArgumentParser(
        prog="irtexam",
        description="Evaluate RAG pipelines with generated exams and item response theory.",
    )
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def _register(sub: argparse._SubParsersAction, name: str) -> bool:
    """Register ``irtexam.commands.<name>``; False when that stage is not part of this installation."""
    try:
        module = importlib.import_module(f"irtexam.commands.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"irtexam.commands.{name}":
            return False
        raise
    module.register(sub)
    return True


def _command_name(argv: Sequence[str]) -> str | None:
    """The sub-command an argument list names: its first argument, when that is not an option."""
    return argv[0] if argv and not argv[0].startswith("-") else None


# Commands of the statistics core: nothing of theirs needs the interpreter's final teardown, which
# after JAX and XLA have been loaded takes 0.1-0.3 s (freeing modules and compiled programs).
FAST_EXIT_COMMANDS = frozenset({"fit", "info", "prune", "report", "adapt", "link", "simulate", "tiny"})


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``irtexam`` script; returns the process exit code.

    Called as the script (``argv`` None) for a statistics command, the process ends right after the
    command: output flushed and ``atexit`` handlers run (weakref finalizers included), then
    ``os._exit`` skips the interpreter's teardown (:data:`FAST_EXIT_COMMANDS`).
    """
    as_script = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    code = _main(argv)
    if as_script and _command_name(argv) in FAST_EXIT_COMMANDS:
        import atexit
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(code)
    return code


def debug_requested(argv: Sequence[str]) -> bool:
    """``--debug`` anywhere in the arguments, or ``IRTEXAM_DEBUG=1``: show the traceback of any error."""
    import os

    return "--debug" in argv or os.environ.get("IRTEXAM_DEBUG", "") not in ("", "0")


def _main(argv: list[str]) -> int:
    debug = debug_requested(argv)
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser(_command_name(argv))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a one-line usage error (2): returned, as every other outcome
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        resumes = args.command in RESUMABLE_COMMANDS
        print(f"irtexam {args.command}: interrupted; "
              + ("finished calls are kept and a re-run of the same command resumes."
                 if resumes else "nothing was written; a re-run starts over."), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`irtexam fit ... | head`): the work is done and saved
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 141
    except Exception as exc:  # noqa: BLE001 - only user-caused errors are translated; others re-raised
        message = user_error_message(exc)
        if message is None or debug:
            raise
        print(f"irtexam {args.command}: error: {message}", file=sys.stderr)
        return 2


# Commands whose finished work is kept and skipped on a re-run: LLM calls (take, generate, verify, grade)
# and prune's finished rounds.
RESUMABLE_COMMANDS = frozenset({"take", "generate", "verify", "grade", "demo", "prune"})


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
