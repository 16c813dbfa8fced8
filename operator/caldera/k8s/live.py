"""Reading a live cluster once, read-only, for ``caldera explain`` and ``caldera simulate`` with
``--kubeconfig``: every kind the scheduler watches, listed into a
:class:`~caldera.cache.state.ClusterState`, so "why is this pod pending" needs no exported YAML.

Nothing here can write: requests go through :class:`ReadOnly`, which hands on only ``get`` and
``list`` (both HTTP GET) and refuses any other verb before a byte is sent. Every kind of
:data:`~caldera.models.kinds.KINDS` is listed at once (a kind read by label selectors, once per
selector), each at the latest resource version and in pages (``docs/live-cluster.md`` says what
consistency that gives); a listing whose ``continue`` token expired midway (``410``) is started
again. A kind the server does not serve (``404``: no
DRA, no HyperNode CRD) counts as empty, as in the operator. Objects are parsed as the operator's
cache parses them; a malformed one is reported (kind, name, field) and left out. Anything else —
credentials that cannot be loaded, a server that does not answer, a list we may not make — is a
:class:`LiveError` of one line; a ``403`` names the resource and verb the credentials lack.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import orjson

from caldera.cache.state import ClusterState, StateObject
from caldera.k8s.client import KubeconfigError, load_configuration
from caldera.k8s.errors import API_ERRORS, describe
from caldera.k8s.listing import list_objects
from caldera.k8s.resources import resource_of
from caldera.k8s.rest import ApiError, Resource, Rest
from caldera.models.kinds import KINDS, Kind, with_named
from caldera.models.parse import parse_object

__all__ = [
    "READ_VERBS",
    "Live",
    "LiveError",
    "ReadOnly",
    "ReadOnlyError",
    "connect",
    "read_cluster",
]

READ_VERBS = frozenset({"get", "list"})


class ReadOptions(TypedDict, total=False):
    """What a read may say besides its verb and resource (a part of
    :class:`~caldera.k8s.rest.CallOptions`: nothing to send)."""

    namespace: str | None
    name: str | None
    query: Mapping[str, str] | None
    timeout: float | None


"""The only verbs :class:`ReadOnly` sends."""

_READ_ERRORS: tuple[type[BaseException], ...] = (*API_ERRORS, ValueError)
"""A failed read, or a reply that is not what it should be."""
_EXPIRED_RETRIES = 3
"""How many times a listing whose ``continue`` token expired is started again."""


class ReadOnlyError(RuntimeError):
    """A request that would change the cluster was asked of a :class:`ReadOnly` client."""


class LiveError(Exception):
    """The cluster could not be read; the message is one line for the user."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class ReadOnly:
    """A :class:`~caldera.k8s.rest.Rest` that can only read.

    It offers ``call`` and ``call_json`` for ``get`` and ``list``, and ``get_path`` for
    non-resource paths; it keeps the client it wraps to itself, so code holding one cannot reach
    a writing method."""

    def __init__(self, rest: Rest) -> None:
        self._rest = rest

    async def call(self, verb: str, resource: Resource, **options: Unpack[ReadOptions]) -> Any:
        raw = await self.call_json(verb, resource, **options)
        return orjson.loads(raw) if raw else None

    async def call_json(
        self, verb: str, resource: Resource, **options: Unpack[ReadOptions]
    ) -> bytes:
        if verb not in READ_VERBS:
            raise ReadOnlyError(f"refused to {verb} {resource.plural}: this client only reads")
        return await self._rest.call_json(verb, resource, **options)

    async def get_path(self, path: str) -> Any:
        return await self._rest.get_path(path)


@dataclass(slots=True)
class Live:
    """The cluster as listed: the objects, what was left out and why, and the server."""

    state: ClusterState = field(default_factory=ClusterState)
    warnings: list[str] = field(default_factory=list)
    server: str = ""


async def connect(kubeconfig: str | None, context: str | None, timeout: float) -> tuple[Rest, str]:
    """A client for the cluster of ``kubeconfig`` (``context``), and its server's address;
    :class:`LiveError` when the kubeconfig does not load."""
    try:
        cfg = await load_configuration(kubeconfig, context)
    except KubeconfigError as exc:
        raise LiveError(str(exc)) from None
    return Rest(cfg, timeout=timeout), cfg.host or ""


