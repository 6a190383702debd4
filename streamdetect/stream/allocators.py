"""The worker's C allocator, told to give freed memory back to the system.

A worker folds batch after batch: each allocates and frees transient buffers (Python's byte strings and
numpy arrays go through the C library's malloc), and a snapshot frees a copy of the state. glibc's malloc
raises its mmap threshold each time a large block is freed (up to 32 MiB), so that later blocks come from a
heap whose holes it does not return: the process then holds far more than its state. A fixed threshold of
128 KiB (glibc's own default, without the raises) maps every large block on its own and unmaps it when
freed. Measured on a partition unit of BP at 452,220 rows per view as a worker runs it (docs/benchmarks.md):
at most 670 MB while folding and 542 MB at the end instead of 731 and 643, in the same time.

polars' allocator (jemalloc) is polars' to set: it returns dirty pages after 0.5 s. An operator who would
rather trade time for memory can set ``_RJEM_MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0`` in the worker's
environment (measured on the same unit: 70-80 MB less at most while folding, for about a third more CPU,
the kernel's time taking pages back and giving them again).
"""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameters (``malloc.h``), and the value set for both: blocks of 128 KiB or more
#: are mapped on their own (unmapped when freed), and the top of the heap is trimmed once 128 KiB are free.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
THRESHOLD_BYTES = 128 * 1024


def return_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds (module docstring); False where there is no glibc (musl, other
    systems: their allocator is left as it is)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    done = bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD_BYTES))
    log.debug("malloc's mmap and trim thresholds fixed at %d bytes: %s", THRESHOLD_BYTES, done)
    return done
