"""The SDK's garbage-collection threshold (docs/sdk.md, "Garbage collection").

A producer allocates a few GC-tracked objects per message (its pending
message, callbacks, futures and message ids), so with CPython's default
young-generation threshold of 700 a collection runs every few hundred
messages, and every tenth of those also scans the older generation. Unless
the application already chose its own threshold, the first ``Client``
raises the young one to ``YOUNG_THRESHOLD`` (what Magnetar's servers use);
``MAGNETAR_SDK_GC=0`` in the environment leaves CPython's settings alone.
"""

from __future__ import annotations

import gc
import os

CPYTHON_DEFAULT = 700
YOUNG_THRESHOLD = 20_000


def tune_gc() -> bool:
    """Raise the young-generation threshold (see above); True if it did."""
    if os.environ.get("MAGNETAR_SDK_GC", "1") == "0":
        return False
    young, middle, old = gc.get_threshold()
    if young != CPYTHON_DEFAULT:
        return False  # the application's own choice
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return True
