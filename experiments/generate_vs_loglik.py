"""Generate vs log-likelihood answering on MMLU with one packaged model, in one `take`.

Two levels of the same model take the same closed-book MMLU exam (the seeded,
topic-balanced sample of experiments/mmlu_grid.py): ``answer: loglik`` (the default,
length-normalised log-likelihood) and ``answer: generate`` (asked for a letter, the
free-text reply graded by irtexam.grading.reply). Prints both accuracies, the agreement
of the picks, the share of each grading route, and questions/s of each mode (from the
per-answer timings). Resumable: re-run the same command. Replies are kept in
<out>/answers.jsonl for hand labelling.

    PYTHONPATH=. .venv/bin/python experiments/generate_vs_loglik.py --model qwen2.5-coder-0.5b --items 100
    PYTHONPATH=. .venv/bin/python experiments/generate_vs_loglik.py --model smollm2-135m --items 40 --served
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def start_server(model: str) -> tuple[subprocess.Popen, str]:
    """Serve ``model`` with ``python -m irtexam.llm.server`` on a free port; (process, API root)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "irtexam.llm.server", model, "--port", str(port)],
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/models", timeout=2).read()
            return proc, url
        except OSError:
            time.sleep(1)
    raise SystemExit("the server did not start in 600 s")


def main() -> None:
    """Run the two levels and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--items", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", default="runs/generate_vs_loglik")
    parser.add_argument("--served", action="store_true",
                        help="serve the model over HTTP (python -m irtexam.llm.server) and time each mode's take")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from mmlu_grid import mmlu_items

    from irtexam.exam.schema import write_exam
    from irtexam.grading.reply import ROUTES
    from irtexam.pipelines import load_spec, take_exam

    out = Path(args.out) / (args.model + ("-served" if args.served else ""))
    out.mkdir(parents=True, exist_ok=True)
    exam, _ = mmlu_items(args.items, 0, seed=0)
    write_exam(exam, out / "exam.jsonl")
    levels = [f"  - {{name: {{M}}, label: loglik}}\n",
              f"  - {{name: {{M}}, label: generate, answer: generate, max_new_tokens: {args.max_new_tokens}}}\n"]
    server = None
    model = args.model
    if args.served:
        server, model = start_server(args.model)
    try:
        walls = {}
        # served: one take per mode (timed apart; the server answers one request at a time);
        # local: both levels in one take (one loaded model)
        groups = [[0], [1]] if args.served else [[0, 1]]
        runs = [out / ("run_" + ["loglik", "generate"][g[0]] if args.served else "run") for g in groups]
        for group, run_dir in zip(groups, runs):
            (out / "spec.yaml").write_text(
                "exam: exam.jsonl\nllms:\n" + "".join(levels[i].replace("{M}", f"'{model}'") for i in group)
                + "retrievers: [closed-book]\nicl: [0]\nbatch_items: 8\n")
            t0 = time.perf_counter()
            result = take_exam(load_spec(out / "spec.yaml"), run_dir, progress=True)
            walls["+".join(["loglik", "generate"][i] for i in group)] = time.perf_counter() - t0
            print(result.summary())
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    import pandas as pd

    table = pd.concat([pd.read_parquet(r / "answers.parquet") for r in runs])  # tables hold the current grading
    ll = {r["item"]: r for r in table[table["llm"] == "loglik"].to_dict("records")}
    gen = {r["item"]: r for r in table[table["llm"] == "generate"].to_dict("records")}
    both = sorted(set(ll) & set(gen))
    n = len(both)
    routes = {r: sum(gen[i]["grading"] == r for i in both) for r in ROUTES}
    graded = [i for i in both if gen[i]["grading"] in ("letter", "text", "embedding")]
    agree = sum(gen[i]["chosen"] == ll[i]["chosen"] for i in graded)
    print(f"model {args.model}, {n} MMLU items, closed-book, ICL 0")
    print(f"accuracy loglik {sum(ll[i]['correct'] for i in both) / n:.3f}, "
          f"generate {sum(gen[i]['correct'] for i in both) / n:.3f} (abstained/unparseable score 0)")
    print(f"generate pick == loglik pick on {agree}/{len(graded)} graded replies "
          f"({agree / max(len(graded), 1):.3f}); {agree}/{n} of all items")
    print("grading routes: " + ", ".join(f"{r} {c} ({c / n:.0%})" for r, c in routes.items()))
    for mode, rows in (("loglik", ll), ("generate", gen)):
        seconds = sum(rows[i]["seconds"] for i in both)
        print(f"{mode}: {n / seconds:.2f} questions/s ({seconds:.0f} s of model time)")
    if args.served:
        print("served, wall time per take: " + ", ".join(f"{k} {v:.1f} s ({n / v:.2f} questions/s)"
                                                        for k, v in walls.items()))


if __name__ == "__main__":
    main()
