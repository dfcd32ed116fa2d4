#!/usr/bin/env bash
# Build the wheel (python -m build), install it alone into a fresh venv (no setup.sh, no torch) and
# fit a 2PL from a long CSV through Python (a pandas DataFrame) and through the CLI.
#
#   scripts/check_wheel.sh [WORKDIR]     (default: a temporary folder, removed afterwards)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work="${1:-$(mktemp -d)}"
[ -n "${1:-}" ] || trap 'rm -rf "$work"' EXIT
PY="${PYTHON:-python3.11}"
"$PY" -m venv "$work/build-venv"
"$work/build-venv/bin/pip" install -q --disable-pip-version-check build
# build from a copy of the tracked files: setuptools writes build/ and *.egg-info/ into the tree it builds
mkdir -p "$work/src"
git -C "$repo" ls-files -z | (cd "$repo" && xargs -0 cp -P --parents -t "$work/src")
"$work/build-venv/bin/python" -m build --wheel --outdir "$work/dist" "$work/src" > "$work/build.log" 2>&1
wheel=$(ls "$work"/dist/irtexam-*.whl)
"$PY" -m venv "$work/fresh"
"$work/fresh/bin/pip" install -q --disable-pip-version-check "$wheel"
if "$work/fresh/bin/python" -c "import torch" 2>/dev/null; then echo "torch was installed with the core wheel" >&2; exit 1; fi
cd "$work"
"$work/fresh/bin/irtexam" simulate --items 8 --examinees 300 --model 2pl --seed 1 --out long.csv
"$work/fresh/bin/python" - <<'PY'
import pandas as pd
import irtexam

fit = irtexam.fit(pd.read_csv("long.csv"), model="2pl")
assert fit.items.shape[0] == 8 and (fit.items["a"] > 0).all(), fit.items
print("python fit:", fit.items[["a", "b"]].round(2).to_dict("list"))
PY
"$work/fresh/bin/irtexam" fit long.csv --model 2pl --out fit
test -f fit/items.csv && test -f fit/meta.json
echo "wheel $(basename "$wheel"): core installed without torch, fitted through Python and the CLI"
