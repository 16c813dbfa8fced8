"""Node-matching primitives shared by filters and scorers: which nodes a pod's constraints allow.

Several plugins ask the same questions of the node table: the predicates filters (NodeAffinity,
TaintToleration, volume node affinity, DRA node selectors), the nodeorder scorers (preferred node
affinity) and the topology spread state both use (``nodeAffinityPolicy``/``nodeTaintsPolicy``).
The answers live here, outside every plugin, so that each plugin stays independent of the others
(an import-linter contract checks it).

- :func:`requirement_mask` evaluates one ``NodeSelectorRequirement`` over a label column.
- :class:`RequiredAffinity` is kube's ``RequiredNodeAffinity.Match`` as a node mask: a pod's
  nodeSelector and required node-affinity terms (keyed by :func:`affinity_key`). A term with a
  requirement kube-scheduler cannot parse (say ``NotIn ["$"]``, not a label value) matches no
  node, while the pod's other terms still count. Each distinct
  requirement is evaluated once per session over the label column it names and cached, and each
  distinct pod constraint is cached as a whole, so identical pods cost one dictionary lookup.
- :func:`taint_groups` groups the nodes by identical NoSchedule/NoExecute taint lists and
  :func:`untolerated_taint` finds the first one a pod does not tolerate; :func:`untolerated_mask`
  turns that into a node mask cached per distinct toleration list.

Complexity per pod constraint: one dictionary lookup for one seen before; O(R·N) for a new one with
R distinct requirements over N nodes (each requirement's mask is itself cached).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.models.core import (
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSpec,
    Taint,
    Toleration,
)
from caldera.models.names import parse_int64

__all__ = [
    "FILTERED_EFFECTS",
    "AffinityKey",
    "RequiredAffinity",
    "TaintGroups",
    "affinity_key",
    "requirement_mask",
    "taint_groups",
    "untolerated_mask",
    "untolerated_taint",
]

BoolArray = npt.NDArray[np.bool_]


# -- node affinity ------------------------------------------------------------------------------


def requirement_mask(column: npt.NDArray[np.object_], req: NodeSelectorRequirement) -> BoolArray:
    """Nodes whose value (None = label absent) satisfies ``req``."""
    op = req.operator
    if op == "Exists":
        return np.array([v is not None for v in column], dtype=bool)
    if op == "DoesNotExist":
        return np.array([v is None for v in column], dtype=bool)
    if op in ("In", "NotIn"):
        values = set(req.values)
        inside = np.array([v is not None and v in values for v in column], dtype=bool)
        return inside if op == "In" else ~inside
    bound = parse_int64(req.values[0])
    if bound is None:
        return np.zeros(len(column), dtype=bool)
    numbers = [parse_int64(v) for v in column]
    if op == "Gt":
        return np.array([n is not None and n > bound for n in numbers], dtype=bool)
    return np.array([n is not None and n < bound for n in numbers], dtype=bool)


AffinityKey = tuple[tuple[tuple[str, str], ...], NodeSelector | None]
"""A pod's nodeSelector (sorted) and required node-affinity terms: what decides where it may go."""


def affinity_key(spec: PodSpec) -> AffinityKey | None:
    """The pod's node constraint, or None when it states neither a nodeSelector nor required
    terms."""
    required = None
    if spec.affinity is not None and spec.affinity.node_affinity is not None:
        required = spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    if not spec.node_selector and required is None:
        return None
    return tuple(sorted(spec.node_selector.items())), required


