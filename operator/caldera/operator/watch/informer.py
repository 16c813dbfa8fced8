"""List, then watch, one kind into the cache, for as long as the operator runs.

The same protocol as client-go's reflector: a paginated list gives the objects and a resource
version; a watch from that version streams every change after it (with bookmarks, so an idle
stream still moves its version forward); a watch the server ends is started again from the last
version seen; a dropped connection is watched again after a short backoff; an expired version
(``410 Gone``, as a reply or as an ``ERROR`` event) relists, and the relist replaces the kind's
objects wholesale, so nothing deleted while the watch was away lingers. A kind the API server does
not serve (no DRA on this cluster, no HyperNode CRD) or may not be read counts as listed and
empty, is said once, and is tried again every minute.

The events are handed to the cache in the order they arrive, each object as its JSON (the cache
decodes pods and nodes straight into records); the informer itself reads only an object's
resource version. A kind read only by label selectors (MindCluster's ConfigMaps) has one informer
per selector, each listing and watching what its selector picks, and the cache keeps an object
while one of them still has it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.listing import pages, resource_version
from caldera.k8s.resources import resource_of
from caldera.k8s.rest import ApiError, Rest
from caldera.models.kinds import Kind
from caldera.operator.watch.cache import Cache

__all__ = ["LIST_PAGE", "Informer"]


log = logging.getLogger(__name__)

_ABSENT = (403, 404)
_READ_ERRORS: tuple[type[BaseException], ...] = (*API_ERRORS, ValueError)
"""A failed read, or a reply that is not what it should be."""
"""Not served, or not ours to read: the kind is empty here."""


LIST_PAGE = 500
"""Objects per page of a listing made in pages (client-go's reflector asks for as many)."""


class Informer:
    def __init__(
        self,
        rest: Rest,
        kind: Kind,
        cache: Cache,
        *,
        page: int | None = None,
        watch_seconds: tuple[int, int] = (300, 600),
        absent_retry: float = 60.0,
        selector: str = "",
    ) -> None:
        self._rest = rest
        self.kind = kind
        self.selector = selector
        """The label selector it lists and watches by ("": every object of the kind); one of
        :attr:`Kind.label_selectors`."""
        self._resource = resource_of(kind)
        self._cache = cache
        self._page = page or LIST_PAGE
        self._watch_seconds = watch_seconds
        self._absent_retry = absent_retry
        self._version: str | None = None
        """The last resource version seen; None: list (again) first."""
        self.absent = ""
        """Why the kind could not be listed, while it cannot (not served, forbidden)."""
        self.version = kind.version
        """The version it is read at (the first of :attr:`Kind.versions` the server serves)."""
        self.lists = 0
        """How many full listings were made (the first, then one per expired version)."""
        self.after_page: Callable[[list[str]], Awaitable[object]] = _nothing
        """Awaited with the keys of each page of a listing once it is stored, while the next
        page is on its way (the session thread makes ahead what a build makes of each pod)."""

    async def run(self) -> None:
        backoff = 0.2
        absent_said = False
        while True:
            try:
                if self._version is None:
                    self._version = await self._list()
                    self.absent = ""
                await self._watch(self._version)
                backoff = 0.2
            except ApiError as exc:
                if exc.status == 410:
                    log.info("%s: %s; listing again", self._resource.plural, exc.message)
                    self._version = None
                    continue
                if self._version is None and exc.status in _ABSENT:
                    self.absent = str(exc)
                    if not absent_said:
                        absent_said = True
                        log.debug(
                            "%s: not readable here (%s); taken as none, tried again every %gs",
                            self._resource.plural,
                            exc,
                            self._absent_retry,
                        )
                    self._cache.replace(self.kind, (), self.selector)
                    await asyncio.sleep(self._absent_retry)
                    continue
                log.warning("%s: %s; trying again", self._resource.plural, exc)
            except _READ_ERRORS as exc:
                if not self._rest.reach.counted(exc):  # an outage is said once, not per kind
                    log.warning("%s: %s; trying again", self._resource.plural, describe(exc))
            await asyncio.sleep(backoff * random.uniform(1.0, 1.5))
            backoff = min(backoff * 2, 30.0)

    async def _list(self) -> str:
        # as client-go's reflector: any version will do (served from the API server's watch
        # cache, in one piece), pages only when the server insists on paging; but pods, the
        # kind counted in tens of thousands, at the latest version in pages, each decoded while
        # the server prepares the next; a kind served at one of several versions is read at the
        # first the server has
        versions = self.kind.all_versions
        if self.version in versions:  # the one found before first: no 404 per relist
            versions = (self.version, *(v for v in versions if v != self.version))
        for i, served in enumerate(versions):
            self._resource = resource_of(self.kind.at(served))
            listed: set[str] = set()
            try:
                async for items, at in pages(
                    self._rest,
                    self._resource,
                    page=self._page,
                    resource_version=None if self.kind.listed_in_pages else "0",
                    selector=self.selector,
                ):
                    keys = self._cache.take_page(self.kind, items, listed, self.selector)
                    version = at
                    await self.after_page(keys)
            except ApiError as exc:
                if exc.status == 404 and i + 1 < len(versions):
                    continue
                raise
            self.version = served
            break
        self.lists += 1
        self._cache.end_listing(self.kind, listed, self.selector)
        return version

    async def _watch(self, version: str) -> None:
        """Watch from ``version`` until the server ends the stream, moving the version on."""
        seconds = random.randint(*self._watch_seconds)
        async for event in self._rest.watch(
            self._resource,
            resource_version=version,
            timeout_seconds=seconds,
            selector=self.selector,
        ):
            text = memoryview(event.object)
            self._version = resource_version(text) or version
            if event.type in ("ADDED", "MODIFIED", "DELETED"):
                self._cache.apply(self.kind, event.type, text, self.selector)


async def _nothing(keys: list[str]) -> None:
    return None
