"""capacity: elastic queues by ``deserved``, ``capability`` and ``guarantee``, optionally a tree.

As Volcano 1.15's ``plugins/capacity/capacity.go``. Each queue has what it deserves
(``spec.deserved``; a resource it leaves out is deserved as 0, and a queue without deserved is
best-effort), what it may never pass (its *real capability*) and what it is guaranteed
(``spec.guarantee``), per resource, scalar resources included.

- **Real capability.** Flat (``buildQueueAttrs``): ``min(capability, cluster − Σ guarantees +
  own guarantee)``, and deserved is capped by it. With ``enableHierarchy``
  (``buildHierarchicalQueueAttrs``, ``checkHierarchicalQueue``) the queues form the tree of
  their ``spec.parent`` (``root`` at the top): root's capability is its own or unbounded (users
  may submit more than the cluster holds), root deserves and is guaranteed what its children
  are, and a child's real capability is its parent's less the guarantees of the parent's
  children, plus its own guarantee, within its own capability (cpu and memory it leaves out are
  its parent's). A queue's allocation includes its descendants'. Jobs run only in leaf queues: a
  job of a queue with children waits and says so.
- **Allocatable**: the task keeps the queue and each ancestor within real capability.
- **Enqueueable** (``jobEnqueueable``): the job's minResources, with what the queue holds and
  has admitted (what of their minResources its Inqueue and started jobs do not hold yet), less
  what its jobs hold past their minResources (``elastic``), fit its real capability (and each
  ancestor's).
- **No Overused**: capacity does not stop a queue's turn in reclaim (Volcano has none).
- **Queue order**: higher ``spec.priority`` first, then the smaller share of deserved (a queue
  without deserved has share 1), a queue with deserved first on a tie. With the hierarchy a leaf
  queue goes before a parent, and two leaves are compared by the shares of their ancestors just
  below where their paths part (``QueueOrderFn`` of ``buildHierarchicalQueueAttrs``).
- **Preemptive** (may reclaim, ``AddPreemptiveFn``): the task keeps the queue within its real
  capability on the resources it requests, and *some* requested resource stays within deserved
  (resources where both are ~0 are not compared); with the hierarchy and
  ``ancestorReclaimLevel`` L > 0, an ancestor at depth 1..L (not root) within its deserved
  that way will do.
- **Reclaimable** (``AddReclaimableFn``), in victim order: a candidate that shares no requested
  resource with the reclaimer is skipped; none that would break its queue's guarantee; one
  whose queue's deserved names none of its resources is a victim at once; otherwise its queue
  (less the victims already offered) must hold more than deserved in a resource it uses that
  the deserved is about (cpu and memory where deserved is at least 0.1, another resource where
  deserved names it: ``GreaterPartlyWithRelevantDimensions``), so a queue within its GPU
  deserved keeps a pod that also uses cpu; with the hierarchy and L > 0, its ancestors at depth
  1..L (not root, not shared with the reclaimer) must too, by the same rule.
- **Victim queue order** (hierarchy): victims of the queue sharing the deeper common ancestor
  with the preemptor's come first.

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
import numpy.typing as npt
from pydantic import Field

from caldera.api.compare import EPS, le_all, le_where, overrun
from caldera.api.job import Job
from caldera.api.queue import Queue
from caldera.api.resources import CPU_MEMORY, ResourceSpace, Vector
from caldera.api.task import Task
from caldera.framework.intents import Event
from caldera.framework.interfaces import EventHandler, SessionView
from caldera.framework.plugin import Args, Plugin
from caldera.framework.points import PERMIT, REJECT

__all__ = ["CapacityArgs", "CapacityPlugin"]

log = logging.getLogger(__name__)
ROOT = "root"


class CapacityArgs(Args):
    ancestor_reclaim_level: int = Field(0, ge=0, alias="ancestorReclaimLevel")
    dra: bool = Field(False, alias="capacity.DynamicResourceAllocationEnable")
    dra_consumable: bool = Field(False, alias="capacity.DRAConsumableCapacityEnable")


@dataclass(slots=True)
class _Attr:
    """Volcano's ``queueAttr``."""

    queue: Queue
    parent: str
    deserved: Vector
    capability: Vector
    guarantee: Vector
    real_capability: Vector
    allocated: Vector
    inqueue: Vector
    elastic: Vector
    """What the queue's jobs hold past their ``minResources`` (enqueue counts it as free)."""
    ancestors: list[str] = field(default_factory=list)
    """Root first, the parent last (Volcano's ``ancestors``); empty without the hierarchy."""
    children: list[str] = field(default_factory=list)
    named: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    """The resources the deserved names (its keys in Volcano: the spec's deserved and
    guarantee; root's, its children's)."""

    @property
    def chain(self) -> list[str]:
        """This queue, then its ancestors, nearest first."""
        return [self.queue.name, *reversed(self.ancestors)]


