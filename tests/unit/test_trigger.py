"""The session trigger: at once after news to an idle scheduler, gathered while busy."""

from __future__ import annotations

import asyncio

from caldera.operator.loop.trigger import Trigger


async def test_news_to_an_idle_scheduler_starts_a_session_at_once() -> None:
    trigger = Trigger(debounce=3600.0, period=3600.0)
    trigger.poke()
    # an hour's debounce would time this out: an idle scheduler does not wait for it
    assert await asyncio.wait_for(trigger.wait(), timeout=30.0) is True


async def test_news_right_after_a_session_waits_for_the_debounce() -> None:
    trigger = Trigger(debounce=3600.0, period=3600.0)
    trigger.done()
    trigger.poke()
    waiting = asyncio.ensure_future(trigger.wait())
    await asyncio.sleep(0.2)
    assert not waiting.done()  # gathering more news behind the session that just ended
    waiting.cancel()


async def test_without_news_the_period_starts_a_session() -> None:
    trigger = Trigger(debounce=0.0, period=0.05)
    assert await asyncio.wait_for(trigger.wait(), timeout=2.0) is False
