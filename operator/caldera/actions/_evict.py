"""The victim table both victim searches use, and the gang-aware search of ``gangpreempt`` and
``gangreclaim``.

Every placed task that could ever be a victim is one row of a :class:`VictimTable` built once per
action: node, request, queue, job, priority, and whether it still holds its resources. For a
preemptor the action's own rule (same queue, other queue, same job...) is a boolean mask over
those rows; summing the masked requests per node (one ``np.bincount`` per resource) gives what
evictions could free on every node at once. ``preempt`` and ``reclaim`` (Volcano's search,
:mod:`caldera.actions._walk`) use that to skip nodes that could never work.

The gang-aware search (:func:`evict_for`) examines only nodes where the preemptor would then fit,
up to ``max_candidates`` of them, best node score first. On each, the plugins' victim tiers
(``ssn.preemptable`` / ``ssn.reclaimable``) choose among the node's eligible tasks; the cheapest
victims come first (a victim whose job would drop below its minAvailable counts as its whole
gang, then lower priority, then the youngest) and are taken until the preemptor fits the node's
future idle resources. Of the examined nodes the one whose victim set is cheapest wins (fewest
pods counted that way, then the lowest priority among them, then node score). Victims are
evicted and the preemptor pipelined in the caller's statement, so a gang that cannot be
pipelined as a whole evicts nothing: the statement is discarded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pydantic import Field

from caldera.actions._queues import OrderedQueue
from caldera.api.job import Job
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.outside import DecisionFailed
from caldera.framework.placement import Curable, first_accepted
from caldera.framework.plugin import Args
from caldera.framework.statement import Statement

__all__ = [
    "CandidateArgs",
    "Chooser",
    "VictimTable",
    "candidate_nodes",
    "commit_with_victims",
    "evict_for",
    "make_room_for_job",
    "starving_jobs",
    "turns_by_queue_share",
]

BoolArray = npt.NDArray[np.bool_]
Chooser = Callable[[Task, Sequence[Task]], "list[Task] | None"]
"""The plugins' victim tiers: (preemptor, candidates) → the victims they allow (None: none)."""

_VICTIM_STATUSES = (TaskStatus.RUNNING, TaskStatus.BOUND)
PATIENCE = 2
"""Examined nodes in a row that were not cheaper than the best so far, before the search
stops (they score lower, too)."""


class CandidateArgs(Args):
    """How many nodes a victim search examines (Volcano's preempt arguments; reclaim takes the
    same)."""

    min_candidate_nodes_percentage: int = Field(
        10, ge=0, le=100, alias="minCandidateNodesPercentage"
    )
    min_candidate_nodes_absolute: int = Field(1, ge=0, alias="minCandidateNodesAbsolute")
    max_candidate_nodes_absolute: int = Field(100, ge=1, alias="maxCandidateNodesAbsolute")


def candidate_nodes(args: CandidateArgs, nodes: int) -> int:
    """How many nodes are examined for victims (kube-scheduler's and Volcano's rule)."""
    wanted = max(
        args.min_candidate_nodes_absolute,
        math.ceil(nodes * args.min_candidate_nodes_percentage / 100),
    )
    return max(1, min(wanted, args.max_candidate_nodes_absolute, nodes))


def starving_jobs(ssn: SessionView, *, pending_too: bool = False) -> list[Job]:
    """Valid jobs past Pending (or, with ``pending_too``, not yet admitted as well) with pending
    tasks that the plugins call starving, in job order within queue order.

    Jobs bound to one HyperNode (a hard ``networkTopology``, for the job or a sub-group) are left
    out, as Volcano's preempt leaves them: the victim search picks nodes anywhere, and a gang
    spread by evictions would break the very constraint it asked for."""
    out = []
    for job in ssn.jobs.values():
        if job.queue not in ssn.queues or (job.is_pending() and not pending_too):
            continue
        if _hard_topology(job):
            continue
        if not job.placeable() or ssn.job_valid(job) is not None:
            continue
        if ssn.job_starving(job):
            out.append(job)
    queue_key, job_key = ssn.queue_order_key(), ssn.job_order_key()
    return sorted(out, key=lambda j: (queue_key(ssn.queues[j.queue]), job_key(j)))


