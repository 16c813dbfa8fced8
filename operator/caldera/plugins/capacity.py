"""capacity: elastic queues by ``deserved``, ``capability`` and ``guarantee``, optionally a tree.

Each queue has what it deserves (``spec.deserved``; its real capability in the resources it
leaves out, and in all of them when it has none: such a queue, ``root`` for one, is never
reclaimed from), what it may never pass (``spec.capability``, and the cluster less every other
queue's guarantee: its real capability) and what it is guaranteed (``spec.guarantee``), per
resource, scalar resources included. With ``enableHierarchy`` the queues form the tree of their
``spec.parent`` (``root`` at the top): a queue's allocation includes its descendants', and every
check is made against the queue and all its ancestors.

- **Allocatable**: the task keeps the queue (and each ancestor) within its real capability.
- **Overused**: the queue (or an ancestor) has reached its real capability.
- **Enqueueable**: the job's minResources, with what the queue holds and has admitted, fit its
  real capability (and each ancestor's), as Volcano's capacity checks (volcano #4118).
- **Queue order**: higher ``spec.priority`` first, then the smaller dominant share of deserved.
- **Preemptive** (may reclaim): the task keeps the queue (and each ancestor) within its deserved.
- **Reclaimable**: victims of queues that hold more than they deserve in a resource the victim
  uses (counting the victims already offered); never the reclaimer's own queue or its
  ancestors. With the hierarchy, victims come from the nearest relatives first (siblings before
  cousins), and ``ancestorReclaimLevel`` (0: no limit) bounds how many levels above the
  reclaimer's queue the common ancestor may be. Root's deserved is the whole cluster: it is not
  checked when a queue may reclaim.

A parent cycle, a parent that does not exist, or a child whose guarantee exceeds its parent's is
reported on that Queue (Warning event ``InvalidQueue`` and a log line) and the queue is treated as
a child of ``root`` for the session, never a crash.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.api.compare import le_where, overrun
from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.resources import Vector
from caldera.api.task import Task
from caldera.framework.intents import Event
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import PERMIT, REJECT
from caldera.framework.session import EventHandler, Session

__all__ = ["CapacityArgs", "CapacityPlugin"]

log = logging.getLogger(__name__)
ROOT = "root"


class CapacityArgs(Args):
    ancestor_reclaim_level: int = Field(0, ge=0, alias="ancestorReclaimLevel")
    dra: bool = Field(False, alias="capacity.DynamicResourceAllocationEnable")
    dra_consumable: bool = Field(False, alias="capacity.DRAConsumableCapacityEnable")


@dataclass(slots=True)
class _Node:
    queue: Queue
    parent: str
    deserved: Vector
    real_capability: Vector
    allocated: Vector
    inqueue: Vector
    chain: list[str] = field(default_factory=list)
    """This queue and its ancestors, nearest first (``root`` last)."""


class CapacityPlugin(Plugin[CapacityArgs]):
    name: ClassVar[str] = "capacity"
    Args = CapacityArgs
    supports_hierarchy: ClassVar[bool] = True

    def on_session_open(self, ssn: Session) -> None:
        space = ssn.space
        quota = space.quota
        total = ssn.snapshot.total_allocatable()
        guarantees = sum((q.guarantee for q in ssn.queues.values()), space.zeros())
        parents = self._parents(ssn)
        nodes: dict[str, _Node] = {}
        for name, q in ssn.queues.items():
            real = np.minimum(q.capability, np.maximum(total - guarantees + q.guarantee, 0.0))
            # a resource deserved leaves out is deserved up to the real capability
            deserved = np.minimum(q.deserved_spec, real) if q.deserved_spec is not None else real
            nodes[name] = _Node(q, parents[name], deserved, real, space.zeros(), space.zeros())
        for name, n in nodes.items():
            path, at = [name], n.parent
            while at and at not in path and at in nodes:
                path.append(at)
                at = nodes[at].parent
            n.chain = path if self.option.hierarchy else [name]
        for job in ssn.jobs.values():
            home = nodes.get(job.queue)
            if home is None:
                continue
            for up in home.chain:
                nodes[up].allocated += job.allocated
                if job.phase == "Inqueue" and job.min_resources is not None:
                    nodes[up].inqueue += job.min_resources

        def chain(queue: str) -> list[_Node]:
            n = nodes.get(queue)
            return [nodes[q] for q in n.chain] if n is not None else []

        def share(n: _Node) -> float:
            mask = quota & (n.deserved > 0)
            if not mask.any():
                return float(n.allocated[quota].any())
            return float(np.max(n.allocated[mask] / n.deserved[mask]))

        def allocatable(queue: Queue, task: Task) -> bool:
            if not queue.is_open:
                ssn.refuse(task, queue.closed_reason)
                return False
            for n in chain(queue.name):
                if not le_where(space, n.allocated + task.resreq, n.real_capability, task.resreq):
                    over = overrun(
                        space,
                        [(n.allocated, "held"), (task.resreq, "requested")],
                        n.real_capability,
                        "capability",
                    )
                    ssn.refuse(task, f"queue {n.queue.name} is at its capability: {over}")
                    return False
            return True

        def overused(queue: Queue) -> bool:
            return any(
                n.allocated[quota].any() and bool(np.all((n.allocated >= n.real_capability)[quota]))
                for n in chain(queue.name)
            )

        def preemptive(queue: Queue, task: Task) -> bool:
            # root's deserved is the whole cluster, which reclaim does not grow
            return queue.is_open and all(
                le_where(space, n.allocated + task.resreq, n.deserved, task.resreq)
                for n in chain(queue.name)
                if n.queue.name != ROOT
            )

        def enqueueable(job: Job) -> int:
            if job.min_resources is None:
                return PERMIT
            for n in chain(job.queue):
                need = job.min_resources + n.allocated + n.inqueue
                if not le_where(space, need, n.real_capability, job.min_resources):
                    msg = f"queue resource quota insufficient (queue {n.queue.name})"
                    job.fit_error = msg
                    ssn.record_event(job, "Normal", "Unschedulable", msg)
                    return REJECT
            return PERMIT

        def enqueued(job: Job) -> None:
            if job.min_resources is not None:
                for n in chain(job.queue):
                    n.inqueue += job.min_resources

        def relatives(reclaimer: str, victim: str) -> int:
            """How many levels above the reclaimer's queue their nearest common ancestor is."""
            mine = nodes[reclaimer].chain if reclaimer in nodes else [reclaimer]
            theirs = set(nodes[victim].chain) if victim in nodes else {victim}
            return next((i for i, q in enumerate(mine) if q in theirs), len(mine))

        def reclaimable(reclaimer: Task, reclaimees: Sequence[Task]) -> tuple[list[Task], int]:
            mine = ssn.jobs[reclaimer.job].queue
            ancestors = set(nodes[mine].chain) if mine in nodes else {mine}
            level = self.args.ancestor_reclaim_level
            left: dict[str, Vector] = {}
            found: list[tuple[int, Task]] = []
            for task in reclaimees:
                queue = ssn.jobs[task.job].queue
                if queue in ancestors or queue not in nodes:
                    continue
                distance = relatives(mine, queue)
                if level and distance > level:
                    continue
                holds = left.setdefault(queue, nodes[queue].allocated.copy())
                # Volcano's rule: the queue still holds more than it deserves in a resource
                # the victim uses
                dims = quota & (task.resreq > 0)
                if np.any((holds > nodes[queue].deserved + 1e-9)[dims]):
                    holds -= task.resreq
                    found.append((distance, task))
            if not found:
                return [], PERMIT
            nearest = min(d for d, _ in found)
            return [t for d, t in found if d == nearest], PERMIT

        def update(task: Task, sign: float) -> None:
            job = ssn.jobs.get(task.job)
            if job is not None:
                for n in chain(job.queue):
                    n.allocated += sign * task.resreq

        ssn.queue_order_point.add_key(
            self.name, lambda q: (-q.priority, share(nodes[q.name]) if q.name in nodes else 0.0)
        )
        ssn.allocatable_point.add(self.name, allocatable)
        ssn.overused_point.add(self.name, overused)
        ssn.preemptive_point.add(self.name, preemptive)
        ssn.job_enqueueable_point.add(self.name, enqueueable)
        ssn.job_enqueued_point.add(self.name, enqueued)
        ssn.reclaimable_point.add(self.name, reclaimable)
        ssn.event_handlers.add(self.name, EventHandler.counting(update))
        for name, n in nodes.items():
            ssn.result.deserved[name] = space.to_quantities(n.deserved)

    def _parents(self, ssn: Session) -> dict[str, str]:
        """Each queue's parent; a queue whose place in the tree is invalid hangs under root."""
        queues = ssn.queues
        parents = {name: "" if name == ROOT else (q.parent or ROOT) for name, q in queues.items()}
        for name, q in sorted(queues.items()):
            problem = ""
            parent = parents[name]
            seen = {name}
            at = parent
            while at and at in parents:
                if at in seen:
                    problem = f"spec.parent: queue {name!r} is its own ancestor (a parent cycle)"
                    break
                seen.add(at)
                at = parents[at]
            if not problem and parent and parent != ROOT and parent not in queues:
                problem = f"spec.parent: queue {parent!r} does not exist"
            if not problem and parent in queues and parent != ROOT:
                over = q.guarantee > queues[parent].guarantee + 1e-9
                if np.any(over):
                    names = [ssn.space.names[i] for i in np.flatnonzero(over)]
                    problem = (
                        f"spec.guarantee: {', '.join(names)} exceeds the guarantee of its parent "
                        f"{parent!r}"
                    )
            if problem and self.option.hierarchy:
                log.warning("queue %s: %s; placed under root for now", name, problem)
                ssn.result.events.append(
                    Event("Queue", "", name, "Warning", "InvalidQueue", problem)
                )
                parents[name] = ROOT
        return parents
