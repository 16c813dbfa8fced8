"""How each cluster object becomes its engine counterpart, for :func:`build_snapshot`.

A :class:`Builder` makes the node table's columns, the queues, a job per PodGroup or per
in-memory group of bare pods, and a task per pod, reusing through the :class:`BuildMemo` what
earlier builds made from the same object versions (:mod:`caldera.cache.memo`,
:mod:`caldera.cache.kept`), and collects what it had to leave out as problems.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass, field

from caldera.api.hypernode import HyperNodeTree
from caldera.api.job import Job
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace
from caldera.api.task import Task, TaskStatus, gate_of
from caldera.cache.converters import engine_queue, node_base
from caldera.cache.groups import (
    VOLCANO_PODGROUPS,
    WORKLOAD_PODGROUPS,
    group_ref,
    workload_group_of,
    workload_key,
)
from caldera.cache.memo import BuildMemo, Implicit, PodEntry
from caldera.cache.outcome import GONE, HELD, JOBLESS, MEMBER, SKIP, Group, Kind, Members, Outcome
from caldera.cache.state import ClusterState
from caldera.cache.topology import hypernode_tree
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import pod_problems
from caldera.models.base import ObjectMeta
from caldera.models.core import FINISHED_PHASES, Pod
from caldera.models.parse import ObjectError
from caldera.models.volcano import (
    GROUP_NAME_ANNOTATION,
    QUEUE_NAME_ANNOTATION,
    PodGroup,
    PodGroupCondition,
    PodGroupStatus,
)
from caldera.models.workload import (
    DISRUPTION_TARGET,
    REASON_PREEMPTION,
    WorkloadPodGroup,
)
from caldera.sharding.scope import WHOLE_CLUSTER, Scope

__all__ = ["Builder", "Priorities", "is_bare", "preempted"]

NO_STATUS = PodGroupStatus()
"""The status of an in-memory group: it has no object, so nothing was ever written."""


@dataclass(slots=True)
class Priorities:
    values: dict[str, int]
    default: int

    def key(self) -> tuple[object, ...]:
        """What the values depend on, for comparison between builds."""
        return (tuple(sorted(self.values.items())), self.default)

    def of(self, class_name: str) -> int:
        if class_name and class_name in self.values:
            return self.values[class_name]
        return self.default


def is_bare(pod: Pod) -> bool:
    """A pod that names no PodGroup of either API: one of ours is grouped in memory
    (:meth:`Builder.classify`)."""
    return not pod.metadata.annotations.get(GROUP_NAME_ANNOTATION) and not workload_group_of(pod)


@dataclass(slots=True)
class Builder:
    state: ClusterState
    scheduler_names: frozenset[str]
    default_queue: str
    memo: BuildMemo
    bare_pods_in_memory: bool = False
    scope: Scope = WHOLE_CLUSTER
    """This instance's share of the cluster: its nodes, its jobs."""
    problems: list[ObjectError] = field(default_factory=list)
    implicit: list[str] = field(default_factory=list)
    """Keys of the in-memory groups of bare pods."""
    space: ResourceSpace = field(default_factory=ResourceSpace)
    node_index: dict[str, int] = field(default_factory=dict)
    """Row of each Ready node (set by :meth:`nodes`)."""

    def owns(self, meta: ObjectMeta) -> bool:
        """The object (a pod, a PodGroup) is this instance's to schedule (:meth:`Scope.owns`)."""
        if self.scope.whole:
            return True
        return self.scope.owns(meta.name, [o.name for o in meta.owner_references])

    def foreign(self, spec: PodGroup | Group, named_by: Collection[str]) -> bool:
        """The job of ``spec``, named by the pods ``named_by``, is another instance's: the
        hash ring gives it another replica, its pods are a peer's (:attr:`Group.foreign`), or
        pods name it and none is ours (another scheduler's PodGroup, whose status that
        scheduler writes). A group no pod names yet is anyone's to admit."""
        if isinstance(spec, Group) and not spec.workload:
            return spec.foreign
        if isinstance(spec, PodGroup) and not self.owns(spec.metadata):
            return True
        pods, names = self.state.pods, self.scheduler_names
        named = False
        for key in named_by:
            pod = pods.get(key)
            if pod is not None:
                if pod.spec.scheduler_name in names:
                    return False  # usually the first: a job of ours is decided at once
                named = True
        return named

    def problem(self, kind: str, name: str, message: str) -> None:
        self.problems.append(ObjectError(kind, name, message))

    def nodes(
        self, space: ResourceSpace, vendors: Sequence[Vendor], managed: frozenset[str]
    ) -> NodeTable:
        state, memo = self.state, self.memo
        if not memo.same_nodes(state.nodes, space, managed, self.scope):
            last = memo.nodes
            memo.nodes = node_base(state.nodes, space, vendors, managed, self.scope)
            rows = (tuple(memo.nodes.names), tuple(sorted(state.nodes)))
            memo.nodes.rows = last.rows if last is not None and last.rows == rows else rows
        base = memo.nodes
        assert base is not None
        for name, message in base.problems:
            self.problem("Node", name, message)
        if base.template is None:
            ready = base.ready
            template = NodeTable(
                space,
                base.names,
                base.allocatable,
                base.labels,
                [n.spec.taints for n in ready],
                [n.spec.unschedulable for n in ready],
            )
            template.annotations = [n.metadata.annotations for n in ready]
            if base.withheld is not None:
                template.withheld = base.withheld
            template.capacity = base.capacity
            template.images = base.images
            template.static = base.static  # shared with the other sessions on these nodes
            base.template = template
        table: NodeTable = base.template.fresh()
        self.node_index = table.index
        return table

    def hypernodes(self, table: NodeTable) -> HyperNodeTree | None:
        tree, problems = hypernode_tree(self.state, table)
        for name, message in problems:
            self.problem("HyperNode", name, message)
        return tree

    def queues(self, space: ResourceSpace) -> dict[str, Queue]:
        out = {}
        for name, q in sorted(self.state.queues.items()):
            out[name] = engine_queue(space, name, q)
        return out

    def job(
        self, space: ResourceSpace, key: str, pg: PodGroup, prio: Priorities, foreign: bool
    ) -> Job:
        spec, meta = pg.spec, pg.metadata
        return Job(
            uid=key,
            namespace=meta.namespace,
            name=meta.name,
            queue=spec.queue or self.default_queue,
            priority=prio.of(spec.priority_class_name),
            min_available=spec.min_member,
            min_task_member=dict(spec.min_task_member),
            min_resources=(
                None if spec.min_resources is None else space.vector(spec.min_resources)
            ),
            creation=meta.creation_timestamp or 0.0,
            phase=pg.status.phase or "Pending",
            annotations=dict(meta.annotations),
            conditions=list(pg.status.conditions),
            allocated=space.zeros(),
            api_status=pg.status,
            network_topology=spec.network_topology,
            min_resource_list=spec.min_resources,
            foreign=foreign,
        )

    def task(self, space: ResourceSpace, key: str, pod: Pod, job: str, prio: Priorities) -> Task:
        entry = self.memo.task_parts(self.memo.entry(key, pod), space)
        assert entry.before is not None and entry.after is not None
        spec = pod.spec
        priority = spec.priority if spec.priority is not None else prio.of(spec.priority_class_name)
        uid, namespace, name = entry.head
        status, resreq, cpu, mem = entry.before
        creation, pod_spec, labels, annotations, best_effort, preemptable, role = entry.after
        # positionally, in Task's field order: a snapshot makes one task per pod every session
        return Task(
            uid,
            namespace,
            name,
            job,
            status,
            resreq,
            cpu,
            mem,
            priority,
            creation,
            pod_spec,
            labels,
            annotations,
            best_effort,
            preemptable,
            role,
            -1,
            spec.node_name,
            None,
            {},
            entry.started,
            None,
            entry.controller,
            gate_of(spec, annotations, status is TaskStatus.PENDING),
            nominated=pod.status.nominated_node_name,
            preempted=pod.metadata.deletion_timestamp is not None and preempted(pod),
        )

    def implicit_job(
        self,
        space: ResourceSpace,
        pod_key: str,
        entry: PodEntry,
        known: dict[str, PodGroup | Group],
        queues: dict[str, Queue],
        prio: Priorities,
        foreign: bool,
    ) -> tuple[str, str, Group | None]:
        """(the key of the bare pod's in-memory group, the key if the pod may join it else "",
        the group's description if the pod is its first): the group is described on its first
        pod, which reports why the pod must wait when it cannot be made; ``foreign``: the pod
        is another instance's, counted, never placed (:attr:`Group.foreign`)."""
        group = self.memo.implicit(entry, space)
        key = group.key
        if key in known:
            return key, key, None
        min_member = 1
        if group.owner is not None:
            known_size = self.state.owner_min_members.get(group.owner.uid)
            if known_size is None:
                self.problem(
                    "Pod",
                    pod_key,
                    f"waiting to read group-min-member from its {group.owner.kind} "
                    f"{group.owner.name}",
                )
                return key, "", None
            min_member = known_size
        if group.topology_problem:
            self.problem("Pod", pod_key, group.topology_problem)
        queue = group.queue or self.default_queue
        if queue not in queues:
            self.problem("Pod", pod_key, f"queue {queue!r} does not exist")
            return key, "", None
        pod = entry.pod
        priority = prio.of(pod.spec.priority_class_name)
        spec = entry.group
        if not (
            isinstance(spec, Group)
            and spec.group is group
            and spec.min_member == min_member
            and spec.queue == queue
            and spec.priority == priority
            and spec.foreign == foreign
        ):  # the same object as last time while it is the same group: kept jobs compare fast
            spec = entry.group = Group(
                group,
                min_member,
                queue,
                priority,
                pod.metadata.namespace,
                pod.metadata.creation_timestamp or 0.0,
                foreign=foreign,
            )
        return key, key, spec

    def workload_missing(self, pg_key: str) -> str:
        """Why a pod of Kubernetes PodGroup ``pg_key`` is not in a job (the group is missing,
        invalid, or names a queue that does not exist)."""
        label = f"its PodGroup {pg_key} ({WORKLOAD_PODGROUPS})"
        invalid = self.state.invalid.get(f"WorkloadPodGroup/{pg_key}")
        if invalid is not None:
            return f"{label} is invalid: {invalid}"
        if pg_key not in self.state.workload_podgroups:
            return f"waiting for {label} to be created"
        return f"{label} names a queue that does not exist"

    def classify(
        self,
        key: str,
        entry: PodEntry,
        known: dict[str, PodGroup | Group],
        queues: dict[str, Queue],
        prio: Priorities,
        context: object,
        vendors: Sequence[Vendor],
    ) -> Outcome:
        """What the snapshot makes of pod ``key`` (see :class:`Outcome`); its problems are
        reported here and kept in the outcome."""
        state, space = self.state, self.space
        pod = entry.pod
        spec = pod.spec
        node_name = spec.node_name
        seen = len(self.problems)

        def outcome(kind: Kind, job_key: str = "", why: str = "", row: int = -1) -> Outcome:
            return Outcome(
                context,
                kind,
                job_key,
                why,
                tuple(self.problems[seen:]),
                row,
                self.memo.task_parts(entry, space).head[0] if row >= 0 else "",
                group,
                joins,
                first,
            )

        group, joins, first = "", False, None
        if node_name and node_name not in state.nodes and pod.status.phase not in FINISHED_PHASES:
            return outcome(GONE)
        job_key = ""
        why = ""
        name = spec.scheduler_name
        ours = name in self.scheduler_names
        mine = ours and self.owns(pod.metadata)
        if not mine and not node_name:
            return outcome(SKIP)  # another's to place; placed, it counts for its queue
        if not mine:  # placed by another scheduler or instance: counted in its group, quietly
            job_key = group_ref(pod)
            if job_key and not pod.metadata.annotations.get(GROUP_NAME_ANNOTATION):
                group, joins = job_key, job_key in known  # a Kubernetes PodGroup's
            if not job_key and self.bare_pods_in_memory and (ours or name in self.scope.peers):
                group, job_key, first = self.implicit_job(
                    space, key, entry, known, queues, prio, True
                )
                joins = bool(job_key) and first is None
                del self.problems[seen:]  # the pod's own scheduler tells of them
            elif job_key not in known:
                job_key = ""
        elif ours:
            pg_name = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
            if pg_name:
                job_key = f"{pod.metadata.namespace}/{pg_name}"
                if job_key not in state.podgroups:
                    invalid = state.invalid.get(f"PodGroup/{job_key}")
                    why = (
                        f"its PodGroup {job_key} ({VOLCANO_PODGROUPS}) is invalid: {invalid}"
                        if invalid is not None
                        else f"its PodGroup {job_key} ({VOLCANO_PODGROUPS}) does not exist"
                    )
                    self.problem(
                        "Pod", key, f"metadata.annotations[{GROUP_NAME_ANNOTATION}]: {why}"
                    )
                    job_key = ""
                elif job_key not in known:
                    queue_name = state.podgroups[job_key].spec.queue or self.default_queue
                    why = (
                        f"its PodGroup {job_key} ({VOLCANO_PODGROUPS}) names queue "
                        f"{queue_name!r}, which does not exist"
                    )
            elif pg_key := workload_group_of(pod):
                group = job_key = workload_key(pg_key)
                joins = job_key in known
                if not joins:
                    why = self.workload_missing(pg_key)
                    self.problem("Pod", key, f"spec.schedulingGroup.podGroupName: {why}")
                    job_key = ""
            elif self.bare_pods_in_memory:
                group, job_key, first = self.implicit_job(
                    space, key, entry, known, queues, prio, False
                )
                joins = bool(job_key) and first is None
                if not job_key and len(self.problems) > seen:
                    why = self.problems[-1].message
            elif not node_name:
                why = f"has no PodGroup ({VOLCANO_PODGROUPS}) yet: waiting for one to be created"
                self.problem("Pod", key, why)
        if why and not node_name:
            return outcome(HELD, why=why)  # kept (not scheduled) so the pod still says why
        if not job_key:
            if not node_name:
                return outcome(SKIP)
        elif job_key not in known and first is None:
            job_key = ""
        if vendors and node_name:
            for message in pod_problems(vendors, pod.metadata.annotations):
                self.problem("Pod", key, message)
        row = -1
        if node_name and pod.status.phase not in FINISHED_PHASES:
            i = self.node_index.get(node_name)
            row = -1 if i is None else i  # -1: its node is not Ready (the pod still holds it)
        return outcome(MEMBER if job_key else JOBLESS, job_key, row=row)

    def kept_job(
        self,
        space: ResourceSpace,
        key: str,
        spec: PodGroup | Group,
        members: Members,
        prio: Priorities,
        named_by: Collection[str],
    ) -> Job:
        """Job ``key`` with its member pods' tasks (``named_by``: the pods that name its group,
        see :meth:`foreign`): the last build's when nothing about it changed (see
        :mod:`caldera.cache.kept`)."""
        kept = self.memo.kept
        source: Hashable
        conditions: Sequence[PodGroupCondition]
        foreign = self.foreign(spec, named_by)
        if isinstance(spec, Group):
            source, phase, conditions = (spec, foreign), "Pending", ()
        else:
            source = (spec, prio.of(spec.spec.priority_class_name), foreign)
            phase, conditions = spec.status.phase or "Pending", spec.status.conditions
        job = kept.take(key, source, members.pods, phase, conditions)
        if job is not None:
            return job
        if isinstance(spec, Group):
            job = self.group_job(space, key, spec)
            job.foreign = foreign
        else:
            job = self.job(space, key, spec, prio, foreign)
        for pod_key, pod in zip(members.keys, members.pods, strict=True):
            job.add_task(self.task(space, pod_key, pod, key, prio))
        kept.keep(key, source, members.pods, job)
        return job

    def group_job(self, space: ResourceSpace, key: str, spec: Group) -> Job:
        # made directly (no PodGroup model in between): a burst of bare pods makes thousands
        return Job(
            uid=key,
            namespace=spec.namespace,
            name=spec.group.name,
            queue=spec.queue,
            priority=spec.priority,
            min_available=spec.min_member,
            min_task_member={},
            min_resources=spec.group.min_resources,
            creation=spec.creation,
            phase="Pending",
            annotations={},
            conditions=[],
            allocated=space.zeros(),
            api_status=NO_STATUS,
            has_object=False,
            network_topology=spec.group.topology,
            workload=spec.workload,
        )

    def workload_group(
        self, space: ResourceSpace, key: str, pg: WorkloadPodGroup, queues: dict[str, Queue]
    ) -> Group | None:
        """The group of a Kubernetes PodGroup (None, reported, when its queue is missing): its
        ``gang.minCount`` is its minMember (1 for ``basic``: each pod on its own); its queue is
        its ``scheduling.volcano.sh/queue-name`` annotation, else its namespace's, else the
        default queue."""
        meta = pg.metadata
        namespace = self.state.namespaces.get(meta.namespace)
        queue = (
            meta.annotations.get(QUEUE_NAME_ANNOTATION)
            or (namespace.metadata.annotations.get(QUEUE_NAME_ANNOTATION) if namespace else None)
            or self.default_queue
        )
        if queue not in queues:
            self.problem("WorkloadPodGroup", key, f"queue {queue!r} does not exist")
            return None
        last = self.memo.workload_groups.get(key)
        kept = last[1] if last is not None and last[0] is pg else None
        if isinstance(kept, Group) and kept.queue == queue:
            return kept  # one object while unchanged: its job can be taken over
        job_key = workload_key(key)
        implicit = Implicit(meta.name, job_key, None, queue, None, None, "")
        created = meta.creation_timestamp or 0.0
        policy = pg.spec.scheduling_policy
        group = Group(implicit, policy.min_count, queue, 0, meta.namespace, created, workload=True)
        self.memo.workload_groups[key] = (pg, group)
        return group


def preempted(pod: Pod) -> bool:
    """``podTerminatingByPreemption`` (Volcano's preempt.go): the pod's ``DisruptionTarget``
    condition is True for ``PreemptionByScheduler`` (asked of terminating pods only)."""
    cond = pod.status.condition(DISRUPTION_TARGET)
    return cond is not None and cond.status == "True" and cond.reason == REASON_PREEMPTION
