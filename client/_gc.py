"""The SDK's tuning of the process it runs in (docs/sdk.md, "Garbage
collection" and "Memory allocation").

A producer allocates a few GC-tracked objects per message (its pending
message, callbacks, futures and message ids), so with CPython's default
young-generation threshold of 700 a collection runs every few hundred
messages, and every tenth of those also scans the older generation. Unless
the application already chose its own threshold, the first ``Client``
raises the young one to ``YOUNG_THRESHOLD`` (what Magnetar's servers use);
``MAGNETAR_SDK_GC=0`` in the environment leaves CPython's settings alone.

The messages a producer sends travel in buffers of up to megabytes, which
glibc by default maps afresh for each and unmaps when freed, so every byte
sent lands on pages the kernel must fault in and zero. The first ``Client``
makes glibc keep freed buffers for reuse instead (mmap threshold 32 MiB,
16 MiB of padding per heap growth), up to ``SDK_TRIM_THRESHOLD_MB`` free
MiB per malloc arena (``protos.malloc``; the arenas are not capped, as the
servers cap theirs: that is the application's choice),
unless the application set glibc's own ``MALLOC_*`` variables;
``MAGNETAR_SDK_MALLOC=0`` leaves malloc alone.
"""

from __future__ import annotations

import gc
import os

from protos.malloc import tune_malloc as _tune_malloc

CPYTHON_DEFAULT = 700
YOUNG_THRESHOLD = 20_000
SDK_TRIM_THRESHOLD_MB = 16
# glibc's own tunables of the same parameters: the application's choice.
GLIBC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")

_malloc_done = False


def tune_gc() -> bool:
    """Raise the young-generation threshold (see above); True if it did."""
    if os.environ.get("MAGNETAR_SDK_GC", "1") == "0":
        return False
    young, middle, old = gc.get_threshold()
    if young != CPYTHON_DEFAULT:
        return False  # the application's own choice
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return True


def tune_malloc() -> bool:
    """Keep freed buffers for reuse (see above), once per process; True if
    it did now."""
    global _malloc_done
    if _malloc_done or os.environ.get("MAGNETAR_SDK_MALLOC", "1") == "0":
        return False
    if any(name in os.environ for name in GLIBC_VARIABLES) or "GLIBC_TUNABLES" in os.environ:
        return False
    _malloc_done = True
    return _tune_malloc(SDK_TRIM_THRESHOLD_MB)
