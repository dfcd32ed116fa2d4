"""Served LLM levels in one `take` (concurrently) against one `take` per level (one after another).

Starts N local servers (``python -m irtexam.llm.server``, the packaged SmolLM2-135M, one
torch thread each, separate processes), then times (a) one `take` per level, run in turn
(the old workaround) and (b) one `take` over all levels, which now runs the served levels
concurrently. Prints the wall times and their ratio. Every answer of (b) must equal (a)'s.

    PYTHONPATH=. .venv/bin/python experiments/concurrent_levels.py --servers 2 --items 20 --answer generate
    PYTHONPATH=. .venv/bin/python experiments/concurrent_levels.py --servers 2 --items 20 --llamacpp --answer loglik

Measured on the shared 2-core machine (load 4): irtexam.llm.server, 2 levels x 16 items, generate:
21.7 s one take per level in turn, 32.6 s in one take (ratio 0.67); again at load 3: 21.9 s and
21.9 s (ratio 1.00), answers identical: two CPU-bound local servers gain nothing when other work
already fills both cores; experiments/concurrent_systems.py shows
the scheduler with endpoints that wait instead (ratio 3.05 for 3 systems).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def free_port() -> int:
    """A free TCP port on localhost."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Poll GET /models until the server answers."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server for {url} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/models", timeout=2).read()
            return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"server {url} not ready after {timeout} s")


def main() -> None:
    """Start the servers, run both schedules, print the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--answer", choices=["loglik", "generate"], default="generate")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", default="runs/concurrent_levels")
    parser.add_argument("--llamacpp", action="store_true",
                        help="serve the packaged GGUF with llama.cpp (patched, scores too) instead of irtexam.llm.server")
    args = parser.parse_args()
    from mmlu_grid import mmlu_items

    from irtexam.exam.schema import write_exam
    from irtexam.pipelines import load_spec, take_exam

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    exam, _ = mmlu_items(args.items, 0, seed=1)
    write_exam(exam, out / "exam.jsonl")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    procs, urls, llamas = [], [], []
    for _ in range(args.servers):
        if args.llamacpp:
            from irtexam.llm.registry import packaged_gguf
            from irtexam.llm.server import LlamaCppServer

            llamas.append(LlamaCppServer(packaged_gguf(args.model), alias=args.model, n_threads=1, patched=True))
            urls.append(llamas[-1].url)
            continue
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "irtexam.llm.server", args.model, "--port", str(port)],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        urls.append(f"http://127.0.0.1:{port}/v1")
    try:
        for server in llamas:
            server.start()
        for url, proc in zip(urls, procs):
            wait_ready(url, proc)
        levels = [f"  - {{name: '{u}', label: s{i}, answer: {args.answer}, max_new_tokens: 24, max_retries: 0}}\n"
                  for i, u in enumerate(urls)]
        head = "exam: exam.jsonl\nretrievers: [closed-book]\nicl: [0]\nbatch_items: 4\nllms:\n"
        for i, level in enumerate(levels):
            (out / f"one_{i}.yaml").write_text(head + level)
        (out / "all.yaml").write_text(head + "".join(levels))
        stamp = time.strftime("%H%M%S")
        t0 = time.perf_counter()
        for i in range(len(levels)):
            take_exam(load_spec(out / f"one_{i}.yaml"), out / f"seq_{stamp}_{i}", progress=False)
        sequential = time.perf_counter() - t0
        t0 = time.perf_counter()
        take_exam(load_spec(out / "all.yaml"), out / f"all_{stamp}", progress=False)
        together = time.perf_counter() - t0
        seq = {}
        for i in range(len(levels)):
            for line in (out / f"seq_{stamp}_{i}" / "answers.jsonl").read_text().splitlines():
                r = json.loads(line)
                seq[(r["pipeline"], r["item"])] = r.get("reply", r.get("chosen"))
        both = {}
        for line in (out / f"all_{stamp}" / "answers.jsonl").read_text().splitlines():
            r = json.loads(line)
            both[(r["pipeline"], r["item"])] = r.get("reply", r.get("chosen"))
        same = sum(seq[k] == both.get(k) for k in seq)
        print(f"{args.servers} served levels x {args.items} items ({args.answer}), {os.cpu_count()} CPU cores: "
              f"one take per level in turn {sequential:.1f} s, one take {together:.1f} s, "
              f"ratio {sequential / together:.2f}; identical answers {same}/{len(seq)}")
    finally:
        for server in llamas:
            server.stop()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
