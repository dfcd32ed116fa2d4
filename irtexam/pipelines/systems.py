"""Black-box RAG systems taking the exam: an HTTP endpoint or a Python function per spec entry.

Protocol (the spec's ``systems:`` list, see :mod:`irtexam.pipelines.spec`):

* ``url``: irtexam POSTs ``{"id": ..., "question": ..., "choices": [...]}`` (choices in the
  order shown, lettered A, B, C, ... in that order) and reads ``{"answer": "<free text>"}``,
  optionally with ``"contexts": [...]`` (the passages the system used);
* ``python: module:function``: ``function(question, choices)`` returns the free-text answer
  or the same dict as the HTTP reply.

Every failure (endpoint down, HTTP error, malformed JSON, no ``answer`` field, timeout,
an import error or an exception in the function) raises :class:`SystemCallError`, one
line naming the system and the item; nothing is scored for that item.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Mapping, Sequence

from ..errors import IrtexamError
from ..exam.schema import ExamItem

RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


class SystemCallError(IrtexamError):
    """A black-box system failed on one item; the message names the system and the item."""

    def __init__(self, label: str, item: str, message: str) -> None:
        super().__init__(f"system {label!r}, item {item!r}: {message}")
        self.label, self.item = label, item


def request_body(item: ExamItem) -> dict[str, Any]:
    """The JSON object sent for one item."""
    return {"id": item.id, "question": item.question, "choices": list(item.choices)}


def parse_reply(reply: Any) -> dict[str, Any]:
    """Check a system's reply (a string, or a dict with ``answer`` and optional ``contexts``).

    Returns ``{"answer": str, "contexts": list[str] | None}``; raises ``ValueError`` with the reason.
    """
    if isinstance(reply, str):
        return {"answer": reply, "contexts": None}
    if not isinstance(reply, Mapping):
        raise ValueError(f"reply must be a JSON object or a string, got {type(reply).__name__}")
    if "answer" not in reply:
        raise ValueError(f"reply has no 'answer' field (keys: {sorted(map(str, reply))[:8]})")
    answer = reply["answer"]
    if answer is None:
        answer = ""
    if not isinstance(answer, str):
        raise ValueError(f"'answer' must be a string, got {type(answer).__name__}")
    contexts = reply.get("contexts")
    if contexts is not None and not (isinstance(contexts, list) and all(isinstance(c, str) for c in contexts)):
        raise ValueError("'contexts' must be a list of strings")
    return {"answer": answer, "contexts": contexts}


def post_item(entry: Mapping[str, Any], item: ExamItem) -> dict[str, Any]:
    """POST one item to a ``url`` system; retries connection errors, timeouts and 408/429/5xx."""
    label, url = entry["label"], entry["url"]
    headers = {"Content-Type": "application/json"}
    if entry.get("api_key_env"):
        key = os.environ.get(entry["api_key_env"])
        if not key:
            raise SystemCallError(label, item.id, f"environment variable {entry['api_key_env']} (the API key) is not set")
        headers["Authorization"] = "Bearer " + key
    data = json.dumps(request_body(item)).encode("utf-8")
    retries = int(entry.get("max_retries", 2))
    last = ""
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=data, method="POST", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=float(entry.get("timeout", 120.0))) as resp:
                raw = resp.read().decode("utf-8", errors="replace")
            try:
                payload = json.loads(raw)
            except json.JSONDecodeError:
                raise SystemCallError(label, item.id, f"POST {url}: reply is not JSON: {raw[:80]!r}") from None
            try:
                return parse_reply(payload)
            except ValueError as exc:
                raise SystemCallError(label, item.id, f"POST {url}: {exc}") from None
        except urllib.error.HTTPError as exc:
            body = exc.read().decode(errors="replace")[:120].replace("\n", " ")
            last = f"HTTP {exc.code}: {body}"
            if exc.code not in RETRY_STATUS:
                break
        except (TimeoutError, OSError) as exc:  # URLError, ConnectionError, socket.timeout
            reason = getattr(exc, "reason", exc)
            timed_out = isinstance(exc, TimeoutError) or isinstance(reason, TimeoutError) or "timed out" in str(reason)
            last = (f"no reply within {entry.get('timeout', 120.0)} s" if timed_out
                    else f"cannot reach the endpoint ({type(reason).__name__}: {reason})")
        if attempt < retries:
            time.sleep(min(10.0, 0.5 * 2 ** attempt))
    tries = f" after {retries + 1} attempts" if retries else ""
    raise SystemCallError(label, item.id, f"POST {url} failed{tries}: {last}")


def load_function(target: str) -> Callable[..., Any]:
    """Import ``module:function`` (the working directory is on the path); raises ``ImportError``/``AttributeError``."""
    module_name, func_name = target.split(":", 1)
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    func = getattr(module, func_name)
    if not callable(func):
        raise AttributeError(f"{target} is not callable")
    return func


def call_python(entry: Mapping[str, Any], item: ExamItem, cache: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """Call a ``python`` system on one item (the function is imported once, into ``cache``)."""
    label, target = entry["label"], entry["python"]
    if target not in cache:
        try:
            cache[target] = load_function(target)
        except Exception as exc:  # ImportError, AttributeError, or anything the module raises on import
            raise SystemCallError(label, item.id, f"cannot import {target} ({type(exc).__name__}: {exc})") from None
    try:
        reply = cache[target](item.question, list(item.choices))
    except Exception as exc:
        message = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise SystemCallError(label, item.id, f"{target} raised {type(exc).__name__}: {message}") from None
    try:
        return parse_reply(reply)
    except ValueError as exc:
        raise SystemCallError(label, item.id, f"{target}: {exc}") from None


def ask_system(entry: Mapping[str, Any], item: ExamItem, cache: dict[str, Callable[..., Any]]) -> dict[str, Any]:
    """One item to one system (url or python); ``{"answer", "contexts"}`` or :class:`SystemCallError`."""
    if "url" in entry:
        return post_item(entry, item)
    return call_python(entry, item, cache)


def contexts_contain(contexts: Sequence[str] | None, passage_text: str | None) -> bool | None:
    """Whether the item's source passage is among the contexts a system reported (None: unknown)."""
    if contexts is None or not passage_text:
        return None
    norm = " ".join(passage_text.split()).lower()
    probe = norm[:200]
    for c in contexts:
        c_norm = " ".join(c.split()).lower()
        if probe and (probe in c_norm or (len(c_norm) >= 50 and c_norm in norm)):
            return True
    return False
