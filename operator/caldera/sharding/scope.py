"""What one scheduler instance is responsible for, when several share a cluster.

Two of Volcano's ways, as its scheduler cache applies them (``pkg/scheduler/cache``):

- **node selector** (``--node-selector key:value``, ``updateNodeSelectors``, ``nodeCanAddCache``):
  the instance places pods only on nodes carrying at least one of the listed labels;
- **hash split** (``MULTI_SCHEDULER_ENABLE``, ``SCHEDULER_NUM``, ``SCHEDULER_POD_NAME``:
  ``getMultiSchedulerInfo``, ``responsibleForPod``, ``responsibleForNode``,
  ``responsibleForPodGroup``): each instance of a StatefulSet takes the jobs and the nodes the
  hash ring (:mod:`~caldera.sharding.ring`) gives it.

A node outside the scope is left out of the session's node table, as a node that is not Ready
is: nothing is placed there, but the pods running on it still count for their queues. A pod or
PodGroup outside the scope is another instance's: its running pods count, and this instance
neither places it nor writes its status.

Instances with scheduler names of their own (node selectors, NodeShards) name each other as
*peers* (``--peer-scheduler-name``): each then counts the peers' running jobs (their bare pods
grouped as its own are) and, with a node selector, the capacity of the nodes outside it, so a
queue's ``capability`` and ``deserved`` hold for the cluster; the instance whose name sorts
first writes the queues' status.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from caldera.sharding.ring import HashRing
from caldera.sharding.shard import NONE

__all__ = ["WHOLE_CLUSTER", "Scope", "parse_node_selector"]


def parse_node_selector(entries: Iterable[str]) -> frozenset[str]:
    """``updateNodeSelectors``: each ``key:value`` entry, trimmed around the first ``:``;
    an entry without one, or with nothing after it, is passed over."""
    out = set()
    for entry in entries:
        index = entry.find(":")
        if index < 0 or index >= len(entry) - 1:
            continue
        out.add(f"{entry[:index].strip()}:{entry[index + 1 :].strip()}")
    return frozenset(out)


@functools.lru_cache(maxsize=8)
def _ring(members: tuple[str, ...]) -> HashRing:
    return HashRing(members)


@dataclass(frozen=True, slots=True)
class Scope:
    """This instance's share of the cluster (the default: all of it)."""

    node_selector: frozenset[str] = frozenset()
    """``key:value`` labels; a node carrying any of them is in scope (none: every node)."""
    me: str = ""
    """This instance's name on the ring (its pod's name)."""
    members: tuple[str, ...] = ()
    """The ring's members, every instance's name (none: no hash split)."""
    shard_mode: str = NONE
    """``--scheduler-sharding-mode``: ``none``, ``hard`` or ``soft``
    (:mod:`caldera.sharding.shard`)."""
    shard_name: str = "volcano"
    """``--scheduler-sharding-name``: the NodeShard this instance follows."""
    name: str = "volcano"
    """This instance's (first) scheduler name."""
    peers: frozenset[str] = frozenset()
    """``--peer-scheduler-name``: the scheduler names of the other instances that share the
    queues."""

    @property
    def whole(self) -> bool:
        return not self.node_selector and not self.members

    @property
    def counts_others(self) -> bool:
        """The instance counts the other instances' jobs and nodes for the queues (a hash split,
        whose instances share their scheduler names, or named peers), so ``capability`` and
        ``deserved`` hold for the cluster; it still places only its own jobs on its own
        nodes."""
        return bool(self.members or self.peers)

    @property
    def writes_queues(self) -> bool:
        """This instance writes the queues' status: it sees every queue's whole use and is the
        first to (the first replica of a hash split; of peers, the one whose name sorts first).
        An instance that shares the cluster with schedulers it does not count (a node selector
        or a NodeShard and no peers named) sees only its own part: it writes none."""
        if self.members and self.me != self.members[0]:
            return False
        if self.peers:
            return all(self.name < peer for peer in self.peers)
        return not self.node_selector and self.shard_mode == NONE

    def _mine(self, key: str) -> bool:
        return not self.members or _ring(self.members).get(key) == self.me

    def node(self, name: str, labels: Mapping[str, str]) -> bool:
        """``nodeCanAddCache``: the ring gives this instance the node, and it carries one of the
        selector's labels."""
        if not self._mine(name):
            return False
        if not self.node_selector:
            return True
        return any(f"{k}:{v}" in self.node_selector for k, v in labels.items())

    def owns(self, name: str, owners: Sequence[str]) -> bool:
        """``responsibleForPod`` / ``responsibleForPodGroup``: the ring gives this instance the
        object's first owner (a pod's Job, ReplicaSet...), or the object itself when it has
        none."""
        return self._mine(owners[0] if owners else name)


WHOLE_CLUSTER = Scope()
