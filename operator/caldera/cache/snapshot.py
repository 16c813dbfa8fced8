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

import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from caldera.api.hypernode import HyperNodeTree
from caldera.api.job import Job
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import PODS, ResourceSpace
from caldera.api.snapshot import NAMESPACE_NAME_LABEL, Snapshot
from caldera.api.task import Task, TaskStatus
from caldera.cache.derived import quotas, spread_owners
from caldera.cache.podgroups import implicit_podgroup_name
from caldera.cache.state import ClusterState
from caldera.cache.topology import assign_subgroups, hypernode_tree
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import enabled_vendors, node_problems, pod_problems
from caldera.models.core import FINISHED_PHASES, Pod, effective_requests, nonzero_requests
from caldera.models.dra import DraObjects
from caldera.models.parse import ObjectError
from caldera.models.storage import StorageObjects
from caldera.models.volcano import (
    GROUP_NAME_ANNOTATION,
    GROUP_OWNER_KINDS,
    PREEMPTABLE_KEY,
    QUEUE_NAME_ANNOTATION,
    TASK_SPEC_KEY,
    NetworkTopologySpec,
    PodGroup,
    PodGroupStatus,
    topology_from_annotations,
)
from caldera.models.volcano import Queue as QueueModel

__all__ = ["PodFacts", "PodMemo", "build_snapshot", "stable_uid"]


_NO_STATUS = PodGroupStatus()
"""The status of an in-memory group: it has no object, so nothing was ever written."""


def stable_uid(kind: str, key: str) -> str:
    """A deterministic UID for objects that have none (manifests written by hand)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"caldera:{kind}/{key}"))


@dataclass(slots=True)
class _Priorities:
    values: dict[str, int]
    default: int

    def of(self, class_name: str) -> int:
        if class_name and class_name in self.values:
            return self.values[class_name]
        return self.default


def _task_status(pod: Pod) -> TaskStatus:
    phase = pod.status.phase
    deleting = pod.metadata.deletion_timestamp is not None
    if phase == "Running":
        return TaskStatus.RELEASING if deleting else TaskStatus.RUNNING
    if phase == "Pending":
        if deleting:
            return TaskStatus.RELEASING
        return TaskStatus.BOUND if pod.spec.node_name else TaskStatus.PENDING
    return {
        "Succeeded": TaskStatus.SUCCEEDED,
        "Failed": TaskStatus.FAILED,
    }.get(phase, TaskStatus.UNKNOWN)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the snapshot derives from a pod's spec."""

    requests: dict[str, float]
    nonzero: tuple[float, float]
    """(milli-cpu, memory) with kube-scheduler's defaults for scoring."""


class PodMemo:
    """Pod facts remembered per pod object, across sessions.

    The watched objects are immutable and replaced whenever they change, so a pod object seen
    before has the same requests: an operator that passes one memo to every
    :func:`build_snapshot` computes a pod's requests once per version instead of once per
    session. An entry whose object was replaced is recomputed; pods gone from the state are
    forgotten after each build.
    """

    __slots__ = ("_facts",)

    def __init__(self) -> None:
        self._facts: dict[str, tuple[Pod, PodFacts]] = {}

    def facts(self, key: str, pod: Pod) -> PodFacts:
        hit = self._facts.get(key)
        if hit is not None and hit[0] is pod:
            return hit[1]
        facts = PodFacts(effective_requests(pod.spec), nonzero_requests(pod.spec))
        self._facts[key] = (pod, facts)
        return facts

    def keep_only(self, keys: Collection[str]) -> None:
        for gone in self._facts.keys() - keys:
            del self._facts[gone]


def _resource_names(state: ClusterState, memo: PodMemo, managed: frozenset[str]) -> Iterable[str]:
    for name in _all_resource_names(state, memo):
        if name not in managed:
            yield name


