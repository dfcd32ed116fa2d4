"""Black-box systems in one `take` run concurrently: wall time against one `take` per system.

Each system is a real HTTP endpoint (standard library server, in this process) that
answers after a fixed delay, as a remote RAG service or hosted model would; no CPU is
spent while it waits, so the numbers show the scheduler, not this machine's cores.

    PYTHONPATH=. .venv/bin/python experiments/concurrent_systems.py --systems 3 --items 16 --delay 0.25
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from irtexam.exam.schema import ExamItem, write_exam
from irtexam.pipelines import load_spec, take_exam

DELAY = [0.25]


class Slow(BaseHTTPRequestHandler):
    """Answers "A" after DELAY seconds."""

    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(DELAY[0])
        body = json.dumps({"answer": "A"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    """Time both schedules and print them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=3)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.25)
    parser.add_argument("--concurrency", type=int, default=1, help="max_concurrency of each system")
    args = parser.parse_args()
    DELAY[0] = args.delay
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/s"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_exam([ExamItem(id=f"q{i}", question=f"question {i}?", choices=["a", "b", "c", "d"], answer=i % 4)
                    for i in range(args.items)], tmp / "exam.jsonl")
        entries = [f"  - {{label: sys{i}, url: '{url}{i}', max_concurrency: {args.concurrency}}}\n"
                   for i in range(args.systems)]
        t0 = time.perf_counter()
        for i, entry in enumerate(entries):
            (tmp / f"one{i}.yaml").write_text("exam: exam.jsonl\nsystems:\n" + entry)
            take_exam(load_spec(tmp / f"one{i}.yaml"), tmp / f"one{i}", progress=False)
        apart = time.perf_counter() - t0
        (tmp / "all.yaml").write_text("exam: exam.jsonl\nsystems:\n" + "".join(entries))
        t0 = time.perf_counter()
        take_exam(load_spec(tmp / "all.yaml"), tmp / "all", progress=False)
        together = time.perf_counter() - t0
    server.shutdown()
    print(f"{args.systems} systems x {args.items} items, {args.delay} s per reply, max_concurrency "
          f"{args.concurrency}: one take per system {apart:.2f} s, one take {together:.2f} s, "
          f"ratio {apart / together:.2f}")


if __name__ == "__main__":
    main()
