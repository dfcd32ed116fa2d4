#!/usr/bin/env bash
# Build the documentation site into site/ (open site/index.html).
#
#   scripts/docs.sh            install the pinned docs tools into .venv/ (once), run the gallery's examples
#                              (scripts/run_gallery.py: their figures go to docs/gallery/, git-ignored) and
#                              run `mkdocs build --strict`
#   scripts/docs.sh serve      the same, then serve it with live reload on http://127.0.0.1:8000
#
# An example that fails fails the build (its name and output are printed). For quick local
# iterations only, IRTEXAM_DOCS_SKIP_GALLERY=1 skips the examples (earlier figures or placeholders).
#
# --strict turns every warning (a broken link, a docstring naming a parameter that does not
# exist, a missing snippet) into a failed build. Needs .venv/ (scripts/setup.sh --core is enough:
# the API pages are read from the source; the gallery's examples use irtexam's core).
set -euo pipefail
export NO_MKDOCS_2_WARNING=1
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=".venv/.irtexam-docs-$(sha256sum docs/requirements.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "docs: installing the pinned docs tools (docs/requirements.txt) into .venv/"
    .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -q -r docs/requirements.txt
    touch "$stamp"
fi
.venv/bin/python scripts/run_gallery.py
if [ "${1:-build}" = "serve" ]; then
    exec .venv/bin/python -m mkdocs serve --strict
fi
.venv/bin/python -m mkdocs build --strict --site-dir site
test -f site/index.html
echo "docs: wrote site/index.html"
