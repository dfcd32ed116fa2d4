"""JAX's persistent compilation cache for irtexam fits.

Compiling the jitted likelihood, solver and Laplace kernels costs about a second per
new problem shape on a CPU, which dominates small fits. JAX can keep compiled
executables on disk and reuse them in later processes for the same shapes (a refit,
the next CLI call, a pruning run on the same exam). irtexam turns that cache on at
import, in ``$IRTEXAM_JAX_CACHE_DIR`` or ``$XDG_CACHE_HOME/irtexam/jax`` (default
``~/.cache/irtexam/jax``), unless the user already configured a JAX cache directory
or set ``IRTEXAM_JAX_CACHE=0``. The folder is capped at 512 MiB (JAX evicts the least
recently used executables).
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..memory import give_back_freed_memory
from .devices import placing_arguments

MAX_CACHE_BYTES = 512 * 1024 ** 2


def default_cache_dir() -> Path:
    """Where irtexam keeps compiled JAX executables."""
    if os.environ.get("IRTEXAM_JAX_CACHE_DIR"):
        return Path(os.environ["IRTEXAM_JAX_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "irtexam" / "jax"


def enable_compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache unless disabled or already set; returns its folder."""
    if os.environ.get("IRTEXAM_JAX_CACHE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    path = default_cache_dir()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_compilation_cache_max_size", MAX_CACHE_BYTES)  # least recently used go first
    return path


# ----------------------------------------------------------------------------- compiled executables
# JAX's cache above saves compiling, not tracing and lowering: every process still traces the jitted
# Python function and lowers it to find the cache key (0.3 s for the L-BFGS objective of a faceted 3PL,
# a sixth of a small `irtexam fit`). For the few functions whose compiled form depends only on shapes
# and the model configuration, irtexam also keeps the compiled executable itself, keyed by those
# (plus the versions of jax, jaxlib, Python and of irtexam's model code), and loads it back without
# tracing. Loaded executables are as trusted as JAX's own cache entries (the same folder, the same user).
EXECUTABLE_FOLDER = "irtexam-executables"
MAX_EXECUTABLE_BYTES = 128 * 1024 ** 2
MAX_IN_MEMORY = 32  # executables kept by this process (oldest dropped first)
# XLA options for the MAP path's kernels (the L-BFGS objective, the alternating sweeps, the Laplace and
# importance-sampling kernels, the fit statistics): XLA CPU's older loop emitters and LLVM at -O1 compile
# the faceted 3PL objective of data/real_run in 0.54 s instead of 1.06 s and run it as fast (0.22 vs
# 0.25 ms per evaluation; same value), which takes ~0.6 s off a cold `irtexam fit`. NUTS keeps XLA's
# defaults (its one program runs for minutes).
# The options are the CPU compiler's: another backend (a GPU) gets XLA's defaults, and on the CPU only
# those the running XLA accepts are passed (jax 0.12's XLA has no 'xla_cpu_use_fusion_emitters' and
# refuses the whole compile when it is named): :func:`fast_compile_options` probes them once per process.
CPU_FAST_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}
BACKEND_FAST_OPTIONS: dict[str, dict[str, Any]] = {"cpu": CPU_FAST_OPTIONS}  # any other backend: none
_MEMORY: dict[str, Any] = {}
_CACHE_HITS = [0]
_LISTENING = [False]
_SOURCE_FILES = ("model.py", "likelihood.py", "kinds.py", "fit.py", "alternating.py", "cell_blocks.py", "examinee_blocks.py",
                 "marginal/steps.py", "marginal/em.py", "marginal/information.py", "marginal/abilities.py",
                 "stats.py")  # the code they trace (a change to any of them must not load an executable of the old)


def backend() -> str:
    """The platform jax compiles for by default ('cpu', 'gpu', 'tpu', ...)."""
    return jax.default_backend()


def fast_compile_options() -> dict[str, Any]:
    """The quick-compile XLA options for :func:`backend`, those of :data:`BACKEND_FAST_OPTIONS` that the
    running XLA accepts (``{}`` on a GPU, or where XLA accepts none of them)."""
    platform = backend()
    candidates = tuple(sorted(BACKEND_FAST_OPTIONS.get(platform, {}).items()))
    return dict(_accepted_options(platform, jax.__version__, candidates))


@functools.lru_cache(maxsize=None)
def _accepted_options(platform: str, jax_version: str, candidates: tuple) -> tuple:
    """The ``candidates`` (sorted (name, value) pairs) that XLA for ``platform`` compiles a trivial program with:
    all of them, else each one that compiles alone, else none. Cached per platform and jax version."""
    if not candidates or _compiles_with(platform, candidates):
        return candidates
    return tuple(option for option in candidates if _compiles_with(platform, (option,)))


