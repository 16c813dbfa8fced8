"""PodTopologySpread (Score): prefer nodes whose domains hold fewer matching pods, as kube does.

For the pod's ``whenUnsatisfiable: ScheduleAnyway`` constraints, kube-scheduler (1.36) scores the
candidate nodes (those that passed the filters) in three steps:

- PreScore: a candidate that lacks any of these constraints' topology keys is ignored. Each
  constraint gets the weight ``ln(size + 2)``, ``size`` being the number of distinct domains among
  the candidates not ignored (for ``kubernetes.io/hostname``, the number of those candidates).
- Score: a candidate's raw score is the sum over the constraints of ``count · weight +
  (maxSkew − 1)``, rounded half away from zero (Go's ``math.Round``). ``count`` is the number of
  matching pods in the candidate's domain, over all nodes that have every key and pass the
  constraint's inclusion policies (state in :mod:`caldera.plugins.spread_state`); for
  ``kubernetes.io/hostname`` it is the matching pods on the candidate itself.
- NormalizeScore: with ``max`` (at least 0) and ``min`` of the raw scores of the candidates not
  ignored, each such candidate scores ``100 · (max + min − raw) // max``, or 100 when ``max`` is
  0; ignored candidates score 0.

A pod without constraints of its own is scored by the system default constraints when something
selects it (:mod:`caldera.plugins.spread_defaults`), with kube's one difference for them: no
candidate is ignored. A candidate without a constraint's key adds nothing for that constraint
(it is still spread by the others), and the candidates without it together count as one more
domain in that constraint's ``size``; the counts come from the nodes that have the key.

Pods without ScheduleAnyway constraints score 0 everywhere (PreScore Skip). The counts are kept
current within the session by an event handler registered for the nodeorder plugin.

Complexity per task: O(C·N) numpy work for C ScheduleAnyway constraints and N nodes; O(C) for a
pod without them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.interfaces import IntArray, SessionView
from caldera.plugins.spread_defaults import DefaultSelectors
from caldera.plugins.spread_state import HOSTNAME, SpreadState

__all__ = ["pod_topology_spread"]

SCHEDULE_ANYWAY = "ScheduleAnyway"
MAX_SCORE = 100


def _round(x: Vector) -> Vector:
    """Go's ``math.Round`` (half away from zero) for non-negative values, exactly."""
    down = np.floor(x)
    rounded: Vector = np.where(x - down >= 0.5, down + 1.0, down)
    return rounded


def pod_topology_spread(
    ssn: SessionView, plugin: str
) -> Callable[[Task, IntArray], Vector | float]:
    """The scorer over candidate rows; its counts' event handler is registered for ``plugin``."""
    state = SpreadState(ssn.nodes, DefaultSelectors(ssn.snapshot.spread_owners))
    ssn.event_handlers.add(plugin, state.pods.handler)

    def score(task: Task, idx: IntArray) -> Vector | float:
        cons = state.constraints(task, SCHEDULE_ANYWAY)
        if not cons:
            return 0.0  # kube's PreScore skips the plugin
        out = np.zeros(len(idx), dtype=np.float64)
        # the nodes not ignored: those with every key, or all of them (``has_all`` of no key)
        required = state.has_all(cons if state.requires_all_keys(task) else ())
        scored = required[idx]
        if not scored.any():
            return out
        raw = np.zeros(len(idx), dtype=np.float64)
        for c in cons:
            dom, size = state.domains(c.key)
            if c.key == HOSTNAME:
                domains = int(np.count_nonzero(scored))
                count = state.pods.counts(task.namespace, c.selector)[idx]
            else:
                # a scored candidate without the key has domain id ``size``: one more domain
                domains = int(np.count_nonzero(np.bincount(dom[idx[scored]], minlength=size)))
                counts, _ = state.domain_counts(task, c, state.eligible(task, c, required))
                count = np.append(counts, 0)[dom[idx]]
            term = count * math.log(domains + 2) + float(c.max_skew - 1)
            raw += np.where(dom[idx] < size, term, 0.0)
        values = _round(raw[scored]).astype(np.int64)
        high = max(int(values.max()), 0)
        low = int(values.min())
        if high == 0:
            out[scored] = MAX_SCORE
        else:
            out[scored] = MAX_SCORE * (high + low - values) // high
        return out

    return score
