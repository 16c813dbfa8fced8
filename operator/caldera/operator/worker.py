"""Sessions in a process of their own, fed only what changed in the cluster.

A session is CPU-bound Python. Run in a thread of the operator's process, it holds the
interpreter lock for most of its run, and the event loop waits for the lock after every socket
write: the benchmark measured single loop steps of 0.2–0.7 s while sessions ran. In a separate
process the session has its own interpreter and its own core, and the loop only diffs and sends.

The worker keeps a copy of the cluster state between sessions. Each tick the operator sends the
objects that changed since the last send (the watched objects are immutable and replaced on every
change, so an identity comparison finds them) and the keys that disappeared; the worker applies
them, overlays the binds still in flight, builds the snapshot (with its own pod memo) and runs
the cycle. If the worker dies, the next tick starts a new one and sends the whole state.

Complexity per tick on the event loop: O(objects) identity comparisons, plus pickling what
changed (the first tick: everything).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields, replace
from typing import Any

from caldera.cache.snapshot import PodMemo, build_snapshot
from caldera.cache.state import ClusterState
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import CycleResult
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.models.parse import ObjectError
from caldera.operator.assume import apply

__all__ = ["Changes", "SessionWorker", "decide"]

Outcome = tuple[CycleResult, list[ObjectError]]


@dataclass(slots=True)
class Changes:
    """What to do to the worker's copy: per ClusterState table, objects to store and keys to drop;
    ``full`` replaces the copy."""

    tables: dict[str, tuple[dict[str, Any], list[str]]]
    full: bool


def diff(sent: dict[str, dict[str, Any]], state: ClusterState) -> Changes:
    """The changes from the tables last sent to ``state``'s, by object identity."""
    full = not sent
    tables: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for f in fields(ClusterState):
        new: dict[str, Any] = getattr(state, f.name)
        old = sent.get(f.name, {})
        changed = {k: v for k, v in new.items() if old.get(k) is not v}
        removed = [k for k in old if k not in new]
        if changed or removed or full:
            tables[f.name] = (changed, removed)
    return Changes(tables, full)


def decide(
    state: ClusterState,
    in_flight: dict[str, str],
    policy: Policy,
    registry: Registry,
    *,
    scheduler_names: list[str],
    default_queue: str,
    session_id: str,
    memo: PodMemo,
) -> Outcome:
    """One session: the binds still in flight overlaid on ``state``, the snapshot, the cycle.
    The same in the worker process and (``--session-process=false``) in a thread."""
    view = replace(state, pods=apply(state.pods, in_flight))
    snapshot, problems = build_snapshot(
        view,
        scheduler_names=scheduler_names,
        now=time.time(),
        session_id=session_id,
        default_queue=default_queue,
        memo=memo,
    )
    return run_cycle(snapshot, policy, registry), problems


# -- the worker process ------------------------------------------------------------------------

_copy = ClusterState()
_memo = PodMemo()
_registry: Registry | None = None


def _start() -> None:
    global _registry
    _registry = Registry.from_entry_points()


def _session(
    changes: Changes,
    in_flight: dict[str, str],
    policy: Policy,
    scheduler_names: list[str],
    default_queue: str,
    session_id: str,
) -> Outcome:
    global _copy
    if changes.full:
        _copy = ClusterState()
    for table, (changed, removed) in changes.tables.items():
        store: dict[str, Any] = getattr(_copy, table)
        for key in removed:
            store.pop(key, None)
        store.update(changed)
    assert _registry is not None
    return decide(
        _copy,
        in_flight,
        policy,
        _registry,
        scheduler_names=scheduler_names,
        default_queue=default_queue,
        session_id=session_id,
        memo=_memo,
    )


# -- the operator's side -----------------------------------------------------------------------


class SessionWorker:
    """The operator's handle on the session process (started on first use)."""

    def __init__(self, scheduler_names: list[str], default_queue: str) -> None:
        self._names = scheduler_names
        self._default_queue = default_queue
        self._pool: ProcessPoolExecutor | None = None
        self._sent: dict[str, dict[str, Any]] = {}

    async def decide(
        self, state: ClusterState, in_flight: dict[str, str], policy: Policy, session_id: str
    ) -> Outcome:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
            )
            self._sent = {}
        changes = diff(self._sent, state)
        loop = asyncio.get_running_loop()
        try:
            outcome = await loop.run_in_executor(
                self._pool,
                _session,
                changes,
                in_flight,
                policy,
                self._names,
                self._default_queue,
                session_id,
            )
        except BrokenProcessPool:
            self.close()  # the next tick starts a new worker and sends everything
            raise
        # copies: the caller may change its tables in place before the next tick
        self._sent = {f.name: dict(getattr(state, f.name)) for f in fields(ClusterState)}
        return outcome

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._sent = {}
