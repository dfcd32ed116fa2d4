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

import os
from pathlib import Path

import jax

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