def _compiles_with(platform: str, options: tuple) -> bool:
    """Whether XLA for ``platform`` (jax's default backend) compiles a trivial program with the XLA ``options``."""
    try:
        jax.jit(lambda x: x * 2.0 + 1.0).lower(np.zeros(3, np.float32)).compile(compiler_options=dict(options))
        return True
    except Exception:  # noqa: BLE001 - an unknown option (INVALID_ARGUMENT), or a value XLA refuses
        return False


def fast_jit(fun: Callable | None = None, **jit_kwargs: Any) -> Any:
    """``jax.jit(fun, compiler_options=fast_compile_options(), **jit_kwargs)``, with the options chosen at the first
    call (on the backend it runs on), not at import; a decorator, bare or with ``jax.jit``'s keyword arguments."""
    if fun is None:
        return functools.partial(fast_jit, **jit_kwargs)
    jitted: dict[tuple, Any] = {}

    @functools.wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        options = fast_compile_options()
        key = tuple(sorted(options.items()))
        if key not in jitted:
            jitted[key] = jax.jit(fun, compiler_options=options or None, **jit_kwargs)
        return jitted[key](*args, **kwargs)

    return call


def _count_cache_hits(event: str, **kwargs: Any) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _CACHE_HITS[0] += 1


def executable_dir() -> Path | None:
    """Where compiled executables are kept: a folder in JAX's cache folder (None when that is off)."""
    folder = jax.config.jax_compilation_cache_dir
    return Path(folder) / EXECUTABLE_FOLDER if folder else None


def argument_signature(args: Sequence[Any]) -> str:
    """The structure, shapes and dtypes of ``args`` (a pytree): what an executable is compiled for."""
    def signature(value: Any) -> tuple[tuple[int, ...], str]:
        dtype = value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype  # no host copy of arrays
        return np.shape(value), str(dtype)

    return repr(jax.tree_util.tree_map(signature, tuple(args)))


def executable_key(name: str, parts: Sequence[Any]) -> str:
    """A file name for the executable of ``name`` whose compiled form is fixed by ``parts`` (shapes, spec, ...)."""
    import jaxlib

    device = jax.devices()[0]
    # the backend, its devices and the jax version: an executable compiled for one is never loaded on another
    identity = repr((tuple(parts), sorted(fast_compile_options().items()), jax.__version__, jaxlib.__version__,
                     sys.version_info[:2], backend(), jax.device_count(), device.platform, device.device_kind,
                     getattr(device.client, "platform_version", None), _cpu_flags(), _source_digest()))
    return f"{name}-{hashlib.sha256(identity.encode()).hexdigest()[:40]}"


@functools.lru_cache(maxsize=None)
def _source_digest() -> str:
    """sha256 of the model code the stored programs trace (:data:`_SOURCE_FILES`), read once per process: a key
    is made for every call of :func:`compiled_executable` (one per block of item rows in the fit statistics)."""
    here = Path(__file__).parent
    source = hashlib.sha256()
    for file in _SOURCE_FILES:
        source.update((here / file).read_bytes())
    return source.hexdigest()


