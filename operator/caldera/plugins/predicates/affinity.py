"""NodeAffinity: ``nodeSelector`` and required node-affinity terms, with kube's semantics.

A pod fits a node when every nodeSelector label matches and, if required terms are given, at least
one term matches (all its expressions and fields). The match itself is
:class:`caldera.plugins.node_match.RequiredAffinity`, shared with the other filters and scorers
that honour the pod's node constraint: each distinct requirement is evaluated once per session
over the label column it names and cached, and each distinct pod constraint is cached as a whole,
so identical pods cost one dictionary lookup; the rejection is cached per constraint too.

Complexity per task: one dictionary lookup for a constraint seen before; O(R·N) for a new one with
R distinct requirements over N nodes (each requirement's mask is itself cached).
"""

from __future__ import annotations

from collections.abc import Callable

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.interfaces import Rejection
from caldera.plugins.node_match import AffinityKey, RequiredAffinity, affinity_key
from caldera.plugins.predicates.base import NodeFilter

__all__ = ["node_affinity_filter"]

REASON = "node(s) didn't match Pod's node affinity/selector"


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
