"""PodTopologySpread (Filter): a pod's hard topology spread constraints, with kube's skew rule.

For each constraint with ``whenUnsatisfiable: DoNotSchedule``, in the pod's order, a node fails
when it lacks the constraint's topology key (``... (missing required label)``) or when placing the
pod there would make ``pods in the node's domain + 1 if the pod matches its own selector − global
minimum`` exceed ``maxSkew``. The global minimum is taken over the eligible domains (the domains of
nodes that have every constraint's key and pass the inclusion policies, see
:mod:`caldera.plugins.spread_state`), and is 0 when fewer than ``minDomains`` domains are
eligible. As kube's Filter returns at the first failing constraint, a node is rejected for the
reason of the first constraint it fails. Pods without DoNotSchedule constraints skip the filter
(PreFilter Skip). The counts are kept current within the session by the event handler, so a pod
sees the pods placed before it.

``simulate`` (preemption) answers for one node as a fresh PreFilter would on the cluster with the
removed tasks gone and the added ones placed on that node.

Complexity per task: O(C·N) numpy work for C DoNotSchedule constraints and N nodes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from caldera.api.node import NodeTable
from caldera.api.task import Task
from caldera.framework.interfaces import Rejection
from caldera.plugins.predicates.base import SKIP, NodeFilter, PreFilterResult
from caldera.plugins.spread_state import BoolArray, Constraint, Counts, SpreadState

__all__ = ["MISSING_LABEL", "NOT_MATCH", "pod_topology_spread_filter"]

NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = NOT_MATCH + " (missing required label)"
DO_NOT_SCHEDULE = "DoNotSchedule"


def _over_skew(c: Constraint, counts: Counts, present: BoolArray, self_match: int) -> BoolArray:
    """Per domain (plus a last slot, False, for nodes without the key): placing the pod there
    would exceed ``maxSkew``."""
    domains = int(np.count_nonzero(present))
    global_min = int(counts[present].min()) if domains >= c.min_domains else 0
    over = np.zeros(len(counts) + 1, dtype=bool)
    over[:-1] = counts + self_match - global_min > c.max_skew
    return over


def pod_topology_spread_filter(nodes: NodeTable) -> NodeFilter:
    state = SpreadState(nodes)
    n = len(nodes)

    def pre_filter(task: Task) -> PreFilterResult:
        return None if state.constraints(task, DO_NOT_SCHEDULE) else SKIP

    def reject(task: Task) -> list[Rejection]:
        cons = state.constraints(task, DO_NOT_SCHEDULE)
        if not cons:
            return []
        has_all = state.has_all(cons)
        missing = np.zeros(n, dtype=bool)
        skewed = np.zeros(n, dtype=bool)
        decided = np.zeros(n, dtype=bool)
        for c in cons:
            dom, size = state.domains(c.key)
            counts, present = state.domain_counts(task, c, state.eligible(task, c, has_all))
            lacks = dom == size
            fails = _over_skew(c, counts, present, state.self_match(task, c))[dom]
            missing |= lacks & ~decided
            skewed |= fails & ~decided
            decided |= lacks | fails
        return [(r, m) for r, m in ((MISSING_LABEL, missing), (NOT_MATCH, skewed)) if m.any()]

    def simulate(task: Task, row: int, removed: Sequence[Task], added: Sequence[Task]) -> list[str]:
        cons = state.constraints(task, DO_NOT_SCHEDULE)
        if not cons:
            return []
        has_all = state.has_all(cons)
        changes = [(t, state.pods.row_of(t), -1) for t in removed]
        changes += [(t, row, 1) for t in added if state.pods.row_of(t) is None]
        for c in cons:
            dom, size = state.domains(c.key)
            if dom[row] == size:
                return [MISSING_LABEL]
            eligible = state.eligible(task, c, has_all)
            counts, present = state.domain_counts(task, c, eligible)
            for t, r, delta in changes:
                if r is not None and eligible[r] and state.counts_pod(task, c, t):
                    counts[dom[r]] += delta
            if _over_skew(c, counts, present, state.self_match(task, c))[dom[row]]:
                return [NOT_MATCH]
        return []

    return NodeFilter(
        "PodTopologySpread",
        reject,
        pre_filter=pre_filter,
        handler=state.pods.handler,
        simulate=simulate,
    )
