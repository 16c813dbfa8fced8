"""What one node filter is: kube-scheduler's Filter plugin, vectorised over the node table.

A :class:`NodeFilter` answers for one task over *all* nodes at once with rejection masks (a
reason and the nodes it rejects), so the predicates plugin never loops over nodes. Its optional
parts mirror the kube-scheduler extension points Volcano wraps:

- ``pre_filter`` (PreFilter) runs once per task before any node is looked at. It returns
  :data:`SKIP` when the filter has nothing to check for this pod (no host ports, no affinity
  terms...), which takes the filter out of this task's evaluation, a message when the pod can
  fit no node at all, or ``None`` to go on.
- ``handler`` (Reserve/Unreserve and the NodeInfo updates of Volcano's AllocateFunc and
  DeallocateFunc) keeps the filter's own node state current within the session after each
  allocate, pipeline, evict or discard.
- ``simulate`` answers "would the task fit node ``i`` if these tasks were removed from the
  cluster and those added?" without touching session state; preemption uses it to check
  victims (Volcano's SimulateRemoveTask, SimulateAddTask and SimulatePredicate in one call).
- ``stable`` marks filters whose verdict depends only on the pod spec and fields of the node
  that do not change within a session (NodeUnschedulable, NodeAffinity, TaintToleration):
  their result may be cached per pod template (``predicate.CacheEnable``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from caldera.api.task import Task
from caldera.framework.interfaces import EventHandler, Rejection

__all__ = ["SKIP", "NodeFilter", "PreFilterResult", "Simulate", "Skip"]


class Skip(enum.Enum):
    SKIP = "skip"


SKIP = Skip.SKIP
PreFilterResult = str | Skip | None
Simulate = Callable[[Task, int, Sequence[Task], Sequence[Task]], Sequence[str]]
"""(task, node row, tasks removed, tasks added) → the reasons the task would not fit there."""


@dataclass(frozen=True, slots=True)
class NodeFilter:
    name: str
    """kube-scheduler's plugin name (``NodePorts``, ``InterPodAffinity``...)."""
    filter: Callable[[Task], Sequence[Rejection]]
    stable: bool = False
    pre_filter: Callable[[Task], PreFilterResult] | None = None
    handler: EventHandler | None = None
    simulate: Simulate | None = None
