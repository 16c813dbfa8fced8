"""Placed pods counted per topology domain, for inter-pod affinity (filter and score).

kube-scheduler's InterPodAffinity asks two kinds of question about the pods already placed:

- *which placed pods match this pod's terms?* (the incoming pod's required and preferred
  (anti-)affinity): :meth:`PodIndex.matching` counts, per domain of a topology key, the placed
  pods matching a conjunction of terms;
- *which placed pods own terms that match this pod?* (existing pods' required anti-affinity for
  the filter, their affinity terms for the score): :meth:`PodIndex.owned_by_key` sums, per
  domain, the (weighted) number of placed pods owning each distinct term that matches the pod.

A domain is one value of a topology key's node label; every key gets an integer domain id per
node (:meth:`~caldera.api.node.NodeTable.topology`, shared with topology spread), so a count per
domain becomes a count per node with one ``np.take``. Count arrays carry one extra trailing slot
that always stays 0, which is where nodes without the label land. Counters are built on first
use from the placed pods (once per session and distinct question; a pod index by label narrows
the scan to the pods carrying the question's first ``matchLabels`` pair) and kept current by
:attr:`PodIndex.handler` on every allocate and deallocate. A pod deallocated while it stays on
its node (an evicted, releasing pod) no longer counts, as in Volcano, whose plugins remove it
from their node info on the deallocate event.

Terms are read as kube-scheduler reads them: a term's namespaces are its ``namespaces`` list plus
the namespaces its ``namespaceSelector`` matches (``{}`` matches every namespace), or only the
owning pod's namespace when both are absent; a missing ``labelSelector`` matches no pod; and
``matchLabelKeys``/``mismatchLabelKeys`` add ``In``/``NotIn`` requirements with the owning pod's
values for those keys (what the API server merges into the selector at pod creation; applying it
again is harmless).

Complexity: the pod map and label index cost O(P·L) once per session for P placed pods with L
labels each; building one counter costs O(P') for the P' pods carrying its first matchLabels
pair (O(P) without one); each allocate or deallocate costs O(L) plus O(C) term matches for C
counters plus O(t) for the pod's own terms; a question costs O(D) per
counter read for D domains (``owned_by_key``: O(T·D) for T distinct owned terms matching the pod,
matched once per pod namespace and label set).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.interfaces import EventHandler
from caldera.models.core import PodAffinityTerm
from caldera.models.selectors import LabelSelector, LabelSelectorRequirement, matches
from caldera.plugins.placed import Placed, PlacedPods

__all__ = [
    "Counts",
    "IntArray",
    "Match",
    "OwnedTerms",
    "PodIndex",
    "Term",
    "terms_of",
]

IntArray = npt.NDArray[np.intp]
Counts = npt.NDArray[np.int64]
"""Per-domain counts of one topology key, plus the trailing always-zero slot for id -1."""
NamespaceLabels = Callable[[str], Mapping[str, str]]
OwnedTerms = Callable[[Task], Sequence[tuple["Term", int]]]
"""The terms a placed pod owns that a question counts, each with its weight."""


@dataclass(frozen=True, slots=True)
class Match:
    """Which pods one affinity term selects (kube's ``AffinityTerm`` without the topology)."""

    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    selector: LabelSelector | None

    def matches(
        self, namespace: str, labels: Mapping[str, str], ns_labels: NamespaceLabels
    ) -> bool:
        if not matches(self.selector, labels):
            return False
        return namespace in self.namespaces or matches(
            self.namespace_selector, ns_labels(namespace)
        )


@dataclass(frozen=True, slots=True)
class Term:
    match: Match
    topology_key: str


def _with_label_keys(term: PodAffinityTerm, labels: Mapping[str, str]) -> LabelSelector | None:
    selector = term.label_selector
    if selector is None:
        return None
    extra = tuple(
        LabelSelectorRequirement(key=key, operator="In", values=(labels[key],))
        for key in term.match_label_keys
        if key in labels
    ) + tuple(
        LabelSelectorRequirement(key=key, operator="NotIn", values=(labels[key],))
        for key in term.mismatch_label_keys
        if key in labels
    )
    return selector.with_requirements(extra)


def terms_of(
    namespace: str, labels: Mapping[str, str], terms: Sequence[PodAffinityTerm]
) -> tuple[Term, ...]:
    """``terms`` of a pod in ``namespace`` with ``labels``, as kube-scheduler reads them."""
    out = []
    for term in terms:
        if term.namespaces or term.namespace_selector is not None:
            namespaces = frozenset(term.namespaces)
        else:
            namespaces = frozenset((namespace,))
        match = Match(namespaces, term.namespace_selector, _with_label_keys(term, labels))
        out.append(Term(match, term.topology_key))
    return tuple(out)


Conjunction = tuple[Match, ...]
PodKey = tuple[str, frozenset[tuple[str, str]]]


class PodIndex:
    """Counts of placed pods per topology domain, kept current within one session."""

    def __init__(self, nodes: NodeTable, ns_labels: NamespaceLabels, owned: OwnedTerms) -> None:
        self.nodes = nodes
        self._ns_labels_of = ns_labels
        self._ns_labels: dict[str, Mapping[str, str]] = {}
        self._owned_terms = owned
        self.placed = PlacedPods(nodes)
        self._counters: dict[Conjunction, dict[str, Counts]] = {}
        self._owned: list[tuple[Term, int]] | None = None
        self._owned_rows: dict[str, int] = {}
        """Placed pods whose terms are counted in the owned counts, and their rows."""
        self._owned_counts: list[Counts] = []
        self._owned_slot: dict[tuple[Term, int], int] = {}
        self._owned_matches: dict[PodKey, tuple[list[int], int]] = {}
        self._owned_of: dict[str, Sequence[tuple[Term, int]]] = {}
        self.handler = EventHandler(allocate=self._allocated, deallocate=self._deallocated)

    # -- pods and domains -----------------------------------------------------------------

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        labels = self._ns_labels.get(namespace)
        if labels is None:
            labels = self._ns_labels[namespace] = self._ns_labels_of(namespace)
        return labels

    def domains(self, key: str) -> IntArray:
        """Domain id of every node for topology ``key`` (:meth:`size` where the label is
        missing, which reads the always-zero trailing slot of a count array)."""
        return self.nodes.topology(key)[0]

    def size(self, key: str) -> int:
        """How many domains topology ``key`` has (ids below it are real domains)."""
        return self.nodes.topology(key)[1]

    def zeros(self, key: str) -> Counts:
        return np.zeros(self.size(key) + 1, dtype=np.int64)

    def present(self, task: Task) -> bool:
        """The task counts as a placed pod."""
        return self.placed.counts(task)

    def _candidates(self, conj: Conjunction) -> Iterator[Placed]:
        """Placed pods that may match ``conj``: those carrying the first ``matchLabels`` pair of
        its first term that has one (every matching pod carries it), else all."""
        for m in conj:
            if m.selector is not None and m.selector.first_label is not None:
                return self.placed.with_label(m.selector.first_label)
        return self.placed.with_label(None)

    def pod_matches(self, conj: Conjunction, task: Task) -> bool:
        return all(m.matches(task.namespace, task.labels, self.namespace_labels) for m in conj)

    def owned_of(self, task: Task) -> Sequence[tuple[Term, int]]:
        if task.spec.affinity is None:
            return ()
        hit = self._owned_of.get(task.uid)
        if hit is None:
            hit = self._owned_of[task.uid] = self._owned_terms(task)
        return hit

    # -- placed pods matching a question's terms --------------------------------------------

    def matching(self, conj: Conjunction, key: str) -> Counts:
        """Per domain of ``key``: placed pods matching every term of ``conj`` (live array: do
        not change it)."""
        by_key = self._counters.setdefault(conj, {})
        counts = by_key.get(key)
        if counts is None:
            counts = self.zeros(key)
            dom, size = self.nodes.topology(key)
            for task, row in self._candidates(conj):
                if dom[row] < size and self.pod_matches(conj, task):
                    counts[dom[row]] += 1
            by_key[key] = counts
        return counts

    # -- placed pods owning terms that match a pod ----------------------------------------

    def _owned_list(self) -> list[tuple[Term, int]]:
        """The terms placed pods own (built on first use). Only pods with an affinity own
        terms, so this reads the node table, not the whole placed-pod index."""
        if self._owned is None:
            self._owned = []
            tasks = self.nodes.tasks
            # the counts are whole numbers: the order the terms are met in changes no sum
            for uid, row in self.nodes.affine.items():
                task = tasks[row][uid]
                if self.placed.counts(task):
                    self._owned_rows[uid] = row
                    self._count_owned(task, row, 1)
        return self._owned

    def _count_owned(self, task: Task, row: int, delta: int) -> None:
        assert self._owned is not None
        for entry in self.owned_of(task):
            slot = self._owned_slot.get(entry)
            if slot is None:
                slot = self._owned_slot[entry] = len(self._owned)
                self._owned.append(entry)
                self._owned_counts.append(self.zeros(entry[0].topology_key))
            dom, size = self.nodes.topology(entry[0].topology_key)
            if dom[row] < size:
                self._owned_counts[slot][dom[row]] += delta

    def owned_by_key(self, namespace: str, labels: Mapping[str, str]) -> dict[str, Counts]:
        """Per topology key and domain: the weighted number of placed pods owning a term that
        matches a pod in ``namespace`` with ``labels`` (fresh arrays; keys with no such pod
        placed anywhere are left out)."""
        owned = self._owned_list()
        pod: PodKey = (namespace, frozenset(labels.items()))
        matched, seen = self._owned_matches.get(pod, ([], 0))
        if seen < len(owned):
            ns_labels = self.namespace_labels
            matched.extend(
                i
                for i in range(seen, len(owned))
                if owned[i][0].match.matches(namespace, labels, ns_labels)
            )
            self._owned_matches[pod] = (matched, len(owned))
        out: dict[str, Counts] = {}
        for i in matched:
            counts = self._owned_counts[i]
            if not counts.any():
                continue
            term, weight = owned[i]
            acc = out.get(term.topology_key)
            if acc is None:
                out[term.topology_key] = counts * weight
            else:
                acc += counts * weight
        return out

    # -- events -------------------------------------------------------------------------------

    def _allocated(self, task: Task) -> None:
        row = self.placed.allocated(task)
        if row is not None:
            self._count(task, row, 1)
        if (
            self._owned is not None
            and task.spec.affinity is not None
            and task.uid not in self._owned_rows
        ):
            self._owned_rows[task.uid] = task.node
            self._count_owned(task, task.node, 1)

    def _deallocated(self, task: Task) -> None:
        row = self.placed.deallocated(task)
        if row is not None:
            self._count(task, row, -1)
        owned_row = self._owned_rows.pop(task.uid, None)
        if owned_row is not None:
            self._count_owned(task, owned_row, -1)

    def _count(self, task: Task, row: int, delta: int) -> None:
        for conj, by_key in self._counters.items():
            if by_key and self.pod_matches(conj, task):
                for key, counts in by_key.items():
                    dom, size = self.nodes.topology(key)
                    if dom[row] < size:
                        counts[dom[row]] += delta
