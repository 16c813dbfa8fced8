"""What the ``k8s`` fixture yields: one API for the emulator and for a real cluster.

Operator tests are written once against :class:`K8sHandle`: its async object helpers, the
kubeconfig, a kubernetes-asyncio client and kopf login data work the same on both. The
fault-injection helpers exist only on the emulator; on a real cluster (``CALDERA_E2E_KUBECONFIG``)
they skip the test, saying why, instead of silently doing nothing; so does
:meth:`K8sHandle.needs_emulator` for a test that needs the emulator for another reason.

Tests put their namespaced objects in :attr:`K8sHandle.namespace`: ``default`` on the emulator
(which is fresh for every test), a namespace made for the test on a real cluster, so that runs and
tests cannot see each other's pods, events or Leases. On a real cluster the handle also stands in
for the kubelet a test node does not have, as far as the API server can tell: it takes off the
``not-ready`` taint that admission puts on every new node and renews the node's Lease, so the
node lifecycle controller neither keeps the node tainted nor marks it unreachable mid-test.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import json
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import kopf
import pytest
import yaml
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import new_client_from_config

from emulator import patching
from emulator.discovery import DEFAULT_RESOURCES, ResourceRegistry, ResourceType
from emulator.errors import ApiError
from emulator.faults import FaultRule, RequestRecord
from emulator.server import Emulator

JsonDict = dict[str, Any]
JsonList = list[JsonDict]
Records = list[RequestRecord]
Predicate = Callable[[JsonDict], object]


def write_kubeconfig(path: Path, server: str, *, name: str = "caldera-emulator") -> Path:
    """A kubeconfig with one context pointing at ``server`` without any credentials."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server}}],
        "users": [{"name": name, "user": {}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": "default"}}
        ],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def connection_info_from_kubeconfig(path: Path) -> kopf.ConnectionInfo:
    """kopf login data for the current context of a kubeconfig (static credentials only)."""
    config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    current = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(
        (u.get("user") or {} for u in config.get("users", []) if u["name"] == context.get("user")),
        {},
    )
    return kopf.ConnectionInfo(
        server=cluster["server"],
        ca_path=cluster.get("certificate-authority"),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=cluster.get("insecure-skip-tls-verify"),
        certificate_path=user.get("client-certificate"),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=user.get("client-key"),
        private_key_data=user.get("client-key-data"),
        username=user.get("username"),
        password=user.get("password"),
        token=user.get("token"),
        default_namespace=context.get("namespace"),
    )


class K8sHandle(abc.ABC):
    """The fixture API shared by the emulator and a real cluster."""

    url: str
    kubeconfig_path: Path
    emulated: bool
    #: Where tests put their namespaced objects (and point the operator's Lease and events).
    namespace: str = "default"

    def __init__(self) -> None:
        self._clients: list[Any] = []

    @abc.abstractmethod
    async def setup(self) -> None:
        """Prepare the API server for one test (called by the fixture before the test)."""

    def needs_emulator(self, why: str) -> None:
        """Skip the test on a real cluster; ``why`` says what only the emulator can do."""
        if not self.emulated:
            pytest.skip(f"needs the emulator: {why}")

    async def api_client(self) -> ApiClient:
        """A kubernetes-asyncio client for this API server (closed by the fixture)."""
        client = await new_client_from_config(
            config_file=str(self.kubeconfig_path), persist_config=False
        )
        self._clients.append(client)
        return client

    def connection_info(self) -> kopf.ConnectionInfo:
        """What a ``@kopf.on.login`` handler should return to reach this API server."""
        return connection_info_from_kubeconfig(self.kubeconfig_path)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.close()
        self._clients.clear()

    # -- objects ----------------------------------------------------------------------------

    @abc.abstractmethod
    async def create(
        self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonDict:
        """Create an object; a given ``status`` is kept (written via the status subresource)."""

    @abc.abstractmethod
    async def find(self, resource: str, name: str, namespace: str | None = None) -> JsonDict | None:
        """The object, or None if it does not exist."""

    async def get(self, resource: str, name: str, namespace: str | None = None) -> JsonDict:
        obj = await self.find(resource, name, namespace)
        if obj is None:
            raise ApiError(404, f'{resource} "{name}" not found')
        return obj

    @abc.abstractmethod
    async def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> JsonList:
        """Objects of a type, across all namespaces unless ``namespace`` is given."""

    @abc.abstractmethod
    async def update(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        """Replace an object (409 if its ``metadata.resourceVersion`` is stale)."""

    @abc.abstractmethod
    async def update_status(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        """Replace an object's status through the ``status`` subresource."""

    @abc.abstractmethod
    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = patching.MERGE,
        subresource: str | None = None,
    ) -> JsonDict:
        """Patch an object (merge patch unless ``content_type`` says otherwise)."""

    @abc.abstractmethod
    async def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        """Delete an object; a missing object is not an error."""

    @abc.abstractmethod
    async def bind(
        self,
        pod: str,
        node: str,
        namespace: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Bind a pod (in :attr:`namespace` unless told) to a node through ``pods/binding``."""

    async def events_about(self, obj: Mapping[str, Any], reason: str | None = None) -> JsonList:
        """The Events about this very object: matched by its uid, so neither an older object of
        the same name (an earlier test or run on a real cluster) nor another one counts."""
        meta = obj["metadata"]
        events = await self.list(
            "events",
            meta.get("namespace") or "default",
            field_selector=f"involvedObject.uid={meta['uid']}",
        )
        return [e for e in events if reason is None or e.get("reason") == reason]

    async def wait_for(
        self,
        resource: str,
        name: str,
        predicate: Predicate,
        *,
        namespace: str | None = None,
        timeout: float = 10.0,
    ) -> JsonDict:
        """Poll until ``predicate(obj)`` is truthy; AssertionError with the last state if not."""
        last: JsonDict | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    last = await self.find(resource, name, namespace)
                    if last is not None and predicate(last):
                        return last
                    await asyncio.sleep(0.02)
        except TimeoutError:
            raise AssertionError(
                f"{resource} {namespace or ''}/{name} did not satisfy the condition within "
                f"{timeout}s; last state: {json.dumps(last)[:2000]}"
            ) from None

    # -- emulator-only -----------------------------------------------------------------------

    @property
    def emulator(self) -> Emulator:
        """The emulator itself, for synchronous direct access (skips on a real cluster)."""
        pytest.skip(
            "needs the emulator: direct, synchronous access to its store, which a real API "
            "server does not offer"
        )

    def _only_emulated(self, what: str) -> Emulator:
        self.needs_emulator(what)
        return self.emulator

    def fail_next(self, status: int = 500, **match: Any) -> FaultRule:
        return self._only_emulated(
            "it makes chosen API requests fail, which a real API server cannot be told to do"
        ).fail_next(status, **match)

    def hang_next(self, **match: Any) -> FaultRule:
        return self._only_emulated(
            "it makes chosen API requests hang, which a real API server cannot be told to do"
        ).hang_next(**match)

    def drop_next(self, **match: Any) -> FaultRule:
        return self._only_emulated(
            "it drops the connection of chosen API requests, which a real API server cannot be "
            "told to do"
        ).drop_next(**match)

    def clear_faults(self) -> None:
        self._only_emulated("it clears injected faults, which only the emulator has").clear_faults()

    def close_watches(self, *, abort: bool = False) -> int:
        return self._only_emulated(
            "it ends every open watch on demand, which a real API server cannot be told to do"
        ).close_watches(abort=abort)

    def compact(self) -> int:
        return self._only_emulated(
            "it compacts the watch history on demand, which a real API server cannot be told to do"
        ).compact()

    @property
    def requests(self) -> Records:
        return self._only_emulated(
            "it reads the log of API requests, which a real API server does not keep for tests"
        ).requests

    def find_requests(self, **match: str | None) -> Records:
        return self._only_emulated(
            "it reads the log of API requests, which a real API server does not keep for tests"
        ).find_requests(**match)


class EmulatorHandle(K8sHandle):
    """The handle over an in-process :class:`Emulator`."""

    emulated = True

    def __init__(self, emulator: Emulator, kubeconfig_path: Path) -> None:
        super().__init__()
        self._emulator = emulator
        self.url = emulator.url
        self.kubeconfig_path = write_kubeconfig(kubeconfig_path, emulator.url)

    @property
    def emulator(self) -> Emulator:
        return self._emulator

    async def setup(self) -> None:
        """Nothing to do: the emulator is fresh for every test."""

    async def create(
        self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonDict:
        return self._emulator.create(resource, obj, namespace=namespace)

    async def find(self, resource: str, name: str, namespace: str | None = None) -> JsonDict | None:
        return self._emulator.find(resource, name, namespace)

    async def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> JsonList:
        return self._emulator.list(
            resource, namespace, label_selector=label_selector, field_selector=field_selector
        )

    async def update(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        return self._emulator.update(resource, obj)

    async def update_status(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        return self._emulator.update_status(resource, obj)

    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = patching.MERGE,
        subresource: str | None = None,
    ) -> JsonDict:
        return self._emulator.patch(
            resource,
            name,
            patch,
            namespace=namespace,
            content_type=content_type,
            subresource=subresource,
        )

    async def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        if self._emulator.find(resource, name, namespace) is not None:
            self._emulator.delete(resource, name, namespace)

    async def bind(
        self,
        pod: str,
        node: str,
        namespace: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self._emulator.bind(pod, node, namespace or self.namespace, annotations)


# Taints the API server's admission (TaintNodesByCondition) puts on every new node; the node
# lifecycle controller takes them off once it sees the node Ready. Test nodes are ready as created.
ADMISSION_TAINTS = frozenset({"node.kubernetes.io/not-ready"})
NODE_LEASE_NAMESPACE = "kube-node-lease"
NODE_LEASE_SECONDS = 40
HEARTBEAT_PERIOD = 10.0


def _micro_time() -> str:
    """Now as a ``MicroTime`` (the format of a Lease's ``renewTime``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ClusterHandle(K8sHandle):
    """The handle over a real cluster: helpers go through its API; created objects are removed.

    Each test gets a namespace of its own (:attr:`namespace`, made by :meth:`setup`); at the end
    the handle deletes what its helpers created, newest first, force-deleting the pods left in a
    namespace it made (without a kubelet a bound pod would otherwise stay Terminating) before the
    namespace itself.
    """

    emulated = False

    def __init__(self, kubeconfig_path: Path) -> None:
        super().__init__()
        self.kubeconfig_path = kubeconfig_path
        self.url = self.connection_info().server
        self.namespace = f"caldera-e2e-{uuid.uuid4().hex[:8]}"
        self._registry = ResourceRegistry(DEFAULT_RESOURCES)
        self._client: Any = None
        self._created: list[tuple[ResourceType, str | None, str]] = []
        self._node_leases: set[str] = set()
        self._heartbeat: asyncio.Task[None] | None = None

    async def setup(self) -> None:
        """Make the test's namespace."""
        await self.create(
            "namespaces",
            {"metadata": {"name": self.namespace, "labels": {"caldera.io/e2e": "true"}}},
        )

    async def _await_service_account(self, namespace: str, timeout: float = 10.0) -> None:
        """Wait (bounded) for a new namespace's ``default`` ServiceAccount: the ServiceAccount
        admission plugin refuses pods until the controller has made it."""
        account = f"/api/v1/namespaces/{namespace}/serviceaccounts/default"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        await self._call("GET", account)
                        return
                    except ApiError as exc:
                        if exc.code != 404:
                            raise
                    await asyncio.sleep(0.1)

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        if self._client is None:
            self._client = await self.api_client()
        response = await self._client.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        async with response:
            data = await response.read()
            status = response.status
        payload = json.loads(data) if data else None
        if status >= 400:
            doc = payload if isinstance(payload, dict) else {}
            raise ApiError(status, str(doc.get("message", data)), reason=doc.get("reason"))
        return payload

    def _meta(self, obj: Mapping[str, Any]) -> tuple[str | None, str]:
        meta = obj.get("metadata") or {}
        return meta.get("namespace"), meta["name"]

    async def create(
        self, resource: str, obj: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonDict:
        rt = self._registry.resolve(resource)
        body = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
        ns = None
        if rt.namespaced:
            ns = namespace or (body.get("metadata") or {}).get("namespace") or self.namespace
        created: JsonDict = await self._call("POST", rt.path(ns), body=body)
        name = created["metadata"]["name"]
        self._created.append((rt, ns, name))
        if "status" in obj and rt.has_status:
            # Controllers may write to the object between the create and this write (the TTL
            # controller annotates every new node), so it must not carry the create's
            # resourceVersion: a merge patch of the status subresource carries none.
            created = await self._call(
                "PATCH",
                rt.path(ns, name, "status"),
                body={"status": obj["status"]},
                content_type=patching.MERGE,
            )
        if rt == self._registry.resolve("nodes"):
            created = await self._settle_node(created, obj)
        elif rt == self._registry.resolve("namespaces"):
            await self._await_service_account(name)
        return created

    async def _settle_node(self, node: JsonDict, asked: Mapping[str, Any]) -> JsonDict:
        """Take off the taints admission put on the new node (those the test did not ask for),
        and keep the node's Lease renewed as its kubelet would."""
        name = node["metadata"]["name"]
        wanted = [
            (t.get("key"), t.get("effect")) for t in (asked.get("spec") or {}).get("taints") or []
        ]
        taints = (node.get("spec") or {}).get("taints") or []
        keep = [
            t
            for t in taints
            if t.get("key") not in ADMISSION_TAINTS or (t.get("key"), t.get("effect")) in wanted
        ]
        if len(keep) != len(taints):
            node = await self._call(
                "PATCH",
                self._registry.resolve("nodes").path(None, name),
                body={"spec": {"taints": keep or None}},
                content_type=patching.MERGE,
            )
        await self._hold_node_lease(node)
        return node

    async def _hold_node_lease(self, node: JsonDict) -> None:
        """Create (or take over) the node's Lease in ``kube-node-lease`` and renew it in the
        background: the node lifecycle controller marks a node whose Lease is not renewed
        unreachable (and taints it) after its grace period, 40 to 50 seconds."""
        name = node["metadata"]["name"]
        leases = self._registry.resolve("leases")
        owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
        spec = {
            "holderIdentity": name,
            "leaseDurationSeconds": NODE_LEASE_SECONDS,
            "renewTime": _micro_time(),
        }
        lease = {
            "apiVersion": leases.api_version,
            "kind": leases.kind,
            "metadata": {
                "name": name,
                "namespace": NODE_LEASE_NAMESPACE,
                "ownerReferences": [owner],
            },
            "spec": spec,
        }
        try:
            await self._call("POST", leases.path(NODE_LEASE_NAMESPACE), body=lease)
        except ApiError as exc:
            if exc.code != 409:
                return  # no kube-node-lease namespace, or not allowed: no heartbeats then
            # a Lease left by an earlier node of this name: take it over
            await self._call(
                "PATCH",
                leases.path(NODE_LEASE_NAMESPACE, name),
                body={"metadata": {"ownerReferences": [owner]}, "spec": spec},
                content_type=patching.MERGE,
            )
        self._created.append((leases, NODE_LEASE_NAMESPACE, name))
        self._node_leases.add(name)
        if self._heartbeat is None:
            self._heartbeat = asyncio.create_task(self._renew_node_leases())

    async def _renew_node_leases(self) -> None:
        leases = self._registry.resolve("leases")
        while True:
            await asyncio.sleep(HEARTBEAT_PERIOD)
            for name in sorted(self._node_leases):
                # best effort, like a kubelet's: a missed renewal is made up by the next one
                with contextlib.suppress(Exception):
                    await self._call(
                        "PATCH",
                        leases.path(NODE_LEASE_NAMESPACE, name),
                        body={"spec": {"renewTime": _micro_time()}},
                        content_type=patching.MERGE,
                    )

    async def find(self, resource: str, name: str, namespace: str | None = None) -> JsonDict | None:
        rt = self._registry.resolve(resource)
        try:
            obj: JsonDict = await self._call("GET", rt.path(namespace, name))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return obj

    async def list(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> JsonList:
        rt = self._registry.resolve(resource)
        query = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        doc = await self._call("GET", rt.path(namespace), query=query)
        items: JsonList = doc["items"]
        return items

    async def update(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        rt = self._registry.resolve(resource)
        ns, name = self._meta(obj)
        body = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
        result: JsonDict = await self._call("PUT", rt.path(ns, name), body=body)
        return result

    async def update_status(self, resource: str, obj: Mapping[str, Any]) -> JsonDict:
        rt = self._registry.resolve(resource)
        ns, name = self._meta(obj)
        body = {"apiVersion": rt.api_version, "kind": rt.kind, **obj}
        result: JsonDict = await self._call("PUT", rt.path(ns, name, "status"), body=body)
        return result

    async def patch(
        self,
        resource: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        content_type: str = patching.MERGE,
        subresource: str | None = None,
    ) -> JsonDict:
        rt = self._registry.resolve(resource)
        path = rt.path(namespace, name, subresource)
        result: JsonDict = await self._call("PATCH", path, body=patch, content_type=content_type)
        return result

    async def delete(self, resource: str, name: str, namespace: str | None = None) -> None:
        """Delete at once (``gracePeriodSeconds=0``): a bound pod has no kubelet to stop it."""
        rt = self._registry.resolve(resource)
        if rt == self._registry.resolve("nodes"):
            self._node_leases.discard(name)
        try:
            await self._call("DELETE", rt.path(namespace, name), query={"gracePeriodSeconds": "0"})
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def bind(
        self,
        pod: str,
        node: str,
        namespace: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        pods = self._registry.resolve("pods")
        ns = namespace or self.namespace
        meta: JsonDict = {"name": pod, "namespace": ns}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self._call("POST", pods.path(ns, pod, "binding"), body=body)

    async def _purge_pods(self, namespace: str) -> None:
        """Force-delete every pod in a namespace about to be deleted: the namespace controller
        deletes them gracefully, and without a kubelet a bound pod would never go."""
        for pod in await self.list("pods", namespace):
            name = pod["metadata"]["name"]
            if pod["metadata"].get("finalizers"):
                with contextlib.suppress(ApiError):
                    await self.patch(
                        "pods", name, {"metadata": {"finalizers": None}}, namespace=namespace
                    )
            await self.delete("pods", name, namespace)

    async def aclose(self) -> None:
        """Delete what the helpers created (newest first), then close the clients."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        failures: list[Exception] = []
        try:
            namespaces = self._registry.resolve("namespaces")
            for rt, namespace, name in reversed(self._created):
                try:
                    if rt == namespaces:
                        await self._purge_pods(name)
                    await self.delete(rt.qualified, name, namespace)
                except (ApiError, aiohttp.ClientError, TimeoutError) as exc:  # clean up the rest
                    failures.append(exc)
            self._created.clear()
        finally:
            await super().aclose()
        if failures:
            raise failures[0]
