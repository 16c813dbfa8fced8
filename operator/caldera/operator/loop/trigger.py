"""When the next session runs: at once after news to an idle scheduler, never later than one
period after the last.

News (a pending pod of ours, capacity freed, a node or queue changed) arms the trigger. A
scheduler that has been idle for at least ``debounce`` starts a session at once, so a pod that
arrives alone is decided in the time one session takes. News that arrives while sessions run back
to back waits until ``debounce`` has passed since the last session ended, so a burst of pods
gathers into a few sessions rather than one session per pod. With no news a session still runs
every ``period`` (retrying what is waiting, as Volcano's fixed period does). Sessions never
overlap: news that arrives during a session arms the trigger for the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

__all__ = ["Trigger"]


class Trigger:
    def __init__(self, *, debounce: float, period: float) -> None:
        self.debounce = debounce
        self.period = period
        self._news = asyncio.Event()
        self._ended = -float("inf")
        """When the last session ended (monotonic seconds)."""
        self.pokes = 0

    def poke(self) -> None:
        """There is news: run a session soon."""
        self.pokes += 1
        self._news.set()

    def done(self) -> None:
        """A session has just ended."""
        self._ended = time.monotonic()

    async def wait(self) -> bool:
        """Wait until a session is due; True when news started it, False when the period did."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._news.wait(), timeout=self.period)
        news = self._news.is_set()
        if news and self.debounce > 0:
            rest = self.debounce - (time.monotonic() - self._ended)
            if rest > 0:
                await asyncio.sleep(rest)
        self._news.clear()
        return news
