"""The order in which victims are evicted (Volcano's ``BuildVictimsPriorityQueue``), apart from
the session because only the victim searches and capacity's reclaim need it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.task import Task
from caldera.framework.points import Point

__all__ = ["Orders", "victim_order"]


class Orders(Protocol):
    """What the victim order reads of the session: its jobs and queues and their orders."""

    jobs: dict[str, Job]
    queues: dict[str, Queue]
    victim_queue_order_point: Point[Callable[[Queue, Queue], Any]]

    def job_order_key(self) -> Callable[[Job], Any]: ...
    def queue_order_key(self) -> Callable[[Queue], Any]: ...
    def task_order_key(self) -> Callable[[Task], Any]: ...


def victim_order(ssn: Orders, victims: Sequence[Task], preemptor: Task) -> list[Task]:
    """``victims`` in the order Volcano evicts them (``BuildVictimsPriorityQueue``): two
    tasks of one job in reverse task order; of two jobs of one queue, in reverse job
    order; of two queues, by the plugins' victim queue order for the preemptor's queue
    (capacity's hierarchy: the deeper common ancestor first), else in reverse queue order."""
    if len(victims) < 2:
        return list(victims)
    jobs, queues = ssn.jobs, ssn.queues
    by_queue: dict[str, tuple[Any, ...]] = {}
    named = sorted({jobs[v.job].queue for v in victims if v.job in jobs} & set(queues))
    if len(named) > 1:  # one queue (preempt's case): nothing to compare
        mine = queues.get(jobs[preemptor.job].queue) if preemptor.job in jobs else None
        ranked = sorted((queues[n] for n in named), key=ssn.queue_order_key())
        queue_rank = {q.name: i for i, q in enumerate(ranked)}
        plugin_keys = list(ssn.victim_queue_order_point)
        for name in named:
            extra = tuple(fn(queues[name], mine) for fn in plugin_keys) if mine else ()
            by_queue[name] = (*extra, -queue_rank[name])
    owned = {v.job for v in victims}
    job_rank: dict[str, int] = {}
    if len(owned) > 1:
        owners = sorted((jobs[j] for j in owned if j in jobs), key=ssn.job_order_key())
        job_rank = {j.uid: i for i, j in enumerate(owners)}
    task_rank: dict[int, int] = {}
    if len(owned) < len(victims):  # some job offers two: their task order matters
        ranked_tasks = sorted(victims, key=ssn.task_order_key())
        task_rank = {id(t): i for i, t in enumerate(ranked_tasks)}

    def key(t: Task) -> tuple[Any, ...]:
        queue = jobs[t.job].queue if by_queue and t.job in jobs else ""
        return (by_queue.get(queue, ()), -job_rank.get(t.job, -1), -task_rank.get(id(t), 0))

    return sorted(victims, key=key)
