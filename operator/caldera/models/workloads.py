"""The objects that select pods for PodTopologySpread's system default constraints: Services,
ReplicationControllers, ReplicaSets and StatefulSets.

kube-scheduler spreads a pod that states no ``topologySpreadConstraints`` of its own by the
selectors of these objects (see :mod:`caldera.plugins.spread_defaults`), so only their metadata
and selector are modelled. A Service and a ReplicationController select with a plain label map
(a Service without one selects nothing); a ReplicaSet and a StatefulSet with a
:class:`~caldera.models.selectors.LabelSelector`. :class:`SpreadOwners` is what a snapshot carries
of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import Field

from caldera.models.base import ApiModel, ObjectMeta
from caldera.models.selectors import LabelSelector

__all__ = [
    "ReplicaSet",
    "ReplicationController",
    "Service",
    "SpreadOwners",
    "StatefulSet",
]


class MapSelectorSpec(ApiModel):
    selector: dict[str, str] | None = None


class LabelSelectorSpec(ApiModel):
    selector: LabelSelector | None = None


class Service(ApiModel):
    metadata: ObjectMeta
    spec: MapSelectorSpec = Field(default_factory=MapSelectorSpec)


class ReplicationController(ApiModel):
    metadata: ObjectMeta
    spec: MapSelectorSpec = Field(default_factory=MapSelectorSpec)


class ReplicaSet(ApiModel):
    metadata: ObjectMeta
    spec: LabelSelectorSpec = Field(default_factory=LabelSelectorSpec)


class StatefulSet(ApiModel):
    metadata: ObjectMeta
    spec: LabelSelectorSpec = Field(default_factory=LabelSelectorSpec)


@dataclass(slots=True)
class SpreadOwners:
    """The selecting objects of one snapshot, keyed the way the default selector looks them
    up: Services by namespace (every one is matched against the pod's labels), the controllers
    by ``namespace/name`` (a pod names its controller)."""

    services: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    """Per namespace, the selectors of its Services that have one."""
    replication_controllers: dict[str, ReplicationController] = field(default_factory=dict)
    replica_sets: dict[str, ReplicaSet] = field(default_factory=dict)
    stateful_sets: dict[str, StatefulSet] = field(default_factory=dict)
