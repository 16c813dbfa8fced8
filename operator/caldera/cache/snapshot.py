"""Build the engine snapshot of the cluster state.

What goes in, as Volcano's snapshot does: Ready nodes (sorted by name); every pod with a node
counts on that node whatever its scheduler; pods of our scheduler names become tasks of the job of
their PodGroup (``scheduling.k8s.io/group-name``); PodGroups whose queue exists become jobs with
their PriorityClass value; PersistentVolumes, claims, StorageClasses and CSINodes go in as they
are, for the volume filters, and ResourceClaims, DeviceClasses and ResourceSlices (with the pods'
``resourceClaimStatuses``) for DynamicResources. What is left out is reported, never silently
dropped: a pod naming a PodGroup that does not exist, a PodGroup naming a queue that does not
exist, a pod bound to an unknown node, a node that is not Ready, a HyperNode (or one of its
members) that the tree must ignore.

Each session's snapshot is its own (a session changes it freely), but what a build derives from
an object version is kept in the :class:`BuildMemo` the caller passes to every build, and jobs
that nothing changed are taken over whole: a build costs little for what stayed the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from caldera.api.job import Job
from caldera.api.node import NodeTable
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, counts_as_resource
from caldera.api.snapshot import NAMESPACE_NAME_LABEL, Snapshot
from caldera.api.task import Task
from caldera.cache.builder import Builder, Priorities, is_bare
from caldera.cache.derived import quota_statuses, quotas, spread_owners
from caldera.cache.groups import group_ref, workload_key
from caldera.cache.memo import BuildMemo, PodEntry, stable_uid
from caldera.cache.outcome import GONE, HELD, NO_MEMBERS, SKIP, Group, Members, Outcome
from caldera.cache.state import ClusterState
from caldera.cache.topology import assign_subgroups
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import COUNT_RESOURCES, enabled_vendors
from caldera.models.core import Pod
from caldera.models.dra import DraObjects
from caldera.models.parse import ObjectError
from caldera.models.storage import StorageObjects
from caldera.models.volcano import PodGroup
from caldera.sharding.scope import WHOLE_CLUSTER, Scope
from caldera.sharding.shard import shard_view

__all__ = [
    "BuildMemo",
    "Parts",
    "Prelude",
    "build_snapshot",
    "build_with_parts",
    "claim_statuses_of",
    "finish",
    "prelude",
    "prepare_pods",
    "report_gone",
    "set_implicit_phase",
    "stable_uid",
]


def _space(state: ClusterState, memo: BuildMemo, managed: frozenset[str]) -> ResourceSpace:
    """The session's resource space: every resource name but those a plugin accounts for
    (``managed``). A shared device's count (``nvidia.com/gpu``) stays, for queues to count as
    Volcano's ``GetIgnoredDevices`` leaves it, but unfitted: its cards are deviceshare's to
    place, and a node need not advertise it."""
    unfitted = managed & COUNT_RESOURCES
    excluded = managed - unfitted
    names = (name for name in _all_resource_names(state, memo) if name not in excluded)
    return memo.space(names, unfitted)


def _all_resource_names(state: ClusterState, memo: BuildMemo) -> Iterable[str]:
    """Every resource name of the state (the memo has an entry for every pod). Of PodGroups and
    Queues, only the names Volcano accounts (:func:`counts_as_resource`): the quota spellings in
    the minResources its controllers write are for the resourcequota plugin alone."""
    yield from memo.node_resource_names(state.nodes)
    yield from memo.request_names()
    for pg in state.podgroups.values():
        yield from filter(counts_as_resource, pg.spec.min_resources or {})
    for q in state.queues.values():
        yield from filter(counts_as_resource, q.spec.capability or {})
        yield from filter(counts_as_resource, q.spec.guarantee.resource)


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
    scope: Scope = WHOLE_CLUSTER,
) -> tuple[Snapshot, list[ObjectError]]:
    """The session's snapshot of ``state``; pass the same ``memo`` to every call to compute
    each pod version's requests once.

    ``bare_pods_in_memory``: a pod of ours without a PodGroup joins the group Volcano's
    pg-controller would make for it (``podgroup-<controller or pod UID>``), held in memory only,
    instead of waiting for that PodGroup object to exist.

    ``managed_resources`` (the policy's :attr:`~caldera.framework.policy.Policy.managed_resources`)
    are left out of every request and capacity: a plugin accounts for them itself.

    ``scope``: this instance's share of the cluster when several schedulers share it
    (:mod:`caldera.sharding.scope`).
    """
    snapshot, problems, _ = build_with_parts(
        state,
        scheduler_names=scheduler_names,
        now=now,
        session_id=session_id,
        default_queue=default_queue,
        memo=memo if memo is not None else BuildMemo(),
        bare_pods_in_memory=bare_pods_in_memory,
        managed_resources=managed_resources,
        scope=scope,
    )
    return snapshot, problems


@dataclass(slots=True)
class Parts:
    """What a build made on the way to its snapshot, for a model that keeps it up to date
    (:mod:`caldera.model`)."""

    pre: Prelude
    members: dict[str, Members]
    held: dict[str, str]
    """Pod key → why it waits."""
    gone: dict[str, str]
    """Pod key → the missing node it is bound to."""
    jobless: dict[str, Task]
    claims: dict[str, dict[str, str | None]]
    refs: dict[str, list[str]]
    """Job key → the pods that name its group (:func:`~caldera.cache.groups.group_ref`)."""


def build_with_parts(
    state: ClusterState,
    *,
    scheduler_names: Iterable[str],
    now: float,
    session_id: str,
    default_queue: str,
    memo: BuildMemo,
    bare_pods_in_memory: bool,
    managed_resources: frozenset[str],
    podgroups_in_context: bool = True,
    scope: Scope = WHOLE_CLUSTER,
) -> tuple[Snapshot, list[ObjectError], Parts]:
    """:func:`build_snapshot`, with what it made on the way (``podgroups_in_context``: see
    :func:`prelude`)."""
    for key, pod in state.pods.items():
        memo.entry(key, pod)
    memo.keep_only(state.pods.keys())  # before the resource space is worked out from them
    pre = prelude(
        state,
        scheduler_names,
        default_queue,
        memo,
        bare_pods_in_memory,
        managed_resources,
        podgroups_in_context=podgroups_in_context,
        scope=scope,
    )
    b, space, known, context = pre.builder, pre.space, pre.known, pre.context
    held: dict[str, str] = {}
    gone: dict[str, str] = {}
    members: dict[str, Members] = {}
    jobless: dict[str, Task] = {}
    on_nodes: list[tuple[str, str, int, str]] = []
    """(job or "", pod, node row, task UID) of every pod that holds room on a node, in pod
    order."""
    entries = memo.entries
    problems = b.problems
    refs: dict[str, list[str]] = {}
    """Job key → the pods that name its group (:meth:`Builder.foreign`)."""
    for key, pod in sorted(state.pods.items()):
        if ref := group_ref(pod):
            refs.setdefault(ref, []).append(key)
        entry = entries[key]
        out = pre.kept_outcome(entry)
        if out is not None:
            problems.extend(out.problems)
        else:  # worked out again (reporting its problems): the pod, or what it reads, changed
            out = entry.outcome = b.classify(
                key, entry, known, pre.queues, pre.prio, context, pre.vendors
            )
        kind = out.kind
        if kind is GONE:
            gone[key] = pod.spec.node_name
            continue
        if kind is HELD:
            held[key] = out.why
            continue
        if kind is SKIP:
            continue
        job_key = out.job_key
        if out.first is not None:
            known[job_key] = out.first
            b.implicit.append(job_key)
        if job_key:
            group_members = members.get(job_key)
            if group_members is None:
                group_members = members[job_key] = Members()
            group_members.keys.append(key)
            group_members.pods.append(pod)
        else:
            jobless[key] = b.task(space, key, pod, "", pre.prio)
        if out.row >= 0:
            on_nodes.append((job_key, key, out.row, out.uid))

    jobs = {
        key: b.kept_job(space, key, spec, members.get(key, NO_MEMBERS), pre.prio, refs.get(key, ()))
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
    pre.table.add_tasks(placed_rows, placed)
    pre.table.share_rows(pre.table.tasks)  # the session copies a row before changing it
    report_gone(b, gone)
    for key, pg in state.podgroups.items():
        if pg.spec.sub_group_policy and key in jobs:
            assign_subgroups(jobs[key], pg)
    for key in b.implicit:
        set_implicit_phase(jobs[key])
    claims = {
        key: claim_statuses_of(pod)
        for key, pod in state.pods.items()
        if pod.status.resource_claim_statuses
    }
    snapshot = finish(state, pre, jobs, held, claims)
    snapshot.now, snapshot.session_id = now, session_id
    return snapshot, b.problems, Parts(pre, members, held, gone, jobless, claims, refs)


def prepare_pods(
    state: ClusterState,
    pods: Mapping[str, Pod],
    memo: BuildMemo,
    managed: frozenset[str],
    grouped: frozenset[str],
) -> None:
    """Make ahead what a build makes of each of ``pods`` alone (its requests, its task's
    fields in the resource space of ``state`` and the pods the memo has, and the in-memory
    group of a bare pod of the schedulers ``grouped``), so a build that follows finds it made:
    while a listing's later pages are on their way."""
    for key, pod in pods.items():
        memo.entry(key, pod)
    space = _space(state, memo, managed)
    entries = memo.entries
    for key, pod in pods.items():
        entry = memo.task_parts(entries[key], space)
        if pod.spec.scheduler_name in grouped and is_bare(pod):
            memo.implicit(entry, space)


@dataclass(slots=True)
class Prelude:
    """What a build works out before it visits the pods: the node table (no pod on it yet),
    the queues, the priorities, the jobs of the PodGroups whose queue exists, and the tokens
    saying whether what pods and jobs read changed since the last build."""

    builder: Builder
    space: ResourceSpace
    vendors: Sequence[Vendor]
    table: NodeTable
    queues: dict[str, Queue]
    prio: Priorities
    world: tuple[object, ...]
    """What every job reads besides its own objects."""
    context: object
    """What every pod's outcome reads besides the pod (:meth:`BuildMemo.context`)."""
    known: dict[str, PodGroup | Group]
    """The jobs of this snapshot, in order: PodGroups whose queue exists (by key), then
    Kubernetes PodGroups; the build adds the in-memory groups of bare pods."""

    def kept_outcome(self, entry: PodEntry) -> Outcome | None:
        """What an earlier build made of ``entry``'s pod version, while nothing it read has
        changed: the context, and for a bare pod whether its group is described yet (by a pod
        before it); None when it must be classified again."""
        out = entry.outcome
        if (
            isinstance(out, Outcome)
            and out.context is self.context
            and (not out.group or (out.group in self.known) == out.joins)
        ):
            return out
        return None


def prelude(
    state: ClusterState,
    scheduler_names: Iterable[str],
    default_queue: str,
    memo: BuildMemo,
    bare_pods_in_memory: bool,
    managed_resources: frozenset[str],
    *,
    podgroups_in_context: bool = True,
    scope: Scope = WHOLE_CLUSTER,
) -> Prelude:
    """Everything of a build but the pods (whose memo entries must be current).

    Without ``podgroups_in_context`` the context token ignores Volcano PodGroups: the caller
    works out again itself the pods of each PodGroup that changed (:mod:`caldera.model`)."""
    names = frozenset(scheduler_names)
    b = Builder(state, names, default_queue, memo, bare_pods_in_memory, scope)
    space = b.space = _space(state, memo, managed_resources)
    vendors = enabled_vendors(managed_resources)
    table = b.nodes(space, vendors, managed_resources)
    queues = b.queues(space)
    default_class = [pc for pc in state.priority_classes.values() if pc.global_default]
    prio = Priorities(
        {n: pc.value for n, pc in state.priority_classes.items()},
        default_class[0].value if default_class else 0,
    )
    assert memo.nodes is not None
    # the node rows, not the node objects: what a job or a pod's outcome reads of the nodes is
    # which row each is on (a cordon, a label, an allocatable changes no job)
    world = (space, memo.nodes.rows, prio.key(), default_queue, names, managed_resources, scope)
    memo.kept.start(world)
    known: dict[str, PodGroup | Group] = {}
    for key, pg in sorted(state.podgroups.items()):
        queue_name = pg.spec.queue or default_queue
        if queue_name not in queues:
            b.problem("PodGroup", key, f"spec.queue: queue {queue_name!r} does not exist")
            continue
        known[key] = pg
    for key, wpg in sorted(state.workload_podgroups.items()):
        group = b.workload_group(space, key, wpg, queues)
        if group is not None:
            known[group.group.key] = group
            b.implicit.append(group.group.key)
    context = memo.context(
        (
            *world,
            bare_pods_in_memory,
            frozenset(queues),
            dict(state.invalid),
            dict(state.owner_min_members),
        ),
        _groups(state, volcano=podgroups_in_context),
    )
    return Prelude(b, space, vendors, table, queues, prio, world, context, known)


def report_gone(b: Builder, gone: Mapping[str, str]) -> None:
    """Pods bound to nodes that no longer exist hold nothing (the pod garbage collector deletes
    them): reported once, with a count."""
    if not gone:
        return
    keys = sorted(gone)
    nodes = sorted(set(gone.values()))
    named = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
    b.problem(
        "Pod",
        keys[0] + (f" and {len(keys) - 1} more" if len(keys) > 1 else ""),
        f"spec.nodeName: {len(keys)} pods are bound to nodes that do not exist ({named}); "
        "they hold nothing until the pod garbage collector deletes them",
    )


def claim_statuses_of(pod: Pod) -> dict[str, str | None]:
    """The pod's ResourceClaim of each of its claim names (DynamicResources)."""
    return {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}


def set_implicit_phase(job: Job) -> None:
    """An in-memory group has no status to remember its phase by: it is what the pods say."""
    job.phase = "Running" if job.is_ready() else "Inqueue" if job.ready_task_num() else "Pending"


def finish(
    state: ClusterState,
    pre: Prelude,
    jobs: dict[str, Job],
    held: Mapping[str, str],
    claim_statuses: dict[str, dict[str, str | None]],
) -> Snapshot:
    """The snapshot of ``jobs`` on ``pre``'s table (its placed pods added), with the held pods
    (key → why) and what the state holds besides pods and jobs."""
    b, space, table, prio = pre.builder, pre.space, pre.table, pre.prio
    snapshot = Snapshot(
        space=space,
        nodes=table,
        jobs=jobs,
        queues=pre.queues,
        now=0.0,
        session_id="",
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
            claim_statuses=claim_statuses,
        ),
    )
    snapshot.quotas = quotas(state)
    snapshot.quota_statuses = quota_statuses(state)
    snapshot.priority_classes = prio.values
    snapshot.numatopologies = dict(state.numatopologies)
    snapshot.disruption_budgets = [d for _, d in sorted(state.disruption_budgets.items())]
    snapshot.hypernodes = b.hypernodes(table)
    scope = b.scope
    snapshot.shard = shard_view(scope.shard_mode, scope.shard_name, state.node_shards, table.names)
    assert b.memo.nodes is not None
    snapshot.outside_allocatable = b.memo.nodes.outside
    snapshot.held = {
        key: (b.task(space, key, state.pods[key], "", prio), held[key]) for key in sorted(held)
    }
    snapshot.spread_owners = spread_owners(state)
    snapshot.config_maps = dict(state.config_maps)
    memo = b.memo
    for dropped in memo.workload_groups.keys() - state.workload_podgroups.keys():
        del memo.workload_groups[dropped]
    return snapshot


def _groups(state: ClusterState, *, volcano: bool = True) -> Mapping[str, object]:
    """Both kinds of PodGroup (Volcano's only with ``volcano``), apart, for the context a
    pod's outcome depends on."""
    podgroups = state.podgroups if volcano else {}
    if not state.workload_podgroups:
        return podgroups
    workload = {workload_key(k): v for k, v in state.workload_podgroups.items()}
    return {**podgroups, **workload}
