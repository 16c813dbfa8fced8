"""Watch streams: ``?watch=true`` served as chunked JSON lines, as the apiserver's watch cache does.

Semantics that kopf and kubernetes-asyncio depend on:

* no ``resourceVersion`` (or ``"0"``): synthetic ``ADDED`` events for the current state, then
  changes; ``resourceVersion=N``: every change after N replayed from the history, then changes;
* N older than the retained history: a single ``ERROR`` event carrying a 410 ``Status`` — kopf
  restarts with a fresh list on it, kubernetes-asyncio's ``Watch`` raises/retries;
* ``allowWatchBookmarks``: ``BOOKMARK`` events with the latest resourceVersion while idle (and the
  ``k8s.io/initial-events-end`` bookmark after ``sendInitialEvents``);
* ``timeoutSeconds``: the stream ends cleanly after that long;
* selectors apply to transitions: an object that stops matching is reported ``DELETED``, one that
  starts matching ``ADDED`` (so a ``spec.nodeName=`` watch sees a pod leave when it is bound).

Tests can end every open stream (cleanly, or by resetting the connection) to force reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from aiohttp import web

from emulator.discovery import ResourceType
from emulator.errors import ApiError, bad_request
from emulator.selectors import Selector
from emulator.store import Store, WatchEvent, resource_key

JsonDict = dict[str, Any]
Item = tuple[str, JsonDict]  # (event type, object)


def translate(event: WatchEvent, selector: Selector) -> Item | None:
    """What a watcher with ``selector`` sees of ``event`` (None: nothing)."""
    now_matches = selector.matches(event.obj)
    if event.type != "MODIFIED":
        return (event.type, event.obj) if now_matches else None
    was_matching = event.old is not None and selector.matches(event.old)
    if now_matches and was_matching:
        return ("MODIFIED", event.obj)
    if now_matches:
        return ("ADDED", event.obj)
    if was_matching:
        # as kube-apiserver's watch cache does: the object as it last matched, at the version
        # of the change that took it out of the selection
        assert event.old is not None
        meta = event.old.get("metadata") or {}
        version = (event.obj.get("metadata") or {}).get("resourceVersion")
        return ("DELETED", {**event.old, "metadata": {**meta, "resourceVersion": version}})
    return None


class Watcher:
    """One open watch stream's subscription to the store."""

    def __init__(self, rt: ResourceType, selector: Selector) -> None:
        self.rt = rt
        self.selector = selector
        self.queue: asyncio.Queue[Item | None] = asyncio.Queue()
        self.abort = False

    def sees(self, event: WatchEvent) -> Item | None:
        """What this stream shows of ``event``: only its own kind, through its selector."""
        if resource_key(event.rt) != resource_key(self.rt):
            return None
        return translate(event, self.selector)

    def deliver(self, event: WatchEvent) -> None:
        item = self.sees(event)
        if item is not None:
            self.queue.put_nowait(item)

    def close(self, *, abort: bool = False) -> None:
        self.abort = abort
        self.queue.put_nowait(None)


def _line(event_type: str, obj: JsonDict) -> bytes:
    return (json.dumps({"type": event_type, "object": obj}, separators=(",", ":")) + "\n").encode()


def _bookmark(rt: ResourceType, rv: int, *, initial_end: bool = False) -> JsonDict:
    meta: JsonDict = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}


def _flag(params: Any, name: str) -> bool:
    return str(params.get(name, "")).lower() in ("true", "1")


class WatchHub:
    """Serves watch requests and keeps track of the open streams."""

    def __init__(self, store: Store, *, bookmark_interval: float = 1.0) -> None:
        self.store = store
        self.bookmark_interval = bookmark_interval
        self._watchers: set[Watcher] = set()

    @property
    def open_streams(self) -> int:
        return len(self._watchers)

    def close_all(self, *, abort: bool = False) -> int:
        """End every open stream; ``abort`` resets the connection instead of a clean end."""
        watchers = list(self._watchers)
        for watcher in watchers:
            watcher.close(abort=abort)
        return len(watchers)

    async def serve(
        self, request: web.Request, rt: ResourceType, selector: Selector
    ) -> tuple[web.StreamResponse, str]:
        """Stream events; returns the response and a note for the request log."""
        params = request.query
        rv_param = params.get("resourceVersion", "")
        send_initial = _flag(params, "sendInitialEvents")
        bookmarks = _flag(params, "allowWatchBookmarks")
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        if rv_param not in ("", "0") and not rv_param.isdigit():
            raise bad_request(f"invalid resource version: {rv_param!r}")

        # Subscribe and take the starting point in one synchronous step: nothing can slip between.
        watcher = Watcher(rt, selector)
        self.store.subscribe(watcher)
        self._watchers.add(watcher)
        try:
            error: ApiError | None = None
            initial: list[Item] = []
            start_rv = self.store.resource_version
            if rv_param in ("", "0") or send_initial:
                initial = [("ADDED", obj) for obj in self.store.list(rt, selector)[0]]
            else:
                try:
                    events = self.store.events_since(int(rv_param))
                except ApiError as exc:
                    error = exc
                else:
                    initial = [item for e in events if (item := watcher.sees(e))]

            response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            if error is not None:
                await response.write(_line("ERROR", error.status()))
                await response.write_eof()
                return response, f"error {error.code}"
            for event_type, obj in initial:
                await response.write(_line(event_type, obj))
            if send_initial and bookmarks:
                await response.write(_line("BOOKMARK", _bookmark(rt, start_rv, initial_end=True)))
            note = await self._stream(response, watcher, bookmarks=bookmarks, timeout=timeout)
            if watcher.abort:
                if request.transport is not None:
                    request.transport.abort()
                return response, note
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
            return response, note
        finally:
            self.store.unsubscribe(watcher)
            self._watchers.discard(watcher)

    async def _stream(
        self,
        response: web.StreamResponse,
        watcher: Watcher,
        *,
        bookmarks: bool,
        timeout: float | None,
    ) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout is not None else None
        while True:
            wait = self.bookmark_interval if bookmarks else None
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return "timeout"
                wait = min(wait, remaining) if wait is not None else remaining
            try:
                item = await asyncio.wait_for(watcher.queue.get(), timeout=wait)
            except TimeoutError:
                if bookmarks and watcher.queue.empty():
                    rv = self.store.resource_version
                    await response.write(_line("BOOKMARK", _bookmark(watcher.rt, rv)))
                continue
            if item is None:
                return "aborted" if watcher.abort else "closed"
            await response.write(_line(*item))
