"""proportion: share the cluster between queues by weight (weighted water-filling).

Each session every queue's *deserved* share is computed by repeatedly handing out what is left of
the cluster in proportion to the weights of the queues that still want more, never above a queue's
real capability (``min(capability, total − Σguarantee + own guarantee)``) or its request, never
below its guarantee. Queues then take turns by ``spec.priority`` (higher first) and share
(allocated/deserved, lower first); a queue at or over its share is overused and skipped; a task is
allocatable only if it keeps its queue within its share; jobs are admitted while the queue's real
capability still covers what is allocated and admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.api.compare import ShareMeter, le_all, le_where, overrun, short_names
from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import EventHandler, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import PERMIT, REJECT

__all__ = ["ProportionPlugin", "QueueShare", "water_fill"]

_MAX_ROUNDS = 1000


@dataclass(slots=True, eq=False)
class QueueShare:
    queue: Queue
    allocated: Vector
    request: Vector
    inqueue: Vector
    elastic: Vector
    real_capability: Vector
    deserved: Vector
    share: float = 0.0
    meter: ShareMeter | None = None


def water_fill(space: ResourceSpace, total: Vector, shares: Sequence[QueueShare]) -> None:
    """Set every ``deserved`` by weighted water-filling of ``total``."""
    remaining = total.copy()
    met: set[int] = set()
    for _ in range(_MAX_ROUNDS):
        weight = sum(s.queue.weight for i, s in enumerate(shares) if i not in met)
        if weight == 0:
            break
        before = remaining.copy()
        grown = space.zeros()
        shrunk = space.zeros()
        for i, s in enumerate(shares):
            if i in met:
                continue
            old = s.deserved
            new = old + remaining * (s.queue.weight / weight)
            new = np.minimum(new, s.real_capability)
            new = np.minimum(new, s.request)
            new = np.maximum(new, s.queue.guarantee)
            s.deserved = new
            # Volcano: a queue is met once its request is covered, or once a round leaves its
            # deserved unchanged (capped by its real capability), so the rest goes to the others.
            if le_all(space, s.request, new) or np.array_equal(new, old):
                met.add(i)
            diff = new - old
            grown += np.maximum(diff, 0.0)
            shrunk += np.maximum(-diff, 0.0)
        remaining = remaining - grown + shrunk
        quota = space.quota
        if np.all(remaining[quota] < 0.1) or np.allclose(remaining, before, rtol=0, atol=1e-6):
            break


class ProportionArgs(Args):
    within_deserved: bool = Field(False, alias="proportion.enqueueWithinDeserved")
    """Admit a job only while its queue's admitted work stays within its deserved share, unless
    no other queue wants more (Caldera's; off is Volcano's rule: within the queue's real
    capability). On, jobs admitted beyond their queue's share cannot hold the admission budget
    that other queues' jobs need; the shipped policies turn it on."""


