"""How many requests of one kind may be in flight: adapted to how the API server copes.

Additive increase, multiplicative decrease, as TCP does: each success raises the limit by
1/limit (one more per round of successes) up to the ceiling; a timeout or an overloaded answer
halves it (at least one request stays in flight). When all requests time out together — the sign
of a saturated API server — the limit drops at once instead of keeping the server saturated, and
the log says so once per drop, naming what timed out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from types import TracebackType

__all__ = ["Throttle"]

log = logging.getLogger(__name__)


class Throttle:
    def __init__(self, ceiling: int, *, name: str, cooldown: float = 1.0) -> None:
        self.ceiling = ceiling
        self.limit = float(ceiling)
        self.name = name
        self._cooldown = cooldown
        self._last_drop = float("-inf")
        self._active = 0
        self._freed = asyncio.Condition()

    @property
    def active(self) -> int:
        return self._active

    async def __aenter__(self) -> None:
        async with self._freed:
            await self._freed.wait_for(lambda: self._active < max(int(self.limit), 1))
            self._active += 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        async with self._freed:
            self._active -= 1
            self._freed.notify_all()

    def ok(self) -> None:
        self.limit = min(float(self.ceiling), self.limit + 1.0 / max(self.limit, 1.0))

    def overloaded(self, why: str) -> None:
        """Halve the limit, at most once per cooldown (one burst of timeouts is one signal)."""
        now = time.monotonic()
        if now - self._last_drop < self._cooldown:
            return
        self._last_drop = now
        before = self.limit
        self.limit = max(1.0, self.limit / 2)
        log.warning(
            "%s: the API server is slow (%s); %d requests in flight at most, was %d",
            self.name,
            why,
            int(self.limit),
            int(before),
        )
