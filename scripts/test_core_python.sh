#!/usr/bin/env bash
# The statistics core on a newer Python with the newest jax and numpyro (issue 43), as a new user installs it:
# a fresh venv .venv-core-py<version>/ (re-made on every run), `pip install -e '.[dev]'` (no LLM stack), the
# versions that resolved, `irtexam simulate` + `irtexam fit --model 3pl` on a small matrix, then the core
# estimator tests (tests needing torch skip without the LLM stack).
#
#   scripts/test_core_python.sh          Python 3.13 (what .ci/run runs)
#   scripts/test_core_python.sh 3.12     another version
set -euo pipefail
cd "$(dirname "$0")/.."
version="${1:-3.13}"
venv=".venv-core-py${version}"
# the estimators (MAP, marginal EM, NUTS, uncertainty), the response matrix, the compiled-program cache and the
# backends/devices: about 5 min in two processes on a 2-core machine
# (IRTEXAM_CORE_TESTS="tests/a.py tests/b.py" runs others instead)
TESTS=(tests/test_irt_*.py tests/test_responses*.py tests/test_fit_path.py tests/test_devices.py)
if [ -n "${IRTEXAM_CORE_TESTS:-}" ]; then read -r -a TESTS <<<"$IRTEXAM_CORE_TESTS"; fi

find_python() {
    # a python<version> on PATH that runs (a pyenv shim of a version not selected does not), else pyenv's copy
    local candidate
    for candidate in "python${version}" "$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")"/versions/"${version}".*/bin/"python${version}"; do
        if "$candidate" -c 'pass' >/dev/null 2>&1; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}
PY="$(find_python)" || { echo "test_core_python: no Python ${version} on this machine" >&2; exit 1; }
echo "test_core_python [$(date +%H:%M:%S)]: a fresh ${venv}/ from $("$PY" --version) ($PY)"
rm -rf "$venv"
"$PY" -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --progress-bar off -e '.[dev]'
"$venv/bin/python" - <<'EOF'
import importlib.metadata as md
import platform
print("test_core_python: Python", platform.python_version(), " ".join(
    f"{name} {md.version(name)}" for name in ("jax", "jaxlib", "numpyro", "arviz", "numpy", "scipy", "pandas")))
EOF
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
"$venv/bin/irtexam" simulate --items 30 --examinees 500 --model 3pl --seed 1 --out "$scratch/responses.csv"
"$venv/bin/irtexam" fit "$scratch/responses.csv" --model 3pl --out "$scratch/fit" >"$scratch/fit.log" 2>&1 \
    || { cat "$scratch/fit.log"; exit 1; }
test -s "$scratch/fit/items.csv" || { echo "test_core_python: irtexam fit wrote no items.csv" >&2; exit 1; }
echo "test_core_python [$(date +%H:%M:%S)]: irtexam simulate + fit --model 3pl ran; the core tests:"
"$venv/bin/python" -m pytest -q -n 2 --dist loadfile "${TESTS[@]}"