class ProportionPlugin(Plugin[ProportionArgs]):
    name: ClassVar[str] = "proportion"
    Args = ProportionArgs

    def on_session_open(self, ssn: SessionView) -> None:
        space = ssn.space
        total = ssn.snapshot.total_allocatable()
        guaranteed = space.zeros()
        for queue in ssn.queues.values():
            guaranteed += queue.guarantee
        free = np.maximum(total - guaranteed, 0.0)
        shares: dict[str, QueueShare] = {}
        table = ssn.job_table
        # As in Volcano, only queues that have jobs share the cluster; the guarantees of the
        # others still hold capacity back through every queue's real capability.
        names = sorted(table.queue_names() & set(ssn.queues))
        allocated, request, inqueue, elastic = table.queue_sums(names)
        for i, name in enumerate(names):
            queue = ssn.queues[name]
            shares[name] = QueueShare(
                queue=queue,
                allocated=allocated[i],
                request=request[i],
                inqueue=inqueue[i],
                elastic=elastic[i],
                real_capability=np.minimum(queue.capability, free + queue.guarantee),
                deserved=space.zeros(),
            )
        counted: set[str] = set()
        """Queues with pending work that asks for resources the shares count."""
        for row in table.pending:
            job = table.jobs[row]
            if job.queue in shares and any(
                task.resreq[space.quota].any()
                for task in job.by_status[TaskStatus.PENDING].values()
            ):
                counted.add(job.queue)
        water_fill(space, total, list(shares.values()))
        for s in shares.values():
            s.meter = ShareMeter(space, s.deserved)
            s.share = s.meter(s.allocated)
            ssn.result.deserved[s.queue.name] = space.to_quantities(s.deserved)
        self.shares = shares

        def update(task: Task, sign: float) -> None:
            job = ssn.jobs.get(task.job)
            s = shares.get(job.queue) if job is not None else None
            if s is not None and s.meter is not None:
                s.allocated += sign * task.resreq
                s.share = s.meter(s.allocated)

        def queue_key(queue: Queue) -> tuple[int, float]:
            s = shares.get(queue.name)
            return (-queue.priority, s.share if s is not None else 0.0)

        def overused(queue: Queue) -> bool:
            s = shares.get(queue.name)
            if s is None or not s.allocated[space.quota].any() or queue.name not in counted:
                # a queue that holds nothing is not over any share, and one whose pending work
                # asks only for resources a plugin accounts for itself (shared GPUs: their
                # quota is the namespace's) takes nothing from any share
                return False
            return le_all(space, s.deserved, s.allocated)

        def allocatable(queue: Queue, task: Task) -> bool:
            s = shares.get(queue.name)
            if s is None:
                return False
            if not queue.is_open:
                ssn.refuse(task, queue.closed_reason)
                return False
            if le_where(space, s.allocated + task.resreq, s.deserved, task.resreq):
                return True
            over = overrun(
                space, [(s.allocated, "held"), (task.resreq, "requested")], s.deserved, "deserved"
            )
            ssn.refuse(task, f"queue {queue.name} is at its deserved share: {over}")
            return False

        def within_share(s: QueueShare, need: Vector, minimum: Vector) -> bool:
            """With ``proportion.enqueueWithinDeserved``: a queue whose admitted work would pass
            its deserved share admits no more while another queue still wants resources, so
            jobs it could not run anyway do not hold the cluster's admission budget."""
            if not self.args.within_deserved:
                return True
            if le_where(space, need, s.deserved, minimum):
                return True
            return not any(
                other is not s
                and np.any((other.request > other.allocated + other.inqueue)[space.quota])
                for other in shares.values()
            )

        def enqueueable(job: Job) -> int:
            s = shares[job.queue]
            if not s.queue.is_open:
                job.fit_error = s.queue.closed_reason
                return REJECT
            if job.min_resources is None:
                return PERMIT
            need = job.min_resources + s.allocated + s.inqueue - s.elastic
            fits = le_where(space, need, s.real_capability, job.min_resources)
            if fits and within_share(s, need, job.min_resources):
                return PERMIT
            if fits:
                # within its capability but past its deserved share while others wait
                share = space.describe(s.deserved)
                msg = f"queue {s.queue.name} is at its deserved share ({share})"
                msg += " while other queues wait"
            else:
                short = short_names(space, need, s.real_capability, job.min_resources)
                detail = ", ".join(f"insufficient {n}" for n in short)
                msg = "queue resource quota insufficient" + (f": {detail}" if detail else "")
            job.fit_error = msg
            ssn.record_event(job, "Normal", "Unschedulable", msg)
            return REJECT

        def enqueued(job: Job) -> None:
            if job.min_resources is not None:
                shares[job.queue].inqueue += job.min_resources

        def reclaimable(_: Task, reclaimees: Sequence[Task]) -> tuple[list[Task], int]:
            # Volcano's proportion ReclaimableFn: a victim while its queue (less the victims
            # already offered) holds more than it deserves. The "queue holds less than the
            # reclaimer asks" guard is gone from Volcano (2025): the node's idle room and
            # other queues' victims count towards the reclaim too.
            left: dict[str, Vector] = {}
            victims = []
            for task in reclaimees:
                s = shares[ssn.jobs[task.job].queue]
                alloc = left.setdefault(s.queue.name, s.allocated.copy())
                if not le_all(space, alloc, s.deserved):
                    alloc -= task.resreq
                    victims.append(task)
            return victims, PERMIT

        ssn.queue_order_point.add_key(self.name, queue_key)
        ssn.overused_point.add(self.name, overused)
        ssn.allocatable_point.add(self.name, allocatable)
        ssn.preemptive_point.add(self.name, allocatable)
        ssn.job_enqueueable_point.add(self.name, enqueueable)
        ssn.job_enqueued_point.add(self.name, enqueued)
        ssn.reclaimable_point.add(self.name, reclaimable)
        ssn.event_handlers.add(self.name, EventHandler.counting(update, reservations=True))
