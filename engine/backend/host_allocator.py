"""Keep freed host memory in the process heap, so a training step's large temporaries don't page-fault anew.

glibc returns blocks above its mmap threshold (128 KiB at first) to the kernel on free; every new
activation or gradient of that size then costs a page fault per 4 KiB when it is first written, which on
a virtual machine is the largest cost of a small CNN step. WIREGRAD_MALLOC_TUNING=0 leaves malloc as is."""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 64 << 20  # arrays up to 64 MiB come from the reusable heap
TRIM_THRESHOLD = 256 << 20  # the heap keeps up to 256 MiB of freed memory instead of returning it

tuned = False


def tune() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where that does not apply."""
    global tuned
    if tuned:
        return True
    if not sys.platform.startswith("linux") or os.environ.get("WIREGRAD_MALLOC_TUNING", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    tuned = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    tuned = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and tuned
    return tuned
