"""Topology spread state: kube-scheduler's PodTopologySpread counting, kept as numpy arrays.

The PodTopologySpread filter (:mod:`caldera.plugins.predicates.spread`) and scorer
(:mod:`caldera.plugins.nodeorder.spread`) count the same thing: per topology domain, the pods in
the incoming pod's namespace that match a constraint's selector, over the *eligible* nodes. Both
build on this module:

- :meth:`SpreadState.constraints` reads a pod's constraints for one ``whenUnsatisfiable``
  action as kube's ``filterTopologySpreadConstraints`` does: ``matchLabelKeys`` add the pod's
  own values as requirements (keys the pod lacks are ignored), ``minDomains`` defaults to 1,
  ``nodeAffinityPolicy`` to Honor and ``nodeTaintsPolicy`` to Ignore. A pod without
  constraints of its own gets the system default constraints with its default selector
  (:mod:`caldera.plugins.spread_defaults`) when the state is given the snapshot's Services and
  controllers (the scorer; the defaults are all ScheduleAnyway, so the filter needs none).
- :class:`MatchCounts` keeps, per tracked (namespace, selector), the number of matching pods on
  every node. A selector is tracked from the first pod that asks for it (one pass over the pods
  that carry its first ``matchLabels`` pair); afterwards the allocate/deallocate event handler
  adds or removes a pod in O(its labels + selectors that could match it). Terminating pods
  (``Releasing``) do not count, as kube skips pods with a deletion timestamp. As in kube 1.36
  (``countPodsMatchSelector`` returns 0 when ``selector.Empty()``), an empty ``labelSelector: {}``
  counts no existing pods, while the incoming pod still matches it; a missing selector matches
  nothing.
- :class:`SpreadState` adds a domain-id array per topology key and the eligibility mask per
  constraint (the node has every constraint's key, and passes the pod's node affinity and taints
  when the constraint's policies say Honor), so the counts per domain for one task are one
  ``np.bincount`` over the eligible nodes.

Complexity per task and constraint: O(N) numpy work for N nodes (eligibility mask, one bincount
and one gather), plus O(P) once per session for each new selector over the P pods carrying its
first label pair.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import EventHandler
from caldera.models.core import Toleration, TopologySpreadConstraint
from caldera.models.selectors import LabelSelector, LabelSelectorRequirement, matches
from caldera.plugins.node_match import RequiredAffinity, affinity_key, untolerated_mask
from caldera.plugins.placed import PlacedPods
from caldera.plugins.spread_defaults import HOSTNAME, SYSTEM_DEFAULTS, DefaultSelectors

__all__ = ["HOSTNAME", "Constraint", "MatchCounts", "SpreadState"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
Counts = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Constraint:
    """One topology spread constraint as kube-scheduler evaluates it for one pod."""

    max_skew: int
    key: str
    selector: LabelSelector | None
    """The labelSelector with the pod's matchLabelKeys values added; None matches nothing."""
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def _constraint(c: TopologySpreadConstraint, labels: dict[str, str]) -> Constraint:
    selector = c.label_selector
    extra = tuple(
        LabelSelectorRequirement(key=k, operator="In", values=(labels[k],))
        for k in c.match_label_keys
        if k in labels
    )
    if selector is not None:
        selector = selector.with_requirements(extra)
    return Constraint(
        max_skew=c.max_skew,
        key=c.topology_key,
        selector=selector,
        min_domains=c.min_domains if c.min_domains is not None else 1,
        honor_affinity=c.node_affinity_policy != "Ignore",
        honor_taints=c.node_taints_policy == "Honor",
    )


_Watch = tuple[LabelSelector, Counts]
_Key = tuple[str, str, str] | str
"""A namespace, or a (namespace, label, value) pair of it."""


class MatchCounts:
    """Per node, how many counted pods match each tracked (namespace, selector).

    The pods are a :class:`~caldera.plugins.placed.PlacedPods` that leaves out terminating
    pods; each tracked selector's per-node counts are built on first use and kept current by
    :attr:`handler`.
    """

    __slots__ = ("_counts", "_nodes", "_watch", "_zeros", "placed")

    def __init__(self, nodes: NodeTable) -> None:
        self._nodes = nodes
        self.placed = PlacedPods(nodes, admit=lambda t: t.status is not TaskStatus.RELEASING)
        self._counts: dict[tuple[str, LabelSelector], Counts] = {}
        self._watch: dict[_Key, list[_Watch]] = {}
        """Tracked selectors by their first matchLabels pair (or by namespace when none)."""
        self._zeros: Counts = np.zeros(len(nodes), dtype=np.int64)
        self._zeros.flags.writeable = False

    @property
    def handler(self) -> EventHandler:
        return EventHandler(allocate=self._allocate, deallocate=self._deallocate)

    def row_of(self, task: Task) -> int | None:
        """The node row ``task`` is counted on, or None when it is not counted."""
        return self.placed.row_of(task)

    def counts(self, namespace: str, selector: LabelSelector | None) -> Counts:
        """Matching pods per node (read-only view; kept current by the event handler)."""
        if selector is None or selector.empty:
            return self._zeros
        key = (namespace, selector)
        arr = self._counts.get(key)
        if arr is None:
            arr = self._counts[key] = np.zeros(len(self._nodes), dtype=np.int64)
            for task, row in self.placed.with_label(selector.first_label):
                if task.namespace == namespace and selector.matches(task.labels):
                    arr[row] += 1
            self._watch.setdefault(_watch_key(namespace, selector), []).append((selector, arr))
        return arr

    def _allocate(self, task: Task) -> None:
        row = self.placed.allocated(task)
        if row is not None:
            self._update(task, row, 1)

    def _deallocate(self, task: Task) -> None:
        row = self.placed.deallocated(task)
        if row is not None:
            self._update(task, row, -1)

    def _update(self, task: Task, row: int, delta: int) -> None:
        keys: list[_Key] = [task.namespace]
        keys += [(task.namespace, label, value) for label, value in task.labels.items()]
        for key in keys:
            for selector, arr in self._watch.get(key, ()):
                if selector.matches(task.labels):
                    arr[row] += delta


