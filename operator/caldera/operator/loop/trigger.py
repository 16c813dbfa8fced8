"""When the next session runs: soon after news, and never later than one period after the last.

News (a pending pod of ours, capacity freed, a node or queue changed) arms the trigger; the
session then waits ``debounce`` for more news to gather, so a burst of pods is placed in a few
sessions rather than one session per pod. With no news a session still runs every ``period``
(retrying what is waiting, as Volcano's fixed period does). Sessions never overlap: news that
arrives during a session arms the trigger for the next one.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["Trigger"]


class Trigger:
    def __init__(self, *, debounce: float, period: float) -> None:
        self.debounce = debounce
        self.period = period
        self._news = asyncio.Event()
        self.pokes = 0

    def poke(self) -> None:
        """There is news: run a session soon."""
        self.pokes += 1
        self._news.set()

    async def wait(self) -> bool:
        """Wait until a session is due; True when news started it, False when the period did."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._news.wait(), timeout=self.period)
        news = self._news.is_set()
        if news and self.debounce > 0:
            await asyncio.sleep(self.debounce)
        self._news.clear()
        return news
