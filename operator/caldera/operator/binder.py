"""Binder: turns Bind intents into ``POST pods/{name}/binding`` calls, concurrently.

Every bind is assumed in the cache before it is sent. A bind that carries volume decisions first
does VolumeBinding's PreBind writes, as kube-scheduler's volume binder does: each chosen
PersistentVolume gets the claim as its ``claimRef`` (marked ``bound-by-controller``), then each
claim to provision gets the ``volume.kubernetes.io/selected-node`` annotation; the PV controller
and the provisioner do the rest. Those writes carry the resource version the session saw, so a
volume or claim that changed since makes the bind fail rather than overwrite it (which is also
what keeps a later session, which does not see volume writes still in flight, from giving the
same volume to a second claim); there is no rollback of the writes already made. Unlike
kube-scheduler, the binder does not wait for the PV controller to finish the binding before
binding the pod (the kubelet waits for the volume anyway).

A bind that carries ResourceClaim decisions then does DynamicResources' PreBind: each claim's
status is updated (status subresource, merge patch guarded by the session's resource version) with
the allocation the session made, if any, and with the pod added to ``status.reservedFor``. A claim
that changed since the session saw it makes the bind fail the same way.

On success the scheduler's annotations go with the binding and a ``Scheduled`` event is posted.
On any failure (of a volume write or of the binding) the pod's ``PodScheduled`` condition says
``SchedulerError`` and the pod is resynced from the API: gone → dropped; already bound (for
example by a request that timed out after the server committed it) → accepted as it is; still
unbound → the assumption is forgotten and the next session places it again. A resync that cannot
reach the API is retried with backoff while the assumption holds, so the pod is neither lost nor
offered to a second session. The API server refuses a second binding for a bound pod, so a pod is
never bound twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from caldera.framework.intents import Bind, ClaimReservation, PodCondition, VolumeBind
from caldera.k8s.calls import send, status_message
from caldera.k8s.errors import API_ERRORS, Outcome, classify
from caldera.k8s.resources import MERGE_PATCH
from caldera.models.storage import BOUND_BY_CONTROLLER_ANNOTATION, SELECTED_NODE_ANNOTATION
from caldera.operator.assume import Assumptions
from caldera.operator.events import EventPoster
from caldera.operator.logs import about
from caldera.operator.retry import WorkQueue

__all__ = ["Binder"]

log = logging.getLogger(__name__)
SCHEDULER_ERROR = "SchedulerError"


class Binder:
    def __init__(
        self,
        api: client.ApiClient,
        assumed: Assumptions,
        events: EventPoster,
        set_condition: Callable[[PodCondition], None],
        *,
        workers: int = 32,
        timeout: float = 10.0,
        on_bound: Callable[[Bind], None] | None = None,
    ) -> None:
        self._core = client.CoreV1Api(api)
        self._resource = client.ResourceV1Api(api)
        self._assumed = assumed
        self._events = events
        self._set_condition = set_condition
        self._timeout = timeout
        self._on_bound = on_bound
        self._resync: set[str] = set()
        self.queue: WorkQueue[str, Bind] = WorkQueue("bind", self._handle, workers=workers)

    def submit(self, bind: Bind) -> None:
        key = f"{bind.namespace}/{bind.name}"
        self._assumed.assume(key, bind.node)
        self.queue.put(key, bind)

    async def _handle(self, key: str, bind: Bind) -> bool:
        if key not in self._resync:
            error = await self._prebind(bind)
            if error is not None:
                message = error
            else:
                error = await self._post(bind)
                message = f"failed to bind to node {bind.node}: {error}"
            if error is None:
                await self._bound(bind)
                return True
            log.warning(
                "bind %s to %s failed: %s",
                key,
                bind.node,
                error,
                extra=about("Pod", bind.name, bind.namespace),
            )
            self._set_condition(
                PodCondition(
                    bind.namespace,
                    bind.name,
                    bind.uid,
                    SCHEDULER_ERROR,
                    message,
                )
            )
            self._resync.add(key)
        return await self._resync_pod(key, bind)

    def _prebind_writes(self, bind: Bind) -> list[tuple[str, Callable[..., Any], tuple[Any, ...]]]:
        """(plugin, API method, arguments) of the bind's PreBind writes, in order: volumes bound
        first, then claims to provision, then device claims' allocations."""
        writes: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = []
        for volume in bind.volumes:
            if volume.volume:
                args: tuple[Any, ...] = (volume.volume, _claim_ref_patch(volume))
                writes.append(("VolumeBinding", self._core.patch_persistent_volume, args))
            else:
                args = (volume.claim, volume.namespace, _selected_node_patch(volume, bind.node))
                call = self._core.patch_namespaced_persistent_volume_claim
                writes.append(("VolumeBinding", call, args))
        for claim in bind.claims:
            args = (claim.claim, claim.namespace, _claim_status_patch(claim))
            call = self._resource.patch_namespaced_resource_claim_status
            writes.append(("DynamicResources", call, args))
        return writes

    async def _prebind(self, bind: Bind) -> str | None:
        """Run the PreBind writes; the first failure stops them and is returned as kube words
        it (``running PreBind plugin "<plugin>": <error>``)."""
        for plugin, call, args in self._prebind_writes(bind):
            try:
                await send(call, *args, _content_type=MERGE_PATCH, _request_timeout=self._timeout)
            except API_ERRORS as exc:
                return f'running PreBind plugin "{plugin}": {_failure(exc)}'
        return None

    async def _post(self, bind: Bind) -> str | None:
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(
                name=bind.name, namespace=bind.namespace, annotations=bind.annotations or None
            ),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=bind.node),
        )
        try:
            # Sent raw: the generated V1Binding model cannot read the server's reply back
            # (kubernetes-client/python#547), and nothing needs it.
            await send(
                self._core.create_namespaced_pod_binding,
                bind.name,
                bind.namespace,
                body,
                _request_timeout=self._timeout,
            )
            return None
        except API_ERRORS as exc:
            return _failure(exc)

    async def _bound(self, bind: Bind) -> None:
        if self._on_bound is not None:
            self._on_bound(bind)
        self._events.pod(
            bind.namespace,
            bind.name,
            bind.uid,
            type_="Normal",
            reason="Scheduled",
            message=f"Successfully assigned {bind.namespace}/{bind.name} to {bind.node}",
        )

    async def _resync_pod(self, key: str, bind: Bind) -> bool:
        try:
            pod = await self._core.read_namespaced_pod(
                bind.name, bind.namespace, _request_timeout=self._timeout
            )
        except API_ERRORS as exc:
            if classify(exc) is Outcome.NOT_FOUND:
                self._finish(key)
                return True
            return False  # API unreachable: keep the assumption, try again later
        node = pod.spec.node_name if pod.spec else None
        if node:
            if pod.metadata is not None and pod.metadata.uid == bind.uid and node == bind.node:
                await self._bound(bind)
            self._resync.discard(key)
            return True
        self._finish(key)
        return True

    def _finish(self, key: str) -> None:
        self._resync.discard(key)
        self._assumed.forget(key)