def _watch_key(namespace: str, selector: LabelSelector) -> _Key:
    pair = selector.first_label
    return namespace if pair is None else (namespace, *pair)


class SpreadState:
    """Counts, topology domains and eligibility for one session's node table."""

    __slots__ = (
        "_affinity",
        "_by_task",
        "_defaults",
        "_has",
        "_nodes",
        "_untolerated",
        "pods",
    )

    def __init__(self, nodes: NodeTable, defaults: DefaultSelectors | None = None) -> None:
        self._nodes = nodes
        self.pods = MatchCounts(nodes)
        self._defaults = defaults
        self._affinity: RequiredAffinity | None = None
        self._untolerated: Callable[[tuple[Toleration, ...]], BoolArray] | None = None
        self._has: dict[tuple[str, ...], BoolArray] = {}
        self._by_task: dict[tuple[str, str], tuple[Constraint, ...]] = {}

    def constraints(self, task: Task, action: str) -> tuple[Constraint, ...]:
        """The pod's constraints whose ``whenUnsatisfiable`` is ``action``, in the pod's order,
        or the system default ones for a pod without any (read once per task and session)."""
        specs = task.spec.topology_spread_constraints
        if not specs and self._defaults is None:
            return ()
        hit = self._by_task.get((task.uid, action))
        if hit is None:
            if specs:
                hit = tuple(
                    _constraint(c, task.labels) for c in specs if c.when_unsatisfiable == action
                )
            else:
                hit = self._default_constraints(task, action)
            self._by_task[task.uid, action] = hit
        return hit

    def _default_constraints(self, task: Task, action: str) -> tuple[Constraint, ...]:
        chosen = [c for c in SYSTEM_DEFAULTS if c.when_unsatisfiable == action]
        if not chosen or self._defaults is None:
            return ()
        selector = self._defaults.of(task)
        if selector is None:
            return ()
        return tuple(replace(_constraint(c, {}), selector=selector) for c in chosen)

    @staticmethod
    def requires_all_keys(task: Task) -> bool:
        """Whether candidates lacking a constraint's key are left out of scoring: yes for the
        pod's own constraints; no for the system defaults, so a node without a zone label is
        still spread by hostname (kube's ``requireAllTopologies``)."""
        return bool(task.spec.topology_spread_constraints)

    def domains(self, key: str) -> tuple[IntArray, int]:
        """(domain id per node, number of domains D); nodes without the label get id D."""
        return self._nodes.topology(key)

    def has_all(self, cons: tuple[Constraint, ...]) -> BoolArray:
        """Nodes that have every constraint's topology key."""
        keys = tuple(sorted({c.key for c in cons}))
        hit = self._has.get(keys)
        if hit is None:
            hit = np.ones(len(self._nodes), dtype=bool)
            for key in keys:
                dom, size = self.domains(key)
                hit &= dom < size
            self._has[keys] = hit
        return hit

    def eligible(self, task: Task, c: Constraint, has_all: BoolArray) -> BoolArray:
        """Nodes whose pods count for ``c`` (kube's ``matchNodeInclusionPolicies``)."""
        mask = has_all
        if c.honor_affinity:
            key = affinity_key(task.spec)
            if key is not None:
                if self._affinity is None:
                    self._affinity = RequiredAffinity(self._nodes)
                mask = mask & self._affinity.fits(key)
        if c.honor_taints:
            if self._untolerated is None:
                self._untolerated = untolerated_mask(self._nodes)
            mask = mask & ~self._untolerated(task.spec.tolerations)
        return mask

    def domain_counts(
        self, task: Task, c: Constraint, eligible: BoolArray
    ) -> tuple[Counts, BoolArray]:
        """Per domain of ``c.key``: the matching pods on eligible nodes, and whether any eligible
        node is in that domain (nodes without the key count for none)."""
        dom, size = self.domains(c.key)
        keyed = eligible & (dom < size)
        rows = dom[keyed]
        weights = self.pods.counts(task.namespace, c.selector)[keyed]
        counts = np.bincount(rows, weights=weights, minlength=size).astype(np.int64)
        present = np.bincount(rows, minlength=size) > 0
        return counts, present

    def counts_pod(self, task: Task, c: Constraint, other: Task) -> bool:
        """Whether ``other`` counts for ``task``'s constraint ``c``: same namespace and a matching
        selector; as in :meth:`MatchCounts.counts`, nothing counts for an empty or missing one."""
        selector = c.selector
        return (
            other.namespace == task.namespace
            and selector is not None
            and not selector.empty
            and selector.matches(other.labels)
        )

    def self_match(self, task: Task, c: Constraint) -> int:
        """1 when the incoming pod matches its own constraint's selector."""
        return 1 if matches(c.selector, task.labels) else 0
