"""The `fit` and `simulate` commands: files written, one-line errors with a non-zero exit, demo help."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from irtexam.cli import main


def test_simulate_then_fit_writes_the_documented_files(tmp_path, capsys):
    responses = tmp_path / "r.csv"
    assert main(["simulate", "--items", "60", "--facets", "llm=3,retriever=2,icl=2", "--seed", "3",
                 "--out", str(responses)]) == 0
    truth = json.loads((tmp_path / "r.csv.truth.json").read_text())
    assert len(truth["theta_llm"]) == 3
    out = tmp_path / "fit"
    assert main(["fit", str(responses), "--model", "2pl", "--facets", "llm,retriever,icl", "--heldout", "0.1",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "2PL fit by MAP: 60 items x 12 examinees" in printed and "held-out log-likelihood" in printed
    items = pd.read_csv(out / "items.csv")
    assert list(items.columns[:7]) == ["item", "a", "a_sd", "a_low", "a_high", "b", "b_sd"]
    assert {"c", "c_sd"} <= set(items.columns)
    examinees = pd.read_csv(out / "examinees.csv")
    assert list(examinees.columns[:5]) == ["examinee", "theta", "theta_sd", "theta_low", "theta_high"]
    facets = pd.read_csv(out / "facets.csv")
    assert list(facets.columns[:6]) == ["facet", "level", "theta", "theta_sd", "theta_low", "theta_high"]
    assert set(facets["facet"]) == {"llm", "retriever", "icl"}
    assert (out / "fit.nc").exists() and (out / "meta.json").exists()
    meta = json.loads((out / "meta.json").read_text())
    assert meta["spec"]["kind"] == "2pl" and meta["fit_stats"]["heldout_cells"] > 0


def test_fixed_guessing_flag(tmp_path, capsys):
    responses = tmp_path / "r.csv"
    main(["simulate", "--items", "40", "--examinees", "60", "--out", str(responses)])
    main(["fit", str(responses), "--model", "3pl", "--guessing", "0.25", "--out", str(tmp_path / "fit")])
    items = pd.read_csv(tmp_path / "fit" / "items.csv")
    assert (items["c"] == 0.25).all()
    assert "; c: fixed 0.25" in capsys.readouterr().out  # the summary says c was held, not estimated
    main(["fit", str(responses), "--model", "2pl", "--out", str(tmp_path / "fit2")])
    summary = [line for line in capsys.readouterr().out.splitlines() if "a: median" in line]
    assert len(summary) == 1 and "c:" not in summary[0]  # a 2PL has no c to report


def test_every_option_with_a_flag_reaches_the_fit(tmp_path, monkeypatch):
    """The CLI passes each row of irtexam.config.OPTIONS that has a flag to fit(): a row added to the table
    cannot be parsed and then dropped (--slope-centre was, at first)."""
    from irtexam import config
    import importlib

    fit_module = importlib.import_module("irtexam.irt.fit")  # the command imports fit() from it when it runs

    responses = tmp_path / "r.csv"
    main(["simulate", "--items", "10", "--examinees", "50", "--out", str(responses)])
    seen: dict = {}

    class Stop(Exception):
        pass

    def capture(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setattr(fit_module, "fit", capture)
    with pytest.raises(Stop):
        main(["fit", str(responses), "--model", "2pl", "--slope-centre", "fixed", "--item-prior", "none",
              "--heldout", "0.2", "--out", str(tmp_path / "fit")])
    assert {option.name for option in config.OPTIONS if option.cli} <= set(seen)
    assert seen["slope_centre"] == "fixed" and seen["item_prior"] == "none" and seen["heldout"] == 0.2
    assert seen["model"] == "2pl" and seen["method"] == "auto"  # fit() resolves it as the command did (and notes its rule)


def test_slope_centre_flag_reaches_the_fit_folder_and_the_fixed_centre_warns(tmp_path, capsys):
    import numpy as np
    from irtexam.irt.simulate import simulate

    a = 2.0 * np.exp(np.random.default_rng(1).normal(0.0, 0.35, 30))
    rm, _ = simulate(30, 800, model="2pl", seed=2, a=a)
    data = tmp_path / "hi.csv"
    rm.to_long(include_missing=False)[["item", "examinee", "response"]].to_csv(data, index=False)
    for centre in ("learned", "fixed"):
        assert main(["fit", str(data), "--model", "2pl", "--slope-centre", centre, "--out", str(tmp_path / centre)]) == 0
    captured = capsys.readouterr()
    printed = captured.out + captured.err  # warnings go to stderr
    prior = {c: json.loads((tmp_path / c / "meta.json").read_text())["fit_stats"]["item_prior"]
             for c in ("learned", "fixed")}
    assert prior["learned"]["slope_centre"] == "learned" and prior["learned"]["a_median"] > 1.5
    assert prior["fixed"]["slope_centre"] == "fixed" and prior["fixed"]["a_median"] == 1.0
    assert printed.count("median slope") == 1 and "--slope-centre learned" in printed  # only the fixed centre warns
    a_hat = {c: pd.read_csv(tmp_path / c / "items.csv")["a"].median() for c in ("learned", "fixed")}
    assert a_hat["fixed"] < a_hat["learned"]


def test_fit_summary_says_when_and_why_the_guessing_centre_was_not_learned(tmp_path, capsys):
    """100 examinees: guessing_centre='auto' holds the c centre at 1/4 (fewer than 300 responses per item), so the
    summary lists it apart from the learned centres, with the rule's reason; meta.json says the same."""
    from irtexam.irt.simulate import simulate

    rm, _ = simulate(15, 100, model="3pl", seed=4)
    data = tmp_path / "small.csv"
    rm.to_long(include_missing=False)[["item", "examinee", "response"]].to_csv(data, index=False)
    assert main(["fit", str(data), "--model", "3pl", "--out", str(tmp_path / "f")]) == 0
    printed = capsys.readouterr().out
    learned_line = next(line for line in printed.splitlines() if "item priors learned from the exam" in line)
    assert "d centre" in learned_line and "c mean" not in learned_line
    assert "a centre" in learned_line          # the marginal estimator learns the slope centre too
    assert "c prior centre 0.25, not learned: held at 1/4: a median of 100 responses per item" in printed
    prior = json.loads((tmp_path / "f" / "meta.json").read_text())["fit_stats"]["item_prior"]
    assert prior["guessing_centre"] == "fixed" and "fewer than 300" in prior["guessing_centre_rule"]


