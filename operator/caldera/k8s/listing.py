"""Listing one kind, page by page: the list half of the operator's informers and the whole of
``caldera explain``/``simulate --kubeconfig``'s read of a cluster.

The first page names the resource version to read at; every later page follows the server's
``continue`` token, which pins the version of the first page, so the pages of one listing are one
snapshot of the kind. A token that has expired meanwhile (``410 Gone``) raises
:class:`~caldera.k8s.rest.ApiError` like any other failure: the caller lists again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import msgspec
import orjson

from caldera.k8s.rest import Resource

__all__ = ["Reader", "list_json", "list_objects", "resource_version"]


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


async def list_json(
    reader: Reader,
    resource: Resource,
    *,
    page: int,
    resource_version: str | None,
    timeout: float = 60.0,
) -> tuple[list[memoryview], str]:
    """Every object of ``resource`` in every namespace, each as its JSON, and the resource
    version of the listing (the operator's informers decode pods and nodes straight into
    records, with no dict of them on the way).

    ``resource_version="0"`` takes any version the server has at hand (kube-apiserver serves it
    from its watch cache, in one piece, as client-go's reflector asks); ``None`` asks for the
    latest, read from storage, in pages of ``page``.
    """
    items: list[memoryview] = []
    first = {"limit": str(page)}
    if resource_version is not None:
        first["resourceVersion"] = resource_version
    query = first
    while True:
        text = await reader.call_json("list", resource, query=query, timeout=timeout)
        try:
            reply = _PAGE.decode(text)
        except msgspec.DecodeError as exc:
            raise ValueError(f"list {resource.plural}: not a list: {exc}") from None
        items.extend(memoryview(item) for item in reply.items or ())
        token = reply.metadata.continue_
        if not token:
            return items, reply.metadata.resource_version
        query = {"limit": str(page), "continue": token}


async def list_objects(
    reader: Reader,
    resource: Resource,
    *,
    page: int,
    resource_version: str | None,
    timeout: float = 60.0,
) -> tuple[list[dict[str, Any]], str]:
    """:func:`list_json`'s objects decoded as dicts."""
    items, version = await list_json(
        reader, resource, page=page, resource_version=resource_version, timeout=timeout
    )
    return [orjson.loads(item) for item in items], version


def resource_version(text: bytes | memoryview) -> str:
    """The resource version of an object given as its JSON (a watch event's object; a bookmark
    has nothing else), read without decoding the rest; empty when it has none to read."""
    try:
        return _VERSIONED.decode(text).metadata.resource_version
    except msgspec.DecodeError:  # not an object: the cache reports it
        return ""