def _all_resource_names(state: ClusterState, memo: PodMemo) -> Iterable[str]:
    for node in state.nodes.values():
        yield from node.allocatable
    for key, pod in state.pods.items():
        yield from memo.facts(key, pod).requests
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
    memo: PodMemo
    problems: list[ObjectError] = field(default_factory=list)
    implicit: list[str] = field(default_factory=list)
    """Keys of the in-memory groups of bare pods."""

    def problem(self, kind: str, name: str, message: str) -> None:
        self.problems.append(ObjectError(kind, name, message))

    def nodes(
        self, space: ResourceSpace, vendors: Sequence[Vendor], managed: frozenset[str]
    ) -> NodeTable:
        ready = []
        for name in sorted(self.state.nodes):
            node = self.state.nodes[name]
            if node.ready:
                ready.append(node)
                for message in node_problems(vendors, node.metadata.annotations):
                    self.problem("Node", name, message)
            else:
                self.problem("Node", name, "not Ready: takes no new pods this session")
        alloc = np.array([space.vector(n.allocatable) for n in ready], dtype=np.float64).reshape(
            len(ready), len(space)
        )
        table = NodeTable(
            space,
            [n.metadata.name for n in ready],
            alloc,
            [dict(n.metadata.labels) for n in ready],
            [n.spec.taints for n in ready],
            [n.spec.unschedulable for n in ready],
        )
        table.annotations = [n.metadata.annotations for n in ready]
        if managed:
            table.withheld = [
                {r: v for r, v in n.allocatable.items() if r in managed} for n in ready
            ]
        table.images = [
            {name: image.size_bytes for image in n.status.images for name in image.names}
            for n in ready
        ]
        return table

    def topology_of(self, pod: Pod) -> NetworkTopologySpec | None:
        """A bare pod's ``networkTopology`` (a bad one is reported and ignored)."""
        spec = topology_from_annotations(pod.metadata.annotations)
        if isinstance(spec, str):
            self.problem("Pod", f"{pod.metadata.namespace}/{pod.metadata.name}", spec)
            return None
        return spec

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
        spec, meta = pod.spec, pod.metadata
        facts = self.memo.facts(key, pod)
        requests = facts.requests
        resreq = space.vector(requests)
        resreq[space.index[PODS]] += 1.0
        cpu, mem = facts.nonzero
        preemptable = meta.annotations.get(PREEMPTABLE_KEY, meta.labels.get(PREEMPTABLE_KEY))
        return Task(
            uid=meta.uid or stable_uid("Pod", key),
            namespace=meta.namespace,
            name=meta.name,
            job=job,
            status=_task_status(pod),
            resreq=resreq,
            nonzero_cpu=cpu,
            nonzero_memory=mem,
            priority=spec.priority
            if spec.priority is not None
            else prio.of(spec.priority_class_name),
            creation=meta.creation_timestamp or 0.0,
            spec=spec,
            labels=dict(meta.labels),
            annotations=dict(meta.annotations),
            best_effort=not any(v for n, v in requests.items() if n != PODS),
            preemptable=preemptable != "false",
            role=meta.annotations.get(TASK_SPEC_KEY, meta.labels.get(TASK_SPEC_KEY, "")),
            node_name=spec.node_name,
            started=pod.status.start_time or 0.0,
            controller=next((o for o in meta.owner_references if o.controller), None),
        )

    def implicit_job(
        self,
        space: ResourceSpace,
        pod: Pod,
        jobs: dict[str, Job],
        queues: dict[str, Queue],
        prio: _Priorities,
    ) -> str:
        """The key of the in-memory group of a bare pod, made on its first pod; "" (reported)
        while the pod must wait."""
        meta = pod.metadata
        key = f"{meta.namespace}/{implicit_podgroup_name(pod)}"
        if key in jobs:
            return key
        owner = next((o for o in meta.owner_references if o.controller and o.uid), None)
        min_member = 1
        if owner is not None and (owner.api_version, owner.kind) in GROUP_OWNER_KINDS:
            known = self.state.owner_min_members.get(owner.uid)
            if known is None:
                self.problem(
                    "Pod",
                    f"{meta.namespace}/{meta.name}",
                    f"waiting to read group-min-member from its {owner.kind} {owner.name}",
                )
                return ""
            min_member = known
        # made directly (no PodGroup model in between): a burst of bare pods makes thousands
        facts = self.memo.facts(f"{meta.namespace}/{meta.name}", pod)
        job = Job(
            uid=key,
            namespace=meta.namespace,
            name=key.partition("/")[2],
            queue=meta.annotations.get(QUEUE_NAME_ANNOTATION) or self.default_queue,
            priority=prio.of(pod.spec.priority_class_name),
            min_available=min_member,
            min_task_member={},
            min_resources=space.vector({n: v for n, v in facts.requests.items() if v}),
            creation=meta.creation_timestamp or 0.0,
            phase="Pending",
            annotations={},
            conditions=[],
            allocated=space.zeros(),
            api_status=_NO_STATUS,
            has_object=False,
            network_topology=self.topology_of(pod),
        )
        if job.queue not in queues:
            self.problem(
                "Pod", f"{meta.namespace}/{meta.name}", f"queue {job.queue!r} does not exist"
            )
            return ""
        jobs[key] = job
        self.implicit.append(key)
        return key


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
    memo: PodMemo | None = None,
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
    memo = memo if memo is not None else PodMemo()
    b = _Builder(state, names, default_queue, memo)
    space = ResourceSpace(_resource_names(state, memo, managed_resources))
    vendors = enabled_vendors(managed_resources)
    table = b.nodes(space, vendors, managed_resources)
    queues = b.queues(space)
    default_class = [pc for pc in state.priority_classes.values() if pc.global_default]
    prio = _Priorities(
        {n: pc.value for n, pc in state.priority_classes.items()},
        default_class[0].value if default_class else 0,
    )

    jobs: dict[str, Job] = {}
    for key, pg in sorted(state.podgroups.items()):
        job = b.job(space, key, pg, prio)
        if job.queue not in queues:
            b.problem("PodGroup", key, f"spec.queue: queue {job.queue!r} does not exist")
            continue
        jobs[key] = job

    held: dict[str, tuple[Task, str]] = {}
    gone: list[str] = []
    """Pods bound to nodes that no longer exist: they hold nothing (the pod garbage collector
    deletes them), and are reported once, with a count."""
    gone_nodes: set[str] = set()
    for key, pod in sorted(state.pods.items()):
        node_name = pod.spec.node_name
        if node_name and node_name not in state.nodes and pod.status.phase not in FINISHED_PHASES:
            gone.append(key)
            gone_nodes.add(node_name)
            continue
        ours = pod.spec.scheduler_name in names
        job_key = ""
        why = ""
        if ours:
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
                elif job_key not in jobs:
                    queue_name = state.podgroups[job_key].spec.queue or default_queue
                    why = f"its PodGroup {job_key} names queue {queue_name!r}, which does not exist"
            elif bare_pods_in_memory:
                job_key = b.implicit_job(space, pod, jobs, queues, prio)
                if not job_key and len(b.problems) > seen:
                    why = b.problems[-1].message
            elif not pod.spec.node_name:
                why = "has no PodGroup yet: waiting for one to be created"
                b.problem("Pod", key, why)
        if why and not pod.spec.node_name:
            # kept (not scheduled) so the pod still says why it waits
            held[key] = (b.task(space, key, pod, "", prio), why)
            continue
        if not job_key and not pod.spec.node_name:
            continue
        task = b.task(space, key, pod, job_key if job_key in jobs else "", prio)
        if vendors and pod.spec.node_name:
            for message in pod_problems(vendors, pod.metadata.annotations):
                b.problem("Pod", key, message)
        if task.job:
            jobs[task.job].add_task(task)
        if pod.spec.node_name and task.status not in (TaskStatus.SUCCEEDED, TaskStatus.FAILED):
            i = table.index.get(pod.spec.node_name)
            if i is None:
                continue  # its node is not Ready: the pod still holds it
            task.node = i
            table.add_task(i, task)

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
