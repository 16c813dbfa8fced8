"""Memories that keep the operator from repeating itself.

The cache learns about our own writes only when the watch delivers them, and the cluster passes
through short-lived states (a pod seen before the PodGroup made for it) on every burst. Without a
memory each session would re-send the same status, re-post the same event, and warn about states
that fix themselves a moment later.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

__all__ = ["Lasting", "Recent"]


class Recent:
    """What was last sent per key, so the same news is not sent again.

    Identical values are suppressed for ``ttl`` seconds (then sent again, in case the first
    write was lost). What is older than that is dropped every quarter of ``ttl`` (so nothing
    is held past 1.25 ``ttl``): the keys name pods and groups that come and go, and a memory of
    every one that ever was held up to ``limit`` of them before it was emptied all at once.
    """

    def __init__(
        self, ttl: float, limit: int = 200_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl = ttl
        self._limit = limit
        self._clock = clock
        self._sent: dict[str, tuple[object, float]] = {}
        self._sweep_at = clock() + ttl / 4

    def __len__(self) -> int:
        return len(self._sent)

    def forget(self, key: str) -> None:
        """What was sent for ``key`` was overwritten since: the next value is fresh."""
        self._sent.pop(key, None)

    def fresh(self, key: str, value: object) -> bool:
        now = self._clock()
        if now >= self._sweep_at:
            ttl = self._ttl
            self._sent = {k: v for k, v in self._sent.items() if now - v[1] < ttl}
            self._sweep_at = now + ttl / 4
        last = self._sent.get(key)
        if last is not None and last[0] == value and now - last[1] < self._ttl:
            return False
        if len(self._sent) >= self._limit:
            self._sent.clear()
        self._sent[key] = (value, now)
        return True


class Lasting:
    """Which problems have lasted: each is told once, after ``grace`` seconds without a break.

    ``seen`` takes every problem of one session. A problem missing from a session is forgotten,
    so one that comes back starts its grace again; one that lasts is returned exactly once.
    """

    def __init__(self, grace: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self._clock = clock
        self._since: dict[str, float] = {}
        self._told: set[str] = set()

    def seen(self, problems: Iterable[str]) -> list[str]:
        now = self._clock()
        current = dict.fromkeys(problems)
        self._since = {p: self._since.get(p, now) for p in current}
        self._told &= current.keys()
        due = [p for p in current if p not in self._told and now - self._since[p] >= self.grace]
        self._told.update(due)
        return due
