"""The pods placed on a session's nodes, for filters and scorers that count other pods.

Inter-pod affinity and topology spread both ask "which placed pods match this selector, and on
which node?". :class:`PlacedPods` answers the first half once for both: every counted pod with
the node row it is counted on, indexed by label pair so a selector with a ``matchLabels`` pair
only scans the pods that carry it. It is built on first use from the node table (so a session
whose pods never ask costs nothing) and kept current by the owner's allocate and deallocate
events, which report the row a pod was added on or removed from (a deallocate reads the row
recorded at placement: a discarded placement may no longer say where it was).

``admit`` decides which pods count at all (topology spread leaves out terminating pods, whose
resources are being released; inter-pod affinity counts them until they are evicted in the
session). A pod deallocated while still listed on its node (evicted in this session) stops
counting, as in Volcano, whose plugins remove it from their node info on that event.

Complexity: building costs O(P·L) for P placed pods with L labels each, once per session and
owner; each event costs O(L).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from caldera.api.node import NodeTable
from caldera.api.task import Task

__all__ = ["Placed", "PlacedPods"]

Placed = tuple[Task, int]
"""A counted pod and the node row it is counted on."""


class PlacedPods:
    __slots__ = ("_admit", "_by_label", "_gone", "_nodes", "_pods")

    def __init__(self, nodes: NodeTable, admit: Callable[[Task], bool] = lambda t: True) -> None:
        self._nodes = nodes
        self._admit = admit
        self._pods: dict[str, Placed] | None = None
        self._by_label: dict[tuple[str, str], set[str]] = {}
        self._gone: set[str] = set()
        """Until the map is built: pods deallocated while still listed on their node."""

    @property
    def built(self) -> bool:
        return self._pods is not None

    def pods(self) -> dict[str, Placed]:
        """uid → (pod, row) of every counted pod (builds the map on first use)."""
        if self._pods is None:
            self._pods = {}
            for row, tasks in enumerate(self._nodes.tasks):
                for task in tasks.values():
                    if task.uid not in self._gone and self._admit(task):
                        self._add(task, row)
            self._gone.clear()
        return self._pods

    def with_label(self, pair: tuple[str, str] | None) -> Iterator[Placed]:
        """Counted pods carrying label ``pair`` (all of them for None)."""
        pods = self.pods()
        if pair is None:
            return iter(pods.values())
        return (pods[uid] for uid in self._by_label.get(pair, ()))

    def row_of(self, task: Task) -> int | None:
        """The row ``task`` is counted on, or None when it does not count."""
        hit = self.pods().get(task.uid)
        return None if hit is None else hit[1]

    def counts(self, task: Task) -> bool:
        """Whether ``task`` counts now, without building the map."""
        if self._pods is not None:
            return task.uid in self._pods
        return (
            task.node >= 0
            and task.uid in self._nodes.tasks[task.node]
            and task.uid not in self._gone
            and self._admit(task)
        )

    def allocated(self, task: Task) -> int | None:
        """Record a placement; the row it now counts on, or None (not built, or no change)."""
        if self._pods is None:
            self._gone.discard(task.uid)
            return None
        if task.uid in self._pods or not self._admit(task):
            return None
        self._add(task, task.node)
        return task.node

    def deallocated(self, task: Task) -> int | None:
        """Record a removal; the row it counted on, or None (not built, or it did not count)."""
        if self._pods is None:
            self._gone.add(task.uid)
            return None
        hit = self._pods.pop(task.uid, None)
        if hit is None:
            return None
        for pair in task.labels.items():
            self._by_label[pair].discard(task.uid)
        return hit[1]

    def _add(self, task: Task, row: int) -> None:
        assert self._pods is not None
        self._pods[task.uid] = (task, row)
        for pair in task.labels.items():
            self._by_label.setdefault(pair, set()).add(task.uid)
