"""Node-matching primitives shared by filters and scorers: which nodes a pod's constraints allow.

Several plugins ask the same questions of the node table: the predicates filters (NodeAffinity,
TaintToleration, volume node affinity, DRA node selectors), the nodeorder scorers (preferred node
affinity) and the topology spread state both use (``nodeAffinityPolicy``/``nodeTaintsPolicy``).
The answers live here, outside every plugin, so that each plugin stays independent of the others
(an import-linter contract checks it).

- :func:`requirement_mask` evaluates one ``NodeSelectorRequirement`` over a label column.
- :class:`RequiredAffinity` is kube's ``RequiredNodeAffinity.Match`` as a node mask: a pod's
  nodeSelector and required node-affinity terms (keyed by :func:`affinity_key`). Each distinct
  requirement is evaluated once per session over the label column it names and cached, and each
  distinct pod constraint is cached as a whole, so identical pods cost one dictionary lookup.
- :func:`taint_groups` groups the nodes by identical NoSchedule/NoExecute taint lists and
  :func:`untolerated_taint` finds the first one a pod does not tolerate; :func:`untolerated_mask`
  turns that into a node mask cached per distinct toleration list.

Complexity per pod constraint: one dictionary lookup for one seen before; O(R·N) for a new one with
R distinct requirements over N nodes (each requirement's mask is itself cached).
"""

from __future__ import annotations

import re
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

_INT64 = re.compile(r"[+-]?[0-9]+")


def _int_or_none(value: object) -> int | None:
    """The label value as Go's ``strconv.ParseInt(v, 10, 64)`` reads it, or None (no spaces,
    no ``_`` separators, within int64)."""
    if not isinstance(value, str) or _INT64.fullmatch(value) is None:
        return None
    n = int(value)
    return n if -(2**63) <= n < 2**63 else None


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
    bound = int(req.values[0])
    numbers = [_int_or_none(v) for v in column]
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
        self._names = np.array(nodes.names, dtype=object)
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
                any_term = np.zeros(len(self._nodes), dtype=bool)
                for term in required.node_selector_terms:
                    any_term |= self.term(term)
                mask &= any_term
            self._pods[key] = mask
        return mask

    def _requirement(self, req: NodeSelectorRequirement, field: bool) -> BoolArray:
        key = ("field" if field else "label", req)
        mask = self._reqs.get(key)
        if mask is None:
            if field:
                n = len(self._nodes)
                column = self._names if req.key == "metadata.name" else np.full(n, None)
            else:
                column = self._nodes.label_column(req.key)
            mask = self._reqs[key] = requirement_mask(column, req)
        return mask

    def term(self, term: NodeSelectorTerm) -> BoolArray:
        if not term.match_expressions and not term.match_fields:
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
    """The nodes with a NoSchedule or NoExecute taint, grouped by identical taint lists."""
    groups: dict[tuple[Taint, ...], list[int]] = {}
    for i, taints in enumerate(nodes.taints):
        if any(t.effect in FILTERED_EFFECTS for t in taints):
            groups.setdefault(taints, []).append(i)
    return [(taints, np.array(rows, dtype=np.intp)) for taints, rows in groups.items()]


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
