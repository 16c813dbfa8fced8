"""Run scheduling cycles on an in-memory cluster, applying decisions between cycles.

Before the first cycle the ``root`` and default queues are created if missing, as the scheduler
does at startup. Between cycles the simulator does what the rest of Kubernetes would: a bound pod
gets its node and phase Running (the kubelet), a volume chosen for a claim is bound to it (the
PersistentVolume controller), a claim to provision gets its selected node, a ResourceClaim gets
the allocation and consumer the binder would write (DynamicResources' PreBind), an evicted pod
disappears, a pod whose queue-allocation gate the session lifted loses it, and the PodGroup and
Queue status the session wrote is stored. Simulated time starts one period after the newest
creation time in the input and advances one schedule period per cycle, so the output depends
only on the input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from caldera.api.task import without_queue_gate
from caldera.cache.groups import workload_group_of
from caldera.cache.podgroups import annotate_pod, implicit_podgroup, implicit_podgroup_name
from caldera.cache.queues import ensure_builtin_queues
from caldera.cache.snapshot import BuildMemo, build_snapshot, stable_uid
from caldera.cache.state import ClusterState
from caldera.collector import between_cycles
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import Bind, CycleResult
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.models.core import FINISHED_PHASES
from caldera.models.dra import AllocationResult, ResourceClaimConsumerReference
from caldera.models.parse import ObjectError
from caldera.models.storage import (
    BIND_COMPLETED_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    ClaimReference,
)
from caldera.models.volcano import (
    ALLOCATED_HYPERNODE_ANNOTATION,
    GROUP_NAME_ANNOTATION,
)
from caldera.quantity import to_engine_units
from caldera.simulate.progress import Progress
from caldera.simulate.usage_file import Reading, at

__all__ = ["CycleRecord", "Simulation", "adopt_bare_pods", "simulate"]


@dataclass(slots=True)
class CycleRecord:
    cycle: int
    now: float
    result: CycleResult
    problems: list[ObjectError]


@dataclass(slots=True)
class Simulation:
    state: ClusterState
    cycles: list[CycleRecord] = field(default_factory=list)
    bind_annotations: dict[str, dict[str, str]] = field(default_factory=dict)


def adopt_bare_pods(state: ClusterState, scheduler_names: Iterable[str]) -> list[str]:
    """Give our pods without a PodGroup (of either kind) one, as the PodGroup controller would:
    running ones too (they count against their queue, as in the operator's in-memory groups),
    but not those on a node that no longer exists (they hold nothing)."""
    names = frozenset(scheduler_names)
    created = []
    for key, pod in sorted(state.pods.items()):
        if pod.spec.scheduler_name not in names:
            continue
        if pod.spec.node_name and pod.spec.node_name not in state.nodes:
            continue
        if pod.status.phase in FINISHED_PHASES:
            continue
        if GROUP_NAME_ANNOTATION in pod.metadata.annotations:
            continue
        if workload_group_of(pod):
            continue  # a member of a Kubernetes PodGroup
        if not pod.metadata.uid:
            meta = pod.metadata.model_copy(update={"uid": stable_uid("Pod", key)})
            pod = pod.model_copy(update={"metadata": meta})
        group = implicit_podgroup_name(pod)
        pg_key = f"{pod.metadata.namespace}/{group}"
        if pg_key not in state.podgroups:
            state.podgroups[pg_key] = implicit_podgroup(pod)
            created.append(pg_key)
        state.pods[key] = annotate_pod(pod, group)
    return created


def _bind_volumes(state: ClusterState, bind: Bind) -> None:
    """What the PersistentVolume controller does after the binder's PreBind writes."""
    for vb in bind.volumes:
        key = f"{vb.namespace}/{vb.claim}"
        claim = state.persistent_volume_claims.get(key)
        if claim is None:
            continue
        meta = claim.metadata
        if not vb.volume:
            notes = {**meta.annotations, SELECTED_NODE_ANNOTATION: bind.node}
            state.persistent_volume_claims[key] = claim.model_copy(
                update={"metadata": meta.model_copy(update={"annotations": notes})}
            )
            continue
        volume = state.persistent_volumes.get(vb.volume)
        if volume is None:
            continue
        ref = ClaimReference(
            kind="PersistentVolumeClaim",
            api_version="v1",
            namespace=vb.namespace,
            name=vb.claim,
            uid=meta.uid or "",
        )
        state.persistent_volumes[vb.volume] = volume.model_copy(
            update={
                "spec": volume.spec.model_copy(update={"claim_ref": ref}),
                "status": volume.status.model_copy(update={"phase": "Bound"}),
            }
        )
        notes = {**meta.annotations, BIND_COMPLETED_ANNOTATION: "yes"}
        state.persistent_volume_claims[key] = claim.model_copy(
            update={
                "metadata": meta.model_copy(update={"annotations": notes}),
                "spec": claim.spec.model_copy(update={"volume_name": vb.volume}),
                "status": claim.status.model_copy(update={"phase": "Bound"}),
            }
        )


def _bind_claims(state: ClusterState, bind: Bind) -> None:
    """What the binder's claim status writes leave in the API."""
    for write in bind.claims:
        key = f"{write.namespace}/{write.claim}"
        claim = state.resource_claims.get(key)
        if claim is None:
            continue
        status = claim.status
        if write.allocation is not None:
            allocation = AllocationResult.model_validate(write.allocation)
            status = status.model_copy(update={"allocation": allocation})
        consumers = tuple(
            ResourceClaimConsumerReference(resource="pods", name=name, uid=uid)
            for name, uid in write.reserved_for
        )
        status = status.model_copy(update={"reserved_for": consumers})
        state.resource_claims[key] = claim.model_copy(update={"status": status})


def _apply(state: ClusterState, result: CycleResult, sim: Simulation) -> None:
    for bind in result.binds:
        _bind_volumes(state, bind)
        _bind_claims(state, bind)
        key = f"{bind.namespace}/{bind.name}"
        pod = state.pods[key]
        meta = pod.metadata
        if bind.annotations:
            meta = meta.model_copy(update={"annotations": {**meta.annotations, **bind.annotations}})
            sim.bind_annotations.setdefault(key, {}).update(bind.annotations)
        state.pods[key] = pod.model_copy(
            update={
                "metadata": meta,
                "spec": pod.spec.model_copy(update={"node_name": bind.node}),
                "status": pod.status.model_copy(update={"phase": "Running"}),
            }
        )
    for evict in result.evictions:
        state.pods.pop(f"{evict.namespace}/{evict.name}", None)
    for lift in result.gate_lifts:
        key = f"{lift.namespace}/{lift.name}"
        state.pods[key] = without_queue_gate(state.pods[key])
    for st in result.podgroups:
        key = f"{st.namespace}/{st.name}"
        pg = state.podgroups.get(key)
        if pg is None or not st.changed:
            continue
        status = pg.status.model_copy(
            update={
                "phase": st.phase,
                "running": st.running,
                "succeeded": st.succeeded,
                "failed": st.failed,
                "conditions": st.conditions,
            }
        )
        update: dict[str, object] = {"status": status}
        if st.hypernode:
            notes = {**pg.metadata.annotations, ALLOCATED_HYPERNODE_ANNOTATION: st.hypernode}
            update["metadata"] = pg.metadata.model_copy(update={"annotations": notes})
        state.podgroups[key] = pg.model_copy(update=update)
    for hs in result.hypernodes:
        hn = state.hypernodes.get(hs.name)
        if hn is not None:
            hn_status = hn.status.model_copy(update={"node_count": hs.node_count})
            state.hypernodes[hs.name] = hn.model_copy(update={"status": hn_status})
    for qs in result.queues:
        queue = state.queues.get(qs.name)
        if queue is None or not qs.changed:
            continue
        allocated = {k: to_engine_units(k, v) for k, v in qs.allocated.items()}
        queue_status = queue.status.model_copy(update={"allocated": allocated})
        state.queues[qs.name] = queue.model_copy(update={"status": queue_status})


def _start_time(state: ClusterState) -> float:
    metas = [
        *(o.metadata for o in state.pods.values()),
        *(o.metadata for o in state.podgroups.values()),
        *(o.metadata for o in state.queues.values()),
        *(o.metadata for o in state.nodes.values()),
    ]
    stamps = [m.creation_timestamp for m in metas if m.creation_timestamp is not None]
    return max(stamps, default=0.0)


def simulate(
    state: ClusterState,
    policy: Policy,
    registry: Registry,
    *,
    scheduler_names: Iterable[str],
    cycles: int = 1,
    period: float = 1.0,
    default_queue: str = "default",
    progress: Progress | None = None,
    memo: BuildMemo | None = None,
    node_usage: Mapping[str, Reading] | None = None,
    trace: str = "",
) -> Simulation:
    """Run ``cycles`` cycles, applying each one's decisions before the next; ``progress`` (shown
    on a terminal only) says which cycle runs and how many pods were bound so far. Pod requests
    are worked out once per pod object over all cycles (in ``memo``, when given, shared with
    snapshots built elsewhere on the same objects). ``node_usage`` is the nodes' real load for
    the ``usage`` plugin, the same age at every cycle. ``trace`` names a pod whose every
    refusing node each cycle keeps (``CycleResult.traced_nodes``)."""
    names = list(scheduler_names)
    memo = memo if memo is not None else BuildMemo()
    shown = progress or Progress()
    sim = Simulation(state=state)
    start = _start_time(state)
    ensure_builtin_queues(state, default_queue, created=start)

    def one_cycle(cycle: int, step: str) -> CycleRecord:
        """A cycle on ``state`` as it stands; its snapshot and session end with it."""
        shown.show(f"{step}: building the snapshot")
        adopt_bare_pods(state, names)
        now = start + cycle * period
        snapshot, problems = build_snapshot(
            state,
            scheduler_names=names,
            now=now,
            session_id=stable_uid("Session", str(cycle)),
            default_queue=default_queue,
            memo=memo,
            managed_resources=policy.managed_resources,
        )
        if node_usage:
            snapshot.node_usage = at(node_usage, now)
        shown.show(f"{step}: scheduling {len(snapshot.jobs):,} jobs")
        result = run_cycle(snapshot, policy, registry, trace=trace)
        return CycleRecord(cycle, now, result, problems)

    bound = 0
    try:
        for cycle in range(1, cycles + 1):
            if cycle > 1:
                between_cycles()  # the last cycle's snapshot and session are garbage now
            record = one_cycle(cycle, f"cycle {cycle}/{cycles} ({bound:,} pods bound so far)")
            bound += len(record.result.binds)
            sim.cycles.append(record)
            _apply(state, record.result, sim)
    finally:
        shown.clear()
    return sim
