"""The worker's allocator setting (streamdetect/stream/allocators.py), in a fresh interpreter: it changes
the process's malloc."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
