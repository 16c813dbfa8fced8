"""InterPodAffinity filter: required pod affinity and anti-affinity, with kube-scheduler's rules.

A node fails, with the first of these that applies (kube reports one reason per node):

1. ``node(s) didn't match pod affinity rules``: the node lacks the topology label of one of the
   pod's required affinity terms, or the node's domain of some term's key holds no placed pod
   matching *all* the terms. Exception (kube's "first pod of a group"): when no placed pod on a
   node carrying a term's topology label matches all the terms, and the pod matches all its own
   terms, every node carrying all the topology labels fits.
2. ``node(s) didn't match pod anti-affinity rules``: for one of the pod's required anti-affinity
   terms, the node's domain holds a placed pod matching that term (nodes without the label fit).
3. ``node(s) didn't satisfy existing pods anti-affinity rules``: a placed pod owns a required
   anti-affinity term that matches this pod (namespaces as that pod reads them), and the node is
   in that pod's domain of the term's topology key.

PreFilter skips the pod when it has no required (anti-)affinity terms and no placed pod's
required anti-affinity term matches it. Counts come from :class:`PodIndex`, kept current by the
allocate and deallocate events.

Complexity per task: O((A + K)·N) numpy work for A topology keys and terms of the pod's own
required terms and K topology keys of matching existing anti-affinity terms over N nodes, plus
O(T·D) to sum the T distinct matching existing terms over D domains; ``simulate`` costs the
same with one node and per-counter copies of D entries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.task import Task
from caldera.framework.interfaces import Rejection, SessionView
from caldera.models.core import Affinity
from caldera.plugins.interpod_state import (
    Counts,
    IntArray,
    Match,
    PodIndex,
    Term,
    terms_of,
)
from caldera.plugins.predicates.base import SKIP, NodeFilter, PreFilterResult

__all__ = [
    "AFFINITY_REASON",
    "ANTI_AFFINITY_REASON",
    "EXISTING_ANTI_AFFINITY_REASON",
    "interpod_affinity_filter",
]

AFFINITY_REASON = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
BoolArray = npt.NDArray[np.bool_]
Conjunction = tuple[Match, ...]
CountsOf = Callable[[Conjunction, str], Counts]


@dataclass(frozen=True, slots=True)
class _Query:
    """The incoming pod's required terms, read once per distinct pod."""

    affinity: Conjunction
    affinity_keys: tuple[str, ...]
    self_match: bool
    anti: tuple[Term, ...]


def _required_anti(task: Task) -> list[tuple[Term, int]]:
    aff = task.spec.affinity
    if aff is None or aff.pod_anti_affinity is None:
        return []
    terms = aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    return [(t, 1) for t in terms_of(task.namespace, task.labels, terms)]


def _query(index: PodIndex, task: Task) -> _Query:
    aff: Affinity | None = task.spec.affinity
    affinity: tuple[Term, ...] = ()
    anti: tuple[Term, ...] = ()
    if aff is not None and aff.pod_affinity is not None:
        required = aff.pod_affinity.required_during_scheduling_ignored_during_execution
        affinity = terms_of(task.namespace, task.labels, required)
    if aff is not None and aff.pod_anti_affinity is not None:
        required = aff.pod_anti_affinity.required_during_scheduling_ignored_during_execution
        anti = terms_of(task.namespace, task.labels, required)
    conj = tuple(t.match for t in affinity)
    return _Query(
        affinity=conj,
        affinity_keys=tuple(dict.fromkeys(t.topology_key for t in affinity)),
        self_match=bool(conj) and index.pod_matches(conj, task),
        anti=anti,
    )


def _failures(
    index: PodIndex,
    q: _Query,
    rows: IntArray | slice,
    counts_of: CountsOf,
    existing: Mapping[str, Counts],
) -> list[tuple[str, BoolArray]]:
    """Per reason, the rows that fail for it first (kube stops at the first failing check)."""
    n = len(index.nodes) if isinstance(rows, slice) else len(rows)
    failed = np.zeros(n, dtype=bool)
    out: list[tuple[str, BoolArray]] = []

    def add(reason: str, mask: BoolArray) -> None:
        nonlocal failed
        mask = mask & ~failed
        if mask.any():
            out.append((reason, mask))
            failed = failed | mask

    if q.affinity:
        missing = np.zeros(n, dtype=bool)
        found = np.ones(n, dtype=bool)
        none_anywhere = True
        for key in q.affinity_keys:
            dom = index.domains(key)[rows]
            counts = counts_of(q.affinity, key)
            missing |= dom == index.size(key)
            found &= counts[dom] > 0
            none_anywhere = none_anywhere and not counts.any()
        if none_anywhere and q.self_match:
            found[:] = True
        add(AFFINITY_REASON, missing | ~found)
    if q.anti:
        hit = np.zeros(n, dtype=bool)
        for term in q.anti:
            counts = counts_of((term.match,), term.topology_key)
            hit |= counts[index.domains(term.topology_key)[rows]] > 0
        add(ANTI_AFFINITY_REASON, hit)
    if existing:
        hit = np.zeros(n, dtype=bool)
        for key, counts in existing.items():
            hit |= counts[index.domains(key)[rows]] > 0
        add(EXISTING_ANTI_AFFINITY_REASON, hit)
    return out


def interpod_affinity_filter(ssn: SessionView) -> NodeFilter:
    """InterPodAffinity: required pod affinity, anti-affinity and existing pods' anti-affinity."""
    index = PodIndex(ssn.nodes, ssn.snapshot.labels_of_namespace, _required_anti)
    queries: dict[tuple[str, frozenset[tuple[str, str]], Affinity | None], _Query] = {}

    def query(task: Task) -> _Query:
        key = (task.namespace, frozenset(task.labels.items()), task.spec.affinity)
        q = queries.get(key)
        if q is None:
            q = queries[key] = _query(index, task)
        return q

    def pre_filter(task: Task) -> PreFilterResult:
        q = query(task)
        if q.affinity or q.anti or index.owned_by_key(task.namespace, task.labels):
            return None
        return SKIP

    def reject(task: Task) -> list[Rejection]:
        existing = index.owned_by_key(task.namespace, task.labels)
        return _failures(index, query(task), slice(None), index.matching, existing)

    def simulate(task: Task, row: int, removed: Sequence[Task], added: Sequence[Task]) -> list[str]:
        q = query(task)
        changes = [(t, t.node, -1) for t in removed if index.present(t)]
        changes += [(t, row, 1) for t in added]

        def counts_of(conj: Conjunction, key: str) -> Counts:
            counts = index.matching(conj, key)
            moved = [(at, d) for t, at, d in changes if index.pod_matches(conj, t)]
            if not moved:
                return counts
            counts = counts.copy()
            dom, size = index.nodes.topology(key)
            for at, d in moved:
                if dom[at] < size:
                    counts[dom[at]] += d
            return counts

        existing = index.owned_by_key(task.namespace, task.labels)
        ns_labels = index.namespace_labels
        for t, at, d in changes:
            for term, _ in index.owned_of(t):
                if term.match.matches(task.namespace, task.labels, ns_labels):
                    key = term.topology_key
                    counts = existing.get(key)
                    if counts is None:
                        counts = existing[key] = index.zeros(key)
                    dom = index.domains(key)[at]
                    if dom < index.size(key):
                        counts[dom] += d
        rows = np.array([row], dtype=np.intp)
        return [reason for reason, _ in _failures(index, q, rows, counts_of, existing)]

    return NodeFilter(
        "InterPodAffinity",
        reject,
        pre_filter=pre_filter,
        handler=index.handler,
        simulate=simulate,
    )
