"""Issue 16: verify the real run's exam (data/real_run/exam.jsonl) and measure its quality.

Stages (``--stage``):

* ``verify``: run :func:`irtexam.exam.verify.verify_items` on the 202 items with the
  verifier LLM (``--llm``, ``--dtype``, ``--threads``), the hand-labelled items first (so
  a cut-off run still scores them), through the committed call cache
  ``data/real_run/verification/cache/llm_cache.sqlite`` (resumable: re-run the same
  command). Writes ``data/real_run/verification/report.csv`` (one row per item),
  ``exam.verified.jsonl`` and ``summary.json``.
* ``analyze``: from those files and the published grid answers (no LLM): precision and
  recall of the verifier's non-keep verdicts and of the IRT ``wrong_key_flag`` against
  the hand labels (``hand_labels.csv``), the confusion tables of verdicts vs IRT flags,
  and the refit of the hierarchical 3PL on the kept items vs all items (RMSE vs
  baseline, held-out log-likelihood per cell, mean discrimination, share of items
  flagged, facet ranking). Writes ``analysis.json``, ``analysis.md`` and the figures in
  ``figures/verification/``; prints every number.
* ``replay``: the same verdicts from the call cache alone (no weights loaded), for every
  item whose calls are all cached (the others are skipped and counted): writes
  ``report.csv`` for a run in progress, or re-decides after a change of the rules.
* ``checkpoint``: fold the cache's write-ahead log into the database file (to commit it).

    nice -n 5 .venv/bin/python experiments/verify_real_run.py --stage verify \\
        > /tmp/verify_real_run.log 2>&1 &
    .venv/bin/python experiments/verify_real_run.py --stage analyze
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sqlite3
import sys
import time
import warnings
from pathlib import Path
from typing import Sequence

for _var, _value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TOKENIZERS_PARALLELISM", "false")):
    os.environ.setdefault(_var, _value)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "real_run"
OUT = DATA / "verification"
FIG = ROOT / "figures" / "verification"
CACHE = OUT / "cache"
NAMED_IN_ISSUE = ("warm-standby-failover#0/q0", "auth-delay#0/q0", "app-initdb#11/q0", "app-psql#9/q0",
                  "monitoring-stats#93/q0", "monitoring-stats#94/q0", "runtime-config-compatible#1/q0")
SAMPLE_SEED, SAMPLE_SIZE = 16, 45
# (source tag, seed, size): each draw is random.Random(seed).sample of the item ids (file order)
# not named in the issue and not drawn before; the fresh samples were labelled after the
# verifier's rules were fixed (seed 17) and before any of its verdicts were looked at (seed 18)
SAMPLES = (("random_seed16", SAMPLE_SEED, SAMPLE_SIZE), ("fresh_seed17", 17, 20), ("fresh_seed18", 18, 40),
           ("fresh_seed19", 19, 40), ("fresh_seed20", 20, 50))


def hand_label_draws(ids: list[str]) -> dict[str, list[str]]:
    """source tag -> its hand-labelled item ids: those named in issue 16, then the seeded samples in turn."""
    draws = {"named_in_issue": list(NAMED_IN_ISSUE)}
    for source, seed, size in SAMPLES:
        taken = {i for drawn in draws.values() for i in drawn}
        draws[source] = random.Random(seed).sample([i for i in ids if i not in taken], size)
    return draws


def hand_label_sample(ids: list[str]) -> list[str]:
    """The hand-labelled items in hand_labels.csv order: named in issue 16, then seeds 16, 17, 18."""
    return [i for drawn in hand_label_draws(ids).values() for i in drawn]


# the run got slow: the fresh sample second (seed 18 was drawn after the run)
SOURCE_ORDER = ("named_in_issue", "fresh_seed17", "random_seed16", "fresh_seed18", "fresh_seed19",
                "fresh_seed20")


def run_order(items: list) -> list:
    """The hand-labelled items first (named in the issue, the fresh sample, the first
    random sample; hand_labels.csv order within each), then the rest in file order."""
    if (OUT / "hand_labels.csv").exists():
        rows = read_hand_labels()
        labelled = sorted(rows, key=lambda i: SOURCE_ORDER.index(rows[i]["source"]))
    else:
        labelled = hand_label_sample([it.id for it in items])
    order = {iid: n for n, iid in enumerate(labelled)}
    return sorted(items, key=lambda it: order.get(it.id, len(order)))


def read_hand_labels(path: Path = OUT / "hand_labels.csv") -> dict[str, dict[str, str]]:
    """item -> row of hand_labels.csv."""
    with open(path, encoding="utf-8") as fh:
        return {row["item"]: row for row in csv.DictReader(fh)}


def stage_verify(args: argparse.Namespace) -> None:
    from irtexam.exam.schema import read_exam, write_exam
    from irtexam.exam.verify import VerifyConfig, verify_items, write_report
    from irtexam.llm import load_llm

    items = read_exam(DATA / "exam.jsonl")
    ordered = run_order(items)[:args.limit or len(items)]
    llm = load_llm(args.llm, dtype=args.dtype, num_threads=args.threads)
    config = VerifyConfig(permutations=args.permutations)
    started = time.time()
    kept, verdicts, summary = verify_items(ordered, llm, config=config, cache_dir=CACHE, progress=True)
    seconds = time.time() - started
    file_order = {it.id: n for n, it in enumerate(items)}
    verdicts.sort(key=lambda v: file_order[v.item])
    kept.sort(key=lambda it: file_order[it.id])
    OUT.mkdir(parents=True, exist_ok=True)
    write_report(verdicts, OUT / "report.csv")
    write_exam(kept, OUT / "exam.verified.jsonl")
    payload = {**summary.to_json(), "config": vars(args), "verify_config": config.__dict__,
               "seconds": round(seconds, 1), "loadavg_at_end": Path("/proc/loadavg").read_text().split()[:3]
               if Path("/proc/loadavg").exists() else None}
    (OUT / "summary.json").write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    print(summary.line())
    print(f"{seconds:.0f} s; report {OUT / 'report.csv'}")


class CacheOnly:
    """Replays a finished verification from the call cache without loading the weights:
    same backend name and chat template as ``TransformersLLM``; a cache miss is an error."""

    def __init__(self, name: str) -> None:
        from transformers import AutoTokenizer

        from irtexam.llm.registry import resolve_model_dir

        self.name, self.chat = name, True
        self.tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_dir(name)[0]))

    def format_prompt(self, prompt: str) -> str:
        return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)

    def score(self, requests):
        raise CacheMiss(f"cache miss for {len(requests)} request(s): run --stage verify first")


class CacheMiss(Exception):
    """A call that the cache does not hold (the item is not verified yet)."""


CacheOnly.__name__ = "TransformersLLM"  # the cache key names the backend class


def stage_replay(args: argparse.Namespace) -> None:
    """Verdicts of the items whose calls are all cached (the hand-labelled first), no model."""
    from irtexam.exam.schema import read_exam
    from irtexam.exam.verify import VerifyConfig, verify_items, write_report
    from irtexam.llm import CachedLLM

    items = read_exam(DATA / "exam.jsonl")
    llm = CachedLLM(CacheOnly(args.llm), CACHE)
    config = VerifyConfig(permutations=args.permutations)
    verdicts, skipped = [], 0
    for it in items:  # file order; an item whose calls are not all cached is skipped (counted)
        try:
            verdicts.extend(verify_items([it], llm, config=config)[1])
        except CacheMiss:
            skipped += 1
    write_report(verdicts, OUT / "report.csv")
    counts = {v: sum(x.verdict == v for x in verdicts) for v in ("keep", *FLAWED)}
    print(f"replayed {len(verdicts)} items from the cache ({skipped} not verified yet): {counts}; "
          f"re-keyed {sum(x.rekeyed for x in verdicts)}")


def stage_checkpoint(_: argparse.Namespace) -> None:
    db = CACHE / "llm_cache.sqlite"
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    print(f"checkpointed {db}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stage", choices=("verify", "replay", "analyze", "checkpoint"), required=True)
    p.add_argument("--llm", default="qwen2.5-coder-1.5b")
    p.add_argument("--dtype", default="float32", help="float32 on CPUs without bf16 units (AVX2 only)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--permutations", type=int, default=4)
    p.add_argument("--limit", type=int, default=None, help="only the first N items of the run order")
    args = p.parse_args(argv)
    if args.stage == "verify":
        stage_verify(args)
    elif args.stage == "analyze":
        stage_analyze(args)
    elif args.stage == "replay":
        stage_replay(args)
    else:
        stage_checkpoint(args)
    return 0


# ------------------------------------------------------------------ analysis
FLAWED = ("wrong_key", "multiple_correct", "unsupported", "malformed")


def precision_recall(truth: list[bool], predicted: list[bool]) -> dict[str, float | int]:
    """Precision = TP / (TP + FP), recall = TP / (TP + FN) of ``predicted`` against ``truth``."""
    tp = sum(t and p for t, p in zip(truth, predicted))
    fp = sum(p and not t for t, p in zip(truth, predicted))
    fn = sum(t and not p for t, p in zip(truth, predicted))
    return {"tp": tp, "fp": fp, "fn": fn, "tn": len(truth) - tp - fp - fn,
            "precision": tp / (tp + fp) if tp + fp else float("nan"),
            "recall": tp / (tp + fn) if tp + fn else float("nan")}


def hand_label_scores(report: "pd.DataFrame", flags: "pd.DataFrame", labels: dict[str, dict[str, str]],
                      subset: str | tuple[str, ...] | None = None) -> dict:
    """P/R of the verifier's non-keep verdicts (a re-keyed item counts as non-keep: its verdict
    is wrong_key) and of wrong_key_flag against the hand labels (flawed = label != sound), and
    the share of hand-judged sound items the verifier keeps; ``subset``: one source tag or several."""
    sources = (subset,) if isinstance(subset, str) else subset
    rows = [r for r in labels.values() if sources is None or r["source"] in sources]
    ids = [r["item"] for r in rows]
    truth = [r["label"] != "sound" for r in rows]
    verdict = report.set_index("item").loc[ids, "verdict"].tolist()
    verifier = [v != "keep" for v in verdict]
    irt = [bool(x) for x in flags.loc[ids, "wrong_key_flag"]]
    sound = [v for v, t in zip(verdict, truth) if not t]
    sound_flags = [f for f, t in zip(irt, truth) if not t]
    return {"n": len(rows), "n_flawed": sum(truth), "n_sound": len(sound),
            "verifier": precision_recall(truth, verifier), "irt_wrong_key_flag": precision_recall(truth, irt),
            "verifier_or_irt": precision_recall(truth, [a or b for a, b in zip(verifier, irt)]),
            "sound_kept_share": sum(v == "keep" for v in sound) / len(sound) if sound else float("nan"),
            "irt_sound_unflagged_share": (sum(not f for f in sound_flags) / len(sound_flags) if sound_flags
                                          else float("nan"))}


def key_support_rule_cv(report: "pd.DataFrame", labels: dict[str, dict[str, str]], folds: int = 10,
                        repeats: int = 20, seed: int = 0) -> dict:
    """How far the verifier's scores can go: the simplest rule on them, cross-validated.

    Rule: an item is flawed when a no-LLM check fires or the verifier's support of the key,
    s_key (the module doc of :mod:`irtexam.exam.verify`), is at most tau. tau is chosen on the
    training folds from a grid 0.20 .. 0.59 (the highest recall with precision >= 0.8 and
    >= 80% of sound items kept; else the highest precision + recall + sound-kept share) and applied
    to the held-out fold; ``repeats`` random fold splits. Also the choice on the first 152 labels
    (seeds <= 19) applied to the fifth sample (seed 20), and the in-sample curve.
    """
    import numpy as np

    rows = list(labels.values())
    rep = report.set_index("item").loc[[r["item"] for r in rows]]
    flawed = np.array([r["label"] != "sound" for r in rows])
    support = rep[[f"support_{x}" for x in "ABCD"]].apply(pd_to_float).to_numpy(float)
    key = np.array(["ABCD".index(k) for k in rep["key"]])
    s_key = support[np.arange(len(rows)), key]
    static = (rep["checks"].astype(str).str.len() > 0).to_numpy()
    grid = np.round(np.arange(0.20, 0.60, 0.01), 2)

    def predict(tau: float) -> "np.ndarray":
        return static | (~np.isnan(s_key) & (s_key <= tau))

    def metrics(pred: "np.ndarray", idx: "np.ndarray") -> tuple[float, float, float]:
        p, f = pred[idx], flawed[idx]
        tp = int((p & f).sum())
        return (tp / max(int(p.sum()), 1), tp / max(int(f.sum()), 1), int((~p & ~f).sum()) / max(int((~f).sum()), 1))

    def choose(idx: "np.ndarray") -> float:
        scored = [(metrics(predict(t), idx), t) for t in grid]
        good = [(m[1], t) for m, t in scored if m[0] >= 0.8 and m[2] >= 0.8]
        return max(good)[1] if good else max(scored, key=lambda c: sum(c[0]))[1]

    rng = np.random.default_rng(seed)
    cv = []
    for _ in range(repeats):
        fold = rng.permutation(len(rows)) % folds
        pred = np.zeros(len(rows), bool)
        for k in range(folds):
            train, test = np.where(fold != k)[0], np.where(fold == k)[0]
            pred[test] = predict(choose(train))[test]
        cv.append(metrics(pred, np.arange(len(rows))))
    source = np.array([r["source"] for r in rows])
    earlier, fifth = np.where(source != "fresh_seed20")[0], np.where(source == "fresh_seed20")[0]
    tau = choose(earlier)
    everything = np.arange(len(rows))
    return {"cv_mean": [float(x) for x in np.mean(cv, axis=0)], "cv_min": [float(x) for x in np.min(cv, axis=0)],
            "tau_on_first_152": float(tau), "first_152": list(metrics(predict(tau), earlier)),
            "seed20": list(metrics(predict(tau), fifth)) if len(fifth) else None,
            "in_sample": {f"{t:.2f}": list(metrics(predict(t), everything)) for t in (0.30, 0.35, 0.40, 0.45, 0.50)}}


def pd_to_float(column: "pd.Series") -> "pd.Series":
    """A report column to floats (empty cells, where a no-LLM check decided, become NaN)."""
    import pandas as pd

    return pd.to_numeric(column, errors="coerce")


def irt_flags(result) -> "pd.DataFrame":
    """Per item: wrong_key_flag, low_discrimination, negative item-rest correlation (as ``irtexam info``)."""
    from irtexam.analysis.diagnostics import diagnose

    items = diagnose(result)["items"]
    out = items[["wrong_key_flag", "low_discrimination", "item_rest_corr"]].copy()
    out["negative_item_rest"] = out["item_rest_corr"] < 0
    out["any_flag"] = out["wrong_key_flag"] | out["low_discrimination"] | out["negative_item_rest"]
    return out


def rescored_responses(kept_ids: list[str], rekeyed: dict[str, int]) -> "pd.DataFrame":
    """The published long response table restricted to ``kept_ids``; re-keyed items are
    rescored from the logged choice of every pipeline (answers.parquet ``chosen``)."""
    import pandas as pd

    long = pd.read_csv(DATA / "responses.csv.gz")
    long = long[long["item"].isin(kept_ids)].copy()
    if rekeyed:
        answers = pd.read_parquet(DATA / "answers.parquet", columns=["pipeline", "item", "chosen"])
        answers = answers[answers["item"].isin(list(rekeyed))]
        new = {(r.pipeline, r.item): int(r.chosen == rekeyed[r.item]) for r in answers.itertuples()}
        mask = long["item"].isin(list(rekeyed))
        long.loc[mask, "response"] = [new[(e, i)] for e, i in zip(long.loc[mask, "examinee"], long.loc[mask, "item"])]
    return long


def fit_summary(long: "pd.DataFrame") -> tuple[dict, "pd.DataFrame", object]:
    """Hierarchical 3PL (llm + retriever + icl, 10% held out, seed 0): headline numbers,
    per-item flags, and the fit."""
    import irtexam
    from irtexam.responses import ResponseMatrix

    rm = ResponseMatrix.from_long(long.reset_index(drop=True))
    with warnings.catch_warnings():  # all-correct / all-wrong items and k-hat notes: expected here
        warnings.simplefilter("ignore", UserWarning)
        result = irtexam.fit(rm, model="3pl", facets=["llm", "retriever", "icl"], heldout=0.1, seed=0)
    flags = irt_flags(result)
    st = result.fit_stats
    facets = result.facets
    ranking = {f: facets[facets["facet"] == f].sort_values("theta", ascending=False)["level"].tolist()
               for f in ("llm", "retriever", "icl")}
    summary = {"n_items": rm.n_items, "n_cells": int(st["n_observed"]), "rmse": st["rmse"],
               "rmse_baseline": st["rmse_baseline"], "heldout_loglik_per_cell": st["heldout_loglik"],
               "heldout_loglik_baseline": st.get("heldout_loglik_baseline"), "heldout_rmse": st.get("heldout_rmse"),
               "mean_discrimination": float(result.items["a"].mean()),
               "median_discrimination": float(result.items["a"].median()),
               "share_wrong_key_flag": float(flags["wrong_key_flag"].mean()),
               "share_low_discrimination": float(flags["low_discrimination"].mean()),
               "share_negative_item_rest": float(flags["negative_item_rest"].mean()),
               "share_any_flag": float(flags["any_flag"].mean()),
               "facet_ranking": ranking,
               "facet_theta": {f"{r.facet}={r.level}": float(r.theta) for r in facets.itertuples()}}
    return summary, flags, result


def matched_heldout(all_long: "pd.DataFrame", kept_ids: list[str], kept_long: "pd.DataFrame",
                    fraction: float = 0.1, seed: int = 0, rekeyed: Sequence[str] = ()) -> dict[str, float]:
    """Held-out log-likelihood per cell on the same cells, with the same responses, for both fits.

    A seeded ``fraction`` of all (item, pipeline) cells is hidden; the 3PL is fitted on
    the rest of all items and on the rest of the kept items; both are scored on the
    hidden cells of the kept items that were not re-keyed: mean of y log p + (1 - y) log(1 - p).
    This isolates what the flawed items do to the estimates of everything else (the fit's own
    held-out score also changes with which items are averaged over). Re-keyed items are left
    out of the score: their responses differ between the two fits (the fit on all items was
    trained on the old key), so scoring it against the new key would credit re-keying, not
    the fit (an earlier version of this comparison did that).
    """
    import irtexam
    import numpy as np
    from irtexam.responses import ResponseMatrix

    rng = np.random.default_rng(seed)
    hidden = rng.random(len(all_long)) < fraction
    key = all_long["item"] + "\x00" + all_long["examinee"]
    hidden_keys = set(key[hidden])
    scored = [i for i in kept_ids if i not in set(rekeyed)]
    test = all_long[hidden & all_long["item"].isin(scored)]
    test = test.assign(response=kept_long.set_index(["item", "examinee"]).loc[
        list(zip(test["item"], test["examinee"])), "response"].to_numpy())
    out = {"cells": int(len(test)), "items": len(scored), "rekeyed_left_out": len(kept_ids) - len(scored)}
    for name, long in (("all_items", all_long), ("kept_items", kept_long)):
        train = long[~(long["item"] + "\x00" + long["examinee"]).isin(hidden_keys)]
        rm = ResponseMatrix.from_long(train.reset_index(drop=True))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            result = irtexam.fit(rm, model="3pl", facets=["llm", "retriever", "icl"], seed=seed, se=False)
        p = np.asarray(result.predict(), dtype=float)
        row = {it: i for i, it in enumerate(rm.items)}
        col = {ex: j for j, ex in enumerate(rm.examinees)}
        pt = np.clip(np.array([p[row[i], col[e]] for i, e in zip(test["item"], test["examinee"])]), 1e-9, 1 - 1e-9)
        y = test["response"].to_numpy(dtype=float)
        out[name] = float(np.mean(y * np.log(pt) + (1 - y) * np.log(1 - pt)))
    return out


def confusion(report: "pd.DataFrame", flags: "pd.DataFrame") -> "pd.DataFrame":
    """Verdict x IRT flag counts (an item counts in every flag it has)."""
    import pandas as pd

    joined = report.set_index("item")[["verdict"]].join(flags)
    rows = []
    for verdict in ("keep",) + FLAWED:
        sub = joined[joined["verdict"] == verdict]
        rows.append({"verdict": verdict, "n": len(sub), "wrong_key_flag": int(sub["wrong_key_flag"].sum()),
                     "low_discrimination": int(sub["low_discrimination"].sum()),
                     "negative_item_rest": int(sub["negative_item_rest"].sum()),
                     "any_irt_flag": int(sub["any_flag"].sum()), "no_irt_flag": int((~sub["any_flag"]).sum())})
    table = pd.DataFrame(rows)
    total = table.drop(columns="verdict").sum()
    return pd.concat([table, pd.DataFrame([{"verdict": "all", **total.to_dict()}])], ignore_index=True)


def two_by_two(report: "pd.DataFrame", flags: "pd.DataFrame", flag: str) -> "pd.DataFrame":
    """Verifier (keep / removes or re-keys) x one IRT flag (yes / no), item counts."""
    import pandas as pd

    joined = report.set_index("item")[["verdict"]].join(flags)
    verifier = joined["verdict"].map(lambda v: "keep" if v == "keep" else "removes or re-keys")
    table = pd.crosstab(verifier, joined[flag].map({True: f"{flag}", False: f"no {flag}"}))
    return table.reindex(index=["keep", "removes or re-keys"], columns=[flag, f"no {flag}"], fill_value=0)


def label_table(report: "pd.DataFrame", labels: dict[str, dict[str, str]]) -> "pd.DataFrame":
    """Hand label x verdict counts."""
    import pandas as pd

    frame = pd.DataFrame([{"label": r["label"], "verdict": report.set_index("item").loc[i, "verdict"]}
                          for i, r in labels.items()])
    return pd.crosstab(frame["label"], frame["verdict"]).reindex(columns=["keep", *FLAWED], fill_value=0)


def plot(report: "pd.DataFrame", flags: "pd.DataFrame", base_result, kept_result) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    FIG.mkdir(parents=True, exist_ok=True)
    joined = report.set_index("item")[["verdict"]].join(flags)
    order = ["keep", *FLAWED]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    flagged = [int(joined[joined.verdict == v]["any_flag"].sum()) for v in order]
    clean = [int((joined.verdict == v).sum()) - f for v, f in zip(order, flagged)]
    ax.bar(order, clean, color="#4c72b0", label="no IRT flag")
    ax.bar(order, flagged, bottom=clean, color="#dd8452", label="an IRT flag (wrong key, low a, r_ir < 0)")
    ax.set_ylabel("items")
    ax.set_title(f"Verifier verdicts on the real-run exam ({len(joined)} of {len(flags)} items verified)")
    ax.legend(frameon=False, fontsize=8, loc="upper right")
    fig.tight_layout()
    paths = [FIG / "verdicts_vs_irt_flags.png"]
    fig.savefig(paths[0], dpi=130)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    a_all = base_result.items["a"]
    ax.hist([a_all[joined.index[joined.verdict == "keep"]], a_all[joined.index[joined.verdict != "keep"]]],
            bins=20, stacked=True, color=["#4c72b0", "#dd8452"], label=["verifier keeps", "verifier removes/re-keys"])
    ax.axvline(a_all.mean(), color="k", ls="--", lw=1, label=f"mean a, all items ({a_all.mean():.2f})")
    ax.axvline(kept_result.items["a"].mean(), color="#4c72b0", ls=":", lw=1.5,
               label=f"mean a, refit on kept ({kept_result.items['a'].mean():.2f})")
    ax.set_xlabel("discrimination a (fit on all 202 items)")
    ax.set_ylabel("items")
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    paths.append(FIG / "discrimination_by_verdict.png")
    fig.savefig(paths[1], dpi=130)
    plt.close(fig)
    return paths


def markdown(frame: "pd.DataFrame", index: bool = True) -> str:
    """A GitHub markdown table of a small DataFrame (no tabulate dependency)."""
    frame = frame.reset_index() if index else frame
    head = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def _fmt_pr(d: dict) -> str:
    return f"precision {d['precision']:.2f} ({d['tp']}/{d['tp'] + d['fp']}), recall {d['recall']:.2f} ({d['tp']}/{d['tp'] + d['fn']})"


def stage_analyze(_: argparse.Namespace) -> None:
    import pandas as pd

    from irtexam.exam.schema import read_exam

    report = pd.read_csv(OUT / "report.csv", keep_default_na=False)
    labels = read_hand_labels()
    draws = hand_label_draws([it.id for it in read_exam(DATA / "exam.jsonl")])
    for source, drawn in draws.items():  # hand_labels.csv holds exactly the seeded draws
        held = {i for i, r in labels.items() if r["source"] == source}
        if held and held != set(drawn):
            raise SystemExit(f"hand_labels.csv: the {source} rows are not the items hand_label_draws() gives")
    missing = [i for i in labels if i not in set(report["item"])]
    if missing:  # a partial run: score the verified hand-labelled items only, and say so
        print(f"note: {len(missing)} of {len(labels)} hand-labelled items are not verified yet; scoring the "
              f"{len(labels) - len(missing)} that are")
        labels = {i: r for i, r in labels.items() if i not in missing}
    all_long = pd.read_csv(DATA / "responses.csv.gz")
    base, base_flags, base_result = fit_summary(all_long)
    rekeyed = {r.item: "ABCD".index(r.new_key) for r in report.itertuples() if str(r.rekeyed) == "True"}
    removed = {r.item for r in report.itertuples() if r.verdict != "keep" and r.item not in rekeyed}
    all_ids = list(dict.fromkeys(all_long["item"]))
    unverified = [i for i in all_ids if i not in set(report["item"])]  # a partial run: still in the exam
    kept_ids = [i for i in all_ids if i not in removed]
    kept, kept_flags, kept_result = fit_summary(rescored_responses(kept_ids, rekeyed))
    keep_only = [i for i in kept_ids if i not in rekeyed]
    strict, _, _ = fit_summary(rescored_responses(keep_only, {}))
    matched = matched_heldout(all_long, kept_ids, rescored_responses(kept_ids, rekeyed), rekeyed=list(rekeyed))
    scores = {"all": hand_label_scores(report, base_flags, labels),
              "first sample, random part (seed 16)": hand_label_scores(report, base_flags, labels, "random_seed16"),
              "fresh sample (seed 17)": hand_label_scores(report, base_flags, labels, "fresh_seed17"),
              "fresh sample (seed 18, labelled blind to the verdicts)":
                  hand_label_scores(report, base_flags, labels, "fresh_seed18"),
              "fresh samples (seeds 17 + 18)":
                  hand_label_scores(report, base_flags, labels, ("fresh_seed17", "fresh_seed18")),
              "fresh sample (seed 19, labelled blind; held out from the session-14 rule changes)":
                  hand_label_scores(report, base_flags, labels, "fresh_seed19"),
              "fresh samples (seeds 17 + 18 + 19)":
                  hand_label_scores(report, base_flags, labels, ("fresh_seed17", "fresh_seed18", "fresh_seed19")),
              "fresh sample (seed 20, labelled blind; no rule change since it was drawn)":
                  hand_label_scores(report, base_flags, labels, "fresh_seed20"),
              "blind samples held out from every rule change (seeds 19 + 20)":
                  hand_label_scores(report, base_flags, labels, ("fresh_seed19", "fresh_seed20")),
              "fresh samples (seeds 17 + 18 + 19 + 20)":
                  hand_label_scores(report, base_flags, labels,
                                    ("fresh_seed17", "fresh_seed18", "fresh_seed19", "fresh_seed20"))}
    rule_cv = key_support_rule_cv(report, labels)
    sound_ids = [i for i in all_ids if i in labels and labels[i]["label"] == "sound"]
    oracle = None
    if len(labels) == len(all_ids):  # every item hand-labelled: what a perfect verifier would give
        oracle, _, _ = fit_summary(rescored_responses(sound_ids, {}))
        matched_oracle = matched_heldout(all_long, sound_ids, rescored_responses(sound_ids, {}))
    conf = confusion(report, base_flags)
    by_label = label_table(report, labels)
    by_label_18 = label_table(report, {i: r for i, r in labels.items() if r["source"] == "fresh_seed18"})
    by_label_19 = label_table(report, {i: r for i, r in labels.items() if r["source"] == "fresh_seed19"})
    by_label_20 = label_table(report, {i: r for i, r in labels.items() if r["source"] == "fresh_seed20"})
    figures = plot(report, base_flags, base_result, kept_result)
    counts = report["verdict"].value_counts().reindex(["keep", *FLAWED], fill_value=0).to_dict()
    payload = {"verified": len(report), "unverified": len(unverified), "verdicts": counts, "rekeyed": len(rekeyed),
               "kept": len(kept_ids), "hand_labels": scores,
               "confusion": conf.to_dict(orient="records"), "hand_label_x_verdict": by_label.to_dict(),
               "hand_label_x_verdict_fresh_seed18": by_label_18.to_dict(),
               "hand_label_x_verdict_fresh_seed19": by_label_19.to_dict(),
               "hand_label_x_verdict_fresh_seed20": by_label_20.to_dict(),
               "key_support_rule_cv": rule_cv,
               "fit_hand_labelled_sound_items": oracle,
               "matched_heldout_loglik_per_cell_hand_sound": matched_oracle if oracle else None,
               "fit_all_items": base, "fit_kept_items": kept, "fit_keep_verdict_only": strict,
               "matched_heldout_loglik_per_cell": matched,
               "facet_ranking_changed": {f: base["facet_ranking"][f] != kept["facet_ranking"][f]
                                         for f in base["facet_ranking"]},
               "figures": [str(p.relative_to(ROOT)) for p in figures]}
    (OUT / "analysis.json").write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    lines = ["# Verification of data/real_run/exam.jsonl (issue 16)", "",
             f"Verified {len(report)} of {len(all_ids)} items"
             + (f" ({len(unverified)} not yet verified stay in the exam)" if unverified else "")
             + f". Verdicts: {counts}; re-keyed {len(rekeyed)}; kept {len(kept_ids)} of {len(all_ids)}.", ""]
    for name, sc in scores.items():
        lines += [f"## Hand labels ({name}: {sc['n']} items, {sc['n_flawed']} flawed, {sc['n_sound']} sound)", "",
                  f"* verifier non-keep: {_fmt_pr(sc['verifier'])}; keeps {sc['sound_kept_share']:.0%} of sound items",
                  f"* IRT wrong_key_flag: {_fmt_pr(sc['irt_wrong_key_flag'])}; leaves "
                  f"{sc['irt_sound_unflagged_share']:.0%} of sound items unflagged",
                  f"* verifier or IRT flag: {_fmt_pr(sc['verifier_or_irt'])}", ""]
    lines += ["## Hand label x verdict", "", markdown(by_label), "",
              "Fresh sample (seed 18) alone:", "", markdown(by_label_18), "",
              "Fresh sample (seed 19) alone:", "", markdown(by_label_19), "",
              "Fresh sample (seed 20) alone:", "", markdown(by_label_20), "",
              "## How far the verifier's scores go: one threshold on the key's support, cross-validated", "",
              "Rule: flawed when a no-LLM check fires or the key's support s_key <= tau; tau chosen on the "
              "training folds (highest recall with precision >= 0.8 and >= 80% of sound items kept). "
              f"10-fold cross-validation over the {len(labels)} labels, 20 random splits: precision "
              f"{rule_cv['cv_mean'][0]:.2f}, recall {rule_cv['cv_mean'][1]:.2f}, sound kept "
              f"{rule_cv['cv_mean'][2]:.0%} (mean; worst split {rule_cv['cv_min'][0]:.2f} / "
              f"{rule_cv['cv_min'][1]:.2f} / {rule_cv['cv_min'][2]:.0%}). tau chosen on the first 152 labels: "
              f"{rule_cv['tau_on_first_152']:.2f} (there {rule_cv['first_152'][0]:.2f} / {rule_cv['first_152'][1]:.2f} / "
              f"{rule_cv['first_152'][2]:.0%}); on the fifth sample (seed 20): "
              + (f"{rule_cv['seed20'][0]:.2f} / {rule_cv['seed20'][1]:.2f} / {rule_cv['seed20'][2]:.0%}."
                 if rule_cv["seed20"] else "-."), "",
              "In-sample (precision / recall / sound kept) by tau: "
              + "; ".join(f"{t}: {v[0]:.2f} / {v[1]:.2f} / {v[2]:.0%}" for t, v in rule_cv["in_sample"].items()), "",
              "## Verdict x IRT flags (fit on all 202 items)", "", markdown(conf, index=False), "",
              "Verifier x IRT flag (2 x 2):", "", markdown(two_by_two(report, base_flags, "wrong_key_flag")), "",
              markdown(two_by_two(report, base_flags, "any_flag")), "",
              "## Refit of the hierarchical 3PL (llm + retriever + icl, 10% of cells held out, seed 0)", "",
              "| | all items | kept (keep + re-keyed) | keep verdict only |"
              + (" sound by hand label |" if oracle else ""), "|---|---:|---:|---:|" + ("---:|" if oracle else "")]
    fits = (base, kept, strict) + ((oracle,) if oracle else ())
    for key in ("n_items", "n_cells", "rmse", "rmse_baseline", "heldout_loglik_per_cell", "heldout_loglik_baseline",
                "mean_discrimination", "median_discrimination", "share_wrong_key_flag", "share_low_discrimination",
                "share_negative_item_rest", "share_any_flag"):
        vals = [d[key] for d in fits]
        lines.append(f"| {key} | " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in vals) + " |")
    for f in base["facet_ranking"]:
        lines.append(f"| ranking {f} | " + " | ".join(" > ".join(d["facet_ranking"][f]) for d in fits)
                     + " |")
    lines += ["", f"Held-out log-likelihood per cell on the same {matched['cells']} hidden cells of the "
              f"{matched['items']} kept items that were not re-keyed (10% of all cells hidden, seed 0; the "
              f"{matched['rekeyed_left_out']} re-keyed items are left out: their responses differ between the fits): "
              f"fit on all items {matched['all_items']:.4f}, fit on kept items {matched['kept_items']:.4f}."]
    if oracle:
        lines += ["", f"The same for the {len(sound_ids)} items judged sound by hand (a perfect verifier, no re-keying), on "
                  f"their {matched_oracle['cells']} hidden cells: fit on all items {matched_oracle['all_items']:.4f}, fit on "
                  f"the sound items {matched_oracle['kept_items']:.4f}."]
    (OUT / "analysis.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print("figures: " + ", ".join(payload["figures"]))


if __name__ == "__main__":
    sys.exit(main())
