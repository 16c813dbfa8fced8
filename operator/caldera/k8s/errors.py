"""What an API failure means for the caller: retry later, resync, or give up.

:class:`~caldera.k8s.rest.Rest` raises :class:`~caldera.k8s.rest.ApiError` for an error status and
aiohttp/asyncio errors for transport failures; writers only need the classification below and a
few words for logs and conditions, never the raw exception types.
"""

from __future__ import annotations

import asyncio
import enum

import aiohttp

from caldera.k8s.rest import ApiError

__all__ = ["API_ERRORS", "Outcome", "classify", "describe", "gives_up", "status_of"]


API_ERRORS: tuple[type[BaseException], ...] = (
    ApiError,
    aiohttp.ClientError,
    TimeoutError,
    OSError,
)
"""What a request raises when it fails (HTTP error or transport)."""


class Outcome(enum.Enum):
    NOT_FOUND = "not found"
    CONFLICT = "conflict"
    RETRY = "retry"
    """Transient: server error, throttling, timeout, dropped connection."""
    FATAL = "fatal"
    """The request itself is wrong (4xx other than the above); retrying will not help."""


def status_of(exc: BaseException) -> int | None:
    return exc.status if isinstance(exc, ApiError) else None


def classify(exc: BaseException) -> Outcome:
    if isinstance(exc, ApiError):
        if exc.status == 404:
            return Outcome.NOT_FOUND
        if exc.status == 409:
            return Outcome.CONFLICT
        if exc.status in (408, 429) or exc.status >= 500 or exc.status == 0:
            return Outcome.RETRY
        return Outcome.FATAL
    if isinstance(exc, aiohttp.ClientError | asyncio.TimeoutError | ConnectionError | OSError):
        return Outcome.RETRY
    return Outcome.FATAL


def gives_up(exc: BaseException) -> bool:
    """After a failed write: True when retrying cannot help (the object is gone, or the request
    itself is wrong); False when the write should be retried."""
    return classify(exc) in (Outcome.NOT_FOUND, Outcome.FATAL)


def describe(exc: BaseException) -> str:
    """A failed request in a few words: the HTTP status and the server's message, what timed
    out, or the transport error."""
    if isinstance(exc, ApiError | TimeoutError) and str(exc):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "no answer from the API server in time"
    return f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