def _hard_topology(job: Job) -> bool:
    specs = [job.network_topology, *(sg.topology for sg in job.subgroups)]
    return any(spec is not None and spec.mode == "hard" for spec in specs)


def turns_by_queue_share(ssn: SessionView, jobs: Sequence[Job]) -> Iterator[Job]:
    """``jobs`` one turn at a time: the first queue in queue order gives its first job in job
    order, then goes back in line keyed by its share as that job left it (Volcano's reclaim pops
    a queue, serves it and pushes it back), so a queue that has just taken resources may let
    another go first. O(log Q) per turn for Q queues."""
    job_key = ssn.job_order_key()
    waiting: dict[str, OrderedQueue[Job]] = {}
    for job in jobs:
        waiting.setdefault(job.queue, OrderedQueue(job_key)).push(job)
    queues = OrderedQueue(ssn.queue_order_key(), (ssn.queues[q] for q in sorted(waiting)))
    while queues:
        queue = queues.pop()
        line = waiting[queue.name]
        yield line.pop()
        if line:
            queues.push(queue)


def make_room_for_job(
    ssn: SessionView,
    table: VictimTable,
    job: Job,
    eligible_for: Callable[[Task], BoolArray | None],
    choose: Chooser,
    reason: str,
    *,
    max_candidates: int,
    may_grow: Callable[[Task], bool] = lambda _: True,
) -> None:
    """Pipeline ``job``'s pending tasks (task order) with the victims they need, until the job
    starves no more (``JobStarving``); commit the lot if it is then pipelined, else undo all of
    it. ``eligible_for`` gives a task's candidate rows (None: it may not preempt); a task its
    queue may not take (reclaim's ``Preemptive``, ``may_grow``) is passed over."""
    stmt = ssn.statement()
    evicted: list[Task] = []
    for task in sorted(job.placeable(), key=ssn.task_order_key()):
        if not ssn.job_starving(job):
            break
        if not may_grow(task):
            continue
        eligible = eligible_for(task)
        if eligible is None:
            continue
        got = evict_for(
            ssn, stmt, table, task, eligible, choose, reason, max_candidates=max_candidates
        )
        if got is not None:
            evicted.extend(got)
    if ssn.job_pipelined(job):
        commit_with_victims(ssn, stmt, job, evicted)
        return
    for task in job.tasks.values():
        ssn.result.preemption_notes.setdefault(
            task.key, f"{reason}: the job would still not have enough pods placed to start"
        )
    stmt.discard()
    for task in evicted:
        table.held[table.index[task.uid]] = True


def commit_with_victims(ssn: SessionView, stmt: Statement, job: Job, victims: list[Task]) -> None:
    """Commit ``stmt`` and tell the job's PodGroup which pods it evicted; a job not admitted yet
    is admitted by it (what it needs is being freed for it)."""
    stmt.commit()
    if job.is_pending():
        ssn.job_enqueued(job)
        job.phase = "Inqueue"
    if victims:
        names = ", ".join(sorted(f"{v.namespace}/{v.name}" for v in victims))
        ssn.record_event(job, "Normal", "Preempted", f"evicted {len(victims)} pod(s): {names}")


