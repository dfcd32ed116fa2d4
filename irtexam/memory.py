"""Bounded memory on large matrices: work a block of rows at a time (:func:`row_blocks`), and give freed memory
back to the operating system during long fits (glibc only; a no-op elsewhere).

glibc's malloc raises its mmap threshold each time a large block is freed (up to 32 MB), after which blocks
of that size come from the heap and, once freed, stay in the process: a 10^8-cell fit kept about 100 MB
it no longer used. :func:`large_blocks_from_mmap` fixes the threshold (every block from 128 KB is mapped
and unmapped, as before the first free); :func:`give_back_freed_memory` trims the heap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

BLOCK_CELLS = 1 << 22  # cells a block of rows: a few tens of MB of float temporaries
M_MMAP_THRESHOLD = -3  # mallopt parameter number in glibc's malloc.h
MMAP_THRESHOLD_BYTES = 128 * 1024


def row_blocks(n_rows: int, row_length: int, max_cells: int = BLOCK_CELLS) -> list[slice]:
    """Consecutive blocks of rows of at most ``max_cells`` cells (one row at least), covering ``n_rows`` rows of
    ``row_length`` cells: where a computation on a large matrix goes a block at a time."""
    rows = max(1, max_cells // max(row_length, 1))
    return [slice(start, min(start + rows, n_rows)) for start in range(0, n_rows, rows)]


@lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def large_blocks_from_mmap() -> bool:
    """Fix glibc's mmap threshold at 128 KB (no dynamic raise): freed large blocks go back to the system.
    True where it took effect."""
    libc = _libc()
    return bool(libc is not None and libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def give_back_freed_memory() -> bool:
    """Return the free memory at the top of glibc's heap to the system (``malloc_trim(0)``). True where some was."""
    libc = _libc()
    return bool(libc is not None and libc.malloc_trim(0))


def collect_cycles() -> int:
    """Run Python's cycle collector now (``gc.collect()``); returns the objects it found unreachable. A phase of a
    large fit calls it where JAX's calls have left reference cycles that hold a large array (the joint mode's
    response blocks: 25 MB at 12,032 x 2,211) until the collector happens to run."""
    import gc

    return gc.collect()
