"""What the ``k8s`` fixture yields: one API for the emulator and for a real cluster.

Operator tests are written once against :class:`K8sHandle`: its async object helpers, the
kubeconfig, a kubernetes-asyncio client and kopf login data work the same on both. The
fault-injection helpers exist only on the emulator; on a real cluster (``CALDERA_E2E_KUBECONFIG``)
they skip the test instead of silently doing nothing.
"""

from __future__ import annotations

import abc
import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

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

    def __init__(self) -> None:
        self._clients: list[Any] = []

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
        namespace: str = "default",
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        """Bind a pod to a node through ``pods/binding`` (409 if already bound)."""

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
        pytest.skip("needs the emulator")

    def fail_next(self, status: int = 500, **match: Any) -> FaultRule:
        return self.emulator.fail_next(status, **match)

    def hang_next(self, **match: Any) -> FaultRule:
        return self.emulator.hang_next(**match)

    def drop_next(self, **match: Any) -> FaultRule:
        return self.emulator.drop_next(**match)

    def clear_faults(self) -> None:
        self.emulator.clear_faults()

    def close_watches(self, *, abort: bool = False) -> int:
        return self.emulator.close_watches(abort=abort)

    def compact(self) -> int:
        return self.emulator.compact()

    @property
    def requests(self) -> Records:
        return self.emulator.requests

    def find_requests(self, **match: str | None) -> Records:
        return self.emulator.find_requests(**match)


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
        namespace: str = "default",
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        self._emulator.bind(pod, node, namespace, annotations)


class ClusterHandle(K8sHandle):
    """The handle over a real cluster: helpers go through its API; created objects are removed."""

    emulated = False

    def __init__(self, kubeconfig_path: Path) -> None:
        super().__init__()
        self.kubeconfig_path = kubeconfig_path
        self.url = self.connection_info().server
        self._registry = ResourceRegistry(DEFAULT_RESOURCES)
        self._client: Any = None
        self._created: list[tuple[ResourceType, str | None, str]] = []

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
        ns = namespace or (body.get("metadata") or {}).get("namespace") or "default"
        created: JsonDict = await self._call(
            "POST", rt.path(ns if rt.namespaced else None), body=body
        )
        name = created["metadata"]["name"]
        self._created.append((rt, ns if rt.namespaced else None, name))
        if "status" in obj and rt.has_status:
            created["status"] = obj["status"]
            created = await self.update_status(resource, created)
        return created

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
        rt = self._registry.resolve(resource)
        try:
            await self._call("DELETE", rt.path(namespace, name), query={"gracePeriodSeconds": "0"})
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def bind(
        self,
        pod: str,
        node: str,
        namespace: str = "default",
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        pods = self._registry.resolve("pods")
        meta: JsonDict = {"name": pod, "namespace": namespace}
        if annotations:
            meta["annotations"] = dict(annotations)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await self._call("POST", pods.path(namespace, pod, "binding"), body=body)

    async def aclose(self) -> None:
        """Delete what the helpers created (newest first), then close the clients."""
        try:
            for rt, namespace, name in reversed(self._created):
                await self.delete(rt.qualified, name, namespace)
        finally:
            await super().aclose()
