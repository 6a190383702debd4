"""The worker's allocator settings (streamdetect/stream/allocators.py), in a fresh interpreter: they change
the process's malloc and polars' allocator."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamdetect.stream.allocators import POLARS_ALLOCATOR, POLARS_ALLOCATOR_VARIABLE, return_polars_freed_memory

PROBE = """
import ctypes
from streamdetect.stream.allocators import return_freed_memory

FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"

class Info(ctypes.Structure):  # glibc's struct mallinfo2 (2.33 and later): hblkhd, bytes in mapped blocks
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info

def mapped_after_churn():
    # A large block freed raises glibc's mmap threshold: the next ones of that size are not mapped.
    for _ in range(3):
        block = bytes(4 << 20)
        del block
    held = [bytes(1 << 20) for _ in range(8)]
    return libc.mallinfo2().hblkhd >= 8 << 20

before = mapped_after_churn()
print(return_freed_memory(), before, mapped_after_churn())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc: Linux")
def test_blocks_of_a_mebibyte_stay_mapped_on_their_own_after_larger_ones_were_freed() -> None:
    """Without the setting, freeing 4 MiB blocks moves glibc's mmap threshold past them, and the 1 MiB
    blocks allocated next come from the heap (whose holes it keeps); with it, they are mapped (and
    unmapped when freed)."""
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False", "True"], done.stdout + done.stderr


POLARS_PROBE = """
import sys, time
from streamdetect.stream.allocators import return_polars_freed_memory

took = return_polars_freed_memory()
import polars as pl

def resident():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096

base = resident()
frames = [pl.select(pl.int_range(0, 20_000, dtype=pl.Int64).alias("a") + i) for i in range(2_000)]
held = resident() - base
del frames
time.sleep(0.5)
print(took, held, resident() - base)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/statm: Linux")
def test_polars_gives_freed_pages_back_within_half_a_second_once_set() -> None:
    """Set before polars is loaded, its allocator gives back what 2,000 small frames (about 320 MB) held
    within half a second (without: 45-75% of it still held then, measured); an operator's own setting is
    left as it is."""
    environment = {key: value for key, value in os.environ.items() if key != POLARS_ALLOCATOR_VARIABLE}
    done = subprocess.run(
        [sys.executable, "-c", POLARS_PROBE], capture_output=True, text=True, check=True, env=environment
    )
    took, held, left = done.stdout.split()
    assert took == "True"
    assert int(held) > 200 << 20
    assert int(left) < int(held) // 4, done.stdout
    theirs = {POLARS_ALLOCATOR_VARIABLE: "dirty_decay_ms:0"}
    assert not return_polars_freed_memory(theirs)
    assert theirs == {POLARS_ALLOCATOR_VARIABLE: "dirty_decay_ms:0"}
    ours: dict[str, str] = {}
    return_polars_freed_memory(ours)
    assert ours == {POLARS_ALLOCATOR_VARIABLE: POLARS_ALLOCATOR}
