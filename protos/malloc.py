"""glibc malloc tuning shared by the servers and the SDK (``tune_malloc``)."""

from __future__ import annotations

# mallopt(3) parameter numbers (glibc malloc.h).
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -2, -3, -8


def tune_malloc(trim_threshold_mb: int, arenas: int = 0) -> bool:
    """Make glibc keep and reuse freed memory of large buffers.

    By default glibc maps each buffer over its mmap threshold (128 KiB at
    first) afresh and unmaps it on free, and gives freed heap tops back to
    the kernel. Every reuse then faults in and zeroes new pages, which on
    these virtual machines costs more CPU than copying the bytes (perf: page
    faults and page clearing were a fifth of a loaded bookie's CPU; add
    requests and group-commit batches are megabytes each). Raising the
    thresholds (buffers up to 32 MiB from the heap, 16 MiB of padding per
    heap growth) keeps up to ``trim_threshold_mb`` free MiB per malloc arena
    for reuse. 0 changes nothing. Returns False where the C library has no
    ``mallopt`` (not glibc): nothing changes then either.

    ``arenas`` > 0 caps the arenas threads allocate from (call it before
    starting threads). A thread's own arena grows in separate 64 MiB heaps
    that glibc unmaps as soon as one is empty, trim threshold or not, so
    gRPC's receive threads got fresh pages for every large message (perf:
    page clearing was ~9 % of a loaded bookie's samples); one arena is one
    heap the trim threshold governs.
    """
    params = []
    if trim_threshold_mb > 0:
        params += [
            (_M_MMAP_THRESHOLD, 32 << 20),
            (_M_TRIM_THRESHOLD, trim_threshold_mb << 20),
            (_M_TOP_PAD, 16 << 20),
        ]
    if arenas > 0:
        params.append((_M_ARENA_MAX, arenas))
    if not params:
        return True
    import ctypes

    try:
        # The C library this process already runs on (no ldconfig subprocess,
        # which ctypes.util.find_library would start: the SDK calls this).
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    ok = True
    for param, value in params:
        ok = bool(mallopt(param, value)) and ok
    return ok
