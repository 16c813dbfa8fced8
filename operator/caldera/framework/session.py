"""A scheduling session: one snapshot, the policy's plugins, and the actions that use them.

The session owns the snapshot for its lifetime. Plugins register functions on its extension points
in ``on_session_open``; actions ask the session (``ssn.job_ready(job)``, ``ssn.predicate(task)``…)
and the session combines the plugins' answers with the rule of each point's kind (see
:mod:`caldera.framework.points`). Placement primitives keep the job index, the node table and the
plugins' event handlers in step; decisions accumulate in :attr:`Session.result`. Plugins and
actions see a session as :class:`~caldera.framework.interfaces.SessionView`, and the session sees
a plugin as :class:`~caldera.framework.interfaces.PluginHooks`: neither imports the other.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from caldera.api.hypernode import HyperNodeUsage
from caldera.api.job import Job, ValidateResult
from caldera.api.jobtable import JobTable, SettledJobs, partition
from caldera.api.queue import Queue
from caldera.api.resources import Vector
from caldera.api.snapshot import Snapshot
from caldera.api.task import Gate, Task, TaskStatus
from caldera.framework import points as rules
from caldera.framework.intents import Bind, CycleResult, Event, Evict
from caldera.framework.interfaces import (
    EventHandler,
    HyperNodeScorer,
    IntArray,
    PluginHooks,
    Rejection,
    VictimFn,
)
from caldera.framework.points import Among, OrderPoint, Point, SimulatePoint
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.framework.scoring import NodeScorer, ScoreCache
from caldera.framework.statement import Statement
from caldera.framework.victims import victim_order
from caldera.models.volcano import PodGroupCondition
from caldera.sharding.shard import hard_filter, shared_node

__all__ = ["IntArray", "Session"]  # the node rows its scorers take


class Session:
    def __init__(self, snapshot: Snapshot, policy: Policy, registry: Registry) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.registry = registry
        self.uid = snapshot.session_id
        self.now = snapshot.now
        self.space = snapshot.space
        self.nodes = snapshot.nodes
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.hypernodes = snapshot.hypernodes
        self._hypernode_usage: HyperNodeUsage | None = None
        self.result = CycleResult(session_id=self.uid)
        self.detail = True
        """Keep the per-node reasons only ``caldera explain`` shows (the operator does not)."""
        self.traced = ""
        """The pod (``namespace/name``) whose every refusing node the session keeps (explain)."""
        self.on_bind: Callable[[Bind], None] | None = None
        """Told of each bind the moment it is decided (the operator starts binding before the
        session ends, as Volcano's cache does)."""
        self.plugins: list[PluginHooks] = []
        self.configured_actions = frozenset(a.name for a in policy.actions)

        layout = policy.layout

        def enabled(plugin: str, point: str) -> bool:
            opt = policy.option(plugin)
            return opt is None or opt.enabled(point)

        def point(name: str) -> Any:
            return Point(name, layout, enabled)

        def order(name: str) -> Any:
            return OrderPoint(name, layout, enabled)

        self.job_order_point: OrderPoint[Job] = order("job_order")
        self.queue_order_point: OrderPoint[Queue] = order("queue_order")
        self.task_order_point: OrderPoint[Task] = order("task_order")
        self.job_valid_point: Point[Callable[[Job], ValidateResult | None]] = point("job_valid")
        self.job_enqueueable_point: Point[Callable[[Job], int]] = point("job_enqueueable")
        self.job_enqueued_point: Point[Callable[[Job], None]] = point("job_enqueued")
        self.job_ready_point: Point[Callable[[Job], bool]] = point("job_ready")
        self.job_pipelined_point: Point[Callable[[Job], int]] = point("job_pipelined")
        self.job_starving_point: Point[Callable[[Job], bool]] = point("job_starving")
        self.overused_point: Point[Callable[[Queue], bool]] = point("overused")
        self.allocatable_point: Point[Callable[[Queue, Task], bool]] = point("allocatable")
        self.preemptive_point: Point[Callable[[Queue, Task], bool]] = point("preemptive")
        self.pre_predicate_point: Point[Callable[[Task], str | None]] = point("pre_predicate")
        self.predicate_point: Point[Callable[[Task], Sequence[Rejection]]] = point("predicate")
        self.node_check_point: Point[Callable[[Task, int], str | None]] = point("node_check")
        """Per-node filters too dear to ask about every node (an extender's HTTP predicate):
        asked about the nodes every other filter passed, best score first, until one passes."""
        self.node_order_point: Point[NodeScorer] = point("node_order")
        self.best_node_point: Point[Callable[[Task, IntArray, Vector], int | None]] = point(
            "best_node"
        )
        self.preemptable_point: Point[VictimFn] = point("preemptable")
        self.reclaimable_point: Point[VictimFn] = point("reclaimable")
        self.victim_queue_order_point: Point[Callable[[Queue, Queue], Any]] = point(
            "victim_queue_order"
        )
        """Keys (lower first) ordering a victim's queue for a preemptor's queue (Volcano's
        ``VictimQueueOrderFn``; capacity's hierarchy registers one)."""
        self.victim_tasks_point: Point[Callable[[Sequence[Task]], Sequence[Task]]] = point(
            "victim_tasks"
        )
        """Tasks the shuffle action should evict (tdm, rescheduling): Volcano's
        ``VictimTasks``, the union within a tier, the first tier with any winning."""
        self.victim_filter_point: Point[Callable[[Sequence[Task]], Sequence[Task]]] = point(
            "victim_filter"
        )
        """Guards of the shuffle action's victims: each keeps those it allows (pdb). Volcano
        registers pdb's filter as a ``VictimTasks`` function of its own, so its union offers
        every labelled pod a budget allows; here it only ever removes victims."""
        self.target_job_point: Point[Callable[[Sequence[Job]], Job | None]] = point("target_job")
        self.reserved_nodes_point: Point[Callable[[], None]] = point("reserved_nodes")
        # Multi-cluster and sub-job (HyperNode-aware) points: registered and combined like their
        # whole-job counterparts; until sub-groups land a job is its own single sub-job.
        self.cluster_order_point: OrderPoint[str] = order("cluster_order")
        self.subjob_order_point: OrderPoint[Job] = order("subjob_order")
        self.subjob_ready_point: Point[Callable[[Job], bool]] = point("subjob_ready")
        self.subjob_pipelined_point: Point[Callable[[Job], int]] = point("subjob_pipelined")
        self.hypernode_order_point: Point[HyperNodeScorer] = point("hypernode_order")
        self.simulate_predicate_point = SimulatePoint[Task]("simulate_predicate", layout, enabled)
        self.event_handlers: Point[EventHandler] = point("event_handler")
        self.pre_bind_point: Point[Callable[[Bind], Bind]] = point("pre_bind")
        """PreBind: each returns the bind with the writes the binder makes before binding
        (volumes, claims). Applied the moment a task is bound, so a bind sent ahead of the
        session's end carries them too."""
        self.refusals: dict[str, str] = {}
        """Task UID → why a plugin last refused it room in its queue (``allocatable``)."""
        self.releasable_reasons: set[str] = set()
        """Filter reasons that evicting tasks from the node can cure (a plugin's own resource
        fit, such as shared-device capacity): the victim search looks past them and checks the
        node with ``simulate_predicate`` once it has chosen victims."""
        self._handlers: list[EventHandler] | None = None
        self._keys: dict[str, Callable[[Any], Any]] = {}
        """The order points' sort keys, made once the plugins have registered (``open``)."""
        self._scores: ScoreCache | None = None
        self.job_table = JobTable(self.space, ())
        """The jobs as arrays at open (made by :meth:`open`, before any plugin opens)."""
        self.active: dict[str, Job] = {}
        """The jobs with something to decide (see :func:`~caldera.api.jobtable.is_settled`);
        :meth:`active_jobs` adds the settled ones the session woke."""
        self.settled = SettledJobs(self.space)

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        start = time.perf_counter()
        snapshot = self.snapshot
        if snapshot.active is None or snapshot.settled is None:
            snapshot.active, snapshot.settled = partition(self.space, self.jobs)
        self.active = snapshot.active
        self.settled = snapshot.settled
        self.settled.woken.clear()
        self.job_table = JobTable(self.space, list(self.active.values()), self.settled)
        for tier in self.policy.tiers:
            for opt in tier:
                cls = self.registry.plugin(opt.name)
                plugin = cls(opt.args, opt)
                self.plugins.append(plugin)
                plugin.on_session_open(self)
        if (refuse := hard_filter(snapshot.shard)) is not None:
            self.predicate_point.add_first("sharding", refuse)
        self._handlers = list(self.event_handlers)
        self._reserve_lifted()
        self._keys = {
            "job": self.job_order_key(),
            "queue": self.queue_order_key(),
            "task": self.task_order_key(),
        }
        self.result.timings["open"] = time.perf_counter() - start

    def active_jobs(self) -> list[Job]:
        """The jobs an action that places or reports must visit: the active ones, then the
        settled jobs this session changed (victims), in the order it woke them. The rest have
        nothing to place and nothing to say; victim searches read :attr:`jobs`."""
        woken = self.settled.woken
        active = list(self.active.values())
        return active + woken if woken else active

    def run_actions(self) -> None:
        for spec in self.policy.actions:
            start = time.perf_counter()
            self.registry.action(spec.name)(spec.args).execute(self)
            self.result.timings[spec.name] = time.perf_counter() - start

    # -- ordering ----------------------------------------------------------------------------

    def job_order_key(self) -> Callable[[Job], Any]:
        """Plugins' job order, then PodGroup creation time, then the job ID ``namespace/name``
        (Volcano's ``JobOrderFn`` fallback: ``CreationTimestamp``, then ``JobInfo.UID``)."""
        return self._keys.get("job") or self.job_order_point.sort_key(lambda j: (j.creation, j.uid))

    def queue_order_key(self) -> Callable[[Queue], Any]:
        return self._keys.get("queue") or self.queue_order_point.sort_key(
            lambda q: (q.creation, q.uid, q.name)
        )

    def task_order_key(self) -> Callable[[Task], Any]:
        """Plugins' task order, then priority, creation time and name (Volcano's CompareTask)."""
        return self._keys.get("task") or self.task_order_point.sort_key(
            lambda t: (-t.priority, t.creation, t.namespace, t.name)
        )

    # -- job and queue verdicts ---------------------------------------------------------------

    def job_valid(self, job: Job) -> ValidateResult | None:
        return rules.first_result(self.job_valid_point, job)

    def job_enqueueable(self, job: Job) -> bool:
        """Asked with the job's own reservations given back: its request already counts them."""
        pending = job.by_status.get(TaskStatus.PENDING, {}).values()
        with self._given_back([t for t in pending if t.reserved]):
            return rules.vote(self.job_enqueueable_point, job)

    def job_enqueued(self, job: Job) -> None:
        rules.call_all(self.job_enqueued_point, job)

    def job_ready(self, job: Job) -> bool:
        return rules.all_true(self.job_ready_point, job)

    def job_pipelined(self, job: Job) -> bool:
        return rules.vote(self.job_pipelined_point, job)

    def job_starving(self, job: Job) -> bool:
        return rules.first_tier(self.job_starving_point, job)

    def overused(self, queue: Queue) -> bool:
        return rules.any_true(self.overused_point, queue)

    def allocatable(self, queue: Queue, task: Task) -> bool:
        return self._unreserved(self.allocatable_point, queue, task)

    def _unreserved(self, point: Point[Any], queue: Queue, task: Task) -> bool:
        """Ask ``point`` about ``task`` with its own reservation given back for the question
        (it would count twice: as room held and as room asked for)."""
        with self._given_back([task] if task.reserved else []):
            return rules.all_true(point, queue, task)

    @contextlib.contextmanager
    def _given_back(self, tasks: list[Task]) -> Iterator[None]:
        for task in tasks:
            self.reserve(task, -1.0)
        try:
            yield
        finally:
            for task in tasks:
                self.reserve(task, 1.0)

    def refuse(self, task: Task, message: str) -> None:
        """Say why ``task`` may not take room now (a queue's share, a closed queue): the
        pending message names it instead of a generic one."""
        self.refusals[task.uid] = message

    def preemptive(self, queue: Queue, task: Task) -> bool:
        return self._unreserved(self.preemptive_point, queue, task)

    # -- nodes ----------------------------------------------------------------------------------

    def pre_predicate(self, task: Task) -> str | None:
        return rules.first_result(self.pre_predicate_point, task)

    def predicate(self, task: Task) -> list[Rejection]:
        return rules.concat(self.predicate_point, task)

    def node_check(self, task: Task, node: int) -> str | None:
        """Why a per-node check refuses ``task`` on row ``node`` (None: every check passes)."""
        return rules.first_result(self.node_check_point, task, node)

    def simulate_predicate(
        self,
        task: Task,
        node: int,
        removed: Sequence[Task] = (),
        added: Sequence[Task] = (),
        among: Among = "all",
    ) -> list[str]:
        """Why ``task`` would not fit node ``node`` with ``removed`` gone and ``added`` placed
        (empty: it would fit, as far as the node-state filters can tell), asking the plugins
        ``among`` (:class:`SimulatePoint`). Session state is not touched; preemption uses this to
        try victims."""
        return self.simulate_predicate_point.ask(task, node, removed, added, among)

    def node_order(self, task: Task, candidates: IntArray) -> Vector:
        """Summed weighted node scores of ``task`` on the candidate rows."""
        if self._scores is None:
            self._scores = ScoreCache(self.nodes, self.node_order_point)
        return self._scores.score(task, candidates)

    def best_node(self, task: Task, candidates: IntArray, scores: Vector) -> int | None:
        for fn in self.best_node_point:
            choice = fn(task, candidates, scores)
            if choice is not None:
                return choice
        return None

    def hypernode_order(self, job: Job, hypernodes: IntArray) -> Vector:
        """Summed plugin scores of the HyperNodes ``hypernodes`` (indices into
        :attr:`hypernodes`), each already weighted, like node order."""
        scores: Vector = np.zeros(len(hypernodes))
        for fn in self.hypernode_order_point:
            scores += fn(job, hypernodes)
        return scores

    @property
    def hypernode_usage(self) -> HyperNodeUsage | None:
        """Per-HyperNode allocatable and free resources, kept current (None: no HyperNodes)."""
        if self._hypernode_usage is None and self.hypernodes is not None:
            self._hypernode_usage = HyperNodeUsage(self.hypernodes, self.nodes)
        return self._hypernode_usage

    # -- jobs: targets, reservations, sub-jobs ---------------------------------------------

    def target_job(self, jobs: Sequence[Job]) -> Job | None:
        """The job a reclaim should serve first: the first plugin that names one decides."""
        return rules.first_result(self.target_job_point, jobs)

    def reserved_nodes(self) -> None:
        rules.call_all(self.reserved_nodes_point)

    def subjob_order_key(self) -> Callable[[Job], Any]:
        return self.subjob_order_point.sort_key(lambda j: (j.creation, j.uid))

    def subjob_ready(self, job: Job) -> bool:
        return rules.all_true(self.subjob_ready_point, job)

    def subjob_pipelined(self, job: Job) -> bool:
        return rules.vote(self.subjob_pipelined_point, job)

    # -- victims ------------------------------------------------------------------------------

    def preemptable(self, preemptor: Task, preemptees: Sequence[Task]) -> list[Task] | None:
        return rules.intersection(self.preemptable_point, preemptor, preemptees)

    def reclaimable(self, reclaimer: Task, reclaimees: Sequence[Task]) -> list[Task] | None:
        return rules.intersection(self.reclaimable_point, reclaimer, reclaimees)

    def refusals_of(
        self, point: Point[VictimFn], actor: Task, candidates: Sequence[Task]
    ) -> dict[str, list[Task]]:
        """Plugin → the candidates it does not offer as victims of ``actor`` (plugins that
        abstain are left out): why the victim tiers came up empty, for ``caldera explain``."""
        out: dict[str, list[Task]] = {}
        for name, fn in point.named():
            chosen, verdict = fn(actor, candidates)
            if verdict == rules.ABSTAIN:
                continue
            keep = {id(v) for v in chosen}
            refused = [c for c in candidates if id(c) not in keep]
            if refused:
                out[name] = refused
        return out

    def victim_order(self, victims: Sequence[Task], preemptor: Task) -> list[Task]:
        """``victims`` in the order Volcano evicts them (:func:`~caldera.framework.victims.
        victim_order`)."""
        return victim_order(self, victims, preemptor)

    def victim_tasks(self, tasks: Sequence[Task]) -> list[Task]:
        """What the victim-choosing plugins offer of ``tasks``, less what a guard forbids."""
        victims = rules.union(self.victim_tasks_point, tasks)
        for guard in self.victim_filter_point:
            if not victims:
                break
            victims = list(guard(victims))
        return victims

    # -- placement primitives (used by Statement) -----------------------------------------------

    def statement(self) -> Statement:
        return Statement(self)

    def _fire(self, task: Task, allocate: bool) -> None:
        handlers = self._handlers if self._handlers is not None else list(self.event_handlers)
        for h in handlers:
            fn = h.allocate if allocate else h.deallocate
            if fn is not None:
                fn(task)

    def reserve(self, task: Task, sign: float) -> None:
        """``task`` takes (1.0) or gives back (-1.0) room in its queue, without a node."""
        for h in self._handlers if self._handlers is not None else self.event_handlers:
            if h.reserve is not None:
                h.reserve(task, sign)
        task.reserved = sign > 0
        self.jobs[task.job].touched = True

    def _reserve_lifted(self) -> None:
        """Pods whose queue-allocation gate was lifted hold their queue's room until placed."""
        for task in (t for j in self.active_jobs() for t in j.tasks_in(TaskStatus.PENDING)):
            if task.gate is Gate.LIFTED:
                self.reserve(task, 1.0)

    def place(self, task: Task, node: int, status: TaskStatus) -> None:
        if task.reserved:
            self.reserve(task, -1.0)  # its reservation becomes its allocation
        self.jobs[task.job].set_status(task, status)
        task.node = node
        task.node_name = self.nodes.names[node]
        self.nodes.add_task(node, task)
        self._fire(task, True)

    def unplace(self, task: Task) -> None:
        self.nodes.remove_task(task.node, task)
        self.jobs[task.job].set_status(task, TaskStatus.PENDING)
        self._fire(task, False)  # handlers still see the node the task leaves
        task.node = -1
        task.node_name = ""
        if task.gate is Gate.LIFTED:
            self.reserve(task, 1.0)

    def release(self, task: Task) -> None:
        self._move(task, TaskStatus.RELEASING)
        self._fire(task, False)

    def unrelease(self, task: Task, previous: TaskStatus) -> None:
        self._move(task, previous)
        self._fire(task, True)

    def _move(self, task: Task, status: TaskStatus) -> None:
        self.nodes.remove_task(task.node, task)
        self.jobs[task.job].set_status(task, status)
        self.nodes.add_task(task.node, task)

    def bind(self, task: Task) -> None:
        """Send an allocated task to the binder."""
        self.jobs[task.job].set_status(task, TaskStatus.BINDING)
        bind = Bind(
            task.namespace,
            task.name,
            task.uid,
            task.node_name,
            dict(task.bind_annotations),
            node_lock=task.node_lock,
            recheck=shared_node(self.snapshot.shard, task.node),
        )
        for pre_bind in self.pre_bind_point:
            bind = pre_bind(bind)
        self.result.binds.append(bind)
        if self.on_bind is not None:
            self.on_bind(bind)

    def evict(self, task: Task, reason: str, preemptor: str = "") -> None:
        self.result.evictions.append(Evict(task.namespace, task.name, task.uid, reason, preemptor))

    def allocate(self, task: Task, node: int) -> None:
        """Place and bind at once (backfill: no gang to wait for)."""
        self.place(task, node, TaskStatus.ALLOCATED)
        self.bind(task)

    # -- status helpers for plugins -----------------------------------------------------------

    def update_podgroup_condition(self, job: Job, condition: PodGroupCondition) -> None:
        """Upsert a condition by type (Volcano keeps one condition per type)."""
        for i, cond in enumerate(job.conditions):
            if cond.type == condition.type:
                job.conditions[i] = condition
                return
        job.conditions.append(condition)

    def record_event(self, job: Job, type_: str, reason: str, message: str) -> None:
        self.result.events.append(
            Event("PodGroup", job.namespace, job.name, type_, reason, message)
        )
