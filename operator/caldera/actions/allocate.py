"""allocate: place pending tasks, gang by gang, queue by queue.

Queues are visited in queue order (overused queues are skipped), one job per visit in job order,
its pending tasks in task order. Each task goes to the best node that fits it now (allocate) or
once evicted tasks are gone (pipeline). A job's placements are staged in a statement and committed
only when the job is ready (gang: at least minAvailable tasks placed). A job that is pipelined but
not ready keeps its reservations for the rest of the session without binding anything; otherwise
its placements are discarded. A ready job with tasks left goes back in line, so one big job does
not starve the others in its queue.

When a task fits no node the job's other tasks are still tried if they can make it ready
(Volcano's ``NeedContinueAllocating``); with ``predicateErrorCacheEnable`` (default on), tasks of a
role (``volcano.sh/task-spec``) that already failed in this session are skipped without filtering,
since they would fail the same way.

Without an ``enqueue`` action, Pending PodGroups are promoted to Inqueue here. Best-effort tasks
(no resource request) are left to ``backfill``. Pods held by a scheduling gate are never placed;
first of all, the queue-allocation gates of pods whose queues have room are lifted
(:mod:`caldera.actions._gates`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import ClassVar

from pydantic import Field

from caldera.actions._gates import lift_gates
from caldera.actions._queues import OrderedQueue
from caldera.api.fiterror import FitErrors
from caldera.api.hypernode import NO_RULE, TopologyTrace
from caldera.api.job import READY_STATUSES, Job, SubGroup
from caldera.api.queue import Queue
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import SessionView
from caldera.framework.placement import BoolArray, choose_node, never_fits
from caldera.framework.plugin import Action, Args
from caldera.framework.statement import Statement
from caldera.framework.topology import PLACED_STATUSES, TopologyRule, TopologySearch, rule_of

__all__ = ["AllocateAction", "AllocateArgs"]


class AllocateArgs(Args):
    predicate_error_cache_enable: bool = Field(True, alias="predicateErrorCacheEnable")
    """Volcano's per-role predicate-error cache: when on, a task whose role
    (``volcano.sh/task-spec``) already fit no node this session is skipped without filtering."""


class AllocateAction(Action[AllocateArgs]):
    name: ClassVar[str] = "allocate"
    Args = AllocateArgs

    def execute(self, ssn: SessionView) -> None:
        promote = "enqueue" not in ssn.configured_actions
        lift_gates(ssn, admitted_only=not promote)
        job_key = ssn.job_order_key()
        task_key = ssn.task_order_key()
        jobs_by_queue: dict[str, OrderedQueue[Job]] = {}
        remaining: dict[str, deque[Task]] = {}
        for job in ssn.active_jobs():
            if job.queue not in ssn.queues:
                continue
            if job.is_pending():
                if not promote:
                    continue
                job.phase = "Inqueue"
            if job.is_ready() and not job.by_status.get(TaskStatus.PENDING):
                continue  # nothing to place, and no verdict on it that anyone reads
            invalid = ssn.job_valid(job)
            if invalid is not None:
                job.fit_error = job.fit_error or invalid.message
                continue
            # best-effort tasks are backfill's, except in a job placed inside one HyperNode
            local = job.network_topology is not None or _grouped(job)
            tasks = [t for t in job.placeable() if local or not t.best_effort]
            if not tasks:
                continue
            remaining[job.uid] = deque(sorted(tasks, key=task_key))
            jobs_by_queue.setdefault(job.queue, OrderedQueue(job_key)).push(job)

        failed_roles: dict[str, set[str]] = {}
        queues = OrderedQueue(ssn.queue_order_key(), (ssn.queues[q] for q in sorted(jobs_by_queue)))
        while queues:
            queue = queues.pop()
            jobs = jobs_by_queue[queue.name]
            if ssn.overused(queue):
                # what is left of an overused queue: only jobs asking for nothing a share
                # counts (shared GPUs alone, whose quota is the namespace's) take nothing more
                uncounted = [j for j in jobs.drain() if not _counted(ssn, remaining[j.uid])]
                jobs = jobs_by_queue[queue.name] = OrderedQueue(job_key, uncounted)
            if not jobs:
                continue
            job = jobs.pop()
            rule = rule_of(job.network_topology, ssn.hypernodes)
            if isinstance(rule, str) or rule.highest >= 0 or _grouped(job):
                stmt = self._place_in_topology(ssn, queue, job, remaining, rule)
            else:
                stmt = ssn.statement()
                failed = failed_roles.setdefault(job.uid, set())
                if self._place(ssn, queue, job, remaining[job.uid], stmt, failed):
                    jobs.push(job)
            if ssn.job_ready(job):
                stmt.commit()
            elif not ssn.job_pipelined(job):
                stmt.discard()
            queues.push(queue)

    def _place_in_topology(
        self,
        ssn: SessionView,
        queue: Queue,
        job: Job,
        remaining: dict[str, deque[Task]],
        rule: TopologyRule | str,
    ) -> Statement:
        """Place ``job`` inside one HyperNode its rule allows, and each of its sub-groups inside
        one its own rule allows (see :mod:`caldera.framework.topology`); the statement holding
        the placement."""
        tasks = remaining[job.uid]
        kept: list[tuple[Statement, deque[Task]]] = []

        def attempt(within: BoolArray | None) -> tuple[Statement, str]:
            stmt = ssn.statement()
            left = deque(tasks)
            for t in left:
                job.nodes_fit_errors.pop(t.uid, None)
            if _grouped(job):
                left = self._place_subgroups(ssn, queue, job, left, stmt, within)
            self._place(ssn, queue, job, left, stmt, set(), within=within)
            kept[:] = [(stmt, left)]
            if ssn.job_ready(job):
                return stmt, "ready"
            if ssn.job_pipelined(job):
                return stmt, "pipelined"
            return stmt, _first_reason(job, tasks)

        if isinstance(rule, str):
            verdict = rule
        elif rule.highest < 0:  # only the sub-groups have a network topology
            stmt, verdict = attempt(None)
            if verdict in ("ready", "pipelined"):
                remaining[job.uid] = kept[0][1]
                return stmt
            stmt.discard()
        else:
            tree, usage = ssn.hypernodes, ssn.hypernode_usage
            assert tree is not None and usage is not None  # a bounded rule needs HyperNodes
            search = TopologySearch(ssn, tree, usage)
            verdict, found = search.place(job, rule, list(tasks), attempt)
            found.subgroups = job.topology_trace.subgroups if job.topology_trace else {}
            job.topology_trace = found
            if verdict in ("ready", "pipelined"):
                stmt, remaining[job.uid] = kept[0]
                return stmt
        _waits(ssn, job, tasks, verdict)
        return ssn.statement()

    def _place_subgroups(
        self,
        ssn: SessionView,
        queue: Queue,
        job: Job,
        tasks: deque[Task],
        stmt: Statement,
        within: BoolArray | None,
    ) -> deque[Task]:
        """Place each sub-group with a network topology inside one HyperNode (within
        ``within``), all of its ``subGroupSize`` or none; the tasks left for the rest."""
        tree = ssn.hypernodes
        traces = job.topology_trace.subgroups if job.topology_trace else {}
        if job.topology_trace is None:
            job.topology_trace = TopologyTrace(rule=NO_RULE, subgroups=traces)
        for sg in job.subgroups:
            if sg.topology is None:
                continue
            members = set(sg.tasks)
            mine = [t for t in tasks if t.uid in members]
            tasks = deque(t for t in tasks if t.uid not in members)
            rule = rule_of(sg.topology, tree)
            if isinstance(rule, str):
                traces[sg.name] = TopologyTrace(rule=rule)
            elif mine and rule.highest >= 0:
                traces[sg.name] = self._place_subgroup(
                    ssn, queue, job, sg, mine, stmt, within, rule
                )
            else:
                tasks.extend(mine)  # soft without HyperNodes: placed with the rest
        return tasks

    def _place_subgroup(
        self,
        ssn: SessionView,
        queue: Queue,
        job: Job,
        sg: SubGroup,
        mine: list[Task],
        stmt: Statement,
        within: BoolArray | None,
        rule: TopologyRule,
    ) -> TopologyTrace:
        """Place one sub-group inside one HyperNode; its placement joins ``stmt``."""
        tree, usage = ssn.hypernodes, ssn.hypernode_usage
        assert tree is not None and usage is not None  # a bounded rule needs HyperNodes
        kept: list[Statement] = []

        def attempt(mask: BoolArray | None) -> tuple[Statement, str]:
            inner = ssn.statement()
            where = mask if within is None else within if mask is None else mask & within
            self._place(ssn, queue, job, deque(mine), inner, set(), within=where)
            kept[:] = [inner]
            if sg.placed(job, READY_STATUSES) >= sg.size:
                return inner, "ready"
            if sg.placed(job, PLACED_STATUSES) >= sg.size:
                return inner, "pipelined"
            return inner, _first_reason(job, mine)

        search = TopologySearch(ssn, tree, usage)
        verdict, trace = search.place(job, rule, mine, attempt, group=sg)
        if verdict in ("ready", "pipelined"):
            stmt.absorb(kept[0])
        else:
            _waits(ssn, job, mine, f"sub-group {sg.name}: {verdict}")
        return trace

    def _place(
        self,
        ssn: SessionView,
        queue: Queue,
        job: Job,
        tasks: deque[Task],
        stmt: Statement,
        failed_roles: set[str],
        *,
        within: BoolArray | None = None,
    ) -> bool:
        """Place ``job``'s tasks in order; True when the job is ready with tasks left over.

        ``failed_roles`` collects the roles of tasks that fit no node in this session. With
        ``within`` (a HyperNode's nodes) the tasks go only there, all of them in one go."""
        while tasks:
            task = tasks.popleft()
            if not ssn.allocatable(queue, task):
                never = never_fits(ssn, task)
                if never is not None:  # the real reason, whatever the queue's share says
                    job.nodes_fit_errors[task.uid] = never
                    continue
                job.nodes_fit_errors[task.uid] = FitErrors(
                    total=len(ssn.nodes),
                    message=ssn.refusals.pop(
                        task.uid, f"queue {queue.name} has no room for this task within its share"
                    ),
                    plain=True,
                )
                continue
            if self.args.predicate_error_cache_enable and task.role and task.role in failed_roles:
                job.nodes_fit_errors[task.uid] = FitErrors(
                    total=len(ssn.nodes),
                    message=f"Task {task.name} with role spec {task.role} "
                    "has already predicated failed, skip",
                    plain=True,
                )
                continue
            choice = choose_node(ssn, task, within=within)
            if isinstance(choice, FitErrors):
                job.nodes_fit_errors[task.uid] = choice
                if choice.message and not choice.counts:
                    return False  # a pre-filter failed: Volcano stops at once
                failed_roles.add(task.role)
                if job.need_continue_allocating(failed_roles):
                    continue
                return False
            if choice.idle:
                stmt.allocate(task, choice.node)
            else:
                stmt.pipeline(task, choice.node)
            if tasks and within is None and ssn.job_ready(job):
                return True
        return False


def _waits(ssn: SessionView, job: Job, tasks: Iterable[Task], message: str) -> None:
    """``message`` is why each of ``tasks`` waits (a verdict not about single nodes)."""
    for t in tasks:
        job.nodes_fit_errors[t.uid] = FitErrors(total=len(ssn.nodes), message=message, plain=True)


def _grouped(job: Job) -> bool:
    """Whether some sub-group of the job has a network topology of its own."""
    return any(sg.topology is not None for sg in job.subgroups)


def _first_reason(job: Job, tasks: Iterable[Task]) -> str:
    """Why the first task of ``tasks`` that found no node did not."""
    for t in tasks:
        fit = job.nodes_fit_errors.get(t.uid)
        if fit is not None:
            return fit.error()
    return "the job is not ready"


def _counted(ssn: SessionView, tasks: Iterable[Task]) -> bool:
    """Whether any of ``tasks`` asks for a resource that queue shares count."""
    return any(t.resreq[ssn.space.quota].any() for t in tasks)
