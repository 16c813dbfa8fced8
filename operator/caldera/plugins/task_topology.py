"""task-topology: a job's task roles placed together or apart, as its PodGroup asks.

Follows Volcano's ``task-topology`` plugin (``pkg/scheduler/plugins/task-topology``:
``JobManager.ApplyTaskTopology``, ``ConstructBucket``/``buildBucket``, ``checkTaskSetAffinity``,
``taskAffinityOrder``, the plugin's ``TaskOrderFn``, ``calcBucketScore``/``NodeOrderFn`` and
``AllocateFunc``). PodGroup annotations name the roles (the pods' ``volcano.sh/task-spec``):

- ``volcano.sh/task-topology-affinity: "ps,worker;chief"``: groups separated by ``;``; roles of
  one group like to share nodes, a group of one role likes its own pods together;
- ``volcano.sh/task-topology-anti-affinity``: the same form, to keep apart;
- ``volcano.sh/task-topology-task-order: "ps,worker"``: roles placed first, in that order.

At session open the pending and placed pods of each such job are sorted into *buckets* (pods that
like to share a node; placed pods start one bucket per node). Task order: pods in a bucket before
those outside any, larger buckets first, older buckets first, and inside a bucket by the task
order, then by affinity kind (self anti-affinity, inter affinity, self affinity, inter
anti-affinity). Node score: the bucket's pods already on the node, less the anti-affine pods this
session put there, plus the bucket's pending pods, less one for each of those the node could not
also hold (taken in bucket order; Volcano takes them in map order), times ``task-topology.weight``
(1), scaled to 0–100 by the largest bucket. A node the pod itself does not fit (idle and
releasing) scores 0. A job whose annotations name a role it does not have is left alone (logged
once).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
from pydantic import Field

from caldera.api.job import Job
from caldera.api.resources import Vector
from caldera.api.task import Task, TaskStatus
from caldera.framework.interfaces import EventHandler, IntArray, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.scoring import NodeScorer

__all__ = ["AFFINITY", "ANTI_AFFINITY", "TASK_ORDER", "TaskTopologyArgs", "TaskTopologyPlugin"]

log = logging.getLogger(__name__)

AFFINITY = "volcano.sh/task-topology-affinity"
ANTI_AFFINITY = "volcano.sh/task-topology-anti-affinity"
TASK_ORDER = "volcano.sh/task-topology-task-order"
MAX_NODE_SCORE = 100.0
SELF_ANTI, INTER_AFFINITY, SELF_AFFINITY, INTER_ANTI = 4, 3, 2, 1
"""Volcano's ``affinityPriority``: which kind of rule orders a role first."""
_MEBI = 1024.0 * 1024.0
_warned: set[tuple[str, str]] = set()


class TaskTopologyArgs(Args):
    weight: int = Field(1, alias="task-topology.weight")


@dataclass(slots=True)
class Bucket:
    index: int
    tasks: dict[str, Task] = field(default_factory=dict)
    """Pending tasks, by uid, in the order they joined."""
    roles: Counter[str] = field(default_factory=Counter)
    request: Vector | None = None
    score: float = 0.0
    """``reqScore``: milli-cpu + MiB of memory + every other resource, one unit each."""
    bound: int = 0
    on_node: Counter[int] = field(default_factory=Counter)

    def add(self, role: str, task: Task, req_score: float) -> None:
        self.roles[role] += 1
        if task.node >= 0:
            self.on_node[task.node] += 1
            self.bound += 1
            return
        self.tasks[task.uid] = task
        self.request = task.resreq.copy() if self.request is None else self.request + task.resreq
        self.score += req_score

    def placed(self, task: Task, req_score: float) -> None:
        self.on_node[task.node] += 1
        self.bound += 1
        if self.tasks.pop(task.uid, None) is not None and self.request is not None:
            self.request = self.request - task.resreq
            self.score -= req_score


def parse_groups(raw: str) -> list[list[str]]:
    return [group.split(",") for group in raw.split(";")]


