"""Ascend 310P vNPUs the MindCluster way, as Volcano's deviceshare shares them.

Volcano's ``deviceshare.AscendMindClusterVNPUEnable`` (``pkg/scheduler/api/devices/ascend/
mindcluster/ascend310p/vnpu``: ``device_info.go``, ``device_manage.go``, ``utils.go``,
``type.go``; the plugin side in ``pkg/scheduler/plugins/deviceshare/devices/ascend/310p/vnpu``)
cuts 310P chips into vNPUs at bind time ("dynamic virtualization"). This module is its per-node
state for one session, :class:`NpuNode` (Go's ``NPUDevices``), and what the plugin asks of it:

- a pod asks when it carries ``ring-controller.atlas: ascend-310P`` and a container limits
  ``huawei.com/npu-core`` (``HasDeviceRequest``); its AI cores are the first container's
  non-zero ``huawei.com/npu-core`` request, and a multiple of the chip's cores is whole chips,
  anything else one vNPU template chosen by the ``vnpu-level`` and ``vnpu-dvpp`` labels
  (``GetPodResource``);
- the filter (``FilterNode``): NodeD's ``PreSeparate``, the node's idle ``huawei.com/npu-core``,
  a valid node, the chips' free AI cores and AI CPUs (a template whose AI CPUs are short is
  downgraded, ``vir02`` to ``vir02_1c``, ``vir04`` to ``vir04_3c``), and one template per node
  among the pods holding its chips (``IsNodeHasDifferentUnFinishedTask``);
- the allocation (``Allocate``): the chip with the least free resource that meets the request,
  written on the pod as ``huawei.com/npu-core`` (``<chip>-<template>``, or ``<chip>,<chip>`` for
  whole chips) with ``predicate-time`` (Unix nanoseconds);
- the node score (``ScoreBatchNodes``): 8 to the node with the least idle ``huawei.com/npu-core``
  (16 to the first one the pod was not downgraded on, 8 to each downgraded one before it).

Volcano's code is followed as it is at ed72c7c8, including where it differs from MindCluster's
own plugin. The pieces (templates, chips, pods) are in :mod:`caldera.devices.mindcluster_chip`;
how a node's state is built as a session opens, in :mod:`caldera.devices.mindcluster_node`; the
init-params and ConfigMaps it is built from, in :mod:`caldera.devices.mindcluster_info`. Where
Go leaves an order to map iteration or an unstable sort, the order is written down here instead
(chips: least free first, then by id).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from caldera.devices.mindcluster_chip import (
    DVPP_NULL,
    EMPTY,
    NODED_STATUS,
    NPU_CORE,
    PREDICATE_TIME,
    TEMPLATES_310P,
    MindClusterError,
    NpuPod,
    VChip,
    VResource,
    asks,
    atoi,
    chip_id,
    downgradable,
    downgrade,
    labelled_template,
    template_named,
)

__all__ = ["PRECHECK_REASON", "NpuNode", "Refusal", "score_nodes"]

PRE_SEPARATE = "PreSeparate"
PRECHECK_REASON = "preCheckNodePredicate failure"
"""The only reason word ``FilterNode`` gives; its other refusals carry none."""
SCORE = 8.0


class Refusal(NamedTuple):
    """Why ``FilterNode`` refuses a node: its status reason ("" for most) and its error."""

    reason: str
    message: str


@dataclass(slots=True, eq=False)
class NpuNode:
    """One node's vNPU state in one session (``NPUDevices``)."""

    name: str
    annotations: dict[str, str] = field(default_factory=dict)
    """The node's annotations, its device info and NodeD's status (``syncAnnotation``)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    idle_known: bool = False
    """The node's idle resources were taken (``NodeInf.Idle``); else it has none."""
    valid: bool = False
    """``ValidVNode``."""
    chip_kind: str = ""
    server_type: str = ""
    chip_type: str = ""
    free_chip_num: int = 0
    total: VResource = EMPTY
    ai_core_per_chip: int = 0
    total_chip_num: int = 0
    chips: dict[int, VChip] = field(default_factory=dict)
    unhealthy: set[int] = field(default_factory=set)
    concurrent: dict[str, set[str]] = field(default_factory=dict)
    """``ConCache``: template ("" for whole chips) → the pods holding it on this node."""
    allocation: dict[str, str] = field(default_factory=dict)
    """``PodAllocation``: pod uid → the ``huawei.com/npu-core`` value it holds."""
    downgraded: set[str] = field(default_factory=set)
    """``DowngradeCache``: names of the pods whose AI CPUs were cut on this node."""

    def copy(self) -> NpuNode:
        """``DeepCopy``."""
        return copy.deepcopy(self)

    # -- the pod's request ----------------------------------------------------------------

    def cores_per_chip(self) -> int | None:
        """``getVChipCoreNum``: the number after the server type's first ``-``."""
        parts = self.server_type.split("-")
        return atoi(parts[1]) if len(parts) >= 2 else None

    def whole_card(self, aicore: int) -> bool:
        """``IsResourceWholeCard``: a multiple of the chip's cores (0 is one)."""
        per = self.cores_per_chip()
        return per is not None and per != 0 and aicore % per == 0

    def pod_resource(self, pod: NpuPod) -> VResource:
        """``GetPodResource``: whole chips, or the template the labels choose."""
        if self.total.aicore == 0:  # the node was not set up: Go returns an empty request
            return EMPTY
        cores = pod.cores
        if self.whole_card(cores):
            return VResource(cores, cores * self.total.aicpu // self.total.aicore, DVPP_NULL)
        return labelled_template(cores, pod.labels)

    # -- filter ---------------------------------------------------------------------------

    def filter(self, pod: NpuPod, idle: float | None) -> Refusal | None:
        """``FilterNode``; ``idle``: the node's idle ``huawei.com/npu-core`` in the session
        (None: the node has none). Records the pod as downgraded here when it is."""
        if self.annotations.get(NODED_STATUS) == PRE_SEPARATE:  # preCheckNodePredicate
            return Refusal(
                PRECHECK_REASON, f"node is {PRE_SEPARATE}, due to nodeD reported node status"
            )
        if not self.idle_known or idle is None:  # checkNodeNum
            return Refusal(PRECHECK_REASON, f"not have {NPU_CORE}")
        if int(idle) < pod.cores:
            return Refusal(PRECHECK_REASON, f"node not meet task request {NPU_CORE}:{pod.cores}")
        try:
            self._check(pod, self.pod_resource(pod))
        except MindClusterError as exc:
            return Refusal("", str(exc))
        return None

    def _check(self, pod: NpuPod, res: VResource) -> None:
        """``CheckNodeNPUByDyPod``. A node short of resource whose request cannot be
        downgraded passes on, as in Volcano (MindCluster's own plugin refuses it here)."""
        if not self.valid:
            raise MindClusterError("checkNodeNPUByDyTask invalid VNode")
        if self.short_of(res) and downgradable(res):
            self.downgraded.add(pod.name)
            self._check(pod, downgrade(res))
            return
        self._one_template(pod, res)

    def short_of(self, res: VResource) -> bool:
        """``IsNodeNotMeetRes``: the chips' free total, or no chip (no whole chips) for it."""
        free = EMPTY
        for chip in self.chips.values():
            free = free.plus(chip.free)
        if not free.covers(res):
            return True
        if self.whole_card(res.aicore):  # isNodeChipResEnoughWholeCard
            if self.ai_core_per_chip == 0:
                return True
            whole = sum(1 for c in self.chips.values() if not c.segmented and c.free.aicore != 0)
            return res.aicore // self.ai_core_per_chip > whole
        return not any(c.meets(res) and not c.unstable for c in self.chips.values())

    def _one_template(self, pod: NpuPod, res: VResource) -> None:
        """``IsNodeHasDifferentUnFinishedTask``: the pods holding this node's chips all hold
        the template asked (whole chips have none, so they pass only an empty node)."""
        if not self.concurrent:
            return
        template = template_named(res)
        if len(self.concurrent) == 1 and template in self.concurrent:
            return
        raise MindClusterError(f"{pod.name} is using {self.name}, and not rewrite")

    # -- allocate / release ---------------------------------------------------------------

    def allocate(self, pod: NpuPod, now: float) -> dict[str, str]:
        """``Allocate``: pick the chips, take them, and return the bind annotations."""
        res = self.pod_resource(pod)
        if pod.name in self.downgraded:
            res = downgrade(res)
        chips = self.select(res)
        annotations = self.bind_annotations(res, chips, now)
        self.add(pod, annotations)
        return annotations

    def select(self, res: VResource) -> str:
        """``SelectChipFromNode``: least free chip first (``vChipsList``)."""
        ordered = sorted(
            self.chips.items(), key=lambda kv: (kv[1].free.aicore, kv[1].free.aicpu, kv[0])
        )
        if not ordered:
            raise MindClusterError("selectChipFromNode sorted chips len 0")
        if not self.whole_card(res.aicore):  # selectChipFromNodeSegment
            for _, chip in ordered:
                if chip.meets(res) and not chip.unstable:
                    return str(chip_id(chip.name))
            raise MindClusterError(
                f"selectChipFromNodeSegment available chip not found for req <{res.aicore}>"
            )
        if self.ai_core_per_chip == 0:  # selectChipFromNodeWhole
            raise MindClusterError("AiCorePerChip is zero, division by zero avoided")
        wanted = res.aicore // self.ai_core_per_chip
        if wanted == 0:
            raise MindClusterError("task require card number 0")
        share = VResource(res.aicore // wanted, res.aicpu // wanted, DVPP_NULL)
        names: list[str] = []
        for _, chip in ordered:
            if chip.meets(share) and not chip.segmented:
                names.append(str(chip_id(chip.name)))
                if len(names) == wanted:
                    return ",".join(names)
        raise MindClusterError(
            f"selectChipFromNodeWhole free whole chip <{len(names)}> not enough for req <{wanted}>"
        )

    def bind_annotations(self, res: VResource, chips: str, now: float) -> dict[str, str]:
        """``BuildNPUTopologyAnnotations``: ``predicate-time`` (Unix nanoseconds) and the
        chips, with the template for a vNPU; {} when no template is the request."""
        stamp = str(int(now * 1_000_000_000))
        if self.whole_card(res.aicore):
            return {PREDICATE_TIME: stamp, NPU_CORE: chips}
        template = next((n for n, r in TEMPLATES_310P.items() if r == res), None)
        if template is None:
            return {}
        return {PREDICATE_TIME: stamp, NPU_CORE: f"{chips}-{template}"}

    def add(self, pod: NpuPod, annotations: Mapping[str, str]) -> None:
        """``addResource``: count the chips ``annotations`` give the pod (the request counted
        is the pod's own, not a downgraded one) and the template it holds."""
        res = self._resource_or_empty(pod)
        value = annotations.get(NPU_CORE)
        if value is None:
            return
        self.allocation[pod.uid] = value
        template = self._take(value, res, 1)
        self.concurrent.setdefault(template, set()).add(pod.uid)

    def release(self, pod: NpuPod) -> tuple[str, ...]:
        """``Release``: ``SubResource`` gives back what the pod holds, by its own annotation
        first, else by what this session gave it; the bind annotation keys to drop."""
        if asks(pod):
            self._sub(pod)
        return (PREDICATE_TIME, NPU_CORE)

    def _sub(self, pod: NpuPod) -> None:
        """``SubResource`` past ``HasDeviceRequest``."""
        res = self._resource_or_empty(pod)
        value = pod.annotations.get(NPU_CORE)
        if value is None:
            value = self.allocation.get(pod.uid)
            if value is None:
                return
        self.allocation.pop(pod.uid, None)
        template = self._take(value, res, -1)
        holders = self.concurrent.get(template)
        if holders is not None and pod.uid in holders:  # releaseTaskInConCache
            holders.discard(pod.uid)
            if not holders:
                del self.concurrent[template]

    def _resource_or_empty(self, pod: NpuPod) -> VResource:
        try:
            return self.pod_resource(pod)
        except MindClusterError:  # Go logs it and goes on with the empty request
            return EMPTY

    def _take(self, value: str, res: VResource, sign: int) -> str:
        """``UpdateNodeInfo{Segment,Whole}With{Add,Sub}``; the template held ("": whole)."""
        parts = value.split("-")
        if len(parts) == 2:
            chip, template = parts
            for i, c in self.chips.items():
                if str(i) != chip:
                    continue
                if sign > 0:
                    c.used, c.free = c.used.plus(res), c.free.minus(res)
                    if not self.whole_card(res.aicore):
                        c.segmented = True
                    c.update_dvpp(res.dvpp)
                else:  # the chip stays segmented
                    c.used, c.free = c.used.minus(res), c.free.plus(res)
                    c.reset_dvpp(res.dvpp)
            return template
        if self.total_chip_num == 0:
            return ""
        share = VResource(self.ai_core_per_chip, self.total.aicpu // self.total_chip_num, DVPP_NULL)
        for chip in parts[0].split(","):
            for i, c in self.chips.items():
                if str(i) != chip:
                    continue
                if sign > 0:
                    c.used, c.free = c.used.plus(share), c.free.minus(share)
                    c.update_dvpp(share.dvpp)
                else:
                    c.used, c.free = c.used.minus(share), c.free.plus(share)
                    c.reset_dvpp(share.dvpp)
        return ""


def score_nodes(pod_name: str, nodes: Sequence[tuple[NpuNode, float | None]]) -> list[float]:
    """``ScoreBatchNodes`` over the nodes that passed the filter, each with its idle
    ``huawei.com/npu-core`` (None: none); scores in the order given, before the plugin's
    ``deviceshare.ScheduleWeight``. Least idle first (``orderVNodesByFreeResource``; equal idle
    keeps the order given)."""
    scores = [0.0] * len(nodes)
    if not nodes:
        return scores

    def idle_of(i: int) -> float:
        node, idle = nodes[i]
        return math.inf if idle is None or not node.idle_known else idle

    ordered = sorted(range(len(nodes)), key=idle_of)
    if not any(pod_name in node.downgraded for node, _ in nodes):
        scores[ordered[0]] += SCORE
        return scores
    for i in ordered:
        if pod_name not in nodes[i][0].downgraded:
            scores[i] += 2 * SCORE
            break
        scores[i] += SCORE
    return scores
