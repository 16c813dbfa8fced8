"""What an API failure means for the caller: retry later, resync, or give up.

kubernetes-asyncio raises ``ApiException`` for HTTP errors and aiohttp/asyncio errors for transport
failures; writers only need the classification below, never the raw exception types.
"""

from __future__ import annotations

import asyncio
import enum

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["API_ERRORS", "Outcome", "classify", "gives_up", "status_of"]


API_ERRORS: tuple[type[BaseException], ...] = (
    ApiException,
    aiohttp.ClientError,
    TimeoutError,
    OSError,
)
"""What a kubernetes-asyncio call raises when the request fails (HTTP error or transport)."""


class Outcome(enum.Enum):
    NOT_FOUND = "not found"
    CONFLICT = "conflict"
    RETRY = "retry"
    """Transient: server error, throttling, timeout, dropped connection."""
    FATAL = "fatal"
    """The request itself is wrong (4xx other than the above); retrying will not help."""


def status_of(exc: BaseException) -> int | None:
    return exc.status if isinstance(exc, ApiException) else None


def classify(exc: BaseException) -> Outcome:
    if isinstance(exc, ApiException):
        if exc.status == 404:
            return Outcome.NOT_FOUND
        if exc.status == 409:
            return Outcome.CONFLICT
        if exc.status in (408, 429) or (exc.status or 0) >= 500 or exc.status == 0:
            return Outcome.RETRY
        return Outcome.FATAL
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | ConnectionError | OSError):
        return Outcome.RETRY
    return Outcome.FATAL


def gives_up(exc: BaseException) -> bool:
    """After a failed write: True when retrying cannot help (the object is gone, or the request
    itself is wrong); False when the write should be retried."""
    return classify(exc) in (Outcome.NOT_FOUND, Outcome.FATAL)
