"""A minimal RAG service speaking irtexam's black-box protocol (standard library only).

    python examples/http_service.py --port 8765
    # spec: systems: [{label: assistant-v1, url: "http://127.0.0.1:8765/answer"}]

irtexam POSTs ``{"id": ..., "question": ..., "choices": [...]}`` and reads
``{"answer": "<free text>", "contexts": [...]}``. Here the answer comes from the example
chain in langchain_wrapper.py; put your own service's handler in its place.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from langchain_wrapper import answer  # noqa: E402


class Handler(BaseHTTPRequestHandler):
    """POST /answer -> {"answer", "contexts"}; anything else -> 404; a bad body -> 400."""

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/answer":
            return self._send(404, {"error": f"no route {self.path}"})
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            question, choices = body["question"], body["choices"]
        except (ValueError, KeyError, TypeError) as exc:
            return self._send(400, {"error": f"bad request: {exc}"})
        self._send(200, answer(question, choices))

    def _send(self, code: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"serving on http://{args.host}:{server.server_address[1]}/answer", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
