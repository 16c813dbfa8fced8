"""Volcano's per-task victim search: walk the nodes, evict in victim order until the task fits.

``preempt`` and ``reclaim`` make room for one pending task at a time the way Volcano 1.15 does
(``normalPreempt`` and ``preemptorFitsOnNode`` in ``actions/preempt/preempt.go``,
``reclaimForTask`` in ``actions/reclaim/reclaim.go``):

1. **Nodes in play.** The task's filters run once. A node is ruled out by a reason evictions
   cannot cure (kube's ``UnschedulableAndUnresolvable``: node affinity, taints, pod affinity...);
   reasons a victim can cure (``ssn.releasable_reasons``: pod anti-affinity either way, host
   ports, spread skew, shared-card capacity) keep it in play
   (``Session.PredicateForPreemptAction``). A job (or sub-group) bound to a HyperNode tier may
   only use the nodes of the HyperNode it runs in, or of any HyperNode of that tier before it
   has a node (Volcano skips such jobs, volcano#4374).
2. **Every node, best score first.** The first node that works wins. A node whose future idle
   resources plus everything its candidates hold could not hold the task is skipped without a
   look (one ``np.bincount`` per requested resource over all nodes): the same answer as looking,
   since the plugins only ever offer a subset of the candidates (``util.ValidateVictims``).
3. **On a node.** The action's filter picks the candidates (reclaim: a node without any is no
   reclaim candidate at all); the plugins' victim tiers choose among them; the victims are
   evicted in victim order (``Session.victim_order``, Volcano's ``BuildVictimsPriorityQueue``) while
   the task does not fit: its queue allocatable (preempt only), its request within the node's
   future idle resources, and its filters passing on the node as it is then. Evictions go into a
   statement of the node, merged into the job's on success and discarded otherwise.

With ``enableTopologyAwarePreemption`` (preempt), candidate nodes are dry-run instead
(``utils.SelectVictimsOnNode``): victims are removed in victim order until the task fits, then
reprieved in reverse order wherever it still fits; the first ``candidate_nodes()`` nodes that
work are compared as kube-scheduler compares them (lowest highest victim priority, lowest sum
of priorities, fewest victims, node score) and the best is evicted.

Why a task got nothing is kept per node for ``caldera explain`` (``result.preemption_nodes``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from caldera.actions._evict import BoolArray, CandidateArgs, VictimTable, candidate_nodes
from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.task import Task
from caldera.framework import points as rules
from caldera.framework.interfaces import SessionView, VictimFn
from caldera.framework.outside import DecisionFailed
from caldera.framework.placement import Curable
from caldera.framework.points import Among, Point
from caldera.framework.statement import Statement
from caldera.framework.topology import rule_of
from caldera.models.volcano import NetworkTopologySpec

__all__ = ["NODES_NOTED", "NodeWalk"]

NODES_NOTED = 16
"""Nodes per pod whose reason is kept for ``caldera explain``."""

Filter = Callable[[Task], BoolArray]
"""Preemptor → the victim-table rows it may evict (the action's own rule)."""


@dataclass(frozen=True, slots=True)
class _Candidate:
    """A dry-run plan of the topology-aware mode: the node and the victims it needs."""

    row: int
    victims: list[Task]
    rank: int

    def cost(self) -> tuple[int, int, int, int]:
        """kube-scheduler's ``pickOneNodeForPreemption`` order, lowest first."""
        prios = [v.priority for v in self.victims]
        return (max(prios, default=-(2**31)), sum(prios), len(prios), self.rank)


class NodeWalk:
    """One action's victim search: the victim table and the plugins' victim tiers it uses."""

    def __init__(
        self,
        ssn: SessionView,
        args: CandidateArgs,
        reason: str,
        tiers: Point[VictimFn],
        *,
        allocatable: bool,
        needs_candidates: bool,
        topology_aware: bool = False,
        nominated: bool = False,
    ) -> None:
        self.ssn = ssn
        self.table = VictimTable(ssn)
        self.reason = reason
        self.tiers = tiers
        """The plugins' victim tiers (``preemptable`` or ``reclaimable``)."""
        self.allocatable = allocatable
        """Preempt: the preemptor's queue must be allocatable for it to fit (reclaim: no)."""
        self.needs_candidates = needs_candidates
        """Reclaim: a node holding no candidate is not a reclaim candidate."""
        self.topology_aware = topology_aware
        self.nominated = nominated
        """Preempt: ``taskEligibleToPreempt``'s checks of the pod's nominated node (reclaim
        has none)."""
        self._asks_for: Task | None = None
        self._asks: list[tuple[int, float]] = []
        """The task ``fits`` last looked at, and its non-zero requests as (column, amount)."""
        self.second_pass = False
        """Set for preempt's within-job pass: a task's notes from the first pass are kept."""
        self.limit = candidate_nodes(args, len(ssn.nodes))
        """Dry-run candidates the topology-aware mode compares (``findCandidates``)."""

    # -- notes ---------------------------------------------------------------------------------

    def note(self, task: Task, why: str) -> None:
        notes = self.ssn.result.preemption_notes
        if self.second_pass:
            notes.setdefault(task.key, f"{self.reason}: {why}")
        else:
            notes[task.key] = f"{self.reason}: {why}"

    def note_node(self, task: Task, row: int, why: str) -> None:
        if not self.ssn.detail:
            return
        per_node = self.ssn.result.preemption_nodes.setdefault(task.key, {})
        name = self.ssn.nodes.names[row]
        if len(per_node) < NODES_NOTED and not (self.second_pass and name in per_node):
            per_node[name] = f"{self.reason}: {why}"

    def succeeded(self, task: Task) -> None:
        self.ssn.result.preemption_notes.pop(task.key, None)
        self.ssn.result.preemption_nodes.pop(task.key, None)
        self.ssn.refusals.pop(task.uid, None)

    # -- the search ----------------------------------------------------------------------------

    def eligible(self, task: Task) -> bool:
        """``taskEligibleToPreempt`` (and reclaim's first gate): a pod with
        ``preemptionPolicy: Never`` evicts nobody."""
        if task.spec.preemption_policy == "Never":
            self.note(task, "its preemptionPolicy is Never")
            return False
        why = self._nominated_in_the_way(task) if self.nominated and task.nominated else None
        if why is not None:
            self.note(task, why)
            return False
        return True

    def _nominated_in_the_way(self, task: Task) -> str | None:
        """``taskEligibleToPreempt`` for a pod an earlier preemption nominated to a node: why
        it may not preempt again (None: it may). It may if the node is refused for a reason
        evictions cannot cure (``UnschedulableAndUnresolvable``); not if the node has gone, if
        the filters pass there, or if a lower-priority pod preempted there is still leaving."""
        ssn = self.ssn
        name = task.nominated
        row = ssn.nodes.index.get(name)
        if row is None:
            return f"its nominated node {name} is not in this session"
        reasons = [why for why, rejected in ssn.predicate(task) if rejected[row]]
        check = ssn.node_check(task, row)
        if check is not None:
            reasons.append(check)
        if not reasons:
            return f"its nominated node {name} passes every filter: it waits for room there"
        cured = ssn.releasable_reasons
        if any(why not in cured and not isinstance(why, Curable) for why in reasons):
            return None
        for other in ssn.nodes.tasks[row].values():
            if other.priority < task.priority and other.preempted:
                return f"{other.key}, preempted on its nominated node {name}, is still leaving"
        return None

    def make_room(
        self, stmt: Statement, task: Task, job: Job, queue: Queue, rows_of: Filter
    ) -> bool:
        """Pipeline ``task`` on the first node (best score first) where evicting victims among
        its ``rows_of`` candidates makes it fit; the evictions and the pipeline go into
        ``stmt``. False (and nothing changed) when no node works."""
        ssn = self.ssn
        ssn.result.preemption_attempts += 1
        if not self.second_pass:
            ssn.result.preemption_nodes.pop(task.key, None)
        message = ssn.pre_predicate(task)
        if message is not None:
            self.note(task, f"the pod fits no node at all ({message})")
            return False
        try:
            return self._make_room(stmt, task, job, queue, rows_of)
        except DecisionFailed as exc:
            self.note(task, str(exc))
            return False

    def _make_room(
        self, stmt: Statement, task: Task, job: Job, queue: Queue, rows_of: Filter
    ) -> bool:
        ssn = self.ssn
        rows, curable = self._in_play(task, job)
        if not len(rows):
            return False
        mask = rows_of(task) & self.table.held
        req = task.resreq
        cols = ssn.nodes.space.fit_columns(req)
        freed = self.table.releasable(mask, cols)
        freed += ssn.nodes.future_idle[:, cols]
        room: BoolArray = np.all(freed >= req[cols] - 1e-9, axis=1)
        if self.needs_candidates:
            room &= np.bincount(self.table.node[mask], minlength=len(ssn.nodes)) > 0
        could = room[rows]
        pruned = rows[~could]
        rows = rows[could]
        if not len(rows):
            self._note_pruned(task, pruned)
            self.note(task, self._nowhere(mask))
            return False
        if len(rows) > 1:
            scores = ssn.node_order(task, rows)
            rows = rows[np.argsort(-scores, kind="stable")]
        if self.topology_aware:
            return self._topology_aware(stmt, task, queue, rows, mask, curable, pruned)
        for row in rows.tolist():
            if self._on_node(stmt, task, queue, row, mask, bool(curable[row])):
                self.succeeded(task)
                return True
        self._note_pruned(task, pruned)
        self.note(task, f"no node of the {len(rows)} examined could be freed for it")
        return False

    def _note_pruned(self, task: Task, pruned: npt.NDArray[np.intp]) -> None:
        """Say why the nodes skipped without a look were skipped (once nothing worked)."""
        why = "no candidate victims here" if self.needs_candidates else "too little room"
        for row in pruned[:NODES_NOTED].tolist():
            self.note_node(task, row, f"{why} even if every pod it may evict were gone")

    def _nowhere(self, mask: BoolArray) -> str:
        if not mask.any():
            if self.needs_candidates:
                return "no running pod of another reclaimable queue to reclaim"
            return "no running pod it may evict (see the rules of this action)"
        return "no node where evicting the pods it may evict would make enough room"

    def _in_play(self, task: Task, job: Job) -> tuple[npt.NDArray[np.intp], BoolArray]:
        """Rows the task may use, in row order, and which of them only fail on curable reasons
        (over all nodes)."""
        ssn = self.ssn
        n = len(ssn.nodes)
        feasible = np.ones(n, dtype=bool)
        curable = np.zeros(n, dtype=bool)
        ruled: dict[int, str] = {}
        for why, rejected in ssn.predicate(task):
            if why in ssn.releasable_reasons:
                curable |= rejected
            else:
                feasible &= ~rejected
                for row in np.flatnonzero(rejected)[:NODES_NOTED].tolist():
                    ruled.setdefault(row, why)
        domain = self._domain(job, task)
        if domain is not None:
            for row in np.flatnonzero(feasible & ~domain)[:NODES_NOTED].tolist():
                ruled.setdefault(row, "outside the HyperNode its job is bound to")
            feasible &= domain
        for row, why in list(ruled.items())[:NODES_NOTED]:
            self.note_node(task, row, f"ruled out by a filter evictions cannot cure ({why})")
        rows = np.flatnonzero(feasible)
        if not len(rows):
            self.note(task, "every node is ruled out by a filter evictions cannot cure")
        return rows, curable

    def _domain(self, job: Job, task: Task) -> BoolArray | None:
        """For a job, or the task's sub-group, with a hard network topology: the nodes the task
        may still use (those of the HyperNode of the highest allowed tier the job, or sub-group,
        already runs in, else of any HyperNode of that tier). None: nothing binds it."""
        tree = self.ssn.hypernodes
        if tree is None or not len(tree):
            return None
        bounds: list[tuple[NetworkTopologySpec | None, list[str] | None]]
        bounds = [(job.network_topology, None)]
        bounds += [(sg.topology, sg.tasks) for sg in job.subgroups if task.uid in sg.tasks]
        allowed: BoolArray | None = None
        for spec, among in bounds:
            if spec is not None and spec.mode == "hard":
                inside = self._inside(spec, job.node_rows(among=among))
                allowed = inside if allowed is None else allowed & inside
        return allowed

    def _inside(self, spec: NetworkTopologySpec, used: npt.NDArray[np.intp]) -> BoolArray:
        """The nodes of the HyperNode of the highest tier ``spec`` allows (as placement reads
        it, :func:`~caldera.framework.topology.rule_of`) holding ``used``, else of any of them."""
        tree = self.ssn.hypernodes
        assert tree is not None
        allowed = np.zeros(len(self.ssn.nodes), dtype=bool)
        rule = rule_of(spec, tree)
        if isinstance(rule, str):
            return allowed  # no HyperNode tier satisfies it
        top = max(t for t in tree.tiers if t <= rule.highest)
        if len(used):
            holder = tree.holding(used, top)
            if holder >= 0:
                allowed[tree.rows[holder]] = True
            return allowed
        allowed |= tree.domain[top] >= 0
        return allowed

    def _candidates(self, row: int, mask: BoolArray) -> list[Task]:
        table = self.table
        return [
            t
            for t in self.ssn.nodes.tasks[row].values()
            if (i := table.index.get(t.uid)) is not None and mask[i]
        ]

    def _victims(self, task: Task, row: int, mask: BoolArray) -> list[Task] | None:
        """The victims the plugins allow on ``row`` (empty: none needed or none allowed), or
        None when the node cannot work (``util.ValidateVictims``)."""
        ssn = self.ssn
        refused = ssn.node_check(task, row)
        if refused is not None and not isinstance(refused, Curable):
            self.note_node(task, row, f"refused whatever is evicted: {refused}")
            return None
        candidates = self._candidates(row, mask)
        if self.needs_candidates and not candidates:
            self.note_node(task, row, "no pod of another reclaimable queue runs here")
            return None
        victims = (rules.intersection(self.tiers, task, candidates) if candidates else None) or []
        self._asks_of(task)
        room = ssn.nodes.future_idle[row].tolist()
        for v in victims:
            held = v.resreq.tolist()
            for c, _ in self._asks:
                room[c] += held[c]
        if any(room[c] < need for c, need in self._asks):
            if self.ssn.detail:  # asking every plugin again costs: only for explain
                self.note_node(task, row, self._refused(task, candidates, victims))
            return None
        return victims

    def _asks_of(self, task: Task) -> None:
        """Set :attr:`_asks` to ``task``'s non-zero requests (kept while it is the same task)."""
        if self._asks_for is not task:
            self._asks_for = task
            cols = self.ssn.nodes.space.fit_columns(task.resreq)
            need = (task.resreq[cols] - 1e-9).tolist()
            self._asks = list(zip(cols.tolist(), need, strict=True))

    def _refused(self, task: Task, candidates: Sequence[Task], allowed: Sequence[Task]) -> str:
        if not candidates:
            return "too little room and no pod it may evict here"
        refusals = self.ssn.refusals_of(self.tiers, task, candidates)
        kept = {id(v) for v in allowed}
        parts = []
        for plugin, refused in refusals.items():
            names = [t.key for t in refused if id(t) not in kept]
            if names:
                parts.append(f"{', '.join(sorted(names))} protected by {plugin}")
        protected = "; ".join(parts) if parts else "the victims allowed free too little"
        return f"not enough room even after evicting what the plugins allow ({protected})"

    def fits(
        self, task: Task, queue: Queue, row: int, check_filters: bool, among: Among = "all"
    ) -> bool:
        """``preemptorFitsOnNode``: the queue allocatable (preempt), the request within the
        node's future idle resources, the filters (of the plugins ``among``) passing on the node
        as it is now."""
        ssn = self.ssn
        self._asks_of(task)
        free = ssn.nodes.future_idle[row].tolist()
        if any(free[c] < need for c, need in self._asks):
            return False  # the cheapest test first: the answer is the same in any order
        if self.allocatable and not ssn.allocatable(queue, task):
            return False
        return not (check_filters and ssn.simulate_predicate(task, row, among=among))

    def _evict_until_fit(
        self,
        node_stmt: Statement,
        task: Task,
        queue: Queue,
        row: int,
        victims: list[Task],
        curable: bool,
        among: Among = "all",
    ) -> bool:
        """Evict ``victims`` in victim order while ``task`` does not fit ``row``; whether it
        fits in the end."""
        fit = self.fits(task, queue, row, curable, among)
        for victim in self.ssn.victim_order(victims, task):
            if fit:
                break
            node_stmt.evict(victim, self.reason, task.key)
            fit = self.fits(task, queue, row, True, among)
        return fit

    def _on_node(
        self, stmt: Statement, task: Task, queue: Queue, row: int, mask: BoolArray, curable: bool
    ) -> bool:
        victims = self._victims(task, row, mask)
        if victims is None:
            return False
        node_stmt = self.ssn.statement()
        if self._evict_until_fit(node_stmt, task, queue, row, victims, curable):
            evicted = node_stmt.evicted()
            for victim in evicted:
                self.table.evicted(victim)
            node_stmt.pipeline(task, row, eviction_occurred=bool(evicted))
            stmt.absorb(node_stmt)
            return True
        node_stmt.discard()
        if self.ssn.detail:
            self.note_node(task, row, self._still_short(task, queue))
        return False

    def _still_short(self, task: Task, queue: Queue) -> str:
        """Why ``task`` still does not fit once every allowed victim is gone."""
        if self.allocatable and not self.ssn.allocatable(queue, task):
            why = self.ssn.refusals.get(task.uid, f"queue {queue.name} is not allocatable")
            return f"its queue does not allow it even after evicting every victim ({why})"
        return "it still does not fit after evicting every victim"

    def rollback(self, stmt: Statement) -> None:
        """Discard a job's statement: the pods it evicted hold their room again."""
        evicted = stmt.evicted()
        stmt.discard()
        for t in evicted:
            self.table.restore(t)

    # -- enableTopologyAwarePreemption ---------------------------------------------------------

    def _dry_run(
        self, task: Task, queue: Queue, row: int, mask: BoolArray, curable: bool
    ) -> list[Task] | None:
        """``SelectVictimsOnNode``: the fewest victims (removed in victim order, reprieved in
        reverse) with which ``task`` fits ``row``; None when it cannot fit. Leaves the session
        as it was."""
        victims = self._victims(task, row, mask)
        if victims is None:
            return None
        if curable and (refused := self.ssn.simulate_predicate(task, row, among="blind")):
            # Session.SimulateRemoveTaskFn tells only the plugins with enablePreemptable or
            # enabledAllocatable of a victim's removal: the others answer for the node as it
            # is, whatever is removed, so they are asked once, before the trial evictions
            if self.ssn.detail:
                self.note_node(task, row, f"no eviction cures it ({'; '.join(refused)})")
            return None
        node_stmt = self.ssn.statement()
        fit = self._evict_until_fit(node_stmt, task, queue, row, victims, curable, "seeing")
        removed = node_stmt.evicted()
        if not fit:
            node_stmt.discard()
            if self.ssn.detail:
                self.note_node(task, row, self._still_short(task, queue))
            return None
        chosen: list[Task] = []
        for victim in reversed(removed):  # reprieve the higher-ordered victims first
            node_stmt.reprieve(victim)
            if not self.fits(task, queue, row, True, "seeing"):
                node_stmt.evict(victim, self.reason, task.key)
                chosen.append(victim)
        node_stmt.discard()
        return chosen

    def _topology_aware(
        self,
        stmt: Statement,
        task: Task,
        queue: Queue,
        rows: npt.NDArray[np.intp],
        mask: BoolArray,
        curable: BoolArray,
        pruned: npt.NDArray[np.intp],
    ) -> bool:
        found: list[_Candidate] = []
        for rank, row in enumerate(rows.tolist()):
            victims = self._dry_run(task, queue, row, mask, bool(curable[row]))
            if victims is not None:
                found.append(_Candidate(row, victims, rank))
                if len(found) >= max(self.limit, 1):
                    break
        if not found:
            self._note_pruned(task, pruned)
            self.note(task, f"no node of the {len(rows)} examined could be freed for it")
            return False
        best = min(found, key=_Candidate.cost)
        for victim in best.victims:
            stmt.evict(victim, self.reason, task.key)
            self.table.evicted(victim)
        stmt.pipeline(task, best.row, eviction_occurred=True)  # topologyAwarePreempt
        self.succeeded(task)
        return True