class JobManager:
    """One job's rules and buckets (Volcano's ``JobManager``)."""

    def __init__(self, affinity: list[list[str]], anti: list[list[str]], order: list[str]) -> None:
        self.priority: dict[str, int] = {}
        self.order: dict[str, int] = {role: len(order) - i for i, role in enumerate(order)}
        self.inter: dict[str, set[str]] = {}
        self.self_affine: set[str] = set()
        self.inter_anti: dict[str, set[str]] = {}
        self.self_anti: set[str] = set()
        self._apply(affinity, self.inter, self.self_affine, INTER_AFFINITY, SELF_AFFINITY)
        self._apply(anti, self.inter_anti, self.self_anti, INTER_ANTI, SELF_ANTI)
        self.buckets: list[Bucket] = []
        self.bucket_of: dict[str, int] = {}
        self.role_of: dict[str, str] = {}
        self.largest = 0
        self.on_node: dict[int, Counter[str]] = {}

    def _apply(
        self,
        groups: list[list[str]],
        inter: dict[str, set[str]],
        alone: set[str],
        inter_kind: int,
        self_kind: int,
    ) -> None:
        for group in groups:
            if len(group) == 1:
                alone.add(group[0])
                self._mark(group[0], self_kind)
                continue
            for i, src in enumerate(group):
                for dst in group[:i]:
                    inter.setdefault(src, set()).add(dst)
                    inter.setdefault(dst, set()).add(src)
                self._mark(src, inter_kind)

    def _mark(self, role: str, kind: int) -> None:
        self.priority[role] = max(kind, self.priority.get(role, 0))

    def affinity(self, role: str, counts: Mapping[str, int], *, only_anti: bool) -> int:
        """``checkTaskSetAffinity``: affine pods count +1, anti-affine −1."""
        total = 0
        if not role:
            return total
        for other, count in counts.items():
            same = other == role
            if not only_anti and (
                role in self.self_affine if same else other in self.inter.get(role, ())
            ):
                total += count
            if role in self.self_anti if same else other in self.inter_anti.get(role, ()):
                total -= count
        return total

    def rank(self, left: str, right: str) -> int:
        """``taskAffinityOrder``: 1 when ``left``'s role goes first, -1 when ``right``'s."""
        if left == right:
            return 0
        for table in (self.order, self.priority):
            a, b = table.get(left, 0), table.get(right, 0)
            if a != b:
                return 1 if a > b else -1
        return 0

    def construct(self, tasks: list[Task], req_score: dict[str, float]) -> None:
        """``ConstructBucket``: tasks of roles with rules, sorted, then into buckets."""
        mine = [t for t in tasks if t.role and t.role in self.priority]
        for t in mine:
            self.role_of[t.uid] = t.role
        mine.sort(
            key=lambda t: (
                t.node < 0,
                t.node_name if t.node >= 0 else "",
                -self.order.get(t.role, 0),
                -self.priority.get(t.role, 0),
                t.name,
            )
        )
        by_node: dict[int, Bucket] = {}
        for task in mine:
            chosen: Bucket | None = None
            best = -(2**31)
            if task.node >= 0:
                best = 0
                chosen = by_node.get(task.node)
            else:
                for bucket in self.buckets:
                    aff = self.affinity(task.role, bucket.roles, only_anti=False)
                    if aff > best or (
                        aff == best and chosen is not None and bucket.score < chosen.score
                    ):
                        best, chosen = aff, bucket
            if best < 0 or chosen is None:
                chosen = Bucket(len(self.buckets))
                self.buckets.append(chosen)
                if task.node >= 0:
                    by_node[task.node] = chosen
            self.bucket_of[task.uid] = chosen.index
            chosen.add(task.role, task, req_score[task.uid])
            self.largest = max(self.largest, len(chosen.tasks) + chosen.bound)

    def bucket(self, task: Task) -> Bucket | None:
        index = self.bucket_of.get(task.uid)
        return None if index is None else self.buckets[index]


