"""Binder: turns Bind intents into ``POST pods/{name}/binding`` calls, concurrently.

Every bind is assumed in the cache before it is sent. On success the scheduler's annotations go
with the binding and a ``Scheduled`` event is posted. On any failure the pod's ``PodScheduled``
condition says ``SchedulerError`` and the pod is resynced from the API: gone → dropped; already
bound (for example by a request that timed out after the server committed it) → accepted as it
is; still unbound → the assumption is forgotten and the next session places it again. A resync that
cannot reach the API is retried with backoff while the assumption holds, so the pod is neither
lost nor offered to a second session. The API server refuses a second binding for a bound pod, so
a pod is never bound twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from caldera.framework.intents import Bind, PodCondition
from caldera.k8s.calls import send, status_message
from caldera.k8s.errors import API_ERRORS, Outcome, classify
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
            error = await self._post(bind)
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
                    f"failed to bind to node {bind.node}: {error}",
                )
            )
            self._resync.add(key)
        return await self._resync_pod(key, bind)

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
        except ApiException as exc:
            return f"HTTP {exc.status}: {status_message(exc.body)}"
        except API_ERRORS as exc:
            return f"{type(exc).__name__}: {getattr(exc, 'reason', None) or exc}"

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