@pytest.mark.parametrize("content,expected", [
    ("item,examinee,score\nq1,e1,1\n", "column 'response'"),
    ("item,examinee,response\nq1,e1,1\nq1,e1,0\n", "row 2"),
    ("item,examinee,response\nq1,e1,7\n", "row 1, column 'response'"),
])
def test_bad_input_exits_non_zero_with_one_clear_line(tmp_path, content, expected):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    run = subprocess.run([sys.executable, "-m", "irtexam.cli", "fit", str(path), "--out", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert run.returncode == 2
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert "Traceback" not in run.stderr
    assert lines[0].startswith("irtexam fit: error: ") and "bad.csv" in lines[0] and expected in lines[0]


def test_unknown_facet_and_missing_file(tmp_path, capsys):
    responses = tmp_path / "r.csv"
    main(["simulate", "--items", "10", "--examinees", "5", "--out", str(responses)])
    capsys.readouterr()
    assert main(["fit", str(responses), "--facets", "llm", "--out", str(tmp_path / "o")]) == 2
    captured = capsys.readouterr()
    assert "unknown facet term 'llm'" in captured.err and "method:" not in captured.out  # no misleading line
    assert main(["fit", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "o")]) == 2
    assert "file not found" in capsys.readouterr().err


def test_demo_help_explains_own_corpus_and_served_model():
    run = subprocess.run([sys.executable, "-m", "irtexam.cli", "demo", "--help"], capture_output=True, text=True)
    assert run.returncode == 0
    assert "--corpus" in run.stdout and "http://localhost:8000/v1" in run.stdout and "--api-key-env" in run.stdout


def test_demo_prefers_the_complete_real_run_matrix(tmp_path):
    import json

    from irtexam.commands.demo import bundled_responses

    assert bundled_responses(tmp_path) is None
    (tmp_path / "responses").mkdir()
    (tmp_path / "responses" / "responses.csv.gz").write_bytes(b"")
    (tmp_path / "real_run").mkdir()
    (tmp_path / "real_run" / "responses.csv.gz").write_bytes(b"")
    assert bundled_responses(tmp_path) == tmp_path / "responses" / "responses.csv.gz"  # no provenance: not trusted
    prov = tmp_path / "real_run" / "provenance.json"
    prov.write_text(json.dumps({"counts": {"missing_pairs": 12}}))
    assert bundled_responses(tmp_path) == tmp_path / "responses" / "responses.csv.gz"  # partial grid
    prov.write_text(json.dumps({"counts": {"missing_pairs": 0}}))
    assert bundled_responses(tmp_path) == tmp_path / "real_run" / "responses.csv.gz"


def test_statistics_core_does_not_import_torch():
    code = ("import sys, irtexam; from irtexam.irt import fit, simulate; from irtexam.cli import build_parser; "
            "build_parser(); r, _ = simulate(20, 10); fit(r, model='2pl'); "
            "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]; "
            "print(bad); sys.exit(1 if bad else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_auto_method_is_nuts_only_for_small_hierarchical_fits():
    from irtexam.irt.fit import resolve_method

    assert resolve_method("auto", ["llm"], 49) == "nuts"
    assert resolve_method("auto", ["llm"], 50) == "map" and resolve_method("auto", None, 5) == "em"
    assert resolve_method("map", ["llm"], 5) == "map" and resolve_method("nuts", None, 500) == "nuts"
    import warnings

    import irtexam

    responses, _ = irtexam.simulate(8, 20, model="2pl", seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert irtexam.fit(responses, model="2pl", method="auto", draws=20).method == "em"  # no facets: marginal
    with pytest.raises(Exception, match="method must be one of .auto., .em., .map., .nuts., got .laplace."):
        irtexam.fit(responses, model="2pl", method="laplace")


def test_auto_facets_skip_single_level_columns_and_say_so(tmp_path, capsys):
    rows = ["item,examinee,response,llm,retriever"]
    for e, llm in (("e1", "small"), ("e2", "big"), ("e3", "small"), ("e4", "big")):
        for i in range(12):
            rows.append(f"q{i},{e},{(i + len(e) + (llm == 'big')) % 2},{llm},closed-book")
    path = tmp_path / "r.csv"
    path.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(path), "--model", "1pl", "--facets", "auto", "--chains", "1", "--warmup", "40",
                 "--samples", "40", "--out", str(tmp_path / "o")]) == 0
    printed = capsys.readouterr().out
    assert "facet 'retriever' has a single level (closed-book)" in printed
    assert "method: NUTS (auto: a hierarchical fit of 12 items" in printed and "1PL fit by NUTS" in printed
    facets = pd.read_csv(tmp_path / "o" / "facets.csv")
    assert set(facets["facet"]) == {"llm"}


def test_a_closed_pipe_ends_the_command_quietly(tmp_path):
    """`irtexam fit ... | head`: the reader goes away; the command stops without a traceback, exit 141 (as a
    shell's for SIGPIPE), like any Unix tool whose output nobody reads."""
    import subprocess
    import sys

    import irtexam

    responses, _ = irtexam.simulate(6, 60, model="2pl", seed=1)
    responses.save(tmp_path / "r.csv")
    script = (f"'{sys.executable}' -m irtexam.cli fit '{tmp_path / 'r.csv'}' --model 2pl --out '{tmp_path / 'fit'}' "
              "| true; echo ${PIPESTATUS[0]}")  # `true` leaves before the first line is printed
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in out.stderr and "BrokenPipeError" not in out.stderr
    assert out.stdout.strip() == "141"


def test_corrupt_gzip_and_an_unusable_out_are_one_line_errors(tmp_path, capsys):
    """A truncated or fake .gz input and an --out that is a file end in one line naming the path (no traceback);
    the --out check comes before any fitting."""
    import gzip

    good = gzip.compress(b"item,examinee,response\n" + b"".join(f"q{i},e{m},{(i + m) % 2}\n".encode()
                                                                 for i in range(5) for m in range(40)))
    (tmp_path / "cut.csv.gz").write_bytes(good[: len(good) // 2])
    (tmp_path / "fake.csv.gz").write_bytes(b"not a gzip file")
    for name in ("cut.csv.gz", "fake.csv.gz"):
        assert main(["fit", str(tmp_path / name), "--model", "2pl", "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and name in err and "corrupt or cut short" in err
    (tmp_path / "full.csv.gz").write_bytes(good)
    (tmp_path / "taken").write_text("a file")
    assert main(["fit", str(tmp_path / "full.csv.gz"), "--model", "2pl", "--out", str(tmp_path / "taken")]) == 2
    out, err = capsys.readouterr()
    assert "is a file, not a folder" in err and "fit by" not in out  # refused before the fit
