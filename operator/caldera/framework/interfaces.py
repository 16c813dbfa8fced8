"""What plugins, actions and the session may call on each other, declared once.

A plugin or an action is handed a session and sees it as :class:`SessionView`: the extension
points it registers on, the snapshot it reads, the verdicts it asks for and the placement it
stages. The session sees a plugin as :class:`PluginHooks`. Both sides depend on these protocols,
not on each other's modules, so :mod:`caldera.framework.plugin` never imports the session and the
session never imports the plugin base classes. :class:`~caldera.framework.session.Session` is the
one implementation of :class:`SessionView`; mypy holds it to the protocol wherever a session is
handed to a plugin or an action.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from caldera.api.hypernode import HyperNodeTree, HyperNodeUsage
from caldera.api.job import Job, ValidateResult
from caldera.api.jobtable import JobTable
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.snapshot import Snapshot
from caldera.api.task import Task
from caldera.framework.intents import Bind, CycleResult
from caldera.framework.outside import Caller
from caldera.framework.points import Among, OrderPoint, Point, SimulatePoint
from caldera.framework.scoring import IntArray, NodeScorer
from caldera.framework.statement import Statement
from caldera.models.volcano import PodGroupCondition

__all__ = [
    "BoolArray",
    "EventHandler",
    "HyperNodeScorer",
    "IntArray",
    "Kept",
    "PluginHooks",
    "PolicyView",
    "Rejection",
    "SessionView",
    "VictimFn",
]

BoolArray = npt.NDArray[np.bool_]
Rejection = tuple[str, BoolArray]
"""A filter's verdict: a reason and the mask (over all nodes) of nodes it rejects for it."""

