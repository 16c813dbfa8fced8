"""PodTopologySpread's system default constraints, and the selector they spread a pod by.

Volcano runs kube-scheduler's PodTopologySpread with ``defaultingType: System``: a pod that
states no ``topologySpreadConstraints`` of its own is spread by :data:`SYSTEM_DEFAULTS`
(``kubernetes.io/hostname`` with maxSkew 3 and ``topology.kubernetes.io/zone`` with maxSkew 5,
both ``ScheduleAnyway``, so they only ever weigh in scoring). The constraints count the pods that
the pod's *default selector* selects (kube's ``helper.DefaultSelector``), which joins:

- the selectors of every Service in the pod's namespace whose selector matches the pod's labels
  (a Service without a selector selects nothing);
- the selector of the pod's controller, when that controller (the owner reference marked
  ``controller``) is a ``v1`` ReplicationController or an ``apps/v1`` ReplicaSet or StatefulSet
  of that name in the pod's namespace. The controller is found by name, not by selector: a
  ReplicaSet that merely selects the pod adds nothing.

When that selector comes out empty (nothing selects the pod, or only objects with empty
selectors), the pod gets no default constraints at all. :class:`DefaultSelectors` computes the
selector from one snapshot's :class:`~caldera.models.workloads.SpreadOwners`; the constraints
are read once per task and session by :mod:`caldera.plugins.spread_state`.

Complexity: O(S + L) per pod for the S Services of its namespace and its L labels.
"""

from __future__ import annotations

from caldera.api.task import Task
from caldera.models.core import TopologySpreadConstraint
from caldera.models.selectors import LabelSelector, LabelSelectorRequirement
from caldera.models.workloads import ReplicaSet, SpreadOwners, StatefulSet

__all__ = ["HOSTNAME", "SYSTEM_DEFAULTS", "ZONE", "DefaultSelectors"]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

SYSTEM_DEFAULTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(
        max_skew=3, topology_key=HOSTNAME, when_unsatisfiable="ScheduleAnyway"
    ),
    TopologySpreadConstraint(max_skew=5, topology_key=ZONE, when_unsatisfiable="ScheduleAnyway"),
)
"""kube-scheduler's ``systemDefaultConstraints``, in its order (selectors filled in per pod)."""

_REPLICATION_CONTROLLER = ("v1", "ReplicationController")
_REPLICA_SET = ("apps/v1", "ReplicaSet")
_STATEFUL_SET = ("apps/v1", "StatefulSet")


class DefaultSelectors:
    """The default selector of each pod, from one snapshot's Services and controllers."""

    __slots__ = ("_owners",)

    def __init__(self, owners: SpreadOwners) -> None:
        self._owners = owners

    def of(self, task: Task) -> LabelSelector | None:
        """The pod's default selector; None when it is empty (no default constraints)."""
        labels = task.labels
        merged: dict[str, str] = {}
        for selector in self._owners.services.get(task.namespace, ()):
            if all(labels.get(k) == v for k, v in selector.items()):
                merged.update(selector)
        extra: list[LabelSelectorRequirement] = []
        owner = task.controller
        if owner is not None:
            kind = (owner.api_version, owner.kind)
            key = f"{task.namespace}/{owner.name}"
            if kind == _REPLICATION_CONTROLLER:
                rc = self._owners.replication_controllers.get(key)
                if rc is not None and rc.spec.selector:
                    merged.update(rc.spec.selector)
            elif kind in (_REPLICA_SET, _STATEFUL_SET):
                found: ReplicaSet | StatefulSet | None = (
                    self._owners.replica_sets.get(key)
                    if kind == _REPLICA_SET
                    else self._owners.stateful_sets.get(key)
                )
                if found is not None and found.spec.selector is not None:
                    _add_requirements(merged, extra, found.spec.selector)
        if not merged and not extra:
            return None
        return LabelSelector(match_labels=merged, match_expressions=tuple(extra))


def _add_requirements(
    merged: dict[str, str], extra: list[LabelSelectorRequirement], selector: LabelSelector
) -> None:
    """AND ``selector``'s requirements to the ones so far. kube adds them as requirements, so a
    ``key=value`` that contradicts a Service's makes the selector match nothing; it is kept as an
    ``In`` requirement for that reason rather than overwriting the Service's value."""
    for key, value in selector.match_labels.items():
        if key not in merged:
            merged[key] = value
        elif merged[key] != value:
            extra.append(LabelSelectorRequirement(key=key, operator="In", values=(value,)))
    extra.extend(selector.match_expressions)