def _both(space: ResourceSpace, a: Vector, b: Vector) -> bool:
    """Some quota resource is non-zero in both (Volcano's ``Intersection``)."""
    return bool(np.any(space.quota & (a > EPS) & (b > EPS)))


def _partly_within(space: ResourceSpace, used: Vector, deserved: Vector, req: Vector) -> bool:
    """``LessEqualPartlyWithDimensionZeroFiltered``: in some resource the request asks for
    (leaving out those where ``used`` and ``deserved`` are both ~0), ``used`` ≤ ``deserved``."""
    dims = space.quota & (req > 0) & ~((used < EPS) & (deserved < EPS))
    return bool(np.any((used <= deserved + EPS)[dims]))


def _over_relevant(space: ResourceSpace, held: Vector, a: _Attr, req: Vector) -> bool:
    """``Resource.GreaterPartlyWithRelevantDimensions`` (``api/resource_info.go``), as
    ``checkDeservedExceedance`` calls it: ``held`` > the queue's deserved in a resource ``req``
    asks for, where the deserved is about it: cpu and memory where the deserved is at least
    ``minResource``, any other resource where the deserved names it."""
    relevant = space.quota & (req > 0) & a.named
    relevant[CPU_MEMORY] = (req[CPU_MEMORY] > 0) & (a.deserved[CPU_MEMORY] >= EPS)
    return bool(np.any((held > a.deserved)[relevant]))


