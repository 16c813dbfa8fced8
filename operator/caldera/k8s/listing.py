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

from caldera.k8s.rest import Resource

__all__ = ["Reader", "list_objects"]


class Reader(Protocol):
    """What listing needs of a client: :class:`~caldera.k8s.rest.Rest`, or a read-only view."""

    async def call(
        self,
        verb: str,
        resource: Resource,
        *,
        query: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any: ...


async def list_objects(
    reader: Reader,
    resource: Resource,
    *,
    page: int,
    resource_version: str | None,
    timeout: float = 60.0,
) -> tuple[list[dict[str, Any]], str]:
    """Every object of ``resource`` in every namespace, and the resource version of the listing.

    ``resource_version="0"`` takes any version the server has at hand (kube-apiserver serves it
    from its watch cache, in one piece, as client-go's reflector asks); ``None`` asks for the
    latest, read from storage, in pages of ``page``.
    """
    items: list[dict[str, Any]] = []
    first = {"limit": str(page)}
    if resource_version is not None:
        first["resourceVersion"] = resource_version
    query = first
    while True:
        reply = await reader.call("list", resource, query=query, timeout=timeout)
        items.extend(reply.get("items") or ())
        meta = reply.get("metadata") or {}
        token = meta.get("continue") or ""
        if not token:
            return items, str(meta.get("resourceVersion") or "")
        query = {"limit": str(page), "continue": token}
