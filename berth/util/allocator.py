"""The C allocator of a long-running Berth process: its mmap threshold, and what its heap holds.

asyncio reads every socket with ``recv(256 KiB)`` and shrinks the bytes object to what
arrived. glibc serves an allocation above its mmap threshold (128 KiB at start) with a mapping
of its own, returned to the system on ``free``; but it raises the threshold to the size of each
mapped block freed (up to 32 MiB), so once one full 256 KiB read has been freed, every later
read buffer is cut from the heap instead and shrunk in place. What is allocated in the space
that frees, and the reads still alive, end up ever higher in the heap, and glibc can return
only its top: under ``berth bench soak`` the heap grew from 38 to 50 MiB in ten minutes while
the bytes in use stayed at 38-39 MiB, most of the operator's RSS growth (docs/chaos.md).
Setting the threshold explicitly turns that adjustment off (mallopt(3)): read buffers stay
mapped, the heap stays at what is in use. :func:`pin_mmap_threshold` does it where the C
library is glibc and does nothing elsewhere (musl and others do not adjust a threshold).

:func:`heap` reads glibc's ``mallinfo2`` so that the soak can tell the C heap's growth (and
how much of it is free) from the Python object allocator's and from objects held.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import platform

__all__ = ["MMAP_THRESHOLD", "Heap", "heap", "pin_mmap_threshold"]

MMAP_THRESHOLD = 128 * 1024
"""Bytes from which a block gets its own mapping: glibc's initial value, kept for good. Below
asyncio's 256 KiB read buffer, so those never come from the heap."""

_M_MMAP_THRESHOLD = -3  # <malloc.h>


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",  # bytes of heap obtained from the system (all arenas), mapped blocks aside
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",  # bytes in mapped blocks
            "usmblks",
            "fsmblks",
            "uordblks",  # bytes of heap in use
            "fordblks",  # bytes of heap free
            "keepcost",
        )
    ]


@dataclasses.dataclass(frozen=True)
class Heap:
    """glibc's C heap now, in bytes."""

    obtained: int  # heap taken from the system (RSS at most this, once touched)
    in_use: int  # of that, in allocated blocks
    mapped: int  # blocks above the threshold, each its own mapping (outside ``obtained``)


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(None)  # the process's own C library
    if not hasattr(libc, "mallopt"):
        return None
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    if hasattr(libc, "mallinfo2"):  # glibc >= 2.33
        libc.mallinfo2.argtypes = []
        libc.mallinfo2.restype = _Mallinfo2
    return libc


def pin_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``size`` bytes for this process (see the module
    docstring); True if set, False where the C library is not glibc."""
    libc = _glibc()
    return libc is not None and libc.mallopt(_M_MMAP_THRESHOLD, size) == 1


def heap() -> Heap | None:
    """The C heap now (glibc >= 2.33), or None where it cannot be read."""
    libc = _glibc()
    if libc is None or not hasattr(libc, "mallinfo2"):
        return None
    info: _Mallinfo2 = libc.mallinfo2()
    return Heap(obtained=info.arena, in_use=info.uordblks, mapped=info.hblkhd)
