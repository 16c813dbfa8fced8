"""How often Python collects cyclic garbage in Caldera's processes.

The operator's cache, a session and ``caldera simulate`` all allocate millions of objects (models,
dicts, arrays) that live as long as the work and form no cycles. Python's default collects the
young generation every 700 allocations and rescans everything that survived, over and over: at
50,000 pods the default thresholds spend a third of a session collecting nothing, and a third of
reading a big manifest directory. The long-running operator sets the thresholds here.

A command that reads its whole input, schedules and exits (``simulate``, ``explain``) does not
collect automatically at all (:func:`batch_process`): even at the raised thresholds, scanning
each new object once cost about a second of a 2,000-node, 20,000-pod simulation, and found
nothing. What it read is then frozen (never scanned again), and the garbage of one simulated
cycle (its snapshot and session are cyclic) is collected before the next, so memory stays flat
over many cycles. At exit it skips the collection Python makes: the garbage left takes about a
second to collect, and the operating system takes the memory back at once.
"""

from __future__ import annotations

import atexit
import gc

__all__ = [
    "after_build",
    "after_session",
    "batch_process",
    "before_fork",
    "between_cycles",
    "fewer_collections",
    "keep_what_is_read",
]

_registered: list[bool] = []


def fewer_collections() -> None:
    """Collect cyclic garbage far less often than Python's default (every 700 allocations)."""
    gc.set_threshold(100_000, 50, 1_000)


def after_build() -> None:
    """In the operator, once the model of the cluster has been built from nothing: what is alive
    now is never scanned again. The model holds millions of objects and no cycles (dropping it
    leaves nothing for the collector), so they are freed as they are replaced; left unfrozen,
    the next session's collection scanned them all (0.28 s at 50,000 pods)."""
    gc.freeze()


def after_session() -> None:
    """In the operator, once a session has returned: collect the young generations, which hold
    the session's cyclic garbage (its plugins' handlers and closures, and through them arrays as
    long as the node list).

    Left to the raised thresholds, a collection ran in the middle of a later session and moved
    that garbage to the oldest generation, which is collected far more rarely: at 5,000 nodes the
    operator grew by about 130 KB a session (26 MiB every 200) until it did. Collected here, only
    what the session allocated is scanned: 0.17 ms a session at 50,000 pods, and memory stays
    flat."""
    gc.collect(1)


def batch_process() -> None:
    """For the process of a batch command: no automatic collection from here on, and none at
    exit (the process ends with the command)."""
    gc.disable()
    _no_collection_at_exit()


def keep_what_is_read() -> None:
    """In a batch command, once the input is read: it lives until the command ends, so no
    collection scans it again."""
    if not gc.isenabled():
        gc.freeze()


def before_fork() -> None:
    """Before forking a process that shares this one's objects: what is alive now is never
    scanned again, in either process. A collection writes to every object it scans, which would
    give each process its own copy of every page the two share (Python's advice for fork)."""
    gc.freeze()


def between_cycles() -> None:
    """In a batch command, after a simulated cycle whose snapshot and session are no longer
    referenced: collect them (only what the cycle allocated is scanned)."""
    if not gc.isenabled():
        gc.collect(1)


def _no_collection_at_exit() -> None:
    """At exit, leave what is left to the operating system instead of collecting it (the objects
    still alive then are frozen, which the interpreter's last collection skips)."""
    if not _registered:
        atexit.register(gc.freeze)
        _registered.append(True)
