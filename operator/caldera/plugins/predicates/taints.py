"""NodeUnschedulable and TaintToleration, vectorised by grouping nodes with identical taints.

A cluster has few distinct taint sets, so the nodes are grouped once per session and a pod's
tolerations are checked once per group (and cached per distinct toleration list): per task the
cost is a dictionary lookup. Reasons read as kube-scheduler prints them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.interfaces import Rejection
from caldera.models.core import Taint, Toleration
from caldera.plugins.node_match import taint_groups, untolerated_taint
from caldera.plugins.predicates.base import NodeFilter

__all__ = ["taint_filter", "unschedulable_filter"]

UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")


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


def _taints(nodes: NodeTable) -> Callable[[Task], list[Rejection]]:
    index = taint_groups(nodes)
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
            taint = untolerated_taint(taints, tolerations)
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