async def read_cluster(
    kubeconfig: str | None,
    context: str | None = None,
    *,
    page: int = 500,
    timeout: float = 30.0,
    named: Iterable[tuple[str, str]] = (),
    only: Iterable[str] | None = None,
) -> Live:
    """List every kind the scheduler reads (or the kinds ``only`` names: ``caldera queue``
    needs two), and the objects ``named`` (kind, ``namespace/name``: the policy's
    :attr:`~caldera.framework.policy.Policy.read_objects`); raises :class:`LiveError` when that
    cannot be done."""
    rest, server = await connect(kubeconfig, context, timeout)
    reader = ReadOnly(rest)
    try:
        await _reach(reader, server)
        wanted = KINDS if only is None else {k: KINDS[k] for k in only}
        kinds = list(with_named(wanted, named).values())
        replies = await asyncio.gather(
            *(_list_kind(reader, kind, page) for kind in kinds), return_exceptions=True
        )
    finally:
        await rest.close()
    out = Live(server=server)
    for kind, reply in zip(kinds, replies, strict=True):
        if isinstance(reply, _READ_ERRORS):
            raise _failure(reply, kind, server) from None
        if isinstance(reply, BaseException):
            raise reply
        if reply is None:
            continue  # not served here
        _store(out, kind, reply[0])
    return out


async def _reach(reader: ReadOnly, server: str) -> None:
    """Fail fast, in one line, when the server does not answer at all."""
    try:
        await reader.get_path("/version")
    except ApiError as exc:
        if exc.status == 401:
            raise LiveError(_refused(exc, server)) from None
        # it answered: a server that hides /version is for the listings to judge
    except API_ERRORS as exc:
        raise LiveError(f"cannot reach the API server at {server}: {describe(exc)}") from None


async def _list_kind(
    reader: ReadOnly, kind: Kind, page: int
) -> tuple[list[dict[str, Any]], str] | None:
    """The kind's objects at the latest version, at the first of its versions the server serves;
    None when it serves none. A kind read by label selectors is listed once per selector."""
    for version in kind.all_versions:
        resource = resource_of(kind.at(version))
        items: list[dict[str, Any]] = []
        at = ""
        try:
            for selector in kind.selectors:
                some, at = await _list_selected(reader, resource, page, selector)
                items.extend(some)
        except ApiError as exc:
            if exc.status == 404:
                continue  # not this version: the next one, if any
            raise
        return items, at
    return None


async def _list_selected(
    reader: ReadOnly, resource: Resource, page: int, selector: str
) -> tuple[list[dict[str, Any]], str]:
    """What ``selector`` picks of ``resource`` ("": all of it), listed again when its
    ``continue`` token expires midway."""
    expired = 0
    while True:
        try:
            return await list_objects(
                reader, resource, page=page, resource_version=None, selector=selector
            )
        except ApiError as exc:
            expired += 1
            if exc.status != 410 or expired > _EXPIRED_RETRIES:
                raise


def _store(out: Live, kind: Kind, items: list[dict[str, Any]]) -> None:
    for raw in items:
        obj = parse_object(kind.name, raw)
        if isinstance(obj, StateObject):
            out.state.add(obj)
        else:
            out.warnings.append(f"{obj}; skipped")


def _refused(exc: ApiError, server: str) -> str:
    return f"the API server at {server} did not accept our credentials ({exc})"


def _failure(exc: BaseException, kind: Kind, server: str) -> LiveError:
    """The one line said when listing ``kind`` failed."""
    what = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
    if not isinstance(exc, ApiError):
        return LiveError(f"cannot list {what} at {server}: {describe(exc)}")
    if exc.status == 401:
        return LiveError(_refused(exc, server))
    if exc.status == 403:
        return LiveError(
            f'not allowed to list {what} at {server}: the credentials need verb "list" on '
            f'resource "{kind.plural}" in API group "{kind.group}", cluster-wide '
            f"(the server said: {exc.message})"
        )
    if exc.status == 410:
        return LiveError(
            f"cannot list {what} at {server}: the listing kept expiring before its last page "
            f"({exc.message}); try again"
        )
    return LiveError(f"cannot list {what} at {server}: {exc}")