class VictimTable:
    """Tasks that may be evicted, as arrays; rows stay valid for the whole action."""

    def __init__(self, ssn: SessionView) -> None:
        tasks: list[Task] = []
        jobs = ssn.jobs
        for row_tasks in ssn.nodes.tasks:
            tasks.extend(
                t
                for t in row_tasks.values()
                if t.status in _VICTIM_STATUSES and not (t.job in jobs and jobs[t.job].foreign)
            )  # another instance's pods are its to evict
        self.tasks = tasks
        self.index = {t.uid: i for i, t in enumerate(tasks)}
        queues = sorted({ssn.jobs[t.job].queue for t in tasks if t.job in ssn.jobs})
        self.queue_ids = {q: i for i, q in enumerate(queues)}
        self.node = np.array([t.node for t in tasks], dtype=np.intp)
        width = len(ssn.space)
        self.resreq = np.array([t.resreq for t in tasks], dtype=np.float64).reshape(
            len(tasks), width
        )
        self.queue = np.array(
            [self.queue_ids.get(_queue_of(ssn, t), -1) for t in tasks], dtype=np.intp
        )
        self.job_ids = {j: i for i, j in enumerate(sorted({t.job for t in tasks}))}
        self.job = np.array([self.job_ids[t.job] for t in tasks], dtype=np.intp)
        """Job of every row, as an index into :attr:`job_ids` (``job_id(uid)`` for a job)."""
        self.priority = np.array([t.priority for t in tasks], dtype=np.int64)
        self.best_effort = np.array([t.best_effort for t in tasks], dtype=bool)
        self.held = np.array([t.preemptable for t in tasks], dtype=bool)
        """Still holding its resources and preemptable (``volcano.sh/preemptable``)."""
        self.n_nodes = len(ssn.nodes)

    def job_id(self, uid: str) -> int:
        """The row value of job ``uid`` (-1: it has no task here)."""
        return self.job_ids.get(uid, -1)

    def evicted(self, task: Task) -> None:
        i = self.index.get(task.uid)
        if i is not None:
            self.held[i] = False

    def restore(self, task: Task) -> None:
        """``task``'s eviction was undone: it holds its resources again."""
        i = self.index.get(task.uid)
        if i is not None:
            self.held[i] = task.preemptable

    def releasable(self, mask: BoolArray, cols: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """Per node, the sum of the masked tasks' requests of resources ``cols`` (nodes × cols)."""
        rows = np.flatnonzero(mask)
        nodes = self.node[rows]
        out = np.empty((self.n_nodes, len(cols)), dtype=np.float64)
        for k, c in enumerate(cols.tolist()):
            out[:, k] = np.bincount(nodes, weights=self.resreq[rows, c], minlength=self.n_nodes)
        return out


def _queue_of(ssn: SessionView, task: Task) -> str:
    job = ssn.jobs.get(task.job)
    return job.queue if job is not None else ""


@dataclass(frozen=True, slots=True)
class _Plan:
    node: int
    victims: list[Task]
    cost: tuple[int, int, int]


def evict_for(
    ssn: SessionView,
    stmt: Statement,
    table: VictimTable,
    preemptor: Task,
    eligible: BoolArray,
    choose: Chooser,
    reason: str,
    *,
    max_candidates: int,
) -> list[Task] | None:
    """Pipeline ``preemptor`` on a node, evicting the cheapest victims the plugins allow among
    the ``eligible`` rows; the victims (empty: it fit without any), or None when no node works.
    Nothing is changed when None is returned."""
    ssn.result.preemption_attempts += 1
    notes = ssn.result.preemption_notes

    def nothing(why: str) -> None:
        notes[preemptor.key] = f"{reason}: {why}"

    message = ssn.pre_predicate(preemptor)
    if message is not None:
        nothing(f"the pod fits no node at all ({message})")
        return None
    try:  # a scorer that cannot decide (an extender that failed) leaves the pod waiting
        nodes = ssn.nodes
        feasible = np.ones(len(nodes), dtype=bool)
        curable = np.zeros(len(nodes), dtype=bool)
        for why, mask in ssn.predicate(preemptor):
            if why in ssn.releasable_reasons:
                curable |= mask  # evictions may cure it: checked once victims are chosen
            else:
                feasible &= ~mask
        req = preemptor.resreq
        cols = nodes.space.fit_columns(req)
        future = nodes.future_idle
        fits_now = feasible & ~curable & (future[:, cols] >= req[cols]).all(axis=1)
        if fits_now.any():
            rows = np.flatnonzero(fits_now)
            if len(rows) > 1:
                rows = rows[np.argsort(-ssn.node_order(preemptor, rows), kind="stable")]
            best = first_accepted(ssn, preemptor, rows)
            if isinstance(best, int):
                stmt.pipeline(preemptor, best)
                return []
            for _, row in best:
                feasible[row] = False
        mask = eligible & table.held
        if not mask.any():
            nothing("no running pod it may evict (see the rules of this action)")
            return None
        freed = table.releasable(mask, cols)
        could = feasible & ((future[:, cols] + freed) >= req[cols]).all(axis=1)
        rows = np.flatnonzero(could)
        if not len(rows):
            nothing("no node where evicting the pods it may evict would make enough room")
            return None
        if len(rows) > 1:
            scores = ssn.node_order(preemptor, rows)
            rows = rows[np.argsort(-scores, kind="stable")]
        plan = _cheapest(ssn, table, preemptor, rows[:max_candidates], mask, choose)
        if plan is None:
            examined = min(len(rows), max_candidates)
            nothing(
                f"the plugins allow no victims that make room on the {examined} node(s) examined"
            )
            return None
        ssn.result.preemption_notes.pop(preemptor.key, None)
        for victim in plan.victims:
            stmt.evict(victim, reason, preemptor.key)
            table.evicted(victim)
        stmt.pipeline(preemptor, plan.node, eviction_occurred=bool(plan.victims))
        return plan.victims
    except DecisionFailed as exc:
        nothing(str(exc))
        return None


def _cheapest(
    ssn: SessionView,
    table: VictimTable,
    preemptor: Task,
    rows: npt.NDArray[np.intp],
    mask: BoolArray,
    choose: Chooser,
) -> _Plan | None:
    best: _Plan | None = None
    stale = 0
    for row in rows.tolist():
        plan = _on_node(ssn, table, preemptor, row, mask, choose)
        if plan is None:
            continue
        if best is None or plan.cost < best.cost:
            best, stale = plan, 0
            if plan.cost[0] <= 1:
                break  # one victim of no gang: nothing is cheaper
        else:
            stale += 1
            if stale >= PATIENCE:
                break  # the next nodes score lower and have not been cheaper
    return best


def _on_node(
    ssn: SessionView,
    table: VictimTable,
    preemptor: Task,
    row: int,
    mask: BoolArray,
    choose: Chooser,
) -> _Plan | None:
    candidates = [
        t
        for t in ssn.nodes.tasks[row].values()
        if (i := table.index.get(t.uid)) is not None and mask[i]
    ]
    refused = ssn.node_check(preemptor, row)
    if refused is not None and not isinstance(refused, Curable):
        return None
    allowed = choose(preemptor, candidates)
    if not allowed:
        return None
    req = preemptor.resreq
    cols = ssn.nodes.space.fit_columns(req)
    room = ssn.nodes.future_idle[row].copy()
    taken: list[Task] = []
    weight = 0
    held: dict[str, int] = {}

    verdicts: dict[int, bool] = {}

    def fits() -> bool:
        """The preemptor fits with ``taken`` gone: room first, then the state filters (asked
        once per victim set)."""
        if not (room[cols] >= req[cols]).all():
            return False
        if len(taken) not in verdicts:
            verdicts[len(taken)] = not ssn.simulate_predicate(preemptor, row, removed=taken)
        return verdicts[len(taken)]

    for victim in sorted(allowed, key=lambda t: _victim_key(ssn, t, held)):
        if fits():
            break
        room += victim.resreq
        taken.append(victim)
        job = ssn.jobs.get(victim.job)
        ready = held.setdefault(victim.job, job.ready_task_num() if job else 0)
        weight += job.min_available if job and ready <= job.min_available else 1
        held[victim.job] = ready - 1
    if not fits():
        return None
    top = max(t.priority for t in taken) if taken else 0
    return _Plan(row, taken, (weight, top, 0))


def _victim_key(ssn: SessionView, task: Task, held: dict[str, int]) -> tuple[int, int, float]:
    """Cheapest first: a victim that keeps its gang whole, lower priority, then the youngest."""
    job = ssn.jobs.get(task.job)
    ready = held.get(task.job, job.ready_task_num() if job else 0)
    breaks = 1 if job is not None and ready <= job.min_available else 0
    return (breaks, task.priority, -task.creation)
