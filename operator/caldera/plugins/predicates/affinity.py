"""NodeAffinity: ``nodeSelector`` and required node-affinity terms, with kube's semantics.

A pod fits a node when every nodeSelector label matches and, if required terms are given, at least
one term matches (all its expressions and fields). Each distinct requirement is evaluated once per
session over the label column it names and cached, and each distinct pod constraint is cached as a
whole, so identical pods cost one dictionary lookup. :class:`RequiredAffinity` is the same match
as a node mask, for other filters that honour the pod's node constraint (PodTopologySpread's
``nodeAffinityPolicy``).

Complexity per task: one dictionary lookup for a constraint seen before; O(R·N) for a new one with
R distinct requirements over N nodes (each requirement's mask is itself cached).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.session import Rejection
from caldera.models.core import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec
from caldera.plugins.predicates.base import NodeFilter

__all__ = [
    "AffinityKey",
    "RequiredAffinity",
    "affinity_key",
    "node_affinity_filter",
    "requirement_mask",
]

REASON = "node(s) didn't match Pod's node affinity/selector"
BoolArray = npt.NDArray[np.bool_]


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


def node_affinity_filter(nodes: NodeTable) -> NodeFilter:
    """NodeAffinity: nodeSelector and required node-affinity terms."""
    return NodeFilter("NodeAffinity", _node_affinity(nodes), stable=True)


def _node_affinity(nodes: NodeTable) -> Callable[[Task], list[Rejection]]:
    required = RequiredAffinity(nodes)
    cache: dict[AffinityKey, list[Rejection]] = {}

    def reject(task: Task) -> list[Rejection]:
        key = affinity_key(task.spec)
        if key is None:
            return []
        hit = cache.get(key)
        if hit is None:
            fits = required.fits(key)
            hit = cache[key] = [(REASON, ~fits)] if not fits.all() else []
        return hit

    return reject
