"""Plain JSON requests to the Kubernetes API: every write, read and watch the operator makes.

kubernetes-asyncio's generated methods build typed models for every request and reply (walking
each body, parsing each timestamp with dateutil). The operator never needs those models: it sends
JSON it built itself and reads what it asked for. So requests go straight through the client's
aiohttp session (the same TLS context, proxy and credentials as kubernetes-asyncio's, refreshed the
same way), which is several times cheaper per request, and a request counter sees each one by verb
and resource (``caldera_api_requests_total``). An error status raises :class:`ApiError` with the
server's message; a request that gets no answer in time raises :class:`ApiTimeout` naming the
request and the time waited.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack
from urllib.parse import quote

import aiohttp
import msgspec
import orjson
from kubernetes_asyncio import client

from caldera.k8s.client import make_api_client
from caldera.k8s.reachability import Reachability
from caldera.models.kinds import selector_query

__all__ = [
    "JSON",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiError",
    "ApiTimeout",
    "Resource",
    "Rest",
    "WatchEvent",
    "status_message",
]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
_METHODS = {
    "get": "GET",
    "list": "GET",
    "watch": "GET",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
}


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a resource lives: ``/api/v1/...`` for the core group, ``/apis/g/v/...`` otherwise."""

    group: str
    version: str
    plural: str

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, message: str, reason: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.reason = reason
        """The Status object's ``reason`` (``AlreadyExists``, ``Conflict``, ``Expired``…)."""


class ApiTimeout(TimeoutError):
    """No answer in time; says which request and how long it waited."""


