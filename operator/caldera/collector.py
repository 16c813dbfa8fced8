"""How often Python collects cyclic garbage in Caldera's long-lived processes.

The operator's cache, a session and ``caldera simulate`` all allocate millions of objects (models,
dicts, arrays) that live as long as the work and form no cycles. Python's default collects the
young generation every 700 allocations and rescans everything that survived, over and over: at
50,000 pods the default thresholds spend a third of a session collecting nothing, and a third of
reading a big manifest directory. Every process that does such work sets the thresholds here.

A command that exits right after such work can also skip the collection Python makes at exit:
the garbage a simulation leaves (its snapshot and session are cyclic) takes about a second to
collect, and the operating system takes the memory back at once.
"""

from __future__ import annotations

import atexit
import gc

__all__ = ["fewer_collections", "no_collection_at_exit"]

_registered: list[bool] = []


def fewer_collections() -> None:
    """Collect cyclic garbage far less often than Python's default (every 700 allocations)."""
    gc.set_threshold(100_000, 50, 1_000)


def no_collection_at_exit() -> None:
    """At exit, leave what is left to the operating system instead of collecting it (the objects
    still alive then are frozen, which the interpreter's last collection skips)."""
    if not _registered:
        atexit.register(gc.freeze)
        _registered.append(True)
