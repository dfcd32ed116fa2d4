#!/usr/bin/env python3
"""Rebuild data/corpus/postgresql15-manual.jsonl.gz from Debian's postgresql-doc-15.

    cd /tmp && apt-get download postgresql-doc-15 && dpkg -x postgresql-doc-15_*.deb pgdoc
    .venv/bin/python scripts/build_corpus.py /tmp/pgdoc/usr/share/doc/postgresql-doc-15

Selection (deterministic): the server-administration chapters (configuration,
authentication, backup/WAL/replication, maintenance, monitoring, indexes,
concurrency, performance), the client and server applications (app-*), and the SQL
reference pages (sql-*) of the most used commands, up to ``--max-pages`` pages.
Pages whose text is shorter than ``--min-chars`` (tables of contents) are skipped and
counted. Navigation headers/footers and tables of contents are stripped. The licence
text is copied from the package's copyright file into data/corpus/LICENSE.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from irtexam.corpus.documents import Document, html_to_text, write_jsonl  # noqa: E402

PREFIXES = ("runtime", "auth", "client-authentication", "backup", "continuous-archiving", "wal", "routine",
            "maintenance", "monitoring", "hot-standby", "high-availability", "warm-standby", "logfile",
            "disk", "indexes", "mvcc", "performance-tips", "populate", "explicit-locking", "ssl",
            "upgrading", "creating-cluster", "kernel-resources", "server-", "app-", "using-explain",
            "planner-stats", "non-durability", "preventing-server-spoofing", "encryption-options",
            "storage-", "locale", "charset", "manage-ag", "user-manag", "role-", "database-roles",
            "default-roles", "predefined-roles", "ddl-", "errcodes-appendix", "log-shipping",
            "different-replication-solutions", "failover", "replication", "pgstat", "progress-reporting",
            "dynamic-trace", "install-post", "libpq-envars", "libpq-connect", "libpq-pgpass")
SQL_COMMANDS = ("alter-database", "alter-index", "alter-role", "alter-system", "alter-table", "analyze",
                "begin", "checkpoint", "cluster", "commit", "copy", "create-database", "create-function",
                "create-index", "create-materialized-view", "create-policy", "create-publication",
                "create-role", "create-schema", "create-sequence", "create-subscription", "create-table",
                "create-table-as", "create-tablespace", "create-trigger", "create-type", "create-user",
                "create-view", "delete", "drop-database", "drop-index", "drop-role", "drop-table",
                "explain", "grant", "insert", "listen", "lock", "merge", "notify", "prepare",
                "prepare-transaction", "refresh-materialized-view", "reindex", "reset", "revoke",
                "rollback", "savepoint", "select", "set", "set-transaction", "show", "start-transaction",
                "truncate", "update", "vacuum", "values", "set-role", "security-label", "discard",
                "declare", "fetch", "do", "call", "import-foreign-schema")


def licence_text(copyright_file: Path) -> str:
    """The PostgreSQL licence paragraph of the Debian copyright file, with attribution."""
    text = copyright_file.read_text(encoding="utf-8")
    # the stand-alone licence paragraph: "License: PostgreSQL" alone on its line, then indented text
    m = re.search(r"\n\nLicense: PostgreSQL\n((?: .*\n)+)", text)
    body = m.group(1) if m else ""
    body = "\n".join(line[1:] if line.startswith(" ") else line for line in body.splitlines())
    body = body.replace("\n.\n", "\n\n")
    return ("The documents in postgresql15-manual.jsonl.gz are text extracted from the PostgreSQL 15\n"
            "manual (Debian package postgresql-doc-15), lightly cleaned (HTML stripped, navigation\n"
            "removed) by scripts/build_corpus.py.\n\n"
            "Portions Copyright (c) 1996-2022, PostgreSQL Global Development Group\n"
            "Portions Copyright (c) 1994, The Regents of the University of California\n\n"
            "PostgreSQL Licence (from /usr/share/doc/postgresql-doc-15/copyright):\n\n" + body.strip() + "\n")


def select_pages(html_dir: Path, max_pages: int) -> list[Path]:
    """Administration pages first, then the SQL reference pages, sorted, capped."""
    pages = sorted(html_dir.glob("*.html"))
    admin = [p for p in pages if p.stem.startswith(PREFIXES)]
    sql = [html_dir / f"sql-{c}.html" for c in SQL_COMMANDS if (html_dir / f"sql-{c}.html").exists()]
    chosen = admin + [p for p in sql if p not in admin]
    return chosen[:max_pages]


def main(argv: list[str] | None = None) -> int:
    """Build the corpus; prints what was kept and skipped."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("doc_dir", type=Path, help="…/usr/share/doc/postgresql-doc-15 (holds html/ and copyright)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "corpus")
    ap.add_argument("--max-pages", type=int, default=300)
    ap.add_argument("--min-chars", type=int, default=800)
    args = ap.parse_args(argv)
    html_dir = args.doc_dir / "html"
    version = "15"
    docs, skipped = [], []
    for page in select_pages(html_dir, args.max_pages):
        text, title = html_to_text(page.read_text(encoding="utf-8"))
        if len(text) < args.min_chars:
            skipped.append(page.stem)
            continue
        docs.append(Document(page.stem, text, title, f"postgresql-doc-{version}:html/{page.name}"))
    args.out.mkdir(parents=True, exist_ok=True)
    write_jsonl(docs, args.out / "postgresql15-manual.jsonl.gz")
    (args.out / "LICENSE").write_text(licence_text(args.doc_dir / "copyright"), encoding="utf-8")
    chars = sum(len(d.text) for d in docs)
    print(f"kept {len(docs)} pages ({chars:,} characters); skipped {len(skipped)} short pages: "
          f"{', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
