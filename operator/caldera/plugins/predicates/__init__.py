"""predicates: kube-scheduler's node filters, evaluated for all nodes at once.

Each filter (:class:`~caldera.plugins.predicates.base.NodeFilter`) turns one task into rejection
masks over the node table, and every failing reason of every node is kept for the pending
explanation. Per task the plugin runs, as Volcano's predicates plugin does:

1. **PrePredicate**: each filter's pre-filter. A filter that answers ``SKIP`` has nothing to
   check for this pod and is left out of step 3; a message makes the pod unschedulable on every
   node (that message is the verdict).
2. **Stable filters** (NodeUnschedulable, NodeAffinity, TaintToleration): their verdict depends
   only on the pod spec and node fields that do not change within a session. With
   ``predicate.CacheEnable`` the result is cached per pod template (``volcano.sh/template-uid``),
   so every pod of a job's task costs one lookup.
3. **Other filters** (NodePorts, InterPodAffinity, PodTopologySpread, volumes...), on node state
   kept current by their event handlers after every allocate and deallocate of the session.

Volcano's pod-count check (a node already holding its ``pods`` allocatable) is part of every
action's resource fit and reads ``Too many pods``.

VolumeBinding is more than a filter, as in Volcano: its Score is registered on node order (only
with its feature gate, see :mod:`~caldera.plugins.predicates.volume_binding`), and at session
close the volumes it reserved for each bound task go with that task's Bind intent (PreBind).

Complexity per task: O(F·N) numpy work for F filters and N nodes in the worst case; most filters
return a cached answer (stable filters) or skip (nothing to check).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import ClassVar

from pydantic import Field, field_validator

from caldera.api.task import Task
from caldera.framework.interfaces import Rejection, SessionView
from caldera.framework.placement import ByFilter
from caldera.framework.plugin import Args, Plugin, PluginOption
from caldera.plugins.predicates import affinity, interpod, ports, spread, taints, volumes
from caldera.plugins.predicates.base import SKIP, NodeFilter
from caldera.plugins.predicates.dra import DynamicResources
from caldera.plugins.predicates.volume_binding import VolumeBinding

__all__ = ["TEMPLATE_UID_ANNOTATION", "PredicatesArgs", "PredicatesPlugin", "ShapePoint"]

TEMPLATE_UID_ANNOTATION = "volcano.sh/template-uid"
CURABLE = frozenset(
    {
        interpod.ANTI_AFFINITY_REASON,
        interpod.EXISTING_ANTI_AFFINITY_REASON,
        ports.REASON,
        spread.NOT_MATCH,
    }
)
"""Reasons kube-scheduler's filters return as ``Unschedulable`` (not ``…AndUnresolvable``):
evicting pods from the node may cure them, so preemption keeps such nodes in play
(InterPodAffinity's anti-affinity either way, NodePorts, PodTopologySpread's skew)."""


class ShapePoint(Args):
    """One point of ``volumebinding.shape``: storage utilisation (%) → score (0–10)."""

    utilization: int = Field(ge=0, le=100)
    score: int = Field(ge=0, le=10)


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
    volume_binding_shape: tuple[ShapePoint, ...] = Field(
        (ShapePoint(utilization=0, score=10), ShapePoint(utilization=100, score=0)),
        alias="volumebinding.shape",
        min_length=1,
        strict=False,  # a YAML list, read as a tuple
    )
    filter_timeout_seconds: int = Field(10, alias="dynamicresources.filterTimeoutSeconds", ge=0)

    @field_validator("volume_binding_shape")
    @classmethod
    def _increasing(cls, shape: tuple[ShapePoint, ...]) -> tuple[ShapePoint, ...]:
        for before, after in pairwise(shape):
            if after.utilization <= before.utilization:
                raise ValueError("utilization values must be sorted in increasing order")
        return shape


class PredicatesPlugin(Plugin[PredicatesArgs]):
    name: ClassVar[str] = "predicates"
    Args = PredicatesArgs

    def __init__(self, args: PredicatesArgs, option: PluginOption) -> None:
        super().__init__(args, option)
        self.filters: list[NodeFilter] = []
        self._skipped: dict[str, frozenset[str]] = {}
        self._template_cache: dict[str, ByFilter] = {}
        self.volume_binding: VolumeBinding | None = None
        self.dynamic_resources: DynamicResources | None = None

    def build_filters(self, ssn: SessionView) -> list[NodeFilter]:
        """The enabled filters, in kube-scheduler's order."""
        nodes, a = ssn.nodes, self.args
        filters = [taints.unschedulable_filter(nodes)]
        if a.node_affinity:
            filters.append(affinity.node_affinity_filter(nodes))
        if a.node_ports:
            filters.append(ports.node_ports_filter(nodes))
        if a.taint_toleration:
            filters.append(taints.taint_filter(nodes))
        if a.pod_affinity:
            filters.append(interpod.interpod_affinity_filter(ssn))
        if a.node_volume_limits:
            filters.append(volumes.node_volume_limits_filter(ssn))
        if a.volume_zone:
            filters.append(volumes.volume_zone_filter(ssn))
        if a.pod_topology_spread:
            filters.append(spread.pod_topology_spread_filter(nodes))
        if a.volume_binding:
            self.volume_binding = VolumeBinding(
                ssn,
                a.volume_binding_weight,
                # kube scales the 0–10 shape scores to node scores (× MaxNodeScore / 10)
                tuple((p.utilization, p.score * 10) for p in a.volume_binding_shape),
            )
            filters.append(self.volume_binding.node_filter)
        if a.dynamic_resource_allocation:
            self.dynamic_resources = DynamicResources(ssn, a.filter_timeout_seconds)
            filters.append(self.dynamic_resources.node_filter)
        return filters

    def on_session_open(self, ssn: SessionView) -> None:
        self.filters = self.build_filters(ssn)
        for f in self.filters:
            if f.handler is not None:
                ssn.event_handlers.add(self.name, f.handler)
        ssn.pre_predicate_point.add(self.name, self.pre_predicate)
        ssn.predicate_point.add(self.name, self.predicate)
        if any(f.simulate is not None for f in self.filters):
            ssn.simulate_predicate_point.add(self.name, self.simulate)
            ssn.releasable_reasons.update(CURABLE)
        if self.volume_binding is not None:
            ssn.pre_bind_point.add(self.name, self.volume_binding.pre_bind)
        if self.dynamic_resources is not None:
            ssn.pre_bind_point.add(self.name, self.dynamic_resources.pre_bind)
        scorer = self.volume_binding.scorer() if self.volume_binding else None
        if scorer is not None:
            ssn.node_order_point.add(self.name, scorer)

    def pre_predicate(self, task: Task) -> str | None:
        skipped: set[str] = set()
        for f in self.filters:
            if f.pre_filter is None:
                continue
            verdict = f.pre_filter(task)
            if verdict is SKIP:
                skipped.add(f.name)
            elif isinstance(verdict, str):
                return verdict
        self._skipped[task.uid] = frozenset(skipped)
        return None

    def predicate(self, task: Task) -> list[Rejection]:
        """Every filter's rejections, stable filters first (as Volcano's ``Predicate``: its
        ``predicateByStablefilter``, then the others), each marked with its filter."""
        skipped = self._skipped.pop(task.uid, None)
        if skipped is None:
            skipped = frozenset(
                f.name for f in self.filters if f.pre_filter and f.pre_filter(task) is SKIP
            )
        out = self._stable(task)
        for f in self.filters:
            if not f.stable and f.name not in skipped:
                out.add(f.name, f.filter(task))
        return out

    def _stable(self, task: Task) -> ByFilter:
        template = task.annotations.get(TEMPLATE_UID_ANNOTATION) if self.args.cache else None
        if template:
            hit = self._template_cache.get(template)
            if hit is not None:
                return hit.copy()
        out = ByFilter()
        for f in self.filters:
            if f.stable:
                out.add(f.name, f.filter(task))
        if template:
            self._template_cache[template] = out.copy()
        return out

    def verdicts(self, task: Task) -> list[tuple[str, Sequence[Rejection]]]:
        """Every filter's own rejections for ``task`` (``caldera explain``); skipped filters
        answer with nothing."""
        skipped = {f.name for f in self.filters if f.pre_filter and f.pre_filter(task) is SKIP}
        return [(f.name, [] if f.name in skipped else f.filter(task)) for f in self.filters]

    def simulate(
        self, task: Task, node: int, removed: Sequence[Task], added: Sequence[Task]
    ) -> list[str]:
        out: list[str] = []
        for f in self.filters:
            if f.simulate is not None:
                out.extend(f.simulate(task, node, removed, added))
        return out
