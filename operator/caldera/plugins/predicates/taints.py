"""NodeUnschedulable and TaintToleration, vectorised by grouping nodes with identical taints.

A cluster has few distinct taint sets, so the nodes are grouped once per session and a pod's
tolerations are checked once per group (and cached per distinct toleration list): per task the
cost is a dictionary lookup. Reasons read as kube-scheduler prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.session import Rejection
from caldera.models.core import Taint, Toleration
from caldera.plugins.predicates.base import NodeFilter

__all__ = ["taint_filter", "unschedulable_filter", "untolerated_mask"]

UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")
BoolArray = npt.NDArray[np.bool_]


def _untolerated(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect in _FILTERED_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def unschedulable_filter(nodes: NodeTable) -> NodeFilter:
    """NodeUnschedulable: cordoned nodes, unless the pod tolerates their unschedulable taint."""
    return NodeFilter("NodeUnschedulable", _unschedulable(nodes), stable=True)


def taint_filter(nodes: NodeTable) -> NodeFilter:
    """TaintToleration: NoSchedule and NoExecute taints the pod does not tolerate."""
    return NodeFilter("TaintToleration", _taints(nodes), stable=True)


def _unschedulable(nodes: NodeTable) -> Callable[[Task], list[Rejection]]:
    mask = nodes.unschedulable
    if not mask.any():
        return lambda task: []
    rejection = [(UNSCHEDULABLE, mask)]

    def reject(task: Task) -> list[Rejection]:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in task.spec.tolerations):
            return []
        return rejection

    return reject


TaintGroups = list[tuple[tuple[Taint, ...], npt.NDArray[np.intp]]]


def _groups(nodes: NodeTable) -> TaintGroups:
    """The nodes with a NoSchedule or NoExecute taint, grouped by identical taint lists."""
    groups: dict[tuple[Taint, ...], list[int]] = {}
    for i, taints in enumerate(nodes.taints):
        if any(t.effect in _FILTERED_EFFECTS for t in taints):
            groups.setdefault(taints, []).append(i)
    return [(taints, np.array(rows, dtype=np.intp)) for taints, rows in groups.items()]


def untolerated_mask(nodes: NodeTable) -> Callable[[tuple[Toleration, ...]], BoolArray]:
    """kube's ``FindMatchingUntoleratedTaint`` with the DoNotSchedule effects (NoSchedule,
    NoExecute) as a node mask: the nodes with a taint the tolerations do not tolerate, cached per
    distinct toleration list (PodTopologySpread's ``nodeTaintsPolicy``)."""
    index = _groups(nodes)
    cache: dict[tuple[Toleration, ...], BoolArray] = {}

    def mask(tolerations: tuple[Toleration, ...]) -> BoolArray:
        hit = cache.get(tolerations)
        if hit is None:
            hit = cache[tolerations] = np.zeros(len(nodes), dtype=bool)
            for taints, rows in index:
                if _untolerated(taints, tolerations) is not None:
                    hit[rows] = True
        return hit

    return mask


def _taints(nodes: NodeTable) -> Callable[[Task], list[Rejection]]:
    index = _groups(nodes)
    if not index:
        return lambda task: []
    cache: dict[tuple[Toleration, ...], list[Rejection]] = {}

    def reject(task: Task) -> list[Rejection]:
        tolerations = task.spec.tolerations
        hit = cache.get(tolerations)
        if hit is not None:
            return hit
        masks: dict[str, np.ndarray] = {}
        for taints, rows in index:
            taint = _untolerated(taints, tolerations)
            if taint is not None:
                reason = f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
                mask = masks.get(reason)
                if mask is None:
                    mask = masks[reason] = np.zeros(len(nodes), dtype=bool)
                mask[rows] = True
        result = list(masks.items())
        cache[tolerations] = result
        return result

    return reject
