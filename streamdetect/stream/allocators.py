"""The worker's C allocator, told to give freed memory back to the system.

A worker folds batch after batch: each allocates and frees transient buffers (Python's byte strings and
numpy arrays go through the C library's malloc), and a snapshot frees a copy of the state. glibc's malloc
raises its mmap threshold each time a large block is freed (up to 32 MiB), so that later blocks come from a
heap whose holes it does not return: the process then holds far more than its state. A fixed threshold of
128 KiB (glibc's own default, without the raises) maps every large block on its own and unmaps it when
freed. Measured on a partition unit of BP at 452,220 rows per view as a worker runs it (docs/benchmarks.md):
at most 670 MB while folding and 542 MB at the end instead of 731 and 643, in the same time.

polars' allocator (jemalloc, in polars' runtime library) keeps the pages it freed for seconds before it
gives them back (its "dirty decay"): a worker folding record after record then holds the last seconds'
transient buffers on top of its state. The worker sets ``_RJEM_MALLOC_CONF`` (read by that jemalloc when
polars is loaded) to :data:`POLARS_ALLOCATOR` before it loads polars: pages freed for 0.1 s go back.
Measured on the same unit: 612 MB at most while folding instead of 642, 582 instead of 616 taking a
snapshot, 567 instead of 602 restoring; the linkage micro-batches of BP in the same CPU time (1.02x,
paired). An operator's own ``_RJEM_MALLOC_CONF`` is left as it is (``dirty_decay_ms:0,muzzy_decay_ms:0``:
70-80 MB less again while folding, for about a third more CPU, the kernel taking pages back and giving
them again).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import MutableMapping

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


#: The variable polars' jemalloc reads its settings from, and what the worker sets it to: freed pages go
#: back to the system after 100 ms (jemalloc's default is 10 s), without a pass through MADV_FREE's
#: "muzzy" pages, which count as resident until the kernel wants them.
POLARS_ALLOCATOR_VARIABLE = "_RJEM_MALLOC_CONF"
POLARS_ALLOCATOR = "dirty_decay_ms:100,muzzy_decay_ms:0"


def return_polars_freed_memory(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set :data:`POLARS_ALLOCATOR_VARIABLE` to :data:`POLARS_ALLOCATOR` unless ``environ`` has it (an
    operator's setting wins), for this process when polars is not loaded yet, and for the processes it
    starts. True when it takes effect in this process (set here, before polars was loaded)."""
    if POLARS_ALLOCATOR_VARIABLE in environ:
        log.debug("%s left as the environment sets it", POLARS_ALLOCATOR_VARIABLE)
        return False
    environ[POLARS_ALLOCATOR_VARIABLE] = POLARS_ALLOCATOR
    return "polars" not in sys.modules