class TaskTopologyPlugin(Plugin[TaskTopologyArgs]):
    name: ClassVar[str] = "task-topology"
    Args = TaskTopologyArgs

    def on_session_open(self, ssn: SessionView) -> None:
        space, nodes = ssn.space, ssn.nodes
        weights = np.ones(len(space), dtype=np.float64)
        for name in ("memory", "ephemeral-storage"):
            if name in space.index:
                weights[space.index[name]] = 1.0 / _MEBI
        weights[space.index["pods"]] = 0.0
        managers: dict[str, JobManager] = {}
        scores: dict[str, float] = {}
        for job in ssn.active_jobs():  # a settled job is an in-memory group: no annotation
            manager = self._manager(job)
            if manager is None:
                continue
            tasks = list(job.tasks.values())
            for t in tasks:
                scores[t.uid] = float(t.resreq @ weights)
            manager.construct(tasks, scores)
            managers[job.uid] = manager
        if not managers:
            return

        def order(left: Task, right: Task) -> int:
            lm, rm = managers.get(left.job), managers.get(right.job)
            if lm is None or rm is None:
                return 0
            lb, rb = lm.bucket(left), rm.bucket(right)
            if (lb is None) != (rb is None):
                return -1 if lb is not None else 1
            if left.job != right.job or lb is None or rb is None:
                return 0
            if len(lb.tasks) != len(rb.tasks):
                return -1 if len(lb.tasks) > len(rb.tasks) else 1
            if lb.index == rb.index:
                return -lm.rank(left.role, right.role)
            return -1 if lb.index < rb.index else 1

        def score(task: Task, rows: IntArray) -> Vector | float:
            manager = managers.get(task.job)
            bucket = manager.bucket(task) if manager is not None else None
            if manager is None or bucket is None:
                return 0.0
            room = nodes.idle[rows] + nodes.releasing[rows]
            cols = nodes.space.fit_columns(task.resreq)
            fits = (room[:, cols] >= task.resreq[cols]).all(axis=1)
            # per node: the bucket's pods there, less the anti-affine pods placed there this
            # session (both kept for the few nodes they touch, spread over all nodes at once)
            extra = np.zeros(len(nodes), dtype=np.float64)
            for row, count in bucket.on_node.items():
                extra[row] += count
            for row, counts in manager.on_node.items():
                extra[row] += min(manager.affinity(task.role, counts, only_anti=True), 0)
            base = extra[rows] + len(bucket.tasks)
            if bucket.request is not None:
                base -= _to_shed(bucket, task, room)
            result: Vector = np.where(fits, base, 0.0) * self.args.weight
            if manager.largest:
                result = result * MAX_NODE_SCORE / manager.largest
            return result

        def placed(task: Task) -> None:
            manager = managers.get(task.job)
            if manager is None or task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED):
                return
            if task.role:
                manager.on_node.setdefault(task.node, Counter())[task.role] += 1
            bucket = manager.bucket(task)
            if bucket is not None:
                bucket.placed(task, scores.get(task.uid, 0.0))

        ssn.task_order_point.add_cmp(self.name, order)
        ssn.node_order_point.add(self.name, NodeScorer(score))
        ssn.event_handlers.add(self.name, EventHandler(allocate=placed))

    def _manager(self, job: Job) -> JobManager | None:
        """The job's rules (Volcano's ``readTopologyFromPgAnnotations``), if it has pending
        tasks and annotations naming only roles it has."""
        raw = {k: job.annotations.get(k, "") for k in (AFFINITY, ANTI_AFFINITY, TASK_ORDER)}
        if not any(raw.values()) or not job.count(TaskStatus.PENDING):
            return None
        roles = {t.role for t in job.tasks.values()}
        affinity = parse_groups(raw[AFFINITY]) if raw[AFFINITY] else []
        anti = parse_groups(raw[ANTI_AFFINITY]) if raw[ANTI_AFFINITY] else []
        order = raw[TASK_ORDER].split(",") if raw[TASK_ORDER] else []
        for key, groups in ((AFFINITY, affinity), (ANTI_AFFINITY, anti), (TASK_ORDER, [order])):
            problem = _check(groups, roles)
            if problem:
                if (job.uid, problem) not in _warned:
                    _warned.add((job.uid, problem))
                    log.warning(
                        "job %s: %s: %s; task-topology leaves it alone", job.uid, key, problem
                    )
                return None
        return JobManager(affinity, anti, order)


def _check(groups: list[list[str]], roles: set[str]) -> str:
    """Volcano's ``affinityCheck``: every named role exists, none twice in a group."""
    for group in groups:
        seen: set[str] = set()
        for role in group:
            if not role:
                continue
            if role not in roles:
                return f"task {role} does not exist in the job"
            if role in seen:
                return f"task {role} is duplicated"
            seen.add(role)
    return ""


def _to_shed(bucket: Bucket, task: Task, room: Vector) -> Vector:
    """Per node, how many of the bucket's other pending pods must be left out for the rest of the
    bucket to fit the node (0 where the whole bucket fits)."""
    assert bucket.request is not None
    others = [t.resreq for uid, t in bucket.tasks.items() if uid != task.uid]
    if not others:
        return np.zeros(len(room), dtype=np.float64)
    remains = bucket.request - np.cumsum(np.array([np.zeros_like(others[0]), *others]), axis=0)
    fits = (remains[:, None, :] <= room[None, :, :]).all(axis=2)  # (k + 1) × nodes
    first = np.where(fits.any(axis=0), fits.argmax(axis=0), len(others))
    return first.astype(np.float64)
