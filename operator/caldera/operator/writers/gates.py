"""Gate lifter: takes the queue-allocation gate off a pod whose queue has room for it.

One strategic-merge patch of the pod deleting that gate by name (``$patch: delete``), as Volcano's
``RemoveVolcanoSchGate`` writes it: other gates stay, a pod that no longer has it is left as it is,
and no read or resourceVersion is needed. A pod already gone needs nothing; other failures are
retried with backoff, and a lift given up on is forgotten, so the next session asks again.
"""

from __future__ import annotations

from collections.abc import Callable

from caldera.framework.intents import GateLift
from caldera.k8s.errors import API_ERRORS, gives_up
from caldera.k8s.resources import PODS
from caldera.k8s.rest import STRATEGIC_MERGE_PATCH, Rest
from caldera.models.volcano import QUEUE_ALLOCATION_GATE
from caldera.operator.writers.retry import WorkQueue

__all__ = ["GateLifter"]

PATCH = {"spec": {"schedulingGates": [{"$patch": "delete", "name": QUEUE_ALLOCATION_GATE}]}}


class GateLifter:
    def __init__(self, rest: Rest, *, forget: Callable[[str], None], workers: int = 8) -> None:
        self._rest = rest
        self._forget = forget
        self.lifted = 0
        self.queue: WorkQueue[str, GateLift] = WorkQueue("gate-lift", self._handle, workers=workers)

    def submit(self, lift: GateLift) -> None:
        self.queue.put(f"{lift.namespace}/{lift.name}", lift)

    async def _handle(self, key: str, lift: GateLift) -> bool:
        try:
            await self._rest.call(
                "patch",
                PODS,
                namespace=lift.namespace,
                name=lift.name,
                body=PATCH,
                content_type=STRATEGIC_MERGE_PATCH,
            )
        except API_ERRORS as exc:
            done = gives_up(exc)
            if done:
                self._forget(key)
            return done
        self.lifted += 1
        return True
