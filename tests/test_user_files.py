"""A command writes only its own files (issue 41): for every command that takes ``--out``, a user's file and
sub-folder inside the output folder survive, a folder irtexam did not write is refused before any work
(one line naming what is there), and a refit into its own fit folder keeps its input table."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from irtexam.cli import main

DATA = Path(__file__).parent / "data"


def _responses(path: Path, seed: int = 0) -> Path:
    import numpy as np

    rng = np.random.default_rng(seed)
    theta, b = rng.normal(size=40), rng.normal(size=8)
    x = (rng.random((40, 8)) < 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))).astype(int)
    path.write_text("examinee,item,response\n" + "".join(f"e{j},q{i},{x[j, i]}\n" for j in range(40)
                                                         for i in range(8)))
    return path


def _user_files(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "thesis.tex").write_text("precious\n")
    (folder / "analysis").mkdir(exist_ok=True)
    (folder / "analysis" / "notes.md").write_text("mine\n")


def _intact(folder: Path) -> bool:
    return ((folder / "thesis.tex").read_text() == "precious\n"
            and (folder / "analysis" / "notes.md").read_text() == "mine\n")


@pytest.fixture(scope="module")
def fits(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fits")
    out = {"resp": _responses(root / "responses.csv"), "resp1": _responses(root / "responses1.csv", seed=1)}
    for name, resp in (("fit", out["resp"]), ("fit1", out["resp1"])):
        assert main(["fit", str(resp), "--model", "2pl", "--method", "em", "--out", str(root / name)]) == 0
        out[name] = root / name
    return out


def _argv(command: str, fits: dict[str, Path], out: Path) -> list[str]:
    return {"info": ["info", str(fits["fit"]), "--draws", "20", "--out", str(out)],
            "prune": ["prune", str(fits["resp"]), "--model", "2pl", "--method", "em", "--steps", "1",
                      "--drop", "0.25", "--heldout", "0", "--out", str(out)],
            "link": ["link", str(fits["fit"]), str(fits["fit1"]), "--method", "mean-sigma", "--draws", "20",
                     "--out", str(out)],
            "adapt": ["adapt", str(fits["fit"]), "--replay", str(fits["resp"]), "--examinee", "e0", "--draws", "20",
                      "--out", str(out)],
            "fit": ["fit", str(fits["resp"]), "--model", "2pl", "--method", "em", "--out", str(out)]}[command]


FOLDER_COMMANDS = ("info", "prune", "link", "adapt", "fit")


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_a_folder_irtexam_did_not_write_is_refused_untouched(command, fits, tmp_path, capsys):
    out = tmp_path / "d"
    _user_files(out)
    assert main(_argv(command, fits, out)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "thesis.tex" in err and "analysis/" in err, err
    assert _intact(out) and sorted(p.name for p in out.iterdir()) == ["analysis", "thesis.tex"]


@pytest.mark.parametrize("command", FOLDER_COMMANDS)
def test_a_rerun_keeps_what_the_user_added(command, fits, tmp_path, capsys):
    out = tmp_path / "d"
    assert main(_argv(command, fits, out)) == 0
    own = sorted(p.name for p in out.iterdir())
    _user_files(out)
    assert main(_argv(command, fits, out)) == 0
    assert _intact(out)
    assert sorted(p.name for p in out.iterdir()) == sorted(own + ["analysis", "thesis.tex"])
    marker = json.loads((out / ".irtexam-out.json").read_text())
    assert marker["command"] == command and "thesis.tex" not in marker["owned"]
    assert [p.name for p in tmp_path.iterdir() if p.name != "d" and not p.name.endswith(".lock")] == []


def test_another_commands_folder_is_refused(fits, tmp_path, capsys):
    """info into a fit folder (not the fit it reads): refused, the fit intact."""
    copy = tmp_path / "fit1"
    shutil.copytree(fits["fit1"], copy)
    before = sorted(p.name for p in copy.iterdir())
    assert main(["info", str(fits["fit"]), "--out", str(copy)]) == 2
    assert "holds the output of `irtexam fit`" in capsys.readouterr().err
    assert sorted(p.name for p in copy.iterdir()) == before


def test_refit_keeps_its_input_table_and_the_users_files(fits, tmp_path, capsys):
    """`irtexam fit d/mydata.csv --out d` where d is a fit folder with the data, notes, an info folder and a
    report beside it: only the fit's files are replaced."""
    d = tmp_path / "d"
    assert main(["fit", str(fits["resp"]), "--model", "2pl", "--method", "em", "--out", str(d)]) == 0
    shutil.copy(fits["resp"], d / "mydata.csv")
    _user_files(d)
    assert main(["info", str(d), "--draws", "20", "--out", str(d / "info")]) == 0
    assert main(["report", str(d), "--draws", "20", "--out", str(d / "report.html")]) == 0
    before = {p.name for p in d.iterdir()}
    run_id = json.loads((d / "meta.json").read_text())["run_id"]
    assert main(["fit", str(d / "mydata.csv"), "--model", "1pl", "--method", "em", "--out", str(d)]) == 0
    assert {p.name for p in d.iterdir()} == before
    assert _intact(d) and (d / "mydata.csv").read_bytes() == fits["resp"].read_bytes()
    assert (d / "info" / "items.csv").exists() and (d / "report_files").is_dir()
    meta = json.loads((d / "meta.json").read_text())
    assert meta["run_id"] != run_id and meta["spec"]["kind"] == "1pl"
    assert main(["info", str(d), "--draws", "20", "--out", str(d / "info")]) == 0  # the refit loads


