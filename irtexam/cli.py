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
from typing import Sequence

from .errors import IrtexamError

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
    "report",
    "grade",
)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser with every available sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="irtexam",
        description="Evaluate RAG pipelines with generated exams and item response theory.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"irtexam.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"irtexam.commands.{name}":
                continue  # that stage is not part of this installation
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``irtexam`` script; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except IrtexamError as exc:
        print(f"irtexam {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"irtexam {args.command}: error: file not found: {exc.filename}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"irtexam {args.command}: interrupted; finished work is kept and a re-run resumes.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
