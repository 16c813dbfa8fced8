"""Event posting: deduplicated, and giving way to binds during a burst."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from caldera.operator.writers.events import EventPoster


class FakeRest:
    def __init__(self) -> None:
        self.posted: list[str] = []

    async def call(self, verb: str, resource: Any, **kw: Any) -> None:
        self.posted.append(kw["body"]["reason"])


def _poster(rest: FakeRest, patience: float = 5.0) -> EventPoster:
    return EventPoster(rest, "volcano", patience=patience)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def running(events: EventPoster) -> AsyncIterator[None]:
    """The poster's queue at work for the block, then stopped."""
    runner = asyncio.create_task(events.queue.run())
    try:
        yield
    finally:
        runner.cancel()


def post_scheduled(events: EventPoster) -> None:
    events.pod("default", "p", "uid-p", type_="Normal", reason="Scheduled", message="m")


async def test_an_event_waits_while_binds_are_queued_and_goes_once_they_are_out() -> None:
    rest = FakeRest()
    events = _poster(rest)
    burst = True
    events.busy = lambda: burst
    async with running(events):
        post_scheduled(events)
        await asyncio.sleep(0.2)
        assert rest.posted == []  # binds first
        burst = False
        await asyncio.wait_for(events.drain(), timeout=5)
        assert rest.posted == ["Scheduled"]


async def test_an_event_is_not_held_back_for_longer_than_its_patience() -> None:
    rest = FakeRest()
    events = _poster(rest, patience=0.1)
    events.busy = lambda: True  # binds that never drain
    async with running(events):
        post_scheduled(events)
        await asyncio.wait_for(events.drain(), timeout=5)
        assert rest.posted == ["Scheduled"]


async def test_the_same_news_about_the_same_object_is_posted_once() -> None:
    rest = FakeRest()
    events = _poster(rest)
    async with running(events):
        for _ in range(3):
            events.pod(
                "default", "p", "uid-p", type_="Warning", reason="FailedScheduling", message="x"
            )
        events.pod("default", "p", "uid-p", type_="Warning", reason="FailedScheduling", message="y")
        await asyncio.wait_for(events.drain(), timeout=5)
        assert rest.posted == ["FailedScheduling", "FailedScheduling"]
