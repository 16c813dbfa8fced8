"""Nodes and queues as the engine holds them: the node table's base columns and engine queues.

Separate from the pods' and jobs' classification in :mod:`caldera.cache.builder`: these change
only with the nodes or queues, and are kept across builds while those stay the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

import numpy as np

from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace
from caldera.cache.memo import NodeBase, frozen, stable_uid
from caldera.devices.model import NodeView
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import CAPACITY_NAMES, node_problems
from caldera.models.core import Node
from caldera.models.volcano import Queue as QueueModel
from caldera.sharding.scope import WHOLE_CLUSTER, Scope

__all__ = ["device_view", "engine_queue", "node_base"]


_NO_CAPACITY: Mapping[str, float] = MappingProxyType({})


def _extended(name: str) -> bool:
    """An extended resource a device plugin may advertise under a name HAMi's device
    configuration gives it (``vendor.com/thing``; not ``hugepages-*`` nor Kubernetes' own)."""
    return "/" in name and not name.startswith(("kubernetes.io/", "hugepages-"))


def device_view(node: Node) -> NodeView:
    """What the device vendors read of ``node``: its name, annotations, and the capacity of its
    extended resources, some vendor's cards among them (most nodes: none, one shared empty
    mapping). A resource the node states no capacity for is read from its allocatable (a
    hand-written manifest may give only that; a kubelet reports both)."""
    capacity, allocatable = node.status.capacity, node.status.allocatable
    kept = {
        r: capacity[r] if r in capacity else allocatable[r]
        for r in (*capacity, *(r for r in allocatable if r not in capacity))
        if r in CAPACITY_NAMES or _extended(r)
    }
    meta = node.metadata
    return NodeView(meta.name, meta.annotations, kept or _NO_CAPACITY, meta.labels)


def node_base(
    nodes: dict[str, Node],
    space: ResourceSpace,
    vendors: Sequence[Vendor],
    managed: frozenset[str],
    scope: Scope = WHOLE_CLUSTER,
) -> NodeBase:
    """The node table's columns that change only with the nodes: the Ready nodes in ``scope``
    (this instance's share of the cluster), sorted by name."""
    ready: list[Node] = []
    problems: list[tuple[str, str]] = []
    outside = space.zeros()
    for name in sorted(nodes):
        node = nodes[name]
        if not scope.whole and not scope.node(name, node.metadata.labels):
            if scope.counts_others and node.ready:  # its capacity counts for the queues
                outside += space.vector(node.allocatable)
            continue  # another instance's: its pods count, nothing is placed there
        if node.ready:
            ready.append(node)
            problems.extend((name, m) for m in node_problems(vendors, device_view(node)))
        else:
            problems.append((name, "not Ready: takes no new pods this session"))
    alloc = np.array([space.vector(n.allocatable) for n in ready], dtype=np.float64).reshape(
        len(ready), len(space)
    )
    return NodeBase(
        nodes=dict(nodes),
        space=space,
        managed=managed,
        scope=scope,
        outside=frozen(outside),
        ready=ready,
        names=[n.metadata.name for n in ready],
        allocatable=frozen(alloc),
        labels=[dict(n.metadata.labels) for n in ready],
        withheld=(
            [{r: v for r, v in n.allocatable.items() if r in managed} for n in ready]
            if managed
            else None
        ),
        capacity=[device_view(n).capacity for n in ready],
        images=[
            {name: image.size_bytes for image in n.status.images for name in image.names}
            for n in ready
        ],
        problems=problems,
    )


def engine_queue(space: ResourceSpace, name: str, q: QueueModel) -> Queue:
    spec = q.spec
    return Queue(
        name=name,
        uid=q.metadata.uid or stable_uid("Queue", name),
        weight=max(spec.weight, 1),
        capability=space.vector(spec.capability or {}, missing=np.inf),
        guarantee=space.vector(spec.guarantee.resource),
        deserved_spec=(
            None if spec.deserved is None else space.vector(spec.deserved, missing=np.inf)
        ),
        parent=spec.parent,
        state=q.status.state or "Open",
        reclaimable=spec.reclaimable is not False,
        priority=spec.priority,
        creation=q.metadata.creation_timestamp or 0.0,
        status_allocated=dict(q.status.allocated),
        annotations=dict(q.metadata.annotations),
        affinity=spec.affinity,
    )
