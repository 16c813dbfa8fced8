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

A bind that carries shared-device decisions (deviceshare) writes them before the binding as HAMi's
scheduler does, so HAMi's device plugin finds them when the kubelet asks: with the node lock on,
the node's ``hami.io/mutex.lock`` is taken first (a lock another pod holds is waited for, retrying,
for up to 28 s), then one merge patch puts the card assignment and ``bind-phase: allocating`` on
the pod, then the binding. A failure after the lock releases it (if it is still ours); on success
the device plugin releases it.

On success a ``Scheduled`` event is posted; nothing else is written (the binding itself sets the
pod's ``PodScheduled`` condition).
The number of binds in flight adapts to the API server (:class:`Throttle`): it halves when a
request times out or the server says it is overloaded, and grows back by one per round of
successes, up to ``--bind-workers``.
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
import time
from collections.abc import Awaitable, Callable
from typing import Any

from caldera.framework.intents import Bind, ClaimReservation, PodCondition, VolumeBind
from caldera.k8s.errors import API_ERRORS, Outcome, classify, describe
from caldera.k8s.nodelock import NodeLocks
from caldera.k8s.resources import PODS, PVCS, PVS, RESOURCE_CLAIMS
from caldera.k8s.rest import MERGE_PATCH, Resource, Rest
from caldera.models.storage import BOUND_BY_CONTROLLER_ANNOTATION, SELECTED_NODE_ANNOTATION
from caldera.operator.logs import about
from caldera.operator.writers.events import EventPoster
from caldera.operator.writers.retry import WorkQueue
from caldera.operator.writers.throttle import Throttle

__all__ = ["Binder"]

log = logging.getLogger(__name__)
SCHEDULER_ERROR = "SchedulerError"
LOCK_RETRY_SECONDS = 28.0
"""How long a bind waits for another pod's node lock (HAMi's ``--node-lock-retry-timeout``)."""
_LOCK_BUSY = "busy"

Write = tuple[str, Resource, str, str, str, dict[str, Any]]
"""(plugin, resource, namespace, name, subresource, merge patch) of one PreBind write."""


class Binder:
    def __init__(
        self,
        rest: Rest,
        events: EventPoster,
        set_condition: Callable[[PodCondition], None],
        *,
        forget: Callable[[str], None],
        workers: int = 32,
        timeout: float = 10.0,
        on_bound: Callable[[Bind], None] | None = None,
        recheck: Callable[[Bind], Awaitable[str | None]] | None = None,
    ) -> None:
        self._rest = rest
        self._events = events
        self._set_condition = set_condition
        self._forget = forget
        self._timeout = timeout
        self._on_bound = on_bound
        self._recheck = recheck
        """Asked before binding a pod onto a node another scheduler shares (``Bind.recheck``):
        why it no longer fits there (:mod:`caldera.operator.writers.recheck`)."""
        self._resync: set[str] = set()
        self._locks = NodeLocks(rest, timeout)
        self._lock_waits: dict[str, float] = {}
        self._causes: dict[str, BaseException] = {}
        """Pod → why its binding call just failed (an outage is logged once, not per bind)."""
        self.throttle = Throttle(workers, name="bind")
        """Binds in flight: fewer while the API server is slow to answer."""
        self.queue: WorkQueue[str, Bind] = WorkQueue("bind", self._handle, workers=workers)

    def submit(self, bind: Bind) -> None:
        """Bind a pod the caller has assumed on its node."""
        self.queue.put(f"{bind.namespace}/{bind.name}", bind)

    async def _handle(self, key: str, bind: Bind) -> bool:
        if key not in self._resync:
            async with self.throttle:
                locked = False
                error = None
                if bind.recheck and self._recheck is not None:
                    error = await self._recheck(bind)
                if error is None and bind.node_lock is not None:
                    error = await self._lock(key, bind)
                    if error == _LOCK_BUSY:
                        return False  # another pod's devices are being handed out: retry soon
                    locked = error is None
                if error is None:
                    error = await self._prebind(bind)
                if error is not None:
                    message = error
                else:
                    error = await self._post(bind)
                    message = f"failed to bind to node {bind.node}: {error}"
                if error is not None and locked:
                    await self._unlock(bind)
            if error is None:
                self._bound(bind)
                return True
            cause = self._causes.pop(key, None)
            if cause is None or not self._rest.reach.counted(cause, "bind"):
                log.warning(
                    "bind %s to %s failed: %s",
                    key,
                    bind.node,
                    error,
                    extra=about("Pod", bind.name, bind.namespace),
                )
            self._set_condition(
                PodCondition(bind.namespace, bind.name, bind.uid, SCHEDULER_ERROR, message)
            )
            self._resync.add(key)
        return await self._resync_pod(key, bind)

    async def _lock(self, key: str, bind: Bind) -> str | None:
        """Take the node lock; :data:`_LOCK_BUSY` while another pod holds it (for at most
        :data:`LOCK_RETRY_SECONDS`, as HAMi's gang members retry), else the failure."""
        lock = bind.node_lock
        assert lock is not None
        try:
            busy = await self._locks.acquire(
                bind.node, lock.key, bind.namespace, bind.name, lock.timeout, lock.bare
            )
        except API_ERRORS as exc:
            self._observe(exc)
            return f"locking node {bind.node}: {describe(exc)}"
        if busy is None:
            self._lock_waits.pop(key, None)
            return None
        first = self._lock_waits.setdefault(key, time.monotonic())
        if time.monotonic() - first < LOCK_RETRY_SECONDS:
            return _LOCK_BUSY
        self._lock_waits.pop(key, None)
        return busy

    async def _unlock(self, bind: Bind) -> None:
        lock = bind.node_lock
        assert lock is not None
        try:
            await self._locks.release(bind.node, lock.key, bind.namespace, bind.name, lock.bare)
        except API_ERRORS as exc:  # the lock expires on its own
            log.warning(
                "releasing the lock on node %s failed: %s",
                bind.node,
                describe(exc),
                extra=about("Pod", bind.name, bind.namespace),
            )

    def _prebind_writes(self, bind: Bind) -> list[Write]:
        """The bind's PreBind writes, in order: volumes bound first, then claims to provision,
        then device claims' allocations, then the pod's annotations (shared devices)."""
        writes: list[Write] = []
        for volume in bind.volumes:
            if volume.volume:
                writes.append(
                    ("VolumeBinding", PVS, "", volume.volume, "", _claim_ref_patch(volume))
                )
            else:
                patch = _selected_node_patch(volume, bind.node)
                writes.append(("VolumeBinding", PVCS, volume.namespace, volume.claim, "", patch))
        for claim in bind.claims:
            patch = _claim_status_patch(claim)
            writes.append(
                ("DynamicResources", RESOURCE_CLAIMS, claim.namespace, claim.claim, "status", patch)
            )
        if bind.annotations:
            patch = {"metadata": {"annotations": dict(bind.annotations)}}
            writes.append(("deviceshare", PODS, bind.namespace, bind.name, "", patch))
        return writes

    async def _prebind(self, bind: Bind) -> str | None:
        """Run the PreBind writes; the first failure stops them and is returned as kube words
        it (``running PreBind plugin "<plugin>": <error>``)."""
        for plugin, resource, namespace, name, sub, patch in self._prebind_writes(bind):
            try:
                await self._rest.call(
                    "patch",
                    resource,
                    namespace=namespace or None,
                    name=name,
                    subresource=sub,
                    body=patch,
                    content_type=MERGE_PATCH,
                    timeout=self._timeout,
                )
            except API_ERRORS as exc:
                self._observe(exc)
                return f'running PreBind plugin "{plugin}": {describe(exc)}'
        return None

    async def _post(self, bind: Bind) -> str | None:
        meta: dict[str, Any] = {"name": bind.name, "namespace": bind.namespace}
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": bind.node},
        }
        try:
            await self._rest.call(
                "create",
                PODS,
                namespace=bind.namespace,
                name=bind.name,
                subresource="binding",
                body=body,
                timeout=self._timeout,
            )
        except API_ERRORS as exc:
            self._observe(exc)
            self._causes[f"{bind.namespace}/{bind.name}"] = exc
            return describe(exc)
        self.throttle.ok()
        return None

    def _observe(self, exc: BaseException) -> None:
        """A timeout or a server that says it is overloaded halves the binds in flight."""
        if isinstance(exc, TimeoutError) or getattr(exc, "status", None) in (429, 503, 504):
            self.throttle.overloaded(describe(exc))

    def _bound(self, bind: Bind) -> None:
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
            pod = await self._rest.call(
                "get", PODS, namespace=bind.namespace, name=bind.name, timeout=self._timeout
            )
        except API_ERRORS as exc:
            if classify(exc) is Outcome.NOT_FOUND:
                self._finish(key)
                return True
            return False  # API unreachable: keep the assumption, try again later
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            if (pod.get("metadata") or {}).get("uid") == bind.uid and node == bind.node:
                self._bound(bind)
            self._resync.discard(key)
            return True
        self._finish(key)
        return True

    def _finish(self, key: str) -> None:
        self._resync.discard(key)
        self._forget(key)


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
