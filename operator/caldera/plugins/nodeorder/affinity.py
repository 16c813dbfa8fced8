"""NodeAffinity score: the summed weights of the pod's preferred node-affinity terms a node matches.

Volcano scores NodeAffinity on its per-node path, which calls kube's ``Score`` and not its
``NormalizeScore``: the score is the raw sum of weights (1–100 per term, so it can pass 100),
times ``nodeaffinity.weight``. A term matches a node as a required term would (all expressions
and fields); an empty term matches nothing. When one term cannot be parsed (a value that is not a
label value, say), kube's ``NewPreferredSchedulingTerms`` fails as a whole and the pod gets no
NodeAffinity score on any node. Node labels do not change within a session, so the score of every
node is computed once per distinct list of preferred terms.

Complexity per task: a dictionary lookup plus O(C) indexing for C candidates.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from caldera.api.node import NodeTable
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray
from caldera.models.core import PreferredSchedulingTerm
from caldera.plugins.node_match import RequiredAffinity

__all__ = ["node_affinity"]


def node_affinity(table: NodeTable) -> Callable[[Task, IntArray], Vector | float]:
    matcher = RequiredAffinity(table)
    zeros = np.zeros(len(table), dtype=np.float64)
    cache: dict[tuple[PreferredSchedulingTerm, ...], Vector] = {}

    def all_nodes(terms: tuple[PreferredSchedulingTerm, ...]) -> Vector:
        total = zeros.copy()
        if not all(t.preference.valid for t in terms if not t.preference.empty):
            return total
        for term in terms:
            total += np.where(matcher.term(term.preference), float(term.weight), 0.0)
        return total

    def score(task: Task, idx: IntArray) -> Vector | float:
        affinity = task.spec.affinity
        if affinity is None or affinity.node_affinity is None:
            return 0.0
        terms = affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
        if not terms:
            return 0.0
        hit = cache.get(terms)
        if hit is None:
            hit = cache[terms] = all_nodes(terms)
        return hit[idx]

    return score
