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

from collections.abc import Iterable, Mapping

from caldera.api.resources import counts_as_resource
from caldera.api.snapshot import NAMESPACE_NAME_LABEL, Snapshot
from caldera.api.task import Task
from caldera.cache.builder import (
    GONE,
    HELD,
    NO_MEMBERS,
    SKIP,
    Builder,
    Group,
    Members,
    Outcome,
    Priorities,
)
from caldera.cache.derived import quota_statuses, quotas, spread_owners
from caldera.cache.groups import workload_key
from caldera.cache.memo import BuildMemo, stable_uid
from caldera.cache.state import ClusterState
from caldera.cache.topology import assign_subgroups
from caldera.devices.vendors import enabled_vendors
from caldera.models.dra import DraObjects
from caldera.models.parse import ObjectError
from caldera.models.storage import StorageObjects
from caldera.models.volcano import PodGroup

__all__ = ["BuildMemo", "build_snapshot", "stable_uid"]


def _resource_names(state: ClusterState, memo: BuildMemo, managed: frozenset[str]) -> Iterable[str]:
    for name in _all_resource_names(state, memo):
        if name not in managed:
            yield name


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
    b = Builder(state, names, default_queue, memo, bare_pods_in_memory)
    for key, pod in state.pods.items():
        memo.entry(key, pod)
    space = b.space = memo.space(_resource_names(state, memo, managed_resources))
    vendors = enabled_vendors(managed_resources)
    table = b.nodes(space, vendors, managed_resources)
    queues = b.queues(space)
    default_class = [pc for pc in state.priority_classes.values() if pc.global_default]
    prio = Priorities(
        {n: pc.value for n, pc in state.priority_classes.items()},
        default_class[0].value if default_class else 0,
    )

    world = (space, memo.nodes, prio.key(), default_queue, names, managed_resources)
    """What every job reads besides its own objects."""
    memo.kept.start(world)
    known: dict[str, PodGroup | Group] = {}
    """The jobs of this snapshot, in order: PodGroups whose queue exists (by key), then the
    in-memory groups of bare pods (in the order of their first pod)."""
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

    held: dict[str, tuple[Task, str]] = {}
    gone: list[str] = []
    """Pods bound to nodes that no longer exist: they hold nothing (the pod garbage collector
    deletes them), and are reported once, with a count."""
    gone_nodes: set[str] = set()
    members: dict[str, Members] = {}
    jobless: dict[str, Task] = {}
    on_nodes: list[tuple[str, str, int, str]] = []
    """(job or "", pod, node row, task UID) of every pod that holds room on a node, in pod
    order."""
    context = memo.context(
        (
            *world,
            bare_pods_in_memory,
            frozenset(queues),
            dict(state.invalid),
            dict(state.owner_min_members),
        ),
        _groups(state),
    )
    entries = memo.entries
    problems = b.problems
    for key, pod in sorted(state.pods.items()):
        entry = entries[key]
        out = entry.outcome
        if (
            isinstance(out, Outcome)
            and out.context is context
            and (not out.group or (out.group in known) == out.joins)
        ):
            if out.problems:
                problems.extend(out.problems)
        else:  # worked out again (reporting its problems): the pod, or what it reads, changed
            out = entry.outcome = b.classify(key, entry, known, queues, prio, context, vendors)
        kind = out.kind
        if kind is GONE:
            gone.append(key)
            gone_nodes.add(pod.spec.node_name)
            continue
        if kind is HELD:
            held[key] = (b.task(space, key, pod, "", prio), out.why)
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
            jobless[key] = b.task(space, key, pod, "", prio)
        if out.row >= 0:
            on_nodes.append((job_key, key, out.row, out.uid))

    jobs = {
        key: b.kept_job(space, key, spec, members.get(key, NO_MEMBERS), prio)
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
    snapshot.quota_statuses = quota_statuses(state)
    snapshot.priority_classes = prio.values
    snapshot.numatopologies = dict(state.numatopologies)
    snapshot.disruption_budgets = [b for _, b in sorted(state.disruption_budgets.items())]
    snapshot.hypernodes = b.hypernodes(table)
    snapshot.held = held
    snapshot.spread_owners = spread_owners(state)
    memo.keep_only(state.pods.keys())
    for dropped in memo.workload_groups.keys() - state.workload_podgroups.keys():
        del memo.workload_groups[dropped]
    return snapshot, b.problems


def _groups(state: ClusterState) -> Mapping[str, object]:
    """Both kinds of PodGroup, apart, for the context a pod's outcome depends on."""
    if not state.workload_podgroups:
        return state.podgroups
    workload = {workload_key(k): v for k, v in state.workload_podgroups.items()}
    return {**state.podgroups, **workload}
