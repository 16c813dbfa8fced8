"""Build a fresh engine snapshot from the cluster state.

What goes in, as Volcano's snapshot does: Ready nodes (sorted by name); every pod with a node
counts on that node whatever its scheduler; pods of our scheduler names become tasks of the job of
their PodGroup (``scheduling.k8s.io/group-name``); PodGroups whose queue exists become jobs with
their PriorityClass value; PersistentVolumes, claims, StorageClasses and CSINodes go in as they
are, for the volume filters, and ResourceClaims, DeviceClasses and ResourceSlices (with the pods'
``resourceClaimStatuses``) for DynamicResources. What is left out is reported, never silently
dropped: a pod naming a PodGroup that does not exist, a PodGroup naming a queue that does not
exist, a pod bound to an unknown node, a node that is not Ready, a HyperNode (or one of its
members) that the tree must ignore.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from caldera.api.hypernode import HyperNodeTree
from caldera.api.job import Job
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace
from caldera.api.snapshot import NAMESPACE_NAME_LABEL, Snapshot
from caldera.api.task import Task
from caldera.cache.derived import quotas, spread_owners
from caldera.cache.memo import BuildMemo, Implicit, NodeBase, PodEntry, frozen, stable_uid
from caldera.cache.state import ClusterState
from caldera.cache.topology import assign_subgroups, hypernode_tree
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import enabled_vendors, node_problems, pod_problems
from caldera.models.core import FINISHED_PHASES, Node, Pod
from caldera.models.dra import DraObjects
from caldera.models.parse import ObjectError
from caldera.models.storage import StorageObjects
from caldera.models.volcano import (
    GROUP_NAME_ANNOTATION,
    PodGroup,
    PodGroupStatus,
)
from caldera.models.volcano import Queue as QueueModel

__all__ = ["BuildMemo", "build_snapshot", "stable_uid"]


_NO_STATUS = PodGroupStatus()
"""The status of an in-memory group: it has no object, so nothing was ever written."""


@dataclass(slots=True)
class _Priorities:
    values: dict[str, int]
    default: int

    def of(self, class_name: str) -> int:
        if class_name and class_name in self.values:
            return self.values[class_name]
        return self.default


def _resource_names(state: ClusterState, memo: BuildMemo, managed: frozenset[str]) -> Iterable[str]:
    for name in _all_resource_names(state, memo):
        if name not in managed:
            yield name


def _all_resource_names(state: ClusterState, memo: BuildMemo) -> Iterable[str]:
    """Every resource name of the state (the memo has an entry for every pod)."""
    for node in state.nodes.values():
        yield from node.allocatable
    yield from memo.request_names()
    for pg in state.podgroups.values():
        yield from pg.spec.min_resources or {}
    for q in state.queues.values():
        yield from q.spec.capability or {}
        yield from q.spec.guarantee.resource


@dataclass(slots=True)
class _Builder:
    state: ClusterState
    scheduler_names: frozenset[str]
    default_queue: str
    memo: BuildMemo
    problems: list[ObjectError] = field(default_factory=list)
    implicit: list[str] = field(default_factory=list)
    """Keys of the in-memory groups of bare pods."""

    def problem(self, kind: str, name: str, message: str) -> None:
        self.problems.append(ObjectError(kind, name, message))

    def nodes(
        self, space: ResourceSpace, vendors: Sequence[Vendor], managed: frozenset[str]
    ) -> NodeTable:
        state, memo = self.state, self.memo
        if not memo.same_nodes(state.nodes, space, managed):
            memo.nodes = _node_base(state.nodes, space, vendors, managed)
        base = memo.nodes
        assert base is not None
        for name, message in base.problems:
            self.problem("Node", name, message)
        ready = base.ready
        table = NodeTable(
            space,
            base.names,
            base.allocatable,
            base.labels,
            [n.spec.taints for n in ready],
            [n.spec.unschedulable for n in ready],
        )
        table.annotations = [n.metadata.annotations for n in ready]
        if base.withheld is not None:
            table.withheld = base.withheld
        table.images = base.images
        return table

    def hypernodes(self, table: NodeTable) -> HyperNodeTree | None:
        tree, problems = hypernode_tree(self.state, table)
        for name, message in problems:
            self.problem("HyperNode", name, message)
        return tree

    def queues(self, space: ResourceSpace) -> dict[str, Queue]:
        out = {}
        for name, q in sorted(self.state.queues.items()):
            out[name] = _queue(space, name, q)
        return out

    def job(self, space: ResourceSpace, key: str, pg: PodGroup, prio: _Priorities) -> Job:
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
        )

    def task(self, space: ResourceSpace, key: str, pod: Pod, job: str, prio: _Priorities) -> Task:
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
        )

    def implicit_job(
        self,
        space: ResourceSpace,
        pod_key: str,
        entry: PodEntry,
        known: dict[str, PodGroup | _Group],
        queues: dict[str, Queue],
        prio: _Priorities,
    ) -> str:
        """The key of the in-memory group of a bare pod, described on its first pod; ""
        (reported) while the pod must wait."""
        group = entry.implicit
        if group is None or entry.space is not space:
            group = self.memo.implicit(entry, space)
        key = group.key
        if key in known:
            return key
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
                return ""
            min_member = known_size
        if group.topology_problem:
            self.problem("Pod", pod_key, group.topology_problem)
        queue = group.queue or self.default_queue
        if queue not in queues:
            self.problem("Pod", pod_key, f"queue {queue!r} does not exist")
            return ""
        pod = entry.pod
        priority = prio.of(pod.spec.priority_class_name)
        spec = entry.group
        if not (
            isinstance(spec, _Group)
            and spec.group is group
            and spec.min_member == min_member
            and spec.queue == queue
            and spec.priority == priority
        ):  # the same object as last time while it is the same group: kept jobs compare fast
            spec = entry.group = _Group(
                group,
                min_member,
                queue,
                priority,
                pod.metadata.namespace,
                pod.metadata.creation_timestamp or 0.0,
            )
        known[key] = spec
        self.implicit.append(key)
        return key

    def kept_job(
        self,
        space: ResourceSpace,
        key: str,
        spec: PodGroup | _Group,
        members: _Members,
        prio: _Priorities,
    ) -> Job:
        """Job ``key`` with its member pods' tasks: the last build's when nothing about it
        changed (see :mod:`caldera.cache.kept`)."""
        kept = self.memo.kept
        if isinstance(spec, _Group):
            job = kept.take(key, spec, members.pods, "Pending", ())
        else:
            source = (spec, prio.of(spec.spec.priority_class_name))
            status = spec.status
            job = kept.take(key, source, members.pods, status.phase or "Pending", status.conditions)
        if job is not None:
            return job
        if isinstance(spec, _Group):
            job = self.group_job(space, key, spec)
        else:
            job = self.job(space, key, spec, prio)
            source = (spec, prio.of(spec.spec.priority_class_name))
        for pod_key, pod in zip(members.keys, members.pods, strict=True):
            job.add_task(self.task(space, pod_key, pod, key, prio))
        kept.keep(key, spec if isinstance(spec, _Group) else source, members.pods, job)
        return job

    def group_job(self, space: ResourceSpace, key: str, spec: _Group) -> Job:
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
            api_status=_NO_STATUS,
            has_object=False,
            network_topology=spec.group.topology,
        )


class _Members:
    """The pods of one job, in pod order."""

    __slots__ = ("keys", "pods")

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.pods: list[Pod] = []


_NO_MEMBERS = _Members()


@dataclass(frozen=True, slots=True, eq=False)
class _Group:
    """An in-memory group of bare pods as its first pod describes it (one object per group
    while it stays the same: equal only to itself)."""

    group: Implicit
    min_member: int
    queue: str
    priority: int
    namespace: str
    creation: float


def _node_base(
    nodes: dict[str, Node], space: ResourceSpace, vendors: Sequence[Vendor], managed: frozenset[str]
) -> NodeBase:
    """The node table's columns that change only with the nodes: Ready nodes sorted by name."""
    ready: list[Node] = []
    problems: list[tuple[str, str]] = []
    for name in sorted(nodes):
        node = nodes[name]
        if node.ready:
            ready.append(node)
            problems.extend((name, m) for m in node_problems(vendors, node.metadata.annotations))
        else:
            problems.append((name, "not Ready: takes no new pods this session"))
    alloc = np.array([space.vector(n.allocatable) for n in ready], dtype=np.float64).reshape(
        len(ready), len(space)
    )
    return NodeBase(
        nodes=dict(nodes),
        space=space,
        managed=managed,
        ready=ready,
        names=[n.metadata.name for n in ready],
        allocatable=frozen(alloc),
        labels=[dict(n.metadata.labels) for n in ready],
        withheld=(
            [{r: v for r, v in n.allocatable.items() if r in managed} for n in ready]
            if managed
            else None
        ),
        images=[
            {name: image.size_bytes for image in n.status.images for name in image.names}
            for n in ready
        ],
        problems=problems,
    )


