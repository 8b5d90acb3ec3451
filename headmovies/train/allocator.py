"""glibc's allocator told to keep freed memory for the next training step (`keep_freed_memory`).

A training step of the orbit experiment allocates and frees tensors of 1–3 MB (the n^3 grid's
attention, logits and their gradients). glibc serves blocks of that size with fresh `mmap`s and
hands freed memory back to the system, so every step pays a page fault per 4 kB it touches
again: about a quarter of a first-phase step with the fused kernels on two threads (9.1 against
6.8 ms on the idle 2-core Xeon, docs/benchmarks.md). Keeping the memory costs at most a few
hundred MB that the process holds until it exits.
"""

from __future__ import annotations

import ctypes

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (glibc's malloc.h)
MMAP_THRESHOLD = 32 * 2**20  # blocks below this come from the heap (glibc's largest allowed value)
TRIM_THRESHOLD = 512 * 2**20  # free heap memory kept before any is given back

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (once; later calls return the first
    answer). True if they were set; False where the C library has no `mallopt` (not glibc: macOS,
    Windows), where nothing changes. Process-wide: every later allocation of the process."""
    global _done
    if _done is None:
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):
            _done = False
        else:
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            _done = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _done
