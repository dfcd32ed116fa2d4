"""Packaging (issue 24): the core wheel installs alone, without torch, and fits from a script and the CLI."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_package_ships_its_type_marker_and_changelog():
    assert (REPO / "irtexam" / "py.typed").exists() and (REPO / "CHANGELOG.md").exists()
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    core = [d.split(">")[0].split("=")[0].split("<")[0] for d in project["project"]["dependencies"]]
    assert not {"torch", "transformers", "sentence-transformers"} & set(core)
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["irtexam"]


@pytest.mark.slow
def test_wheel_installs_alone_and_fits(tmp_path):
    """scripts/check_wheel.sh: python -m build, a fresh venv with only the wheel, a 2PL through both paths."""
    proc = subprocess.run([str(REPO / "scripts" / "check_wheel.sh"), str(tmp_path)], capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "core installed without torch, fitted through Python and the CLI" in proc.stdout