class CapacityPlugin(Plugin[CapacityArgs]):
    name: ClassVar[str] = "capacity"
    Args = CapacityArgs
    supports_hierarchy: ClassVar[bool] = True

    def on_session_open(self, ssn: SessionView) -> None:
        space = ssn.space
        hierarchy = self.option.hierarchy
        level = self.args.ancestor_reclaim_level
        attrs = self._build(ssn, hierarchy)
        names = sorted(attrs)
        # capacity.go's buildQueueAttrs / buildHierarchicalQueueAttrs: per queue (the settled
        # jobs' sums included), what every job holds, what admission counts it as holding
        # (util.GetInqueueResource: its minResources less what it holds, while Inqueue or
        # Running with minMember placed) and what it holds past its minResources
        # (JobInfo.GetElasticResources), each added up the queue's chain of ancestors
        held, _, inqueue, elastic = ssn.job_table.queue_sums(names)
        for i, name in enumerate(names):
            for up in attrs[name].chain:
                attrs[up].allocated += held[i]
                attrs[up].inqueue += inqueue[i]
                attrs[up].elastic += elastic[i]

        def chain(queue: str) -> list[_Attr]:
            a = attrs.get(queue)
            return [attrs[q] for q in a.chain] if a is not None else []

        def share(a: _Attr) -> float:
            """``updateQueueAttrShare``: 1 for a best-effort queue (no deserved)."""
            dims = space.quota & (a.deserved > EPS)
            if not dims.any():
                return 1.0  # best-effort: after every queue still under its deserved
            return float(np.max(a.allocated[dims] / a.deserved[dims]))

        def not_leaf(queue: str) -> str:
            a = attrs.get(queue)
            if hierarchy and a is not None and a.children:
                return (
                    f"queue {queue} has child queues ({', '.join(sorted(a.children))}): with "
                    "capacity's enableHierarchy jobs run only in leaf queues"
                )
            return ""

        told: set[str] = set()
        """Jobs of a parent queue already told so this session (one event each)."""

        def allocatable(queue: Queue, task: Task) -> bool:
            if not queue.is_open:
                ssn.refuse(task, queue.closed_reason)
                return False
            why = not_leaf(queue.name)
            if why:
                ssn.refuse(task, why)
                job = ssn.jobs.get(task.job)
                if job is not None and job.uid not in told:
                    told.add(job.uid)
                    ssn.record_event(job, "Warning", "Unschedulable", why)
                return False
            return all(within_capability(a, task) for a in chain(queue.name))

        def refuse_over(a: _Attr, task: Task, limit: Vector, what: str, state: str) -> bool:
            """Tell ``task`` why queue ``a`` cannot take it (held + requested > ``limit``)."""
            terms = [(a.allocated, "held"), (task.resreq, "requested")]
            over = overrun(space, terms, limit, what)
            ssn.refuse(task, f"queue {a.queue.name} is {state}: {over}")
            return False

        def within_capability(a: _Attr, task: Task) -> bool:
            """The task keeps queue ``a`` within its real capability (else it is told why)."""
            if le_where(space, a.allocated + task.resreq, a.real_capability, task.resreq):
                return True
            return refuse_over(a, task, a.real_capability, "capability", "at its capability")

        def preemptive(queue: Queue, task: Task) -> bool:
            a = attrs.get(queue.name)
            if not queue.is_open or a is None:
                return False
            if not within_capability(a, task):
                return False
            used = a.allocated + task.resreq
            if _partly_within(space, used, a.deserved, task.resreq):
                return True
            if hierarchy and level > 0:
                for depth in range(1, level + 1):
                    if depth > len(a.ancestors) or a.ancestors[-depth] == ROOT:
                        continue
                    up = attrs[a.ancestors[-depth]]
                    if _partly_within(space, up.allocated + task.resreq, up.deserved, task.resreq):
                        return True
            return refuse_over(a, task, a.deserved, "deserved", "beyond its deserved share")

        def enqueueable(job: Job) -> int:
            why = not_leaf(job.queue)
            if why:
                job.fit_error = why
                if job.uid not in told:
                    told.add(job.uid)
                    ssn.record_event(job, "Warning", "Unschedulable", why)
                return REJECT
            if job.min_resources is None:
                return PERMIT
            for a in chain(job.queue):  # jobEnqueueable, leaf first
                need = job.min_resources + a.allocated + a.inqueue - a.elastic
                if not le_where(space, need, a.real_capability, job.min_resources):
                    msg = f"queue resource quota insufficient (queue {a.queue.name})"
                    job.fit_error = msg
                    ssn.record_event(job, "Normal", "Unschedulable", msg)
                    return REJECT
            return PERMIT

        def enqueued(job: Job) -> None:
            if job.min_resources is not None:
                for a in chain(job.queue):
                    a.inqueue += job.min_resources

        def reclaimable(reclaimer: Task, reclaimees: Sequence[Task]) -> tuple[list[Task], int]:
            mine = attrs.get(ssn.jobs[reclaimer.job].queue) if reclaimer.job in ssn.jobs else None
            if mine is None:
                return [], REJECT
            left: dict[str, Vector] = {}
            victims: list[Task] = []
            for task in ssn.victim_order(reclaimees, reclaimer):
                job = ssn.jobs.get(task.job)
                a = attrs.get(job.queue) if job is not None else None
                if a is None or not _both(space, task.resreq, reclaimer.resreq):
                    continue  # shouldSkipReclaimee
                held = left.setdefault(a.queue.name, a.allocated.copy())
                if not le_all(space, a.guarantee, held - task.resreq):
                    continue  # checkGuaranteeConstraint
                if not _both(space, task.resreq, a.deserved):  # isImmediateVictim
                    shares = hierarchy and level > 0 and _shares_ancestor(mine, a, level)
                    if shares and not _both(space, reclaimer.resreq, mine.deserved):
                        continue
                elif not _over_relevant(space, held, a, task.resreq):
                    continue  # checkDeservedExceedance
                ups: list[Vector] = []
                if (
                    hierarchy
                    and level > 0
                    and not self._ancestors_over(space, attrs, left, mine, a, task, level, ups)
                ):
                    continue
                held -= task.resreq
                for up in ups:
                    up -= task.resreq
                victims.append(task)
            return victims, PERMIT

        def depth_shared(queue: Queue, preemptor: Queue) -> int:
            """``getQueueLevel``: the deeper the common ancestor, the earlier (lower key)."""
            a, b = attrs.get(queue.name), attrs.get(preemptor.name)
            return 0 if a is None or b is None else -_common_level(a, b)

        def update(task: Task, sign: float) -> None:
            job = ssn.jobs.get(task.job)
            if job is not None:
                for a in chain(job.queue):
                    a.allocated += sign * task.resreq

        def queue_key(q: Queue) -> tuple[int, float, bool]:
            a = attrs.get(q.name)
            if a is None:
                return (-q.priority, 0.0, False)
            # compareShareWithDeserved: on a tie, a queue with deserved first
            return (-q.priority, share(a), not np.any(a.deserved[space.quota] > EPS))

        def by_paths(left: Queue, right: Queue) -> int:
            """The hierarchical ``QueueOrderFn``: priority, then a leaf queue before a parent;
            two parents by their own shares, two leaves by the shares of their ancestors just
            below where their paths part (``getQueueLevel``), with compareShareWithDeserved."""
            if left.priority != right.priority:
                return right.priority - left.priority
            la, ra = attrs.get(left.name), attrs.get(right.name)
            if la is None or ra is None:
                return 0
            if bool(la.children) != bool(ra.children):
                return 1 if la.children else -1
            if not la.children:
                level = _common_level(la, ra)
                la, ra = _below(attrs, la, level), _below(attrs, ra, level)
            return _cmp(queue_key(la.queue)[1:], queue_key(ra.queue)[1:])

        if hierarchy:
            ssn.queue_order_point.add_cmp(self.name, by_paths)
        else:
            ssn.queue_order_point.add_key(self.name, queue_key)
        ssn.allocatable_point.add(self.name, allocatable)
        ssn.preemptive_point.add(self.name, preemptive)
        ssn.job_enqueueable_point.add(self.name, enqueueable)
        ssn.job_enqueued_point.add(self.name, enqueued)
        ssn.reclaimable_point.add(self.name, reclaimable)
        if hierarchy:
            ssn.victim_queue_order_point.add(self.name, depth_shared)
        ssn.event_handlers.add(self.name, EventHandler.counting(update, reservations=True))
        for name, a in attrs.items():
            ssn.result.deserved[name] = space.to_quantities(a.deserved)

    @staticmethod
    def _ancestors_over(
        space: ResourceSpace,
        attrs: dict[str, _Attr],
        left: dict[str, Vector],
        mine: _Attr,
        a: _Attr,
        task: Task,
        level: int,
        ups: list[Vector],
    ) -> bool:
        """With ``ancestorReclaimLevel``: each ancestor of the victim's queue at depth 1..L
        (not root, not the reclaimer's ancestor at that depth) holds more than it deserves in
        a resource the victim uses (``getReclaimeeAncestorToCheck``); their holdings, less the
        victims already offered, go to ``ups``."""
        for depth in range(1, level + 1):
            theirs = a.ancestors[-depth] if depth <= len(a.ancestors) else ""
            if not theirs or theirs == ROOT:
                continue
            ours = mine.ancestors[-depth] if depth <= len(mine.ancestors) else ""
            if ours == theirs:
                continue
            up = attrs.get(theirs)
            if up is None:
                return False
            held = left.setdefault(theirs, up.allocated.copy())
            ups.append(held)
            if not _both(space, task.resreq, up.deserved):
                continue
            if not _over_relevant(space, held, up, task.resreq):
                return False
        return True

    def _build(self, ssn: SessionView, hierarchy: bool) -> dict[str, _Attr]:
        space = ssn.space
        total = ssn.snapshot.total_allocatable()
        inf = np.full(len(space), np.inf)
        attrs: dict[str, _Attr] = {}
        for name, q in ssn.queues.items():
            spec = q.deserved_spec
            deserved = np.where(np.isinf(spec), 0.0, spec) if spec is not None else space.zeros()
            named = ~np.isinf(spec) if spec is not None else np.zeros(len(space), dtype=bool)
            attrs[name] = _Attr(
                q,
                "",
                deserved,
                q.capability.copy(),
                q.guarantee.copy(),
                inf.copy(),
                space.zeros(),
                space.zeros(),
                space.zeros(),
                named=named | (q.guarantee > 0),
            )
        if not hierarchy:
            guarantees = sum((q.guarantee for q in ssn.queues.values()), space.zeros())
            for a in attrs.values():
                free = np.maximum(total - guarantees, 0.0) + a.guarantee
                a.real_capability = np.minimum(a.capability, free)
                a.deserved = np.maximum(np.minimum(a.deserved, a.real_capability), a.guarantee)
            return attrs
        parents = self._parents(ssn)
        for name, a in attrs.items():
            a.parent = parents[name]
            if a.parent in attrs:
                attrs[a.parent].children.append(name)
        if ROOT not in attrs:  # the operator always has it; a bare manifest set may not
            root_queue = Queue(
                ROOT, ROOT, 1, inf.copy(), space.zeros(), None, "", "Open", False, 0, 0.0, {}
            )
            attrs[ROOT] = _Attr(
                root_queue,
                "",
                space.zeros(),
                inf.copy(),
                space.zeros(),
                inf.copy(),
                space.zeros(),
                space.zeros(),
                space.zeros(),
                named=np.zeros(len(space), dtype=bool),
            )
            for name, a in attrs.items():
                if a.parent == ROOT:
                    attrs[ROOT].children.append(name)
        root = attrs[ROOT]
        root.real_capability = root.capability.copy()  # unbounded where root names no amount

        def walk(parent: _Attr, ancestors: list[str]) -> None:
            kids = [attrs[c] for c in sorted(parent.children)]
            guarantees = sum((k.guarantee for k in kids), space.zeros())
            for k in kids:
                k.deserved = np.maximum(k.deserved, k.guarantee)
                k.capability = np.where(np.isinf(k.capability), parent.capability, k.capability)
            if parent.queue.name == ROOT:
                parent.guarantee = guarantees
                parent.deserved = sum((k.deserved for k in kids), space.zeros())
                for k in kids:
                    parent.named = parent.named | k.named
            for k in kids:
                free = np.maximum(parent.real_capability - guarantees, 0.0) + k.guarantee
                k.real_capability = np.minimum(free, k.capability)
                k.ancestors = [*ancestors, parent.queue.name]
                walk(k, k.ancestors)

        walk(root, [])
        return attrs

    def _parents(self, ssn: SessionView) -> dict[str, str]:
        """Each queue's parent; a queue whose place in the tree is invalid hangs under root."""
        queues = ssn.queues
        parents = {name: "" if name == ROOT else (q.parent or ROOT) for name, q in queues.items()}
        in_cycle: set[str] = set()
        for name in queues:
            seen: list[str] = []
            at = name
            while at and at in parents and at not in seen:
                seen.append(at)
                at = parents[at]
            if at == name:
                in_cycle.update(seen)  # every queue of a cycle hangs under root
        for name, q in sorted(queues.items()):
            problem = ""
            parent = parents[name]
            if name in in_cycle:
                problem = f"spec.parent: queue {name!r} is its own ancestor (a parent cycle)"
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
            if problem:
                log.warning("queue %s: %s; placed under root for now", name, problem)
                ssn.result.events.append(
                    Event("Queue", "", name, "Warning", "InvalidQueue", problem)
                )
                parents[name] = ROOT
        return parents


