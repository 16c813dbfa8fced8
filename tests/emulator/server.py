"""The HTTP face of the emulator: an aiohttp server on 127.0.0.1 that real clients talk to.

:class:`Emulator` owns the store, the watch hub, the fault injector and the request log, serves
them over HTTP, and offers tests synchronous direct access to the same state (no HTTP, same
semantics and watch events) plus the fault-injection API.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import Iterable, Mapping
from typing import Any, Self, Unpack

from aiohttp import web

from emulator import patching, routing
from emulator.discovery import DEFAULT_RESOURCES, ResourceRegistry, ResourceType
from emulator.errors import ApiError, bad_request, success
from emulator.faults import FaultInjector, FaultMatch, FaultRule, RequestRecord
from emulator.selectors import Selector
from emulator.store import Store
from emulator.watch import WatchHub

JsonDict = dict[str, Any]
JsonList = list[JsonDict]
Records = list[RequestRecord]


def _json(body: JsonDict | str, status: int = 200) -> web.Response:
    if isinstance(body, str):
        return web.Response(text=body, status=status, content_type="text/plain")
    return web.Response(
        body=json.dumps(body, separators=(",", ":")), status=status, content_type="application/json"
    )


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise bad_request("continue key is not valid") from exc


def _encode_continue(rv: int, last: JsonDict) -> str:
    meta = last["metadata"]
    start = [meta.get("namespace", ""), meta["name"]]
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": start}).encode()).decode()


class Emulator:
    """An in-process Kubernetes apiserver for tests. Use ``async with Emulator() as emu:``.

    It serves :data:`DEFAULT_RESOURCES` plus ``extra_resources`` (more can be registered later
    with ``emulator.registry.register(ResourceType(...))``). ``bookmark_interval`` is how often
    an idle watch that asked for bookmarks gets one; ``history_limit`` bounds the event history
    that watches resume from (older resource versions get 410).
    """

    def __init__(
        self,
        *,
        extra_resources: Iterable[ResourceType] = (),
        history_limit: int = 10_000,
        bookmark_interval: float = 1.0,
        host: str = "127.0.0.1",
    ) -> None:
        self.registry = ResourceRegistry((*DEFAULT_RESOURCES, *extra_resources))
        self.documents: dict[str, Any] = {}
        """Fixed answers at paths no resource type serves (GET only), set by tests."""
        self.store = Store(self.registry, history_limit=history_limit)
        self.watches = WatchHub(self.store, bookmark_interval=bookmark_interval)
        self.faults = FaultInjector()
        self.requests: list[RequestRecord] = []
        # Exceptions raised by the emulator's own code while serving; the fixture fails on them.
        self.internal_errors: list[Exception] = []
        self._host = host
        self._runner: web.AppRunner | None = None
        self.url = ""

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app,
            access_log=None,
            handle_signals=False,
            handler_cancellation=True,
            shutdown_timeout=1.0,
        )
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, 0))
        site = web.SockSite(self._runner, sock)
        await site.start()
        self.url = f"http://{self._host}:{sock.getsockname()[1]}"
        return self.url

    async def stop(self) -> None:
        self.faults.clear()  # releases held requests
        self.watches.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    # -- HTTP ------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        body_error = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body, body_error = raw.decode(errors="replace"), True
        record = RequestRecord(
            verb="",
            method=request.method,
            path=request.path,
            query=dict(request.query),
            body=body,
            content_type=request.headers.get("Content-Type", ""),
        )
        self.requests.append(record)
        rule: FaultRule | None = None
        try:
            route = routing.parse(self.registry, request.path, self.documents)
            record.verb = routing.verb_of(request.method, route, request.query)
            if route.rt is not None:
                record.resource, record.group = route.rt.plural, route.rt.group
                record.namespace = route.namespace or ""
                record.name = route.name or ""
                record.subresource = route.subresource or ""
            rule = self.faults.take(record)
            if rule is not None:
                record.fault = rule.action
                if rule.action == "fail":
                    raise ApiError(
                        rule.status, rule.message or "injected fault", reason=rule.reason
                    )
                if not rule.apply:
                    if rule.action == "hang":
                        await rule.hold()
                    return self._drop(request)
            if body_error:
                raise bad_request("the body of the request could not be decoded as JSON")
            routing.check_allowed(route, record.verb)
            response = await self._dispatch(request, route, record)
            if rule is not None:  # an applied hang/drop: the write happened, the answer is lost
                if rule.action == "hang":
                    await rule.hold()
                return self._drop(request)
        except ApiError as exc:
            response = _json(exc.status(), exc.code)
            if rule is not None and rule.action == "fail" and rule.retry_after is not None:
                response.headers["Retry-After"] = str(rule.retry_after)
        except ConnectionError:
            raise
        except Exception as exc:  # noqa: BLE001 -- an emulator bug: answer 500, fail the test later
            self.internal_errors.append(exc)
            response = _json(ApiError(500, f"emulator error: {exc!r}").status(), 500)
        record.status = response.status
        return response

    @staticmethod
    def _drop(request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError  # aiohttp closes the (already reset) connection quietly

    async def _dispatch(
        self, request: web.Request, route: routing.Route, record: RequestRecord
    ) -> web.StreamResponse:
        if route.document is not None:
            if request.method != "GET":
                raise ApiError(
                    405, "the server does not allow this method on the requested resource"
                )
            return _json(route.document())
        rt = route.rt
        assert rt is not None
        query = request.query
        body = record.body
        dry_run = query.get("dryRun") == "All"
        ns, name, sub = route.namespace, route.name or "", route.subresource
        match record.verb:
            case "get":
                return _json(self.store.get(rt, ns, name))
            case "list":
                return _json(self._list(rt, ns, query))
            case "watch":
                field_selector = query.get("fieldSelector")
                if route.name:
                    term = f"metadata.name={route.name}"
                    field_selector = f"{field_selector},{term}" if field_selector else term
                selector = Selector.parse(rt, ns, query.get("labelSelector"), field_selector)
                record.status = 200  # while it streams; an error below overwrites it
                response, record.note = await self.watches.serve(request, rt, selector)
                return response
            case "create" if rt.plural == "bindings" or sub == "binding":
                if not isinstance(body, Mapping):
                    raise bad_request("the body of the request must be a Binding object")
                target = name or (body.get("metadata") or {}).get("name", "")
                self.store.bind(ns or "default", target, body, dry_run=dry_run)
                return _json(success(201), 201)
            case "create":
                return _json(self.store.create(rt, body, ns, strict=True, dry_run=dry_run), 201)
            case "update":
                obj = self.store.update(
                    rt, ns, name, body, subresource=sub, strict=True, dry_run=dry_run
                )
                return _json(obj)
            case "patch":
                obj = self.store.patch(
                    rt, ns, name, body, record.content_type, subresource=sub, dry_run=dry_run
                )
                return _json(obj)
            case "delete":
                options = body if isinstance(body, Mapping) else {}
                grace = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
                obj = self.store.delete(
                    rt,
                    ns,
                    name,
                    grace_period_seconds=int(grace) if grace is not None else None,
                    preconditions=options.get("preconditions"),
                    dry_run=dry_run,
                )
                return _json(obj)
            case "deletecollection":
                selector = Selector.parse(
                    rt, ns, query.get("labelSelector"), query.get("fieldSelector")
                )
                items = self.store.delete_collection(rt, selector)
                return _json(self._list_doc(rt, items, self.store.resource_version))
        raise ApiError(405, "the server does not allow this method on the requested resource")

    def _list_doc(self, rt: ResourceType, items: JsonList, rv: int) -> JsonDict:
        if not rt.custom:  # built-in list items carry no kind/apiVersion, as on a real cluster
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {
            "kind": f"{rt.kind}List",
            "apiVersion": rt.api_version,
            "metadata": {"resourceVersion": str(rv)},
            "items": items,
        }

    def _list(self, rt: ResourceType, namespace: str | None, query: Any) -> JsonDict:
        selector = Selector.parse(
            rt, namespace, query.get("labelSelector"), query.get("fieldSelector")
        )
        rv = self.store.resource_version
        start = None
        if query.get("continue"):
            rv, start = _decode_continue(query["continue"])
        # resourceVersion=0 asks for any version, which kube-apiserver serves from its watch
        # cache in one piece, paying no attention to limit (client-go's reflectors rely on it)
        limit = 0 if query.get("resourceVersion") == "0" else int(query.get("limit") or 0)
        items, remaining = self.store.list(rt, selector, after=start, limit=limit)
        doc = self._list_doc(rt, items, rv)
        if remaining:
            doc["metadata"]["continue"] = _encode_continue(rv, items[-1])
            doc["metadata"]["remainingItemCount"] = remaining
        return doc

    # -- direct access for tests (no HTTP; same semantics and watch events) -------------------

    def resource(self, name: str) -> ResourceType:
        """The served type for ``pods``, ``queues.scheduling.volcano.sh``, ``PodGroup``, ``pg``…"""
        return self.registry.resolve(name)

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    def create(
        self,
        resource: str,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
        keep_status: bool = True,
    ) -> JsonDict:
        """Create an object; unlike a POST, a given ``status`` is kept (test setup shortcut)."""
        return self.store.create(self.resource(resource), obj, namespace, keep_status=keep_status)

    def get(self, resource: str, name: str, namespace: str | None = None) -> JsonDict:
        return self.store.get(self.resource(resource), namespace, name)

    def find(self, resource: str, name: str, namespace: str | None = None) -> JsonDict | None:
        return self.store.find(self.resource(resource), namespace, name)

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> JsonList:
        rt = self.resource(resource)
        selector = Selector.parse(rt, namespace, label_selector, field_selector)
        return self.store.list(rt, selector)[0]

    def update(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        """Replace an object (``metadata.resourceVersion``, if given, must be current)."""
        meta = obj.get("metadata") or {}
        return self.store.update(self.resource(resource), meta.get("namespace"), meta["name"], obj)

    def update_status(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        meta = obj.get("metadata") or {}
        rt = self.resource(resource)
        return self.store.update(rt, meta.get("namespace"), meta["name"], obj, subresource="status")

    def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = patching.MERGE,
        subresource: str | None = None,
    ) -> JsonDict:
        rt = self.resource(resource)
        return self.store.patch(rt, namespace, name, patch, content_type, subresource=subresource)

    def delete(self, resource: str, name: str, namespace: str | None = None) -> JsonDict:
        return self.store.delete(self.resource(resource), namespace, name)

    def bind(
        self,
        pod: str,
        node: str,
        namespace: str = "default",
        annotations: Mapping[str, str] | None = None,
    ) -> JsonDict:
        """What a ``pods/binding`` POST does; returns the bound pod."""
        meta: JsonDict = {"name": pod, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        binding = {"metadata": meta, "target": {"kind": "Node", "name": node}}
        return self.store.bind(namespace, pod, binding)

    # -- faults, watches, history, request log -------------------------------------------------

    def fail_next(
        self,
        status: int = 500,
        *,
        reason: str | None = None,
        message: str | None = None,
        retry_after: int | None = None,
        **match: Unpack[FaultMatch],
    ) -> FaultRule:
        """Answer the next ``times`` matching requests with ``status`` (state untouched)."""
        rule = FaultRule(
            "fail", status=status, reason=reason, message=message, retry_after=retry_after, **match
        )
        return self.faults.add(rule)

    def hang_next(
        self, *, seconds: float | None = None, apply: bool = False, **match: Unpack[FaultMatch]
    ) -> FaultRule:
        """Hold matching requests for ``seconds`` (None: until released/stopped), then drop them.

        With ``apply=True`` the request takes effect first and only the answer is withheld.
        """
        return self.faults.add(FaultRule("hang", seconds=seconds, apply=apply, **match))

    def drop_next(self, *, apply: bool = False, **match: Unpack[FaultMatch]) -> FaultRule:
        """Reset the connection of matching requests (after applying them if ``apply``)."""
        return self.faults.add(FaultRule("drop", apply=apply, **match))

    def clear_faults(self) -> None:
        self.faults.clear()

    def close_watches(self, *, abort: bool = False) -> int:
        """End every open watch stream (cleanly, or by connection reset); returns how many."""
        return self.watches.close_all(abort=abort)

    @property
    def open_watches(self) -> int:
        return self.watches.open_streams

    def compact(self) -> int:
        """Forget the event history: watches resuming from any earlier RV get 410 Gone."""
        return self.store.compact()

    def find_requests(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        subresource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
    ) -> Records:
        """Recorded requests matching every given field (exact match)."""
        wanted = {
            "verb": verb,
            "resource": resource,
            "subresource": subresource,
            "name": name,
            "namespace": namespace,
        }
        return [
            record
            for record in self.requests
            if all(value is None or getattr(record, key) == value for key, value in wanted.items())
        ]

    def clear_requests(self) -> None:
        self.requests.clear()
