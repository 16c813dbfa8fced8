"""Whether the API server answers at all: two log lines per outage, not one per failed request.

When the API server goes away (restarted, its node lost, the network cut), every request in
flight and every retry fails the same way, a refused or dropped connection. Logging each one
buries the log in identical warnings (a burst of binds makes over a thousand). :class:`Rest`
reports each request's fate here instead: the first request that cannot reach the server logs
one warning, the first answer after that logs one line saying the server is back, for how long it
was away and how many requests failed meanwhile (and which writes were retried). Callers ask
:meth:`Reachability.counted` before logging a failure of their own and stay quiet when it is one
of these. A server that answers, even with an error status, is reachable: such failures are the
caller's to report.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable

import aiohttp

__all__ = ["Reachability", "unreachable"]

log = logging.getLogger(__name__)


def unreachable(exc: BaseException) -> bool:
    """The request never got an answer because no connection to the server could be made or
    kept (refused, reset, dropped)."""
    return isinstance(
        exc,
        aiohttp.ClientConnectionError | ConnectionError | aiohttp.ClientPayloadError,
    ) and not isinstance(exc, asyncio.TimeoutError)


class Reachability:
    def __init__(
        self,
        on_failure: Callable[[], None] = lambda: None,
        on_change: Callable[[bool], None] = lambda reachable: None,
        clock: Callable[[], float] = time.monotonic,
        *,
        say: bool = True,
    ) -> None:
        self._say = say
        """Log the two lines (the operator); a one-shot command reports failures itself."""
        self._on_failure = on_failure
        self._on_change = on_change
        self._clock = clock
        self.down_since: float | None = None
        """When the current outage began (None: the server answers)."""
        self.failed = 0
        """Requests that found no server during the current outage."""
        self.retried: Counter[str] = Counter()
        """Writes retried during the current outage, by what they were (``bind``…)."""

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def failure(self, exc: BaseException) -> None:
        """A request failed; an outage starts at the first one that found no server."""
        if not unreachable(exc):
            return
        self._on_failure()
        if self.down_since is None:
            self.down_since = self._clock()
            self.failed = 0
            self.retried.clear()
            self._on_change(False)
            if self._say:
                log.warning(
                    "the API server is unreachable (%s); retrying, quietly until it is back "
                    "(failed requests are counted in caldera_api_unreachable_requests_total)",
                    exc,
                )
        self.failed += 1

    def answered(self) -> None:
        """A request got an answer (any status): the server is there."""
        if self.down_since is None:
            return
        away = self._clock() - self.down_since
        retried = ", ".join(f"{n} {what}s" for what, n in sorted(self.retried.items()))
        if self._say:
            log.warning(
                "the API server is reachable again after %.1fs: %d requests failed meanwhile%s",
                away,
                self.failed,
                f"; retried {retried}" if retried else "",
            )
        self.down_since = None
        self._on_change(True)

    def counted(self, exc: BaseException, retrying: str = "") -> bool:
        """True when ``exc`` is part of an outage already said (the caller logs nothing); a
        ``retrying`` write is counted for the line that ends the outage."""
        if not (self.down and unreachable(exc)):
            return False
        if retrying:
            self.retried[retrying] += 1
        return True
