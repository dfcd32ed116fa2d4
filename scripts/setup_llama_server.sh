#!/usr/bin/env bash
# Install llama.cpp's OpenAI-compatible server (llama-cpp-python[server], pinned) into .venv/
# for the served-LLM integration tests (tests/test_served_*.py, marker `served`) and
# benchmarks/served_answering.py. Not part of scripts/setup.sh: it compiles llama.cpp (C++).
#
#   scripts/setup_llama_server.sh               build the wheel once per machine, install it
#   scripts/setup_llama_server.sh --build-only  only build (or find) the cached wheel
#
# The wheel is built from the PyPI sdist with cmake into
# ${IRTEXAM_CACHE:-~/.cache/irtexam}/wheels and reused on later runs (same machine, same pin).
# Needs gcc/g++ and cmake (Debian: apt-get install -y cmake build-essential).
# CMAKE_BUILD_PARALLEL_LEVEL (default: number of cores) sets the compile jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="0.3.36"
mode="${1:-install}"
# a portable build (AVX2, no -march=native): on CPUs with AMX tiles (Sapphire Rapids) a native build takes
# ggml's AMX path, which segfaults on the first completion in VMs that do not grant the AMX state
# (seen here: SIGSEGV in ggml_backend_amx_mul_mat); the folder name keeps native wheels of earlier
# versions of this script from being reused
cache="${IRTEXAM_CACHE:-$HOME/.cache/irtexam}/wheels/portable-avx2"
mkdir -p "$cache"
py=".venv/bin/python"
[ -x "$py" ] || py="${PYTHON:-python3.11}"

if [ "$mode" != "--build-only" ] && [ -x .venv/bin/python ] && .venv/bin/python - "$VERSION" <<'EOF' 2>/dev/null
import sys, importlib.metadata as md
assert md.version("llama_cpp_python") == sys.argv[1]
import llama_cpp.server.app, uvicorn, fastapi  # noqa: F401
EOF
then
    exit 0  # already installed
fi

wheel=$(ls "$cache"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$wheel" ]; then
    if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then  # a fresh CI machine
            apt-get update -qq && apt-get install -y -qq cmake build-essential >/dev/null
        fi
    fi
    for tool in cmake g++ gcc; do
        command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install -y cmake build-essential" >&2; exit 1; }
    done
    start=$(date +%s)
    echo "building llama-cpp-python==$VERSION (llama.cpp from source; a few minutes) into $cache" >&2
    # Only the shared libraries the Python package loads: no multimodal (mtmd/llava), tests,
    # examples, tools or the C++ server.
    CMAKE_ARGS="${CMAKE_ARGS:-} -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
-DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
        "$py" -m pip --disable-pip-version-check -q wheel --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$VERSION" -w "$cache"
    echo "built in $(( $(date +%s) - start ))s" >&2
    wheel=$(ls "$cache"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
fi
[ "$mode" = "--build-only" ] && { echo "$wheel"; exit 0; }
[ -x .venv/bin/python ] || { echo ".venv/ is missing: run scripts/setup.sh first" >&2; exit 1; }
.venv/bin/python -m pip --disable-pip-version-check -q install "$wheel" \
    'uvicorn>=0.22.0' 'fastapi>=0.100.0' 'pydantic-settings>=2.0.1' 'sse-starlette>=1.6.1' \
    'starlette-context>=0.3.6,<0.4' 'diskcache>=5.6.1'