@functools.lru_cache(maxsize=None)
def _cpu_flags() -> str:
    """The host CPU's feature flags (Linux), so that an executable built for one CPU is not run on another."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return hashlib.sha256(line.encode()).hexdigest()[:16]
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def compiled_executable(name: str, parts: Sequence[Any], jitted: Any, args: Sequence[Any],
                        compiler_options: dict | None = None, check: bool = True) -> Any:
    """The compiled executable of ``jitted`` for ``args``: from this process, from disk (no tracing), or traced.

    ``parts`` must fix everything the compiled function depends on apart from ``args`` (the
    model configuration); the arguments' structure, shapes and dtypes are added to the key
    (:func:`argument_signature`). Data enter as arguments, not as constants. A freshly compiled
    executable is written to :func:`executable_dir` (not one JAX loaded from its own cache: those
    cannot be serialised again). A stored
    executable that fails to load or to run on ``args`` is deleted and the function traced.
    ``compiler_options``: XLA options (default :func:`fast_compile_options`; ``{}`` for XLA's defaults,
    slower to compile, faster to run: the marginal EM's kernels run 2-3x faster with them).
    ``check=False`` skips that trial run of a loaded executable, for a program that runs once per fit
    (the trial would double its cost): the first call is the trial, and if it fails the file is deleted
    and the function traced and run instead (:class:`_FirstCallChecked`).
    """
    fast = fast_compile_options()
    options = fast if compiler_options is None else compiler_options
    given_parts = parts  # what a fallback compile passes again (the options are added to the key below)
    if options != fast:
        parts = (*parts, ("options", tuple(sorted(options.items()))))
    if not _LISTENING[0]:
        jax.monitoring.register_event_listener(_count_cache_hits)
        _LISTENING[0] = True
    key = executable_key(name, (*parts, argument_signature(args)))
    if key in _MEMORY:
        return _MEMORY[key]
    folder = executable_dir()
    path = folder / f"{key}.bin" if folder is not None else None
    if path is not None and path.exists():
        try:
            compiled = placing_arguments(_load(path))
            if not check:
                def fallback() -> Any:  # forget this wrapper first: the call below must compile, not return it
                    _MEMORY.pop(key, None)
                    return compiled_executable(name, given_parts, jitted, args, compiler_options)

                checked = _FirstCallChecked(compiled, path, fallback)
                _remember(key, checked)  # a later fit of this process reuses it (and its check)
                return checked
            jax.block_until_ready(compiled(*args))  # a broken file fails here, not in the caller
            _remember(key, compiled)
            return compiled
        except Exception:  # noqa: BLE001 - any failure: forget the file and compile
            path.unlink(missing_ok=True)
    # An executable that JAX loads from its own disk cache cannot be serialised again, so each stored
    # program is traced under a name made from its key (`_named_for`): JAX's cache key includes the
    # module's name, so no other program, and no earlier version of irtexam whose code hashed to another
    # key, can have left an entry that this compile would load instead of compiling. (Switching JAX's
    # cache off for this compile instead would, as the first compile of a process, turn it off for the
    # whole process.) A program that cannot be stored (custom calls, see `storable`) leaves a marker.
    marker = path.with_suffix(".nostore") if path is not None else None
    fresh = path is not None and not marker.exists()
    hits = _CACHE_HITS[0]
    lowered = _named_for(key, jitted).trace(*args).lower()
    compiled = lowered.compile(compiler_options=options or None)
    if fresh and _CACHE_HITS[0] == hits:  # compiled here, not loaded from JAX's cache
        if storable(compiled):
            _store(compiled, path)
        else:
            try:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            except OSError:
                pass
    compiled = placing_arguments(compiled)
    _remember(key, compiled)
    give_back_freed_memory()  # the compiler's freed working memory (about 100 MB for the leaderboard sweeps)
    return compiled


class _FirstCallChecked:
    """A loaded executable whose first call is its check: if that call fails, the file is deleted and the
    call is answered by ``fallback()`` (the function traced and compiled afresh), which later calls use too."""

    def __init__(self, compiled: Any, path: Path, fallback: Any) -> None:
        self.compiled, self.path, self.fallback, self.checked = compiled, path, fallback, False

    def __call__(self, *args: Any) -> Any:
        if self.checked:
            return self.compiled(*args)
        try:
            out = jax.block_until_ready(self.compiled(*args))
        except Exception:  # noqa: BLE001 - a broken file: forget it and compile
            self.path.unlink(missing_ok=True)
            self.compiled = self.fallback()
            out = self.compiled(*args)
        self.checked = True
        return out


def _named_for(key: str, jitted: Any) -> Any:
    """``jitted`` (a ``jax.jit`` function, or a plain one) jitted again under a name made from ``key``."""
    fun = getattr(jitted, "__wrapped__", jitted)

    def program(*args: Any) -> Any:
        return fun(*args)

    program.__name__ = program.__qualname__ = "irtexam_" + "".join(ch if ch.isalnum() else "_" for ch in key)
    return jax.jit(program)


def storable(compiled: Any) -> bool:
    """Whether a compiled executable can be stored: not when it holds custom calls (LAPACK solves,
    cholesky, ...): their targets are registered in the process that compiled them, and a fresh process
    that loads such an executable crashes (segmentation fault, no exception to catch)."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - cannot inspect it: do not store it
        return False
    return "custom-call" not in text and "custom_call" not in text


def _remember(key: str, compiled: Any) -> None:
    while len(_MEMORY) >= MAX_IN_MEMORY:
        _MEMORY.pop(next(iter(_MEMORY)))
    _MEMORY[key] = compiled


def _load(path: Path) -> Any:
    import pickle

    from jax.experimental import serialize_executable

    with open(path, "rb") as handle:
        payload, in_tree, out_tree = pickle.load(handle)
    os.utime(path)  # recently used: kept when the folder is trimmed
    return serialize_executable.deserialize_and_load(payload, in_tree, out_tree)


def _store(compiled: Any, path: Path) -> None:
    """Write ``compiled`` to ``path`` (atomically), then trim the folder to MAX_EXECUTABLE_BYTES; never raises."""
    import pickle
    import tempfile

    from jax.experimental import serialize_executable

    try:
        payload = pickle.dumps(serialize_executable.serialize(compiled))
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as handle:
            handle.write(payload)
        os.replace(handle.name, path)
        files = sorted(path.parent.glob("*.bin"), key=lambda p: p.stat().st_mtime, reverse=True)
        total = 0
        for file in files:
            total += file.stat().st_size
            if total > MAX_EXECUTABLE_BYTES:
                file.unlink(missing_ok=True)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is only slower
        return


def on_first_call(build: Callable[[], Callable]) -> Callable:
    """A function that builds its implementation (``build()``, e.g. a compile) when first called, then calls it."""
    built: list[Callable] = []

    def call(*args: Any) -> Any:
        if not built:
            built.append(build())
        return built[0](*args)

    return call