def _claim_ref_patch(volume: VolumeBind) -> dict[str, Any]:
    """A merge patch binding the PersistentVolume to the claim (kube's GetBindVolumeToClaim)."""
    meta: dict[str, Any] = {}
    if volume.volume_resource_version:
        meta["resourceVersion"] = volume.volume_resource_version
    if not volume.prebound:
        meta["annotations"] = {BOUND_BY_CONTROLLER_ANNOTATION: "yes"}
    claim_ref = {
        "kind": "PersistentVolumeClaim",
        "apiVersion": "v1",
        "namespace": volume.namespace,
        "name": volume.claim,
        "uid": volume.claim_uid,
        "resourceVersion": volume.claim_resource_version,
    }
    return {"metadata": meta, "spec": {"claimRef": claim_ref}}


def _selected_node_patch(volume: VolumeBind, node: str) -> dict[str, Any]:
    """A merge patch asking for the claim to be provisioned for ``node``."""
    meta: dict[str, Any] = {"annotations": {SELECTED_NODE_ANNOTATION: node}}
    if volume.claim_resource_version:
        meta["resourceVersion"] = volume.claim_resource_version
    return {"metadata": meta}


def _claim_status_patch(write: ClaimReservation) -> dict[str, Any]:
    """A merge patch of a ResourceClaim's status: the allocation (when new) and the consumers."""
    status: dict[str, Any] = {
        "reservedFor": [
            {"resource": "pods", "name": name, "uid": uid} for name, uid in write.reserved_for
        ]
    }
    if write.allocation is not None:
        status["allocation"] = write.allocation
    patch: dict[str, Any] = {"status": status}
    if write.claim_resource_version:
        patch["metadata"] = {"resourceVersion": write.claim_resource_version}
    return patch


def _failure(exc: BaseException) -> str:
    """A failed request in a few words: the HTTP status and the server's message, or the
    transport error."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {status_message(exc.body)}"
    return f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"
