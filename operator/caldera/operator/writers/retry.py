"""A keyed work queue with retries: what binds, evictions and status writes go through.

Each item has a key (a pod, a PodGroup, a queue). Putting a key that is already waiting replaces
its value, so a newer intent for the same object supersedes an older one; a key is worked on by one
worker at a time, so two writes to one object never race. A handler returns True when the item is
done and False (or raises) to have it retried after a per-key exponential backoff (5 ms doubling up
to 1000 s), and retries also pass a global token bucket (100 per second, burst 1000), as Volcano's
error-task queue does, so a failing API server is not hammered. First attempts are limited only by
the number of workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["RetryPolicy", "TokenBucket", "WorkQueue"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    base: float = 0.005
    cap: float = 1000.0
    qps: float = 100.0
    burst: int = 1000

    def delay(self, failures: int) -> float:
        return float(min(self.cap, self.base * 2 ** max(failures - 1, 0)))


class TokenBucket:
    """Tokens refill at ``rate`` per second up to ``burst``; ``take`` waits for one."""

    def __init__(self, rate: float, burst: int) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._stamp: float | None = None

    async def take(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            if self._stamp is not None:
                self._tokens = min(self._burst, self._tokens + (now - self._stamp) * self._rate)
            self._stamp = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return
            await asyncio.sleep((1.0 - self._tokens) / self._rate)


class WorkQueue(Generic[K, V]):
    def __init__(
        self,
        name: str,
        handler: Callable[[K, V], Awaitable[bool]],
        *,
        workers: int = 16,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.name = name
        self._handler = handler
        self._workers = workers
        self._policy = policy or RetryPolicy()
        self._bucket = TokenBucket(self._policy.qps, self._policy.burst)
        self._values: dict[K, V] = {}
        self._failures: dict[K, int] = {}
        self._due: list[tuple[float, int, K]] = []
        self._active: set[K] = set()
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def put(self, key: K, value: V, *, delay: float = 0.0) -> None:
        """Queue ``value`` for ``key`` (replacing one that is still waiting)."""
        fresh = key not in self._values
        self._values[key] = value
        if fresh:
            self._schedule(key, delay)

    def waiting(self, key: K) -> V | None:
        """The value queued for ``key`` and not yet handed to the handler, if any."""
        return self._values.get(key)

    def _schedule(self, key: K, delay: float) -> None:
        loop = asyncio.get_running_loop()
        heapq.heappush(self._due, (loop.time() + delay, next(self._seq), key))
        self._idle.clear()
        self._wake.set()

    def __len__(self) -> int:
        return len(self._values) + len(self._active)

    @property
    def retrying(self) -> int:
        """Keys waiting out a backoff after a failure (or being retried now)."""
        return len(self._failures)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def join(self) -> None:
        """Wait until nothing is queued or in progress (used by tests and shutdown)."""
        await self._idle.wait()

    async def run(self) -> None:
        await asyncio.gather(*(self._worker() for _ in range(self._workers)))

    async def _next(self) -> K:
        loop = asyncio.get_running_loop()
        while True:
            if self._due:
                due, _, key = self._due[0]
                wait = due - loop.time()
                if wait <= 0:
                    heapq.heappop(self._due)
                    if key in self._active:
                        # one worker per key: try again once the other worker is done
                        self._schedule(key, self._policy.base)
                        continue
                    if key in self._values:
                        return key
                    continue
            else:
                wait = 3600.0
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=max(wait, 0.0))

    async def _worker(self) -> None:
        while True:
            key = await self._next()
            value = self._values.pop(key)
            self._active.add(key)
            retrying = key in self._failures
            try:
                if retrying:
                    await self._bucket.take()
                done = await self._handler(key, value)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: handling %s failed", self.name, key)
                done = False
            finally:
                self._active.discard(key)
            if done:
                self._failures.pop(key, None)
            else:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                if key not in self._values:
                    self._values[key] = value
                    self._schedule(key, self._policy.delay(failures))
            if not self._values and not self._active:
                self._idle.set()