def _status(raw: str | bytes | None) -> tuple[str, str]:
    """(message, reason) of a Kubernetes Status body; the raw text when it is not one."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw or ""
    try:
        body = json.loads(text)
    except ValueError:
        return text[:200], ""
    if not isinstance(body, dict):
        return text[:200], ""
    reason = str(body.get("reason") or "")
    return str(body.get("message") or reason or text[:200]), reason


def status_message(raw: str | bytes | None) -> str:
    """The ``message`` of a Kubernetes Status body, or the raw text."""
    return _status(raw)[0]


def _error(status: int, raw: bytes) -> ApiError:
    return ApiError(status, *_status(raw))


Counter = Callable[[str, str], None]
"""Called with (verb, resource[/subresource]) for every request sent."""


class CallOptions(TypedDict, total=False):
    """What a request may say besides its verb and resource (see :meth:`Rest.call_json`)."""

    namespace: str | None
    name: str | None
    subresource: str
    body: Mapping[str, Any] | None
    content_type: str
    query: Mapping[str, str] | None
    timeout: float | None


class Rest:
    """JSON requests through one pooled session. Make it inside the event loop it serves."""

    def __init__(
        self,
        cfg: client.Configuration,
        *,
        timeout: float = 30.0,
        pool: int = 256,
        counter: Counter | None = None,
        reachability: Reachability | None = None,
    ) -> None:
        cfg.connection_pool_maxsize = pool
        self.api_client = make_api_client(cfg)
        """For the few callers that need kubernetes-asyncio itself (the Lease elector)."""
        self._cfg = cfg
        self._host = (cfg.host or "").rstrip("/")
        self._session: aiohttp.ClientSession = self.api_client.rest_client.pool_manager
        self._proxy = self.api_client.rest_client.proxy
        self._timeout = timeout
        self._count = counter or (lambda verb, resource: None)
        self.reach = reachability or Reachability(say=False)
        """Whether the server answers: one line per outage instead of one per request."""

    async def close(self) -> None:
        await self.api_client.close()

    async def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Accept": JSON, "Content-Type": content_type}
        keys = self._cfg.api_key or {}
        for ident in ("BearerToken", "authorization"):
            if ident in keys:
                token = await self._cfg.get_api_key_with_prefix(ident)
                if token:
                    headers["Authorization"] = token
                break
        else:
            if self._cfg.username or self._cfg.password:
                headers["Authorization"] = self._cfg.get_basic_auth_token()
        return headers

    async def call(self, verb: str, resource: Resource, **options: Unpack[CallOptions]) -> Any:
        """Send one request; returns the decoded JSON reply (None when it has no body)."""
        raw = await self.call_json(verb, resource, **options)
        return orjson.loads(raw) if raw else None

    async def call_json(
        self,
        verb: str,
        resource: Resource,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str = "",
        body: Mapping[str, Any] | None = None,
        content_type: str = JSON,
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> bytes:
        """Send one request; returns the reply's JSON as it came (empty when it has none), for a
        caller that decodes it into records itself."""
        path = resource.path(namespace, name, subresource)
        self._count(verb, f"{resource.plural}/{subresource}" if subresource else resource.plural)
        data = None if body is None else orjson.dumps(body)
        return await self._send(verb, path, data, content_type, query, timeout or self._timeout)

    async def get_path(self, path: str) -> Any:
        """GET a path that is not a resource (``/version``, ``/readyz``)."""
        raw = await self._send("get", path, None, JSON, None, self._timeout)
        return orjson.loads(raw) if raw else None

    async def _send(
        self,
        verb: str,
        path: str,
        data: bytes | None,
        content_type: str,
        query: Mapping[str, str] | None,
        wait: float,
    ) -> bytes:
        try:
            async with asyncio.timeout(wait):
                async with self._session.request(
                    _METHODS[verb],
                    self._host + path,
                    params=query,
                    data=data,
                    headers=await self._headers(content_type),
                    proxy=self._proxy,
                ) as resp:
                    raw = await resp.read()
                    status = resp.status
        except TimeoutError:
            raise ApiTimeout(f"{verb} {path}: no answer within {wait:g}s") from None
        except (aiohttp.ClientError, OSError) as exc:
            self.reach.failure(exc)
            raise
        self.reach.answered()
        if status >= 300:
            raise _error(status, raw)
        return raw

    async def watch(
        self,
        resource: Resource,
        *,
        resource_version: str,
        timeout_seconds: int,
        selector: str = "",
    ) -> AsyncIterator[WatchEvent]:
        """The events of one watch request, until the server ends it: each event's type, and
        its object as the JSON it came in (the caller decodes it as its kind needs). With
        ``selector`` (an informer's: :func:`~caldera.models.kinds.selector_query`), only the
        objects it picks (one that stops matching comes as ``DELETED``).

        An ``ERROR`` event raises :class:`ApiError` with the Status it carries (``410`` when the
        version has expired).
        """
        path = resource.path()
        self._count("watch", resource.plural)
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        query.update(selector_query(selector))
        # the server ends the watch after timeoutSeconds; the client waits a little longer
        timeout = aiohttp.ClientTimeout(total=timeout_seconds + 30, sock_connect=self._timeout)
        try:
            resp = await self._session.get(
                self._host + path,
                params=query,
                headers=await self._headers(JSON),
                proxy=self._proxy,
                timeout=timeout,
            )
        except (aiohttp.ClientError, OSError) as exc:
            self.reach.failure(exc)
            raise
        self.reach.answered()
        async with resp:
            if resp.status >= 300:
                raw = await resp.read()
                raise _error(resp.status, raw)
            buffer = b""
            try:
                async for chunk in resp.content.iter_any():
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line, buffer = buffer[:end], buffer[end + 1 :]
                        if line.strip():
                            yield _event(line)
            except (aiohttp.ClientError, OSError) as exc:
                self.reach.failure(exc)  # the server went away mid-watch
                raise
            if buffer.strip():
                yield _event(buffer)


class WatchEvent(msgspec.Struct, frozen=True):
    """One event of a watch stream; ``object`` is its object's JSON, not decoded."""

    type: str
    object: msgspec.Raw = msgspec.Raw(b"{}")


_EVENT = msgspec.json.Decoder(WatchEvent)


def _event(line: bytes) -> WatchEvent:
    try:
        event = _EVENT.decode(line)
    except msgspec.DecodeError as exc:  # not JSON, or not an event
        raise ValueError(f"a watch event that is not one: {exc}") from None
    if event.type == "ERROR":
        obj = orjson.loads(memoryview(event.object))
        obj = obj if isinstance(obj, dict) else {}
        raise ApiError(
            int(obj.get("code") or 500), str(obj.get("message") or ""), obj.get("reason") or ""
        )
    return event
