"""A fit folder is always one complete fit (issue 27): SIGTERM at many points while a fit is saved over an
earlier one leaves the earlier fit or the new one, never a mix; two fits on one folder at once end in one
complete fit. Each case runs the real `irtexam` script in a fresh process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

SCRIPT = str(Path(sys.executable).with_name("irtexam"))


def _simulate(path: Path, seed: int) -> None:
    subprocess.run([SCRIPT, "simulate", "--items", "12", "--examinees", "300", "--model", "2pl", "--seed", str(seed),
                    "--out", str(path)], check=True, capture_output=True, timeout=120)


def _fit_cmd(responses: Path, out: Path) -> list[str]:
    return [SCRIPT, "fit", str(responses), "--model", "2pl", "--method", "em", "--out", str(out)]


def _items(folder: Path) -> str:
    import irtexam

    return irtexam.load_fit(folder).items.to_csv()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("fit-faults")
    old_resp, new_resp = root / "old.csv", root / "new.csv"
    _simulate(old_resp, 1)
    _simulate(new_resp, 2)
    old_fit, new_fit = root / "old-fit", root / "new-fit"
    for resp, out in ((old_resp, old_fit), (new_resp, new_fit)):
        subprocess.run(_fit_cmd(resp, out), check=True, capture_output=True, timeout=300)
    start = time.perf_counter()
    subprocess.run(_fit_cmd(new_resp, root / "timing"), check=True, capture_output=True, timeout=300)
    return {"root": root, "old": old_fit, "new_resp": new_resp, "old_items": _items(old_fit),
            "new_items": _items(new_fit), "seconds": time.perf_counter() - start}


def _kill_during_save(setup, target: Path, delay: float) -> str:
    """Copy the old fit to ``target``, start a fit over it, SIGTERM after ``delay`` s; which fit is left."""
    import shutil

    shutil.copytree(setup["old"], target)
    proc = subprocess.Popen(_fit_cmd(setup["new_resp"], target), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)
    items = _items(target)  # raises if the folder is damaged or mixed
    assert items in (setup["old_items"], setup["new_items"])
    return "old" if items == setup["old_items"] else "new"


def _delays(setup, n: int) -> np.ndarray:
    # spread over the whole run, denser near its end where the save happens
    t = setup["seconds"]
    return np.sort(np.concatenate([np.linspace(0.3, 0.8 * t, n // 2), np.linspace(0.8 * t, 1.2 * t, n - n // 2)]))


def test_sigterm_during_a_fit_saved_over_an_earlier_one(setup):
    seen = [_kill_during_save(setup, setup["root"] / f"kill{i}", float(d)) for i, d in enumerate(_delays(setup, 6))]
    assert "old" in seen  # early kills leave the old fit


@pytest.mark.slow
def test_sigterm_at_many_points(setup):
    seen = [_kill_during_save(setup, setup["root"] / f"many{i}", float(d))
            for i, d in enumerate(_delays(setup, 30))]
    assert {"old", "new"} <= set(seen), seen


def test_two_fits_on_one_folder_end_in_one_complete_fit(setup, tmp_path):
    target = tmp_path / "shared"
    other = tmp_path / "other.csv"
    _simulate(other, 3)
    procs = [subprocess.Popen(_fit_cmd(resp, target), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for resp in (setup["new_resp"], other)]
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0, 0], [p.stderr.read() for p in procs]
    import irtexam

    fit = irtexam.load_fit(target)
    expected = {_items(setup["root"] / "new-fit")}
    subprocess.run(_fit_cmd(other, tmp_path / "other-fit"), check=True, capture_output=True, timeout=300)
    expected.add(_items(tmp_path / "other-fit"))
    assert fit.items.to_csv() in expected
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".shared.") and not p.name.endswith(".lock")]
    assert leftovers == []
    assert os.path.exists(target / "meta.json")


def test_multi_file_outputs_are_replaced_whole_or_not_at_all(tmp_path):
    """info/prune/link/adapt write through paths.atomic_output_dir: a finished run replaces the earlier
    run's own files whole (its extra files gone) and keeps what a user put beside them; an interrupted
    one leaves the earlier folder untouched (issue 41)."""
    from irtexam.paths import atomic_output_dir, relocate

    out = tmp_path / "info"
    with atomic_output_dir(out, "info") as staging:
        (staging / "facets.csv").write_text("earlier run\n")
    (out / "thesis.tex").write_text("precious\n")
    (out / "analysis").mkdir()
    (out / "analysis" / "notes.md").write_text("mine\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_output_dir(out, "info") as staging:
            (staging / "items.csv").write_text("half\n")
            raise KeyboardInterrupt
    assert sorted(p.name for p in out.iterdir()) == [".irtexam-out.json", "analysis", "facets.csv", "thesis.tex"]
    with atomic_output_dir(out, "info") as staging:
        (staging / "items.csv").write_text("new\n")
        written = relocate({"items": str(staging / "items.csv"), "n": 3}, staging, out)
    assert sorted(p.name for p in out.iterdir()) == [".irtexam-out.json", "analysis", "items.csv", "thesis.tex"]
    assert (out / "thesis.tex").read_text() == "precious\n" and (out / "analysis" / "notes.md").read_text() == "mine\n"
    assert written == {"items": str(out / "items.csv"), "n": 3}
    assert [p.name for p in tmp_path.iterdir() if p.name != "info" and not p.name.endswith(".lock")] == []
