"""Writes whose reply the operator does not need, sent without building typed models.

kubernetes-asyncio turns every reply into its generated models (parsing each timestamp with
dateutil); for binds, events and status writes nobody reads that reply, and at thousands of
writes a second building it was a large share of the event loop's time. :func:`send` asks for
the raw reply instead, reads it so the connection goes back to the pool, and raises the same
``ApiException`` the typed call would on an error status, so callers classify failures as before.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

__all__ = ["send", "status_message"]


async def send(call: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> None:
    """Run the API method ``call`` for its effect; raise ``ApiException`` on an error status."""
    resp = await call(*args, _preload_content=False, **kwargs)
    async with resp:
        body = await resp.read()
        if 200 <= resp.status < 300:
            return
    exc = ApiException(status=resp.status, reason=resp.reason)
    exc.body = body.decode("utf-8", errors="replace")
    exc.headers = resp.headers
    raise exc


def status_message(raw: str | bytes | None) -> str:
    """The ``message`` of a Kubernetes Status body, or the raw text."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw or ""
    try:
        body = json.loads(text)
    except ValueError:
        return text[:200]
    if not isinstance(body, dict):
        return text[:200]
    return str(body.get("message") or body.get("reason") or text[:200])
