"""Iterative pruning: alignment by item id, drop counts, and (with the real fit) noise items first."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from irtexam.analysis import pruning as pr
from irtexam.errors import InputError
from irtexam.responses import ResponseMatrix


def _matrix(n_items=20, n_noise=4, n_ex=120, seed=0):
    """Simulated 2PL responses; the last ``n_noise`` items are coin flips (a = 0)."""
    rng = np.random.default_rng(seed)
    th = rng.normal(size=n_ex)
    a = np.r_[rng.uniform(1.0, 2.5, n_items - n_noise), np.zeros(n_noise)]
    b = rng.normal(0, 0.8, n_items)
    p = 1 / (1 + np.exp(-a[:, None] * (th[None] - b[:, None])))
    x = (rng.random(p.shape) < p).astype(float)
    items = [f"q{i:02d}" for i in range(n_items)]
    rng.shuffle(items)  # ids unrelated to row order
    return ResponseMatrix(values=x, items=items, examinees=[f"m{j}" for j in range(n_ex)]), items[-n_noise:]


class SpyFit:
    """Cheap estimator for logic tests: a = item-rest correlation, records what it was given."""

    def __init__(self, reference: ResponseMatrix):
        self.ref = reference
        self.calls = []

    def __call__(self, rm, **kw):
        self.calls.append((list(rm.items), kw.get("init")))
        ref_rows = {i: self.ref.values[k] for k, i in enumerate(self.ref.items)}
        for k, item in enumerate(rm.items):  # responses must follow their item ids
            np.testing.assert_array_equal(rm.values[k], ref_rows[item])
        x = rm.values
        total = x.sum(0)
        a = np.array([np.corrcoef(x[k], total - x[k])[0, 1] for k in range(len(x))])
        items = pd.DataFrame({"a": np.maximum(a, 0) * 3, "b": 0.0, "c": 0.0}, index=list(rm.items))
        ex = pd.DataFrame({"theta": (total - total.mean()) / total.std()}, index=list(rm.examinees))
        return SimpleNamespace(items=items, examinees=ex, fit_stats={"loglik": -1.0}, responses=rm)


def test_drop_count_rule():
    assert pr.drop_count(100, 0.1, 5) == 10
    assert pr.drop_count(7, 0.1, 5) == 1  # at least one per round
    assert pr.drop_count(6, 0.5, 5) == 1  # capped by min_items
    assert pr.drop_count(5, 0.5, 5) == 0


def test_prune_keeps_responses_aligned_and_warm_starts():
    rm, noise = _matrix()
    spy = SpyFit(rm)
    res = pr.prune(rm, drop=0.1, steps=3, fit_fn=spy, progress=False)
    assert [len(items) for items, _ in spy.calls] == [20, 18, 16, 14]
    assert spy.calls[0][1] is None and all(init is not None for _, init in spy.calls[1:])
    assert res.steps["n_items"].tolist() == [20, 18, 16, 14]
    dec = res.decisions.set_index("item")
    assert len(dec) == 20 and dec["step_dropped"].notna().sum() == 6
    first_round = dec.index[dec["step_dropped"] == 1].tolist()
    assert set(first_round) <= set(noise)
    assert res.steps["mean_information"].iloc[-1] > res.steps["mean_information"].iloc[0]
    assert res.kept_items == [i for i in rm.items if pd.isna(dec.loc[i, "step_dropped"])]
    assert list(res.responses.items) == res.kept_items


def test_prune_by_information_and_min_items_stop():
    rm, _ = _matrix(10, 2, 80)
    res = pr.prune(rm, drop=0.5, steps=5, by="information", min_items=6, fit_fn=SpyFit(rm), progress=False)
    assert res.steps["n_items"].tolist() == [10, 6]
    assert "min_items" in res.stop_reason


def test_prune_rejects_bad_options():
    rm, _ = _matrix(10, 2, 40)
    with pytest.raises(InputError, match="fraction"):
        pr.prune(rm, drop=10, fit_fn=SpyFit(rm))
    with pytest.raises(InputError, match="by must be"):
        pr.prune(rm, by="luck", fit_fn=SpyFit(rm))
    with pytest.raises(InputError, match="min_items"):
        pr.prune(rm, min_items=10, fit_fn=SpyFit(rm))


def test_cli_prune_real_3pl_fit_drops_planted_noise_items_first(tmp_path, capsys):
    """Through `irtexam prune`: real MAP fits, planted a=0 items must be the first dropped."""
    import irtexam
    from irtexam.cli import main
    from irtexam.exam.schema import ExamItem, read_exam, write_exam

    rng = np.random.default_rng(0)
    a = rng.lognormal(0.2, 0.3, 30)
    a[-3:] = 0.0  # pure noise: answers do not depend on ability
    rm, _ = irtexam.simulate(30, 90, model="3pl", seed=3, a=a)
    noise = set(list(rm.items)[-3:])
    rm.save(tmp_path / "responses.csv")
    write_exam([ExamItem(id=i, question=f"What is {i}?", choices=["x", "y"], answer=0) for i in rm.items],
               tmp_path / "exam.jsonl")
    out = tmp_path / "out"
    assert main(["prune", str(tmp_path / "responses.csv"), "--model", "3pl", "--drop", "0.1", "--steps", "1",
                 "--method", "map", "--out", str(out), "--exam", str(tmp_path / "exam.jsonl")]) == 0
    printed = capsys.readouterr().out
    assert "pruned 30 -> 27 items" in printed
    dec = pd.read_csv(out / "decisions.csv").set_index("item")
    assert set(dec.index[dec["step_dropped"] == 1]) == noise
    assert dec["step_dropped"].isna().sum() == 27 and {"a", "information"} <= set(dec.columns)
    steps = pd.read_csv(out / "steps.csv")
    assert steps["n_items"].tolist() == [30, 27] and steps["heldout_loglik"].notna().all()
    assert steps["mean_information"].iloc[1] > steps["mean_information"].iloc[0]
    back = ResponseMatrix.read(out / "responses_pruned.csv")
    assert set(back.items) == set(rm.items) - noise
    k = list(rm.items).index(back.items[0])
    np.testing.assert_array_equal(back.values[0], rm.values[k])  # responses followed their item
    assert {it.id for it in read_exam(out / "exam_pruned.jsonl")} == set(back.items)
    assert (out / "information_evolution.png").read_bytes()[:4] == b"\x89PNG"
    assert irtexam.load_fit(out / "fit").items.shape[0] == 27


def test_mean_sigma_linking_keeps_probabilities_and_rescales_information():
    from irtexam.analysis import information as inf

    ref = np.array([-1.0, 0.0, 1.0, 2.0])
    now = 1.5 * ref - 0.3  # a refit that stretched and shifted the scale
    A, B = pr.linking_constants(now, ref)
    np.testing.assert_allclose(A * now + B, ref, atol=1e-12)
    items = pd.DataFrame({"a": [1.2, 0.8], "b": [0.1, -0.7], "c": [0.2, 0.1]}, index=["x", "y"])
    linked = pr.link_items(items, A, B)
    p_now = inf.prob_correct(now, items.a.values, items.b.values, items.c.values)
    p_ref = inf.prob_correct(ref, linked.a.values, linked.b.values, linked.c.values)
    np.testing.assert_allclose(p_now, p_ref, rtol=1e-10)
    i_now = inf.item_information(now, items.a.values, items.b.values, items.c.values)
    i_ref = inf.item_information(ref, linked.a.values, linked.b.values, linked.c.values)
    np.testing.assert_allclose(i_ref, i_now / A ** 2, rtol=1e-10)


def test_interrupted_prune_resumes_its_finished_rounds(tmp_path, monkeypatch, capsys):
    """Issue 27: `irtexam prune` keeps each round's fit beside --out; after an interruption a re-run loads the
    finished rounds instead of fitting them again, ends with the same steps table as an uninterrupted run,
    and removes the rounds once the prune is written."""
    import importlib

    import pandas as pd

    from irtexam.cli import main

    responses = tmp_path / "r.csv"
    assert main(["simulate", "--items", "14", "--examinees", "200", "--model", "2pl", "--seed", "3",
                 "--out", str(responses)]) == 0
    args = ["prune", str(responses), "--model", "2pl", "--method", "em", "--steps", "3", "--drop", "0.2",
            "--heldout", "0", "--min-items", "4"]
    assert main(args + ["--out", str(tmp_path / "whole")]) == 0
    fit_module = importlib.import_module("irtexam.irt.fit")
    real_fit, calls = fit_module.fit, []

    def counting(*a, **k):
        calls.append(1)
        if len(calls) == 3 and not getattr(counting, "resumed", False):
            raise KeyboardInterrupt
        return real_fit(*a, **k)

    monkeypatch.setattr(fit_module, "fit", counting)
    out = tmp_path / "cut"
    assert main(args + ["--out", str(out)]) == 130
    assert "a re-run of the same command resumes" in capsys.readouterr().err
    assert not out.exists()
    assert len([p for p in (tmp_path / ".cut.prune-rounds").iterdir() if p.name.startswith("step")]) == 2
    calls.clear()
    counting.resumed = True
    assert main(args + ["--out", str(out)]) == 0
    assert len(calls) == 2  # rounds 2 and 3 only: 0 and 1 were loaded
    assert not (tmp_path / ".cut.prune-rounds").exists()
    whole = pd.read_csv(tmp_path / "whole" / "steps.csv")
    resumed = pd.read_csv(out / "steps.csv")
    pd.testing.assert_frame_equal(whole[["step", "n_items"]], resumed[["step", "n_items"]])
    assert (whole["mean_information"] - resumed["mean_information"]).abs().max() < 1e-3