class RequiredAffinity:
    """kube's ``RequiredNodeAffinity.Match`` over the node table: the nodes matching a pod's
    nodeSelector and required node-affinity terms. Each distinct requirement is evaluated once per
    session and each distinct pod constraint is cached as a whole."""

    __slots__ = ("_names", "_nodes", "_pods", "_reqs")

    def __init__(self, nodes: NodeTable) -> None:
        self._nodes = nodes
        self._names: npt.NDArray[np.object_] | None = None
        """The node names as an array, made only when a ``matchFields`` term asks for them."""
        self._reqs: dict[tuple[str, NodeSelectorRequirement], BoolArray] = {}
        self._pods: dict[AffinityKey, BoolArray] = {}

    def fits(self, key: AffinityKey) -> BoolArray:
        """The nodes matching the pod constraint ``key`` (from :func:`affinity_key`)."""
        mask = self._pods.get(key)
        if mask is None:
            selector, required = key
            mask = np.ones(len(self._nodes), dtype=bool)
            for label, value in selector:
                mask &= self._requirement(
                    NodeSelectorRequirement(key=label, operator="In", values=(value,)), False
                )
            if required is not None:
                mask &= self.selector(required)
            self._pods[key] = mask
        return mask

    def _requirement(self, req: NodeSelectorRequirement, field: bool) -> BoolArray:
        key = ("field" if field else "label", req)
        mask = self._reqs.get(key)
        if mask is None:
            if field:
                n = len(self._nodes)
                if req.key == "metadata.name":
                    if self._names is None:
                        self._names = np.array(self._nodes.names, dtype=object)
                    column = self._names
                else:
                    column = np.full(n, None)
            else:
                column = self._nodes.label_column(req.key)
            mask = self._reqs[key] = requirement_mask(column, req)
        return mask

    def selector(self, selector: NodeSelector, *, strict: bool = False) -> BoolArray:
        """The nodes any term of ``selector`` matches. An invalid term matches nothing and the
        others still count (kube's ``LazyErrorNodeSelector``, which pod affinity and volumes
        use); with ``strict`` one invalid term voids the whole selector (``NewNodeSelector``,
        which dynamic resource allocation uses)."""
        terms = [t for t in selector.node_selector_terms if not t.empty]
        mask = np.zeros(len(self._nodes), dtype=bool)
        if strict and not all(t.valid for t in terms):
            return mask
        for term in terms:
            mask |= self.term(term)
        return mask

    def term(self, term: NodeSelectorTerm) -> BoolArray:
        """The nodes ``term`` matches: all of its requirements; none when it is empty or one of
        its requirements is invalid (:attr:`NodeSelectorTerm.valid`)."""
        if term.empty or not term.valid:
            return np.zeros(len(self._nodes), dtype=bool)
        mask = np.ones(len(self._nodes), dtype=bool)
        for req in term.match_expressions:
            mask &= self._requirement(req, False)
        for req in term.match_fields:
            mask &= self._requirement(req, True)
        return mask


# -- taints -------------------------------------------------------------------------------------

FILTERED_EFFECTS = ("NoSchedule", "NoExecute")
"""The taint effects that keep a pod off a node (kube's DoNotSchedule taints)."""

TaintGroups = list[tuple[tuple[Taint, ...], npt.NDArray[np.intp]]]


def untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint that none of ``tolerations`` tolerates, or None."""
    for taint in taints:
        if taint.effect in FILTERED_EFFECTS and not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def taint_groups(nodes: NodeTable) -> TaintGroups:
    """The nodes with a NoSchedule or NoExecute taint, grouped by identical taint lists (worked
    out once per node set; the row arrays are read-only)."""
    return nodes.derived("taint groups", lambda: _taint_groups(nodes.taints))


def _taint_groups(node_taints: Sequence[tuple[Taint, ...]]) -> TaintGroups:
    groups: dict[tuple[Taint, ...], list[int]] = {}
    for i, taints in enumerate(node_taints):
        if any(t.effect in FILTERED_EFFECTS for t in taints):
            groups.setdefault(taints, []).append(i)
    out = [(taints, np.array(rows, dtype=np.intp)) for taints, rows in groups.items()]
    for _, rows in out:
        rows.flags.writeable = False
    return out


def untolerated_mask(nodes: NodeTable) -> Callable[[tuple[Toleration, ...]], BoolArray]:
    """kube's ``FindMatchingUntoleratedTaint`` with the DoNotSchedule effects (NoSchedule,
    NoExecute) as a node mask: the nodes with a taint the tolerations do not tolerate, cached per
    distinct toleration list (PodTopologySpread's ``nodeTaintsPolicy``)."""
    index = taint_groups(nodes)
    cache: dict[tuple[Toleration, ...], BoolArray] = {}

    def mask(tolerations: tuple[Toleration, ...]) -> BoolArray:
        hit = cache.get(tolerations)
        if hit is None:
            hit = cache[tolerations] = np.zeros(len(nodes), dtype=bool)
            for taints, rows in index:
                if untolerated_taint(taints, tolerations) is not None:
                    hit[rows] = True
        return hit

    return mask
