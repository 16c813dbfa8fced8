"""Sessions in a process of their own, fed only what changed in the cluster.

A session is CPU-bound Python. Run in a thread of the operator's process, it holds the
interpreter lock for most of its run, and the event loop waits for the lock after every socket
write: the benchmark measured single loop steps of 0.2–0.7 s while sessions ran. In a separate
process the session has its own interpreter and its own core, and the loop only diffs and sends.

The worker keeps a copy of the cluster state between sessions. Each session the operator sends
the objects the cache stored and the keys it dropped since the last session (the cache records
them as events arrive); the worker applies them, overlays the binds still in flight, builds the
snapshot (with its own pod memo) and runs the cycle. If the worker dies, the next session starts a
new one and sends the whole state.

Binds are not held back until the session ends: as Volcano's cache starts binding the moment a
job commits, each bind the session decides is sent ahead in small batches on a queue of its own
(:class:`BindStream`), and a thread of the operator hands them to the event loop, so binding a
large burst overlaps the session placing it. The result still lists every bind; those already
sent ahead are not bound twice.

Cost per session on the event loop: pickling what changed (the first session: everything).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from caldera.api.usage import NodeUsage
from caldera.collector import before_fork
from caldera.framework.policy import Policy
from caldera.operator.loop.decide import (
    BindStream,
    Outcome,
    SessionConfig,
    Streamed,
    can_fork,
    decide,
    prepare,
    run_session,
    start,
    start_forked,
)
from caldera.operator.watch.assume import InFlight

if TYPE_CHECKING:  # the session process imports this module's callees only, not the cache
    from caldera.operator.watch.cache import Cache

__all__ = ["BindStream", "SessionConfig", "SessionWorker", "Streamed", "decide"]

# -- the operator's side -----------------------------------------------------------------------


class SessionWorker:
    """The operator's handle on the session process (started on first use).

    Each session sends what the cache changed since the last one, as JSON; a new worker (the
    first, or one replacing a worker that died) gets the whole state instead.
    """

    def __init__(
        self,
        config: SessionConfig,
        on_binds: Callable[[Streamed], None] = lambda item: None,
        *,
        fork: bool | None = None,
    ) -> None:
        self._config = config
        self.on_binds = on_binds
        """Called on the event loop with binds sent ahead of a session's result."""
        self.fork = can_fork() if fork is None else fork
        """Fork the process from this one once the cache is synced (it starts with the state
        in memory, nothing sent, nothing validated twice), rather than spawn a fresh
        interpreter that is sent the whole state as JSON."""
        self._pool: ProcessPoolExecutor | None = None
        self._stream: Any = None
        self._reader: threading.Thread | None = None
        self._fresh = True
        """The process has nothing yet: the next session sends everything."""
        self._usage_version = -1
        """The version of the node usage the process last got (-1: none)."""
        self._warm: Future[int] | None = None
        """Done once the process has started and imported what sessions need."""

    def start(self, cache: Cache | None = None, managed: frozenset[str] = frozenset()) -> None:
        """Start the process now, not at the first session: a spawned one at once (it takes a
        second to import, while the informers list); a forked one once there is a ``cache``
        (synced) to start from, whose model it builds at once (``managed``: the policy's
        managed resources), so the first session costs what changed since."""
        if self._pool is not None or (self.fork and cache is None):
            return
        context = multiprocessing.get_context("fork" if self.fork else "spawn")
        self._stream = context.SimpleQueue()
        if self.fork:
            assert cache is not None
            initializer: Callable[..., None] = start_forked
            initargs: tuple[Any, ...] = (self._stream, cache.state)
        else:
            initializer, initargs = start, (self._stream,)
        self._pool = ProcessPoolExecutor(
            max_workers=1, mp_context=context, initializer=initializer, initargs=initargs
        )
        if self.fork:
            before_fork()  # the state's pages stay shared until one side writes them
        # starts the process (a fork: right here)
        self._warm = (
            self._pool.submit(prepare, self._config, managed)
            if self.fork
            else self._pool.submit(int)
        )
        if cache is not None and self.fork:
            cache.forget_changes()  # the process has the state as of now
        self._fresh = not self.fork
        self._usage_version = -1  # a new process has no node usage yet
        loop = asyncio.get_running_loop()
        self._reader = threading.Thread(
            target=self._read, args=(self._stream, loop), name="bind-stream", daemon=True
        )
        self._reader.start()

    async def warm(self, cache: Cache | None = None, managed: frozenset[str] = frozenset()) -> None:
        """Wait until the process is up and has what a session needs (a spawned one: its
        imports, about a second after :meth:`start`; a forked one: its model), so the first
        session does not pay."""
        self.start(cache, managed)
        if self._warm is not None:
            try:
                await asyncio.wrap_future(self._warm)
            except BrokenProcessPool:
                self.close()  # the next session starts a new one

    def _read(self, stream: Any, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the binds sent ahead to the event loop (a thread: the queue's get blocks)."""
        while (item := stream.get()) is not None:
            loop.call_soon_threadsafe(self.on_binds, item)

    async def decide(
        self,
        cache: Cache,
        in_flight: InFlight,
        policy: Policy,
        session_id: str,
        evicting: Sequence[str] = (),
        lifting: Sequence[str] = (),
        node_usage: tuple[int, Mapping[str, NodeUsage]] = (0, {}),
    ) -> Outcome:
        """One session in the worker process; ``node_usage`` (version, usage) crosses to it
        only when its version changed since the last session, or the process is new."""
        self.start(cache)
        version, usage = node_usage
        send = self._fresh or version != self._usage_version
        self._usage_version = version
        assert self._pool is not None
        changes = cache.everything() if self._fresh else cache.take_changes()
        self._fresh = False
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._pool,
                run_session,
                changes,
                in_flight,
                policy,
                self._config,
                session_id,
                tuple(evicting),
                tuple(lifting),
                usage if send else None,  # pickled: the process gets its own copy
            )
        except BrokenProcessPool:
            self.close()  # the next session starts a new worker and sends everything
            raise

    def close(self) -> None:
        """Stop the process now, even in the middle of a session (its result is not wanted)."""
        if self._pool is not None:
            # ProcessPoolExecutor can only wait for a running call to end; a session at 50,000
            # pods takes seconds, so its process is ended instead
            processes = list(getattr(self._pool, "_processes", {}).values())
            self._pool.shutdown(wait=False, cancel_futures=True)
            for process in processes:
                process.kill()  # it ignores SIGTERM (see decide.start)
            for process in processes:
                process.join(timeout=5)
            self._pool = None
        if self._stream is not None:
            self._stream.put(None)  # ends the reader
            self._stream = None