def test_report_and_simulate_leave_the_folder_around_them(fits, tmp_path, capsys):
    d = tmp_path / "d"
    _user_files(d)
    assert main(["report", str(fits["fit"]), "--draws", "20", "--out", str(d / "report.html")]) == 0
    assert main(["simulate", "--items", "5", "--examinees", "6", "--out", str(d / "sim.csv")]) == 0
    assert _intact(d)
    assert sorted(p.name for p in d.iterdir() if not p.name.endswith(".lock")) == [
        "analysis", "report.html", "report_files", "sim.csv", "sim.csv.truth.json", "thesis.tex"]
    (d / "index.html").write_text("<p>mine</p>\n")
    (d / "data.csv").write_text("mine\n")
    assert main(["report", str(fits["fit"]), "--out", str(d / "index.html")]) == 2  # a user's page
    assert main(["simulate", "--items", "5", "--examinees", "6", "--out", str(d / "data.csv")]) == 2  # a user's table
    assert (d / "index.html").read_text() == "<p>mine</p>\n" and (d / "data.csv").read_text() == "mine\n"
    assert main(["simulate", "--items", "5", "--examinees", "6", "--seed", "1", "--out", str(d / "sim.csv")]) == 0
    assert main(["report", str(fits["fit"]), "--draws", "20", "--out", str(d / "report.html")]) == 0  # reruns
    capsys.readouterr()
    _user_files(d / "other_files")
    assert main(["report", str(fits["fit"]), "--out", str(d / "other.html")]) == 2  # a user's folder of that name
    assert "other_files" in capsys.readouterr().err and _intact(d / "other_files")


def test_take_writes_beside_the_users_files_only_in_its_own_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_rag.py").write_text("def answer(question, choices):\n    return choices[0]\n")
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent(f"""\
        exam: {DATA / 'retrieval_exam.jsonl'}
        systems:
          - {{label: mine, python: "my_rag:answer"}}
        """))
    d = tmp_path / "d"
    _user_files(d)
    assert main(["take", str(spec), "--out", str(d), "--no-progress"]) == 2
    assert "thesis.tex" in capsys.readouterr().err and sorted(p.name for p in d.iterdir()) == ["analysis",
                                                                                               "thesis.tex"]
    run = tmp_path / "run"
    assert main(["take", str(spec), "--out", str(run), "--no-progress"]) == 0
    _user_files(run)
    assert main(["take", str(spec), "--out", str(run), "--no-progress"]) == 0  # a resume
    assert _intact(run) and (run / "responses.csv").exists()


def test_a_long_out_name_does_not_fail_after_the_work(fits, tmp_path, capsys):
    """The hidden staging, lock and checkpoint names stay short whatever --out's name (issue 41)."""
    name = "x" * 250
    assert main(["fit", str(fits["resp"]), "--model", "2pl", "--method", "em", "--out", str(tmp_path / name)]) == 0
    assert main(["info", str(fits["fit"]), "--draws", "20", "--out", str(tmp_path / ("i" * 250))]) == 0
    assert (tmp_path / name / "meta.json").exists() and (tmp_path / ("i" * 250) / "items.csv").exists()