def _common_level(a: _Attr, b: _Attr) -> int:
    """``getQueueLevel``: the index of the last ancestor the two paths share (root first),
    counted only while they agree from root down; 0 when they part at once."""
    level = 0
    for i, (x, y) in enumerate(zip(a.ancestors, b.ancestors, strict=False)):
        if x != y:
            break
        level = i
    return level


def _below(attrs: dict[str, _Attr], a: _Attr, level: int) -> _Attr:
    """The ancestor of ``a`` just below ``level`` on its path, or ``a`` itself where the path
    ends there (``QueueOrderFn``'s ``lvParentID``)."""
    return attrs[a.ancestors[level + 1]] if level + 1 < len(a.ancestors) else a


def _cmp(left: tuple[float, bool], right: tuple[float, bool]) -> int:
    return (left > right) - (left < right)


def _shares_ancestor(mine: _Attr, theirs: _Attr, level: int) -> bool:
    """``sharesAnyNonRootAncestorWithinLevel``: the two queues have a common ancestor other
    than root among their ancestors at depth 1..``level``."""
    ours = {mine.ancestors[-d] for d in range(1, level + 1) if d <= len(mine.ancestors)}
    other = {theirs.ancestors[-d] for d in range(1, level + 1) if d <= len(theirs.ancestors)}
    return bool((ours & other) - {ROOT})
