"""The binder's throttle: fewer requests in flight while the API server struggles."""

from __future__ import annotations

import asyncio
import logging

import pytest

from caldera.operator.writers.throttle import Throttle


async def test_no_more_than_the_limit_are_in_flight() -> None:
    throttle = Throttle(3, name="bind")
    peak = 0

    async def one() -> None:
        nonlocal peak
        async with throttle:
            peak = max(peak, throttle.active)
            await asyncio.sleep(0.01)

    await asyncio.gather(*(one() for _ in range(20)))
    assert peak == 3 and throttle.active == 0


def test_a_timeout_halves_the_limit_once_per_burst_and_says_what_timed_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    throttle = Throttle(32, name="bind", cooldown=60.0)
    with caplog.at_level(logging.WARNING):
        for _ in range(10):  # all 32 binds time out together: one signal, not ten
            throttle.overloaded("create pods/binding: no answer within 10s")
    assert throttle.limit == 16
    assert len(caplog.records) == 1
    assert "no answer within 10s" in caplog.records[0].getMessage()


def test_successes_bring_the_limit_back_up_to_its_ceiling() -> None:
    throttle = Throttle(8, name="bind", cooldown=0.0)
    throttle.overloaded("slow")
    throttle.overloaded("slow")
    assert throttle.limit == 2
    for _ in range(200):
        throttle.ok()
    assert throttle.limit == 8


def test_the_limit_never_drops_below_one() -> None:
    throttle = Throttle(2, name="bind", cooldown=0.0)
    for _ in range(5):
        throttle.overloaded("slow")
    assert throttle.limit == 1
