"""Pods whose shared devices the device plugin could not hand over (``bind-phase: failed``).

HAMi's device plugin marks such a pod ``hami.io/bind-phase: failed`` (Volcano's plugin:
``volcano.sh/bind-phase``) and the kubelet will not start it. A bound pod cannot be unbound, so
it is sent back the only way there is: a pod a controller owns is evicted (its controller makes a
new one, which the scheduler places again, usage rebuilt without the failed assignment); a pod
nobody owns is left alone, since deleting it would lose it, and gets a Warning event saying to
delete it to retry. Either way it is logged once, naming the pod and its node.
"""

from __future__ import annotations

import logging

from caldera.devices.vendors import VENDORS
from caldera.framework.intents import Evict
from caldera.models.core import Pod
from caldera.operator.logs import about
from caldera.operator.writers.events import EventPoster
from caldera.operator.writers.evictor import Evictor

__all__ = ["FAILED_PHASE", "DeviceFailures", "failed_devices"]

log = logging.getLogger(__name__)
FAILED_PHASE = "failed"
REASON = "DeviceAllocationFailed"


def failed_devices(pod: Pod) -> str | None:
    """The bind-phase annotation that says the device plugin failed this pod, if any."""
    annotations = pod.metadata.annotations
    for vendor in VENDORS:
        if annotations.get(vendor.keys.phase) == FAILED_PHASE:
            return vendor.keys.phase
    return None


class DeviceFailures:
    def __init__(self, events: EventPoster, evictor: Evictor) -> None:
        self._events = events
        self._evictor = evictor
        self._handled: set[str] = set()

    def seen(self, pod: Pod) -> None:
        """A bound pod of ours changed (called by the cache for every such event)."""
        key = failed_devices(pod)
        meta = pod.metadata
        if key is None or meta.uid in self._handled or pod.status.phase != "Pending":
            return
        self._handled.add(meta.uid)
        namespace, name, node = meta.namespace or "default", meta.name, pod.spec.node_name
        owned = any(o.controller for o in meta.owner_references)
        then = (
            "evicted so that its controller makes a new one"
            if owned
            else "delete it to schedule it again (it has no controller to make a new one)"
        )
        message = f"the device plugin on node {node} could not hand over its devices ({key}: "
        message += f"{FAILED_PHASE}); {then}"
        log.warning("pod %s/%s: %s", namespace, name, message, extra=about("Pod", name, namespace))
        self._events.pod(namespace, name, meta.uid, type_="Warning", reason=REASON, message=message)
        if owned:
            self._evictor.submit(Evict(namespace, name, meta.uid, f"{REASON} on node {node}"))

    def forget(self, uid: str) -> None:
        self._handled.discard(uid)