VictimFn = Callable[[Task, Sequence[Task]], tuple[Sequence[Task], int]]
HyperNodeScorer = Callable[[Job, IntArray], Vector]
"""Scores HyperNodes (indices into the session's HyperNode tree) for a job, weighted."""


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Called whenever a task is placed (allocate, pipeline) or unplaced (discard, evict)."""

    allocate: Callable[[Task], None] | None = None
    deallocate: Callable[[Task], None] | None = None
    reserve: Callable[[Task, float], None] | None = None
    """A task takes (1.0) or gives back (-1.0) queue room without a node (a lifted gate)."""

    @classmethod
    def counting(
        cls, update: Callable[[Task, float], None], *, reservations: bool = False
    ) -> EventHandler:
        """A handler that adds a placed task (``update(task, 1.0)``) and takes an unplaced one
        away (``update(task, -1.0)``); with ``reservations``, reservations count too (quotas)."""
        return cls(
            allocate=lambda t: update(t, 1.0),
            deallocate=lambda t: update(t, -1.0),
            reserve=update if reservations else None,
        )


class PolicyView(Protocol):
    """What a plugin reads of the policy beyond its own entry (:attr:`Plugin.option`)."""

    @property
    def metrics(self) -> Mapping[str, Any]: ...
    @property
    def configurations(self) -> tuple[Mapping[str, Any], ...]: ...


class Kept(Protocol):
    """What outlives a session (the registry): plugins' memory from one session to the next,
    and the way out to systems beyond the cluster."""

    memory: dict[str, Any]
    caller: Caller


class SessionView(Protocol):
    """The session as plugins and actions see it (see :class:`~caldera.framework.session.
    Session` for what each member means)."""

    @property
    def policy(self) -> PolicyView: ...
    @property
    def registry(self) -> Kept: ...

    snapshot: Snapshot
    uid: str
    now: float
    space: ResourceSpace
    nodes: NodeTable
    jobs: dict[str, Job]
    queues: dict[str, Queue]
    hypernodes: HyperNodeTree | None
    result: CycleResult
    detail: bool
    traced: str
    configured_actions: frozenset[str]
    refusals: dict[str, str]
    releasable_reasons: set[str]
    job_table: JobTable

    # -- extension points: plugins register on these in ``on_session_open``
    job_order_point: OrderPoint[Job]
    queue_order_point: OrderPoint[Queue]
    task_order_point: OrderPoint[Task]
    job_valid_point: Point[Callable[[Job], ValidateResult | None]]
    job_enqueueable_point: Point[Callable[[Job], int]]
    job_enqueued_point: Point[Callable[[Job], None]]
    job_ready_point: Point[Callable[[Job], bool]]
    job_pipelined_point: Point[Callable[[Job], int]]
    job_starving_point: Point[Callable[[Job], bool]]
    overused_point: Point[Callable[[Queue], bool]]
    allocatable_point: Point[Callable[[Queue, Task], bool]]
    preemptive_point: Point[Callable[[Queue, Task], bool]]
    pre_predicate_point: Point[Callable[[Task], str | None]]
    predicate_point: Point[Callable[[Task], Sequence[Rejection]]]
    node_check_point: Point[Callable[[Task, int], str | None]]
    node_order_point: Point[NodeScorer]
    best_node_point: Point[Callable[[Task, IntArray, Vector], int | None]]
    preemptable_point: Point[VictimFn]
    reclaimable_point: Point[VictimFn]
    victim_queue_order_point: Point[Callable[[Queue, Queue], Any]]
    victim_tasks_point: Point[Callable[[Sequence[Task]], Sequence[Task]]]
    victim_filter_point: Point[Callable[[Sequence[Task]], Sequence[Task]]]
    target_job_point: Point[Callable[[Sequence[Job]], Job | None]]
    reserved_nodes_point: Point[Callable[[], None]]
    cluster_order_point: OrderPoint[str]
    subjob_order_point: OrderPoint[Job]
    subjob_ready_point: Point[Callable[[Job], bool]]
    subjob_pipelined_point: Point[Callable[[Job], int]]
    hypernode_order_point: Point[HyperNodeScorer]
    simulate_predicate_point: SimulatePoint[Task]
    event_handlers: Point[EventHandler]
    pre_bind_point: Point[Callable[[Bind], Bind]]

    # -- what actions (and plugins acting for them) ask
    def active_jobs(self) -> list[Job]: ...
    def job_order_key(self) -> Callable[[Job], Any]: ...
    def queue_order_key(self) -> Callable[[Queue], Any]: ...
    def task_order_key(self) -> Callable[[Task], Any]: ...
    def subjob_order_key(self) -> Callable[[Job], Any]: ...
    def job_valid(self, job: Job) -> ValidateResult | None: ...
    def job_enqueueable(self, job: Job) -> bool: ...
    def job_enqueued(self, job: Job) -> None: ...
    def job_ready(self, job: Job) -> bool: ...
    def job_pipelined(self, job: Job) -> bool: ...
    def job_starving(self, job: Job) -> bool: ...
    def subjob_ready(self, job: Job) -> bool: ...
    def subjob_pipelined(self, job: Job) -> bool: ...
    def overused(self, queue: Queue) -> bool: ...
    def allocatable(self, queue: Queue, task: Task) -> bool: ...
    def preemptive(self, queue: Queue, task: Task) -> bool: ...
    def refuse(self, task: Task, message: str) -> None: ...
    def pre_predicate(self, task: Task) -> str | None: ...
    def predicate(self, task: Task) -> list[Rejection]: ...
    def node_check(self, task: Task, node: int) -> str | None: ...
    def simulate_predicate(
        self,
        task: Task,
        node: int,
        removed: Sequence[Task] = (),
        added: Sequence[Task] = (),
        among: Among = "all",
    ) -> list[str]: ...
    def node_order(self, task: Task, candidates: IntArray) -> Vector: ...
    def best_node(self, task: Task, candidates: IntArray, scores: Vector) -> int | None: ...
    def hypernode_order(self, job: Job, hypernodes: IntArray) -> Vector: ...
    @property
    def hypernode_usage(self) -> HyperNodeUsage | None: ...
    def target_job(self, jobs: Sequence[Job]) -> Job | None: ...
    def reserved_nodes(self) -> None: ...
    def preemptable(self, preemptor: Task, preemptees: Sequence[Task]) -> list[Task] | None: ...
    def reclaimable(self, reclaimer: Task, reclaimees: Sequence[Task]) -> list[Task] | None: ...
    def refusals_of(
        self, point: Point[VictimFn], actor: Task, candidates: Sequence[Task]
    ) -> dict[str, list[Task]]: ...
    def victim_order(self, victims: Sequence[Task], preemptor: Task) -> list[Task]: ...
    def victim_tasks(self, tasks: Sequence[Task]) -> list[Task]: ...

    # -- placement
    def statement(self) -> Statement: ...
    def reserve(self, task: Task, sign: float) -> None: ...
    def allocate(self, task: Task, node: int) -> None: ...

    # -- status
    def update_podgroup_condition(self, job: Job, condition: PodGroupCondition) -> None: ...
    def record_event(self, job: Job, type_: str, reason: str, message: str) -> None: ...


class PluginHooks(Protocol):
    """A plugin as the session sees it once made: its name and its two hooks."""

    name: ClassVar[str]

    def on_session_open(self, ssn: SessionView) -> None: ...
    def on_session_close(self, ssn: SessionView) -> None: ...
