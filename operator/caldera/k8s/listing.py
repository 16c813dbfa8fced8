"""Listing one kind, page by page: the list half of the operator's informers and the whole of
``caldera explain``/``simulate --kubeconfig``'s read of a cluster.

The first page names the resource version to read at; every later page follows the server's
``continue`` token, which pins the version of the first page, so the pages of one listing are one
snapshot of the kind. A token that has expired meanwhile (``410 Gone``) raises
:class:`~caldera.k8s.rest.ApiError` like any other failure: the caller lists again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

import msgspec
import orjson

from caldera.k8s.rest import Resource
from caldera.models.kinds import selector_query

__all__ = ["Reader", "list_json", "list_objects", "pages", "resource_version"]


class Reader(Protocol):
    """What listing needs of a client: :class:`~caldera.k8s.rest.Rest`, or a read-only view."""

    async def call_json(
        self,
        verb: str,
        resource: Resource,
        *,
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> bytes: ...


class _Meta(msgspec.Struct, frozen=True):
    """A list's metadata, or an object's: only what listing and watching read."""

    resource_version: str = msgspec.field(default="", name="resourceVersion")
    continue_: str = msgspec.field(default="", name="continue")


class _Versioned(msgspec.Struct, frozen=True):
    metadata: _Meta = _Meta()


class _Page(_Versioned, frozen=True):
    """One page of a list reply: its items left as JSON."""

    items: list[msgspec.Raw] | None = None


_VERSIONED = msgspec.json.Decoder(_Versioned)
_PAGE = msgspec.json.Decoder(_Page)


async def pages(
    reader: Reader,
    resource: Resource,
    *,
    page: int,
    resource_version: str | None,
    timeout: float = 60.0,
    selector: str = "",
) -> AsyncIterator[tuple[list[memoryview], str]]:
    """Every object of ``resource`` in every namespace, a page at a time, each object as its
    JSON, with the listing's resource version (known once the first page is in). The next page
    is asked for before this one is handed over, so the server prepares it while the caller
    takes this one in.

    ``resource_version="0"`` takes any version the server has at hand (kube-apiserver serves it
    from its watch cache, in one piece, as client-go's reflector asks); ``None`` asks for the
    latest, in pages of ``page`` (from storage, or from the watch cache where the server keeps
    its snapshots). With ``selector`` (an informer's: :func:`~caldera.models.kinds.selector_query`),
    only the objects it picks.
    """
    first = {"limit": str(page)}
    if resource_version is not None:
        first["resourceVersion"] = resource_version
    selected = selector_query(selector)
    first.update(selected)

    async def fetch(query: Mapping[str, str]) -> _Page:
        text = await reader.call_json("list", resource, query=query, timeout=timeout)
        try:
            return _PAGE.decode(text)
        except msgspec.DecodeError as exc:
            raise ValueError(f"list {resource.plural}: not a list: {exc}") from None

    reply = await fetch(first)
    version = reply.metadata.resource_version
    while True:
        token = reply.metadata.continue_
        following = None
        if token:
            following = asyncio.ensure_future(
                fetch({"limit": str(page), "continue": token, **selected})
            )
            await asyncio.sleep(0)  # the request goes out before this page is handed over
        try:
            yield [memoryview(item) for item in reply.items or ()], version
            if following is None:
                return
            reply = await following
        finally:
            if following is not None and not following.done():
                following.cancel()


async def list_json(
    reader: Reader,
    resource: Resource,
    *,
    page: int,
    resource_version: str | None,
    timeout: float = 60.0,
    selector: str = "",
) -> tuple[list[memoryview], str]:
    """Every object of ``resource`` (see :func:`pages`), each as its JSON, and the resource
    version of the listing."""
    items: list[memoryview] = []
    version = ""
    async for batch, at in pages(
        reader,
        resource,
        page=page,
        resource_version=resource_version,
        timeout=timeout,
        selector=selector,
    ):
        items.extend(batch)
        version = at
    return items, version


async def list_objects(
    reader: Reader,
    resource: Resource,
    *,
    page: int,
    resource_version: str | None,
    timeout: float = 60.0,
    selector: str = "",
) -> tuple[list[dict[str, Any]], str]:
    """:func:`list_json`'s objects decoded as dicts."""
    items, version = await list_json(
        reader,
        resource,
        page=page,
        resource_version=resource_version,
        timeout=timeout,
        selector=selector,
    )
    return [orjson.loads(item) for item in items], version


def resource_version(text: bytes | memoryview) -> str:
    """The resource version of an object given as its JSON (a watch event's object; a bookmark
    has nothing else), read without decoding the rest; empty when it has none to read."""
    try:
        return _VERSIONED.decode(text).metadata.resource_version
    except msgspec.DecodeError:  # not an object: the cache reports it
        return ""
