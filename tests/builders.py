"""Keyword builders for test objects and a one-call scenario runner.

Objects are built as the raw dicts an API server or manifest would hold and validated through the
same models the product uses, so tests exercise the real boundary. ``scenario()`` runs the real
simulator (snapshot → session → actions → close) on them; ``open_session()`` stops once the session
is open, for tests that ask its extension points directly. ``policy_text()`` writes a policy's
YAML and ``default_policy_with()`` derives one from Volcano's built-in policy. ``engine_task()``
and ``node_table()`` build engine objects directly, for scorer tests that need no snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import yaml

from caldera.api.node import NodeTable
from caldera.api.resources import PODS, ResourceSpace, Vector
from caldera.api.snapshot import Snapshot
from caldera.api.task import Task, TaskStatus
from caldera.cache.snapshot import build_snapshot
from caldera.cache.state import ClusterState
from caldera.framework.policy import DEFAULT_POLICY_YAML, Policy, default_policy, load_policy
from caldera.framework.registry import Registry
from caldera.framework.session import Session
from caldera.models.core import (
    Container,
    Node,
    Pod,
    PriorityClass,
    ResourceQuota,
    effective_requests,
    nonzero_requests,
)
from caldera.models.numa import Numatopology
from caldera.models.parse import parse_object
from caldera.models.shard import NodeShard
from caldera.models.topology import HyperNode
from caldera.models.volcano import PodGroup, Queue
from caldera.models.workload import WorkloadPodGroup
from caldera.models.workloads import ReplicaSet, ReplicationController, Service, StatefulSet
from caldera.plugins.nodeorder.resources import GPU
from caldera.simulate.report import report
from caldera.simulate.runner import Simulation, simulate

REGISTRY = Registry.from_entry_points()

MINDCLUSTER_CONFIG_043 = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.AscendMindClusterVNPUEnable: true   # enable ascend vnpu
configurations:
...
- name: init-params
  arguments: {"grace-over-time":"900","presetVirtualDevice":"false"}  \
# to enable dynamic virtualization, presetVirtualDevice need to be set false
"""
"""Real config 043 (``shared/real-configs/043-volcano-doc-vnpu-mindcluster.yaml``, Volcano's
``how_to_use_vnpu.md``), as users run it: its ``init-params`` come after a ``...`` line, so
Volcano (and Caldera) read none of them and every default holds (ClusterD's ConfigMaps, free
chips worked out by the scheduler)."""
Obj = (
    Pod
    | Node
    | PodGroup
    | Queue
    | PriorityClass
    | Service
    | ReplicationController
    | ReplicaSet
    | StatefulSet
    | HyperNode
    | NodeShard
    | ResourceQuota
    | Numatopology
    | WorkloadPodGroup
)
ObjT = TypeVar(
    "ObjT",
    Pod,
    Node,
    PodGroup,
    Queue,
    PriorityClass,
    Service,
    ReplicationController,
    ReplicaSet,
    StatefulSet,
    HyperNode,
    NodeShard,
    ResourceQuota,
    Numatopology,
    WorkloadPodGroup,
)


def _meta(name: str, namespace: str | None, created: float | None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **{k: v for k, v in extra.items() if v}}
    if namespace is not None:
        meta["namespace"] = namespace
    if created is not None:
        meta["creationTimestamp"] = created
    return meta


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    unschedulable: bool = False,
    ready: bool = True,
    images: Mapping[str, int] | None = None,
    annotations: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
) -> Node:
    raw = {
        "kind": "Node",
        "metadata": _meta(
            name, None, None, labels=dict(labels or {}), annotations=dict(annotations or {})
        ),
        "spec": {"unschedulable": unschedulable, "taints": list(taints)},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})},
            "capacity": dict(capacity or {}),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "images": [{"names": [n], "sizeBytes": size} for n, size in (images or {}).items()],
        },
    }
    return _parse(Node, raw)