def _queue(space: ResourceSpace, name: str, q: QueueModel) -> Queue:
    spec = q.spec
    return Queue(
        name=name,
        uid=q.metadata.uid or stable_uid("Queue", name),
        weight=max(spec.weight, 1),
        capability=space.vector(spec.capability or {}, missing=np.inf),
        guarantee=space.vector(spec.guarantee.resource),
        deserved_spec=(
            None if spec.deserved is None else space.vector(spec.deserved, missing=np.inf)
        ),
        parent=spec.parent,
        state=q.status.state or "Open",
        reclaimable=spec.reclaimable is not False,
        priority=spec.priority,
        creation=q.metadata.creation_timestamp or 0.0,
        status_allocated=dict(q.status.allocated),
        annotations=dict(q.metadata.annotations),
    )


def build_snapshot(
    state: ClusterState,
    *,
    scheduler_names: Iterable[str],
    now: float,
    session_id: str,
    default_queue: str = "default",
    memo: BuildMemo | None = None,
    bare_pods_in_memory: bool = False,
    managed_resources: frozenset[str] = frozenset(),
) -> tuple[Snapshot, list[ObjectError]]:
    """The session's snapshot of ``state``; pass the same ``memo`` to every call to compute
    each pod version's requests once.

    ``bare_pods_in_memory``: a pod of ours without a PodGroup joins the group Volcano's
    pg-controller would make for it (``podgroup-<controller or pod UID>``), held in memory only,
    instead of waiting for that PodGroup object to exist.

    ``managed_resources`` (the policy's :attr:`~caldera.framework.policy.Policy.managed_resources`)
    are left out of every request and capacity: a plugin accounts for them itself.
    """
    names = frozenset(scheduler_names)
    memo = memo if memo is not None else BuildMemo()
    b = _Builder(state, names, default_queue, memo)
    entry = memo.entry
    for key, pod in state.pods.items():
        entry(key, pod)
    space = memo.space(_resource_names(state, memo, managed_resources))
    vendors = enabled_vendors(managed_resources)
    table = b.nodes(space, vendors, managed_resources)
    queues = b.queues(space)
    default_class = [pc for pc in state.priority_classes.values() if pc.global_default]
    prio = _Priorities(
        {n: pc.value for n, pc in state.priority_classes.items()},
        default_class[0].value if default_class else 0,
    )

    memo.kept.start(
        (
            space,
            memo.nodes,
            tuple(sorted(prio.values.items())),
            prio.default,
            default_queue,
            names,
            managed_resources,
        )
    )
    known: dict[str, PodGroup | _Group] = {}
    """The jobs of this snapshot, in order: PodGroups whose queue exists (by key), then the
    in-memory groups of bare pods (in the order of their first pod)."""
    for key, pg in sorted(state.podgroups.items()):
        queue_name = pg.spec.queue or default_queue
        if queue_name not in queues:
            b.problem("PodGroup", key, f"spec.queue: queue {queue_name!r} does not exist")
            continue
        known[key] = pg

    held: dict[str, tuple[Task, str]] = {}
    gone: list[str] = []
    """Pods bound to nodes that no longer exist: they hold nothing (the pod garbage collector
    deletes them), and are reported once, with a count."""
    gone_nodes: set[str] = set()
    members: dict[str, _Members] = {}
    jobless: dict[str, Task] = {}
    on_nodes: list[tuple[str, str, int, str]] = []
    """(job or "", pod, node row, task UID) of every pod that holds room on a node, in pod
    order."""
    entries = memo.entries
    all_nodes = state.nodes
    node_index = table.index
    for key, pod in sorted(state.pods.items()):
        spec = pod.spec
        node_name = spec.node_name
        if node_name and node_name not in all_nodes and pod.status.phase not in FINISHED_PHASES:
            gone.append(key)
            gone_nodes.add(node_name)
            continue
        job_key = ""
        why = ""
        if spec.scheduler_name in names:
            group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION)
            seen = len(b.problems)
            if group:
                job_key = f"{pod.metadata.namespace}/{group}"
                if job_key not in state.podgroups:
                    invalid = state.invalid.get(f"PodGroup/{job_key}")
                    why = (
                        f"its PodGroup {job_key} is invalid: {invalid}"
                        if invalid is not None
                        else f"its PodGroup {job_key} does not exist"
                    )
                    b.problem("Pod", key, f"metadata.annotations[{GROUP_NAME_ANNOTATION}]: {why}")
                    job_key = ""
                elif job_key not in known:
                    queue_name = state.podgroups[job_key].spec.queue or default_queue
                    why = f"its PodGroup {job_key} names queue {queue_name!r}, which does not exist"
            elif bare_pods_in_memory:
                job_key = b.implicit_job(space, key, entries[key], known, queues, prio)
                if not job_key and len(b.problems) > seen:
                    why = b.problems[-1].message
            elif not node_name:
                why = "has no PodGroup yet: waiting for one to be created"
                b.problem("Pod", key, why)
        if why and not node_name:
            # kept (not scheduled) so the pod still says why it waits
            held[key] = (b.task(space, key, pod, "", prio), why)
            continue
        if not job_key:
            if not node_name:
                continue
        elif job_key not in known:
            job_key = ""
        if vendors and node_name:
            for message in pod_problems(vendors, pod.metadata.annotations):
                b.problem("Pod", key, message)
        if job_key:
            group_members = members.get(job_key)
            if group_members is None:
                group_members = members[job_key] = _Members()
            group_members.keys.append(key)
            group_members.pods.append(pod)
        else:
            jobless[key] = b.task(space, key, pod, "", prio)
        if node_name and pod.status.phase not in FINISHED_PHASES:
            i = node_index.get(node_name)
            if i is not None:  # else its node is not Ready: the pod still holds it
                uid = memo.task_parts(entries[key], space).head[0]
                on_nodes.append((job_key, key, i, uid))

    jobs = {
        key: b.kept_job(space, key, spec, members.get(key, _NO_MEMBERS), prio)
        for key, spec in known.items()
    }
    memo.kept.keep_only(jobs)
    placed_rows: list[int] = []
    placed: list[Task] = []
    for job_key, key, row, uid in on_nodes:
        task = jobs[job_key].tasks[uid] if job_key else jobless[key]
        task.node = row
        placed_rows.append(row)
        placed.append(task)
    table.add_tasks(placed_rows, placed)

    if gone:
        nodes = sorted(gone_nodes)
        named = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        b.problem(
            "Pod",
            gone[0] + (f" and {len(gone) - 1} more" if len(gone) > 1 else ""),
            f"spec.nodeName: {len(gone)} pods are bound to nodes that do not exist ({named}); "
            "they hold nothing until the pod garbage collector deletes them",
        )

    for key, pg in state.podgroups.items():
        if pg.spec.sub_group_policy and key in jobs:
            assign_subgroups(jobs[key], pg)

    for key in b.implicit:
        # An in-memory group has no status to remember its phase by: it is what the pods say.
        job = jobs[key]
        job.phase = (
            "Running" if job.is_ready() else "Inqueue" if job.ready_task_num() else "Pending"
        )

    snapshot = Snapshot(
        space=space,
        nodes=table,
        jobs=jobs,
        queues=queues,
        now=now,
        session_id=session_id,
        namespace_labels={
            name: {NAMESPACE_NAME_LABEL: name, **ns.metadata.labels}
            for name, ns in state.namespaces.items()
        },
        volumes=StorageObjects(
            volumes=dict(state.persistent_volumes),
            claims=dict(state.persistent_volume_claims),
            classes=dict(state.storage_classes),
            csi_nodes=dict(state.csi_nodes),
        ),
        dra=DraObjects(
            claims=dict(state.resource_claims),
            classes=dict(state.device_classes),
            slices=dict(state.resource_slices),
            claim_statuses={
                key: {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
                for key, pod in state.pods.items()
                if pod.status.resource_claim_statuses
            },
        ),
    )
    snapshot.quotas = quotas(state)
    snapshot.disruption_budgets = [b for _, b in sorted(state.disruption_budgets.items())]
    snapshot.hypernodes = b.hypernodes(table)
    snapshot.held = held
    snapshot.spread_owners = spread_owners(state)
    memo.keep_only(state.pods.keys())
    return snapshot, b.problems
