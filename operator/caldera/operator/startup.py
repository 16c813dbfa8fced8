"""How the operator tells it is up: ready once the cache has listed everything and the session
side is warm, one line saying what the cache holds, and the event loop's lag as a metric. Each
takes the runtime as :class:`Starting`, the few parts of it they read, so this module knows
nothing of :mod:`caldera.operator.app`, which starts them."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from caldera.operator.loop.scheduler import Scheduler
    from caldera.operator.metrics import Metrics
    from caldera.operator.watch.cache import Cache
    from caldera.operator.watch.informer import Informer

__all__ = ["Starting", "ready_when_warm", "say_synced", "watch_loop_lag"]

log = logging.getLogger("caldera.operator.app")


class Starting(Protocol):
    """What start-up reads of the operator's runtime (:class:`~caldera.operator.app.Runtime`)."""

    cache: Cache | None
    scheduler: Scheduler | None
    informers: list[Informer]
    metrics: Metrics
    loop_lag_max: float


async def ready_when_warm(runtime: Starting, ready: asyncio.Event) -> None:
    """Ready (``/readyz``, and the first session) once the cache has every listing and the
    session process has started: a pod created then is decided at once, not after the
    process's imports."""
    if runtime.cache is not None:
        await runtime.cache.synced.wait()
    if runtime.scheduler is not None and runtime.scheduler.worker is not None:
        managed = runtime.scheduler.policy.policy.managed_resources
        since = asyncio.get_running_loop().time()
        await runtime.scheduler.worker.warm(runtime.cache, managed)
        log.info(
            "session process ready in %.1fs (a forked one has built its model of the cluster)",
            asyncio.get_running_loop().time() - since,
        )
    elif runtime.scheduler is not None:
        since = asyncio.get_running_loop().time()
        await runtime.scheduler.warm()
        log.info("model of the cluster built in %.1fs", asyncio.get_running_loop().time() - since)
    ready.set()


async def say_synced(runtime: Starting, since: float) -> None:
    """One line when the cache is ready: how long it took, what it holds, what is not served."""
    assert runtime.cache is not None
    await runtime.cache.synced.wait()
    state = runtime.cache.state
    absent = sorted({i.kind.plural for i in runtime.informers if i.absent})
    log.info(
        "cache synced in %.1fs: %d nodes, %d pods, %d podgroups, %d queues%s",
        asyncio.get_running_loop().time() - since,
        len(state.nodes),
        len(state.pods),
        len(state.podgroups),
        len(state.queues),
        f"; not served here, taken as none: {', '.join(absent)}" if absent else "",
    )


async def watch_loop_lag(runtime: Starting, interval: float = 0.05, window: float = 10.0) -> None:
    """Sample how late the loop wakes up; export the worst delay of each window."""
    loop = asyncio.get_running_loop()
    worst, started = 0.0, loop.time()
    while True:
        before = loop.time()
        await asyncio.sleep(interval)
        lag = max(loop.time() - before - interval, 0.0)
        worst = max(worst, lag)
        runtime.loop_lag_max = max(runtime.loop_lag_max, lag)
        if loop.time() - started >= window:
            runtime.metrics.loop_lag.set(worst)
            worst, started = 0.0, loop.time()
