"""Placing a gang inside one HyperNode: the tier-by-tier search, pruned by arrays.

A job with ``networkTopology`` must land inside one HyperNode no higher than its tier bound
(``hard``), or prefers to (``soft``: the whole cluster is the last resort, as Volcano's virtual top
HyperNode). The search goes tier by tier, lowest first. Within a tier it first rules out, with a
few numpy operations over every HyperNode at once, those that cannot hold the gang:

1. the HyperNode's free resources (per-HyperNode sums of ``future_idle``, kept current from the
   node table's change log) must cover the sum of the needed tasks' requests;
2. for each task shape, the number of such pods its nodes could hold (per node
   ``min(free // request)`` summed per HyperNode) must cover that shape's count: this sees
   fragmentation, which a sum cannot.

Only the survivors are tried, best first by the HyperNode order plugins (the network-topology-aware
binpack score), each try a real placement in a statement restricted to the HyperNode's nodes; the
first that makes the job ready (or, failing that, pipelined) is kept. Trying in score order and
stopping at the first success picks the same HyperNode as scoring every success, because the
score does not depend on the trial. What was tried and why each failed is kept in a
:class:`~caldera.api.hypernode.TopologyTrace` for the pending message and ``caldera explain``.

A job that already has placed tasks may only grow inside the HyperNode holding all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.api.hypernode import ROOM, HyperNodeTree, HyperNodeUsage, TierTrial, TopologyTrace
from caldera.api.job import Job, SubGroup
from caldera.api.resources import ResourceSpace
from caldera.api.task import ALLOCATED_STATUSES, Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.statement import Statement
from caldera.models.volcano import NetworkTopologySpec
from caldera.quantity import format_resource

__all__ = ["PLACED_STATUSES", "Attempt", "TopologyRule", "TopologySearch", "home_of", "rule_of"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]

Attempt = Callable[[BoolArray | None], tuple[Statement, str]]
"""Place the job's tasks on the masked nodes (None: anywhere): the statement holding what was
placed and ``"ready"``, ``"pipelined"`` or why it failed."""


@dataclass(frozen=True, slots=True)
class TopologyRule:
    hard: bool
    highest: int
    """The highest tier a HyperNode may have (soft: the last tier tried before the cluster)."""

    @property
    def text(self) -> str:
        return f"{'hard' if self.hard else 'soft'}, tier ≤ {self.highest}"


def rule_of(spec: NetworkTopologySpec | None, tree: HyperNodeTree | None) -> TopologyRule | str:
    """The job's placement rule, or why it cannot be placed at all (a hard rule and no HyperNode
    to satisfy it). No spec, or a soft one without HyperNodes: an unconstrained rule (soft, -1)."""
    tiers = tree.tiers if tree is not None else []
    if spec is None or (spec.mode == "soft" and not tiers):
        return TopologyRule(hard=False, highest=-1)
    if spec.highest_tier_name:
        tier = tree.tier_of_name(spec.highest_tier_name) if tree is not None else None
        if tier is None:
            return f"network topology: no HyperNode tier is named {spec.highest_tier_name!r}"
        highest = tier
    elif spec.highest_tier_allowed is not None:
        highest = spec.highest_tier_allowed
    else:
        highest = max(tiers, default=0)
    hard = spec.mode == "hard"
    if not hard:
        highest = max(tiers)  # soft: every tier, lowest first, then the whole cluster
    if hard and not any(t <= highest for t in tiers):
        return f"network topology (hard, tier ≤ {highest}): no HyperNode of such a tier exists"
    return TopologyRule(hard=hard, highest=highest)


class TopologySearch:
    """The search for one session, over the session's HyperNode tree and usage."""

    def __init__(self, ssn: SessionView, tree: HyperNodeTree, usage: HyperNodeUsage) -> None:
        self.ssn = ssn
        self.tree = tree
        self.usage = usage

    # -- the search --------------------------------------------------------------------------

    def place(
        self,
        job: Job,
        rule: TopologyRule,
        tasks: Sequence[Task],
        attempt: Attempt,
        *,
        group: SubGroup | None = None,
    ) -> tuple[str, TopologyTrace]:
        """Try HyperNodes for ``job`` (or one of its sub-groups) until ``attempt`` succeeds; its
        statement is left applied (``"ready"``/``"pipelined"``) or everything is undone (the
        failure). The trace says what was tried."""
        tree = self.tree
        trace = TopologyTrace(rule=rule.text)
        if group is None:
            placed = job.node_rows(PLACED_STATUSES)
            need = _needed(job, tasks)
        else:
            placed = job.node_rows(PLACED_STATUSES, group.tasks)
            need = list(tasks[: max(group.size - group.placed(job, PLACED_STATUSES), 0)])
        # per shape, the pods of it each node could take: the same at every tier (a failed trial
        # leaves the nodes as they were), so counted once
        idle = self.ssn.nodes.future_idle
        space = self.ssn.space
        slots = [(_pods_per_node(idle, req, space), count) for req, count in _shapes(need)]
        total = sum((t.resreq for t in need), self.ssn.space.zeros())
        for tier in tree.tiers:
            if rule.highest >= 0 and tier > rule.highest:
                break
            trial = TierTrial(tier=tier, name=tree.tier_names.get(tier, ""))
            trace.tiers.append(trial)
            if len(placed):
                holder = tree.holding(placed, tier)
                pool = np.array([holder] if holder >= 0 else [], dtype=np.intp)
                if holder < 0:
                    trial.note = "the job's running pods are not all inside one HyperNode here"
            else:
                pool = tree.at_tier(tier)
            survivors = self._prune(job, pool, slots, total, len(need), trial)
            chosen, verdict = self._try(survivors, attempt, trial)
            if chosen:
                trace.chosen = chosen
                return verdict, trace
        if not rule.hard:
            stmt, verdict = attempt(None)
            if verdict in ("ready", "pipelined"):
                trace.outside = True
                return verdict, trace
            stmt.discard()
            return verdict, trace
        return trace.summary(), trace

    def _prune(
        self,
        job: Job,
        pool: IntArray,
        slots: list[tuple[FloatArray, int]],
        total: npt.NDArray[np.float64],
        need: int,
        trial: TierTrial,
    ) -> IntArray:
        """The HyperNodes of ``pool`` with room for the needed tasks, best first."""
        trial.candidates = len(pool)
        if not len(pool) or not need:
            return self._ordered(job, pool)
        free = self.usage.free()
        space = self.ssn.space
        cols = np.flatnonzero(total)
        short = (free[pool][:, cols] < total[cols]).any(axis=1)
        room = np.full(len(pool), need, dtype=np.int64)
        dom = self.tree.domain[int(self.tree.tier[pool[0]])]
        inside = dom >= 0
        for per_node, count in slots:
            per_hn = np.bincount(dom[inside], weights=per_node[inside], minlength=len(self.tree))
            fits = per_hn[pool]
            room = np.minimum(room, (fits * need // count).astype(np.int64))
            short |= fits < count
        for i in np.flatnonzero(short):
            h = int(pool[i])
            lacking = [
                f"{space.names[c]} {format_resource(space.names[c], free[h, c])} free of "
                f"{format_resource(space.names[c], total[c])}"
                for c in cols
                if free[h, c] < total[c]
            ]
            if lacking:
                why = f"not enough free resources ({', '.join(lacking)} needed)"
            else:
                most = min(int(room[i]), need - 1)
                trial.most_room = max(trial.most_room, most)
                why = f"{ROOM}{most} of {need} pods"
            trial.tried.append((self.tree.names[h], why))
        trial.pruned = int(short.sum())
        return self._ordered(job, pool[~short])

    def _ordered(self, job: Job, pool: IntArray) -> IntArray:
        """``pool`` best first by the HyperNode order plugins (ties: name order)."""
        if len(pool) < 2 or not self.ssn.hypernode_order_point:
            return pool
        scores = self.ssn.hypernode_order(job, pool)
        order = np.argsort(-scores, kind="stable")
        return pool[order]

    def _try(self, pool: IntArray, attempt: Attempt, trial: TierTrial) -> tuple[str, str]:
        """The first HyperNode of ``pool`` where the job is ready (or, if none, pipelined), with
        its placement applied, and the verdict; ("", "") when none of them works."""
        pipelined = -1
        for h in pool:
            h = int(h)
            mask = np.zeros(len(self.ssn.nodes), dtype=bool)
            mask[self.tree.rows[h]] = True
            stmt, verdict = attempt(mask)
            if verdict == "ready":
                return self.tree.names[h], verdict
            stmt.discard()
            if verdict == "pipelined":
                if pipelined < 0:
                    pipelined = h
                trial.tried.append((self.tree.names[h], "the job fits only once pods leave"))
            else:
                trial.tried.append((self.tree.names[h], verdict))
        if pipelined >= 0:
            mask = np.zeros(len(self.ssn.nodes), dtype=bool)
            mask[self.tree.rows[pipelined]] = True
            attempt(mask)
            return self.tree.names[pipelined], "pipelined"
        return "", ""


PLACED_STATUSES = frozenset(ALLOCATED_STATUSES | {TaskStatus.PIPELINED})


def home_of(ssn: SessionView, job: Job) -> BoolArray | str | None:
    """Where more pods of ``job`` may go without breaking its hard ``networkTopology``: the nodes
    of the lowest allowed HyperNode holding all its placed pods (None: anywhere; a message: not
    yet known, as nothing is placed, or nowhere)."""
    spec, tree = job.network_topology, ssn.hypernodes
    if spec is None or spec.mode != "hard":
        return None
    rule = rule_of(spec, tree)
    if isinstance(rule, str):
        return rule
    assert tree is not None  # a bounded hard rule needs HyperNodes
    placed = job.node_rows(PLACED_STATUSES)
    if not len(placed):
        return "network topology: waits for the job's gang to be placed inside a HyperNode"
    holder = tree.lowest_holding(placed, rule.highest)
    if holder < 0:
        return f"network topology ({rule.text}): the job's pods are not inside one such HyperNode"
    mask = np.zeros(len(ssn.nodes), dtype=bool)
    mask[tree.rows[holder]] = True
    return mask


def _needed(job: Job, tasks: Sequence[Task]) -> list[Task]:
    """The first tasks (in order) the job still needs to be ready."""
    missing = job.min_available - job.ready_task_num() - job.pending_best_effort_num()
    return list(tasks[: max(missing, 0)])


def _pods_per_node(
    idle: npt.NDArray[np.float64], req: npt.NDArray[np.float64], space: ResourceSpace
) -> FloatArray:
    """How many pods asking ``req`` each node could take: ``min over resources ⌊idle/req⌋``
    (of the resources a node is checked for)."""
    cols = space.fit_columns(req)
    out: FloatArray = np.floor(idle[:, cols] / req[cols]).min(axis=1).clip(min=0)
    return out


def _shapes(tasks: Sequence[Task]) -> list[tuple[npt.NDArray[np.float64], int]]:
    """Distinct requests among ``tasks`` with how many ask for each."""
    counts: dict[bytes, tuple[npt.NDArray[np.float64], int]] = {}
    for t in tasks:
        key = t.resreq.tobytes()
        req, n = counts.get(key, (t.resreq, 0))
        counts[key] = (req, n + 1)
    return list(counts.values())
