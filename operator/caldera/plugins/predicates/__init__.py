"""predicates: kube-scheduler's node filters, evaluated for all nodes at once.

Each filter turns one task into rejection masks over the node table (a reason and the nodes it
rejects), and every failing reason of every node is kept for the pending explanation. Filters whose
answer depends only on the pod spec and static node fields cache their masks per distinct spec
within the session, so identical pods cost one dictionary lookup. This issue ships
NodeUnschedulable, NodeAffinity (nodeSelector and required terms) and TaintToleration; the pod-count
check is part of every action's resource fit (``Too many pods``). The remaining filters of
Volcano's list accept their switches now and are added by later work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from pydantic import Field

from caldera.api.task import Task
from caldera.framework.plugin import Args, Plugin
from caldera.framework.session import Rejection, Session
from caldera.plugins.predicates import affinity, taints

__all__ = ["PredicatesArgs", "PredicatesPlugin"]


class PredicatesArgs(Args):
    node_affinity: bool = Field(True, alias="predicate.NodeAffinityEnable")
    node_ports: bool = Field(True, alias="predicate.NodePortsEnable")
    taint_toleration: bool = Field(True, alias="predicate.TaintTolerationEnable")
    pod_affinity: bool = Field(True, alias="predicate.PodAffinityEnable")
    node_volume_limits: bool = Field(True, alias="predicate.NodeVolumeLimitsEnable")
    volume_zone: bool = Field(True, alias="predicate.VolumeZoneEnable")
    pod_topology_spread: bool = Field(True, alias="predicate.PodTopologySpreadEnable")
    volume_binding: bool = Field(True, alias="predicate.VolumeBindingEnable")
    dynamic_resource_allocation: bool = Field(
        False, alias="predicate.DynamicResourceAllocationEnable"
    )
    cache: bool = Field(False, alias="predicate.CacheEnable")
    volume_binding_weight: int = Field(1, alias="volumebinding.weight", ge=0)
    bind_timeout_seconds: int = Field(600, alias="volumebinding.bindTimeoutSeconds", ge=0)
    filter_timeout_seconds: int = Field(10, alias="dynamicresources.filterTimeoutSeconds", ge=0)


Filter = Callable[[Task], Sequence[Rejection]]


class PredicatesPlugin(Plugin[PredicatesArgs]):
    name: ClassVar[str] = "predicates"
    Args = PredicatesArgs

    def on_session_open(self, ssn: Session) -> None:
        nodes = ssn.nodes
        filters: list[Filter] = [taints.unschedulable_filter(nodes)]
        if self.args.node_affinity:
            filters.append(affinity.node_affinity_filter(nodes))
        if self.args.taint_toleration:
            filters.append(taints.taint_filter(nodes))
        for fn in filters:
            ssn.predicate_point.add(self.name, fn)
