"""Every CLI command walked through the bad-input table (tests/bad_inputs.py): each case ends with a
non-zero exit code and one line ``irtexam COMMAND: error: ...`` that names the option or file at
fault, never a traceback and never exit 0. ``experiments/bad_input_sweep.py`` prints the counts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bad_inputs import cases, make_fixtures, run_case

CASES = cases()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    return make_fixtures(tmp_path_factory.mktemp("bad-input-fixtures"))


def test_the_table_covers_every_command():
    from irtexam.cli import COMMAND_MODULES

    covered = {c.command.replace("-", "_") for c in CASES}
    assert set(COMMAND_MODULES) - covered <= {"demo", "import_lm_eval"}
    assert len(CASES) >= 238  # 174 before issue 41


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_ends_in_one_line(case, fixtures, tmp_path):
    outcome = run_case(case, fixtures, tmp_path)
    assert outcome.kind == "one-line", f"{outcome.kind} (exit {outcome.code}):\n{outcome.stderr[-3000:]}"
    line = next(x for x in outcome.stderr.splitlines() if ": error: " in x)
    names = case.names(fixtures)
    assert any(name in line for name in names), f"the error names none of {names}: {line}"


def test_debug_shows_the_traceback(fixtures, tmp_path, capsys):
    """--debug (or IRTEXAM_DEBUG=1) re-raises a user error with its traceback instead of one line."""
    from irtexam.cli import main
    from irtexam.errors import IrtexamError

    with pytest.raises(IrtexamError, match="not UTF-8"):
        main(["filter", fixtures["exam_nonutf8"], "--out", str(tmp_path / "o.jsonl"), "--no-embeddings",
              "--debug"])


def test_a_bug_keeps_its_traceback(monkeypatch, tmp_path):
    """Only user-caused errors are translated: an internal KeyError still raises."""
    import importlib

    from irtexam.cli import main

    def broken(*args, **kwargs):
        raise KeyError("internal")

    monkeypatch.setattr(importlib.import_module("irtexam.irt.simulate"), "simulate", broken)
    with pytest.raises(KeyError):
        main(["simulate", "--items", "3", "--examinees", "4", "--out", str(tmp_path / "s.csv")])


def test_one_line_from_the_installed_script(fixtures, tmp_path):
    """The console script, in a fresh process: one stderr line and exit 2."""
    script = Path(sys.executable).with_name("irtexam")
    proc = subprocess.run([str(script), "fit", fixtures["truncgz"], "--out", str(tmp_path / "f")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "truncated.csv.gz" in proc.stderr


def test_fit_refuses_a_matrix_that_would_not_fit_in_memory(fixtures, tmp_path, monkeypatch, capsys):
    """The memory check before allocating (issue 27): with one 4 kB page 'free', a fit of 8 x 40 cells
    (250 bytes a cell: 80 kB) is refused with the size it would need, before any fit."""
    import os

    from irtexam.cli import main

    real = os.sysconf
    monkeypatch.setattr(os, "sysconf", lambda name: 1 if name == "SC_AVPHYS_PAGES" else
                        (4096 if name == "SC_PAGE_SIZE" else real(name)))
    assert main(["fit", fixtures["resp"], "--out", str(tmp_path / "f")]) == 2
    err = capsys.readouterr().err
    assert "8 items x 40 examinees = 320 cells would need about" in err and err.count("\n") == 1
