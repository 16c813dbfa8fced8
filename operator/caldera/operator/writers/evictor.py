"""Evictor: marks a victim pod the way Volcano does, then deletes it with its grace period.

Before the delete the pod gets ``Ready=False`` (reason ``Evict``) and ``DisruptionTarget=True``
(reason ``PreemptionByScheduler``), so its owner and users can see why it went. A pod already gone
counts as evicted; other failures are retried with backoff.
"""

from __future__ import annotations

import time

from caldera.framework.intents import Evict
from caldera.k8s.errors import API_ERRORS, gives_up
from caldera.k8s.resources import PODS
from caldera.k8s.rest import STRATEGIC_MERGE_PATCH, Rest
from caldera.models.base import format_timestamp
from caldera.models.workload import DISRUPTION_TARGET, REASON_PREEMPTION
from caldera.operator.writers.events import EventPoster
from caldera.operator.writers.retry import WorkQueue

__all__ = ["Evictor"]


class Evictor:
    def __init__(
        self, rest: Rest, events: EventPoster, scheduler_name: str, *, workers: int = 8
    ) -> None:
        self._rest = rest
        self._events = events
        self._scheduler = scheduler_name
        self.queue: WorkQueue[str, Evict] = WorkQueue("evict", self._handle, workers=workers)

    def submit(self, evict: Evict) -> None:
        self.queue.put(f"{evict.namespace}/{evict.name}", evict)

    async def _handle(self, key: str, evict: Evict) -> bool:
        now = format_timestamp(time.time())
        message = f"Pod is evicted, because of {evict.reason}"
        if evict.preemptor:
            message += f" (to make room for {evict.preemptor})"
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "False",
                        "reason": "Evict",
                        "message": message,
                        "lastTransitionTime": now,
                    },
                    {
                        "type": DISRUPTION_TARGET,
                        "status": "True",
                        "reason": REASON_PREEMPTION,
                        "message": f"{self._scheduler}: preempting to accommodate a higher "
                        "priority pod",
                        "lastTransitionTime": now,
                    },
                ]
            }
        }
        try:
            ns, name = evict.namespace, evict.name
            await self._rest.call(
                "patch",
                PODS,
                namespace=ns,
                name=name,
                subresource="status",
                body=patch,
                content_type=STRATEGIC_MERGE_PATCH,
            )
            await self._rest.call("delete", PODS, namespace=ns, name=name)
        except API_ERRORS as exc:
            return gives_up(exc)
        self._events.pod(
            evict.namespace, evict.name, evict.uid, type_="Warning", reason="Evict", message=message
        )
        return True