def pod(
    name: str,
    *,
    namespace: str = "default",
    group: str | None = None,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    extra: Mapping[str, str] | None = None,
    scheduler: str = "volcano",
    node_name: str = "",
    phase: str | None = None,
    priority: int | None = None,
    priority_class: str = "",
    created: float | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    affinity: Mapping[str, Any] | None = None,
    tolerations: Iterable[Mapping[str, Any]] = (),
    init_containers: Iterable[Mapping[str, Any]] = (),
    overhead: Mapping[str, str] | None = None,
    ports: Iterable[Mapping[str, Any]] = (),
    images: Iterable[str] = ("busybox",),
    topology_spread_constraints: Iterable[Mapping[str, Any]] = (),
    volumes: Iterable[Mapping[str, Any]] = (),
    uid: str = "",
    preemption_policy: str | None = None,
    owners: Iterable[Mapping[str, Any]] = (),
    limits: Mapping[str, str] | None = None,
    gates: Iterable[str] = (),
    scheduling_group: str = "",
    nominated: str = "",
    preempted_at: float | None = None,
) -> Pod:
    """A pod; ``nominated``: its ``status.nominatedNodeName``; ``preempted_at``: terminating
    since then, preempted by a scheduler (its ``DisruptionTarget`` condition)."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    first, *more = images
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "main", "image": first, "resources": {"requests": requests}},
            *({"name": f"c{i}", "image": image} for i, image in enumerate(more, start=1)),
        ],
        "nodeName": node_name,
        "tolerations": list(tolerations),
        "initContainers": list(init_containers),
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    if overhead:
        spec["overhead"] = dict(overhead)
    if ports:
        spec["containers"][0]["ports"] = [dict(p) for p in ports]
    if limits:
        spec["containers"][0]["resources"]["limits"] = dict(limits)
    if topology_spread_constraints:
        spec["topologySpreadConstraints"] = [dict(c) for c in topology_spread_constraints]
    if volumes:
        spec["volumes"] = [dict(v) for v in volumes]
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if scheduling_group:
        spec["schedulingGroup"] = {"podGroupName": scheduling_group}
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    raw = {
        "kind": "Pod",
        "metadata": _meta(
            name,
            namespace,
            created,
            labels=dict(labels or {}),
            annotations=ann,
            uid=uid,
            ownerReferences=[dict(o) for o in owners],
            deletionTimestamp=preempted_at,
        ),
        "spec": spec,
        "status": status,
    }
    if nominated:
        status["nominatedNodeName"] = nominated
    if preempted_at is not None:
        status["conditions"] = [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    return _parse(Pod, raw)


def owner(
    kind: str, name: str, *, api_version: str | None = None, controller: bool = True
) -> dict[str, Any]:
    """An owner reference for ``pod(owners=...)``; the API version defaults to the kind's own
    (``v1`` for a ReplicationController, ``apps/v1`` otherwise)."""
    version = api_version or ("v1" if kind == "ReplicationController" else "apps/v1")
    return {
        "apiVersion": version,
        "kind": kind,
        "name": name,
        "uid": f"uid-{kind}-{name}",
        "controller": controller,
    }


def service(
    name: str, selector: Mapping[str, str] | None, *, namespace: str = "default"
) -> Service:
    """A Service selecting pods by ``selector`` (None: a Service without a selector)."""
    spec = {} if selector is None else {"selector": dict(selector)}
    raw = {"kind": "Service", "metadata": _meta(name, namespace, None), "spec": spec}
    return _parse(Service, raw)


def replication_controller(
    name: str, selector: Mapping[str, str], *, namespace: str = "default"
) -> ReplicationController:
    raw = {
        "kind": "ReplicationController",
        "metadata": _meta(name, namespace, None),
        "spec": {"selector": dict(selector)},
    }
    return _parse(ReplicationController, raw)


def replica_set(
    name: str, selector: Mapping[str, Any] | None, *, namespace: str = "default"
) -> ReplicaSet:
    """A ReplicaSet whose ``spec.selector`` is the LabelSelector ``selector`` as written."""
    spec = {} if selector is None else {"selector": dict(selector)}
    raw = {"kind": "ReplicaSet", "metadata": _meta(name, namespace, None), "spec": spec}
    return _parse(ReplicaSet, raw)


def stateful_set(
    name: str, selector: Mapping[str, Any] | None, *, namespace: str = "default"
) -> StatefulSet:
    spec = {} if selector is None else {"selector": dict(selector)}
    raw = {"kind": "StatefulSet", "metadata": _meta(name, namespace, None), "spec": spec}
    return _parse(StatefulSet, raw)


def podgroup(
    name: str,
    *,
    namespace: str = "default",
    min_member: int = 1,
    queue: str = "default",
    min_resources: Mapping[str, str] | None = None,
    priority_class: str = "",
    phase: str = "Pending",
    created: float | None = None,
    annotations: Mapping[str, str] | None = None,
    min_task_member: Mapping[str, int] | None = None,
    network_topology: Mapping[str, Any] | None = None,
    sub_group_policy: Iterable[Mapping[str, Any]] = (),
) -> PodGroup:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if network_topology is not None:
        spec["networkTopology"] = dict(network_topology)
    if sub_group_policy:
        spec["subGroupPolicy"] = [dict(p) for p in sub_group_policy]
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = dict(min_task_member)
    raw = {
        "kind": "PodGroup",
        "metadata": _meta(name, namespace, created, annotations=dict(annotations or {})),
        "spec": spec,
        "status": {"phase": phase},
    }
    return _parse(PodGroup, raw)


def queue(
    name: str,
    *,
    weight: int = 1,
    capability: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    state: str = "Open",
    priority: int = 0,
    parent: str = "",
    created: float | None = None,
    deserved: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    reclaimable: bool | None = None,
    affinity: Mapping[str, Any] | None = None,
) -> Queue:
    spec: dict[str, Any] = {"weight": weight, "priority": priority}
    if affinity is not None:
        spec["affinity"] = dict(affinity)
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    if deserved is not None:
        spec["deserved"] = dict(deserved)
    if capability is not None:
        spec["capability"] = dict(capability)
    if guarantee is not None:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if parent:
        spec["parent"] = parent
    raw = {
        "kind": "Queue",
        "metadata": _meta(name, None, created, annotations=dict(annotations or {})),
        "spec": spec,
        "status": {"state": state},
    }
    return _parse(Queue, raw)


def workload_podgroup(
    name: str, *, min_count: int | None = None, namespace: str = "default", **annotations: str
) -> WorkloadPodGroup:
    """A Kubernetes PodGroup (``scheduling.k8s.io``): a gang of ``min_count``, else ``basic``."""
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    raw = {
        "kind": "PodGroup",
        "metadata": _meta(name, namespace, None, annotations=dict(annotations)),
        "spec": {"schedulingPolicy": policy},
    }
    return _parse(WorkloadPodGroup, raw)


def hypernode(
    name: str,
    *,
    tier: int,
    nodes: Iterable[str] = (),
    hypernodes: Iterable[str] = (),
    regex: str | None = None,
    labels: Mapping[str, str] | None = None,
    tier_name: str = "",
    members: Iterable[Mapping[str, Any]] = (),
) -> HyperNode:
    """A HyperNode whose members are ``nodes`` and ``hypernodes`` by exact name, plus nodes
    matching ``regex`` or ``labels``, plus raw ``members``."""
    listed: list[dict[str, Any]] = [
        {"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes
    ]
    listed += [{"type": "HyperNode", "selector": {"exactMatch": {"name": h}}} for h in hypernodes]
    if regex is not None:
        listed.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    if labels is not None:
        listed.append({"type": "Node", "selector": {"labelMatch": {"matchLabels": dict(labels)}}})
    listed += [dict(m) for m in members]
    spec: dict[str, Any] = {"tier": tier, "members": listed}
    if tier_name:
        spec["tierName"] = tier_name
    raw = {"kind": "HyperNode", "metadata": {"name": name}, "spec": spec}
    return _parse(HyperNode, raw)


def resource_quota(
    name: str,
    hard: Mapping[str, str],
    *,
    namespace: str = "default",
    used: Mapping[str, str] | None = None,
    status_hard: Mapping[str, str] | None = None,
) -> ResourceQuota:
    """A ResourceQuota with ``spec.hard``; ``used`` and ``status_hard`` fill its status as the
    quota controller would."""
    status: dict[str, Any] = {}
    if used is not None:
        status["used"] = dict(used)
    if status_hard is not None:
        status["hard"] = dict(status_hard)
    raw = {
        "kind": "ResourceQuota",
        "metadata": _meta(name, namespace, None),
        "spec": {"hard": dict(hard)},
        "status": status,
    }
    return _parse(ResourceQuota, raw)


def priority_class(name: str, value: int, *, default: bool = False) -> PriorityClass:
    raw = {
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }
    return _parse(PriorityClass, raw)


def _parse(cls: type[ObjT], raw: dict[str, Any]) -> ObjT:
    obj = parse_object(cls.__name__, raw)
    if isinstance(obj, cls):
        return obj
    raise AssertionError(f"test object does not validate: {obj}")


def policy(
    text: str | None = None, registry: Registry = REGISTRY, *, strict: bool = True
) -> Policy:
    """The policy ``text`` (Volcano's built-in one when ``None``), loaded against ``registry``;
    strict by default, so a misspelt key in a test's policy fails the test."""
    return default_policy(registry) if text is None else load_policy(text, registry, strict=strict)


def policy_text(
    actions: str,
    *tiers: Sequence[str],
    arguments: Mapping[str, Mapping[str, Any] | None] | None = None,
    configurations: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Policy YAML that runs ``actions`` (comma-separated) over the plugin ``tiers`` (each a
    sequence of plugin names), with ``arguments`` (``{plugin: its arguments}``; ``None`` gives
    none) and a ``configurations`` block (``{action: its arguments}``) if given."""
    args = dict(arguments or {})
    unknown = set(args) - {name for tier in tiers for name in tier}
    assert not unknown, f"arguments for plugins not in the tiers: {sorted(unknown)}"

    def option(name: str) -> dict[str, Any]:
        given = args.get(name)
        return {"name": name} if given is None else {"name": name, "arguments": dict(given)}

    doc: dict[str, Any] = {
        "actions": actions,
        "tiers": [{"plugins": [option(name) for name in tier]} for tier in tiers],
    }
    if configurations:
        doc["configurations"] = [
            {"name": action, "arguments": dict(action_args)}
            for action, action_args in configurations.items()
        ]
    text: str = yaml.safe_dump(doc, sort_keys=False)
    return text


def default_policy_with(
    *,
    actions: str | None = None,
    add: Mapping[str, str] | None = None,
    arguments: Mapping[str, Mapping[str, Any] | None] | None = None,
    configurations: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Volcano's built-in policy (``DEFAULT_POLICY_YAML``) as ``policy_text()``, changed by:

    - ``actions``: another action list, e.g. ``"enqueue, allocate"``;
    - ``add``: ``{new plugin: the plugin it goes right after}``, in that plugin's tier;
    - ``arguments`` and ``configurations``: as for ``policy_text()``.
    """
    default = yaml.safe_load(DEFAULT_POLICY_YAML)
    tiers: list[list[str]] = [[p["name"] for p in tier["plugins"]] for tier in default["tiers"]]
    for new, after in (add or {}).items():
        (tier,) = (t for t in tiers if after in t)
        tier.insert(tier.index(after) + 1, new)
    return policy_text(
        actions or default["actions"], *tiers, arguments=arguments, configurations=configurations
    )


def state_of(objects: Iterable[Obj]) -> ClusterState:
    state = ClusterState()
    for i, obj in enumerate(objects):
        if obj.metadata.creation_timestamp is None:
            meta = obj.metadata.model_copy(update={"creation_timestamp": 1_700_000_000.0 + i})
            obj = obj.model_copy(update={"metadata": meta})
        state.add(obj)
    if "default" not in state.queues:
        state.add(queue("default", created=1_600_000_000.0))
    return state


NOW = 2e9
"""Session time of ``open_session()``: later than every builder default creation time."""


def snapshot_of(
    objects: Iterable[Obj], *, now: float = NOW, managed: frozenset[str] = frozenset()
) -> Snapshot:
    """The snapshot of ``state_of(objects)`` for the ``volcano`` scheduler; no object may be left
    out as a problem."""
    snapshot, problems = build_snapshot(
        state_of(objects),
        scheduler_names=["volcano"],
        now=now,
        session_id="test",
        managed_resources=managed,
    )
    assert not problems, problems
    return snapshot


def new_session(
    objects: Iterable[Obj], policy_yaml: str | None = None, *, registry: Registry = REGISTRY
) -> Session:
    """A session on ``snapshot_of(objects)`` under ``policy(policy_yaml, registry)``, not yet
    opened: no plugin has registered anything."""
    pol = policy(policy_yaml, registry)
    return Session(snapshot_of(objects, managed=pol.managed_resources), pol, registry)


def open_session(
    objects: Iterable[Obj], policy_yaml: str | None = None, *, registry: Registry = REGISTRY
) -> Session:
    """``new_session(...)``, opened: the plugins have registered on its extension points."""
    ssn = new_session(objects, policy_yaml, registry=registry)
    ssn.open()
    return ssn


def scenario(
    objects: Iterable[Obj],
    *,
    policy_yaml: str | None = None,
    cycles: int = 1,
    scheduler_names: Iterable[str] = ("volcano",),
    registry: Registry = REGISTRY,
) -> Simulation:
    """Run the simulator on ``objects`` (a ``default`` queue is added if missing)."""
    return simulate(
        state_of(objects),
        policy(policy_yaml, registry),
        registry,
        scheduler_names=scheduler_names,
        cycles=cycles,
    )


def engine_task(
    space: ResourceSpace,
    name: str,
    cpu: str | None = None,
    memory: str | None = None,
    gpu: str | None = None,
    *,
    status: TaskStatus = TaskStatus.PENDING,
) -> Task:
    """A job-less task of ``pod(name, ...)`` as the snapshot builds it: its request vector in
    ``space`` plus one pod slot, and kube-scheduler's non-zero scoring requests."""
    spec = pod(name, cpu=cpu, memory=memory, extra={GPU: gpu} if gpu else None).spec
    requests = effective_requests(spec)
    resreq = space.vector(requests)
    resreq[space.index[PODS]] += 1
    nz_cpu, nz_mem = nonzero_requests(spec)
    return Task(
        uid=name,
        namespace="default",
        name=name,
        job="",
        status=status,
        resreq=resreq,
        nonzero_cpu=nz_cpu,
        nonzero_memory=nz_mem,
        priority=0,
        creation=0.0,
        spec=spec,
        labels={},
        annotations={},
        best_effort=not any(requests.values()),
    )


def node_table(
    space: ResourceSpace, names: Sequence[str], allocatable: Sequence[Vector]
) -> NodeTable:
    """Empty nodes ``names``, each with its ``allocatable`` vector: no labels, no taints,
    schedulable."""
    n = len(names)
    return NodeTable(space, names, np.array(allocatable), [{}] * n, [()] * n, [False] * n)


def binds(sim: Simulation) -> dict[str, str]:
    """``{"ns/pod": node}`` for every bind in the run."""
    return {f"{b.namespace}/{b.name}": b.node for rec in sim.cycles for b in rec.result.binds}


def bound_with(sim: Simulation, name: str) -> dict[str, str]:
    """The annotations the one bind of the pod ``name`` in the run writes."""
    (bind,) = [b for r in sim.cycles for b in r.result.binds if b.name == name]
    return dict(bind.annotations)


def summary(sim: Simulation) -> dict[str, Any]:
    """The ``--output json`` document of the run."""
    return report(sim)


def task_named(ssn: Session, name: str) -> Task:
    """The session's task of the pod ``name``."""
    (task,) = [t for job in ssn.jobs.values() for t in job.tasks.values() if t.name == name]
    return task


def node_verdicts(ssn: Session, name: str) -> dict[str, str]:
    """Per node, the first reason the filters give for the pod ``name`` ("" where it passes)."""
    out = dict.fromkeys(ssn.nodes.names, "")
    for reason, mask in ssn.predicate(task_named(ssn, name)):
        for i in np.flatnonzero(mask):
            out[ssn.nodes.names[i]] = out[ssn.nodes.names[i]] or reason
    return out


def node_scores(ssn: Session, name: str) -> dict[str, float]:
    """Per node, the session's weighted score for the pod ``name``."""
    rows = np.arange(len(ssn.nodes), dtype=np.intp)
    totals = ssn.node_order(task_named(ssn, name), rows).tolist()
    return dict(zip(ssn.nodes.names, totals, strict=True))


# -- shared GPUs (HAMi) --------------------------------------------------------------------------

T4 = "NVIDIA-Tesla T4"
REGISTER = "hami.io/node-nvidia-register"
"""HAMi's NVIDIA registration annotation on a node."""


def card(
    uuid: str,
    devmem: int = 16000,
    *,
    count: int = 10,
    devcore: int = 100,
    model: str = T4,
    health: bool = True,
    numa: int = 0,
) -> dict[str, Any]:
    """One card as the device plugin registers it (§2.2)."""
    return {
        "id": uuid,
        "count": count,
        "devmem": devmem,
        "devcore": devcore,
        "type": model,
        "numa": numa,
        "mode": "hami-core",
        "health": health,
    }


def register(*cards: Mapping[str, Any]) -> str:
    """The JSON registration, indexes in listing order, Go's compact form."""
    return json.dumps([{**c, "index": i} for i, c in enumerate(cards)], separators=(",", ":"))


def gpu_node(
    name: str,
    *cards: Mapping[str, Any],
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Node:
    """A node registering ``cards`` (HAMi's JSON form), labelled ``host=<name>``."""
    return node(
        name,
        annotations={REGISTER: register(*cards), **(annotations or {})},
        labels={"host": name, **(labels or {})},
    )


def gpu(
    mem: int | None = None,
    *,
    n: int = 1,
    cores: int | None = None,
    percentage: int | None = None,
) -> dict[str, str]:
    """A container's HAMi resources (§1.1)."""
    out = {"nvidia.com/gpu": str(n)}
    if mem is not None:
        out["nvidia.com/gpumem"] = str(mem)
    if cores is not None:
        out["nvidia.com/gpucores"] = str(cores)
    if percentage is not None:
        out["nvidia.com/gpumem-percentage"] = str(percentage)
    return out


def with_containers(p: Pod, *resources: Mapping[str, str]) -> Pod:
    """``p`` with one app container per entry of ``resources`` (its requests, and 100m cpu)."""
    containers = tuple(
        Container.model_validate(
            {
                "name": f"c{i}",
                "image": "busybox",
                "resources": {"requests": {"cpu": "100m", **r}},
            }
        )
        for i, r in enumerate(resources)
    )
    return p.model_copy(update={"spec": p.spec.model_copy(update={"containers": containers})})
