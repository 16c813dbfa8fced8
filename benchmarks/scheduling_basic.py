"""Decision-only scheduling throughput on kube-scheduler's SchedulingBasic shape.

Nodes have 4 cpu / 32Gi / 110 pods; 1000 pods (100m / 500Mi) already run on them; P pending pods of
100m / 500Mi wait, each in its own PodGroup or, with ``--gang-size G``, in PodGroups of G
(minMember G). Sessions run with the default policy until one binds nothing. Throughput is pods
bound per second of session time (open + actions + close); building the snapshot from the API
objects is reported separately, as is peak RSS.

With ``--affinity`` nodes carry ``kubernetes.io/hostname`` and ``topology.kubernetes.io/zone``
(zone-0..zone-9) labels, every pod belongs to an app of 100 pods (label ``app``; the running pods
are spread over the same apps), and each pending pod has a required pod anti-affinity to its app
on ``kubernetes.io/hostname`` and a topology spread constraint over the zones (maxSkew 1,
DoNotSchedule, selecting its app).

With ``--gpus-per-node N`` every node registers N shared GPUs the HAMi way (16 GiB, 10 slots
each), the policy adds ``deviceshare`` (``VGPUEnable``), every pending pod asks one GPU for a
fraction of its memory and cores (1000–8000 MiB, 10–30 %), and a fifth of them come in gangs of 8.

With ``--npu`` those devices are Ascend 910B3 NPUs the HAMi way (64 GiB, 20 AI cores, 4 slots,
eight to a network) and every pending pod asks one NPU for 4-32 GiB and 1-10 AI cores.

With ``--leaf-size L`` the nodes form a three-tier HyperNode tree (leaves of L nodes at tier 1,
16 leaves per tier-2 HyperNode, one tier-3 root), every PodGroup asks ``networkTopology`` hard
with ``highestTierAllowed: 1`` (each gang inside one leaf), and the policy adds
``network-topology-aware``.

    python benchmarks/scheduling_basic.py --nodes 5000 --pods 10000 [--gang-size 20] [--affinity]
        [--gpus-per-node 8 [--npu]] [--leaf-size 16] [--operator-gc] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))

from caldera.api.usage import NodeUsage
from caldera.cache.snapshot import BuildMemo, build_snapshot, stable_uid
from caldera.cache.state import ClusterState
from caldera.collector import fewer_collections
from caldera.framework.cycle import run_cycle
from caldera.framework.policy import DEFAULT_POLICY_YAML, default_policy, load_policy
from caldera.framework.registry import Registry
from caldera.models.core import Node, Pod, ResourceQuota
from caldera.models.topology import HyperNode
from caldera.models.volcano import PodGroup, Queue

RUNNING = 1000
ZONES = 10
APP_SIZE = 100
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def _constraints(app: str) -> dict[str, Any]:
    """Required anti-affinity to the pod's app per node, hard spread of the app over zones."""
    selector = {"matchLabels": {"app": app}}
    return {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": HOSTNAME}
                ]
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": selector,
            }
        ],
    }


GPU_SHARES = ((1000, 10), (2000, 20), (4000, 30), (8000, 25))
"""(gpumem MiB, gpucores %) the GPU pods cycle through."""


NPU = "Ascend910B3"
NPU_SHARES = ((4096, 1), (8192, 2), (16384, 5), (32768, 10))
"""(memory MiB, AI cores) the NPU pods cycle through (with ``--npu``)."""


def _gpu_limits(i: int, npu: bool = False) -> dict[str, str]:
    if npu:
        mem, cores = NPU_SHARES[i % len(NPU_SHARES)]
        word = f"huawei.com/{NPU}"
        return {word: "1", f"{word}-memory": str(mem), f"{word}-core": str(cores)}
    mem, cores = GPU_SHARES[i % len(GPU_SHARES)]
    return {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(mem), "nvidia.com/gpucores": str(cores)}


def _pod(
    name: str, *, node: str = "", group: str = "", app: str = "", gpu: int = -1, npu: bool = False
) -> Pod:
    resources: dict[str, Any] = {"requests": {"cpu": "100m", "memory": "500Mi"}}
    if gpu >= 0:
        resources["limits"] = _gpu_limits(gpu, npu)
    spec: dict[str, Any] = {
        "schedulerName": "volcano" if group else "default-scheduler",
        "nodeName": node,
        "containers": [{"name": "c", "resources": resources}],
    }
    if app and not node:
        spec.update(_constraints(app))
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": stable_uid("Pod", name),
                "creationTimestamp": 1_700_000_000.0,
                "annotations": {"scheduling.k8s.io/group-name": group} if group else {},
                "labels": {"app": app} if app else {},
            },
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


def _register(node: str, gpus: int, npu: bool = False, mig: bool = False) -> str:
    if npu:  # HAMi's Ascend registration: 64 GiB, 20 AI cores, 4 containers, 8 to a network
        cards = [
            {"ID": f"NPU-{node}-{g}", "Index": g, "Count": 4, "Devmem": 65536, "Devcore": 20}
            | {"Type": NPU, "Health": True, "CustomInfo": {"NetworkID": g // 8}}
            for g in range(gpus)
        ]
    else:
        cards = [
            {"id": f"GPU-{node}-{g}", "index": g, "count": 10, "devmem": 16384, "devcore": 100}
            | {"type": "NVIDIA-A10", "mode": "hami-core", "health": True}
            for g in range(gpus)
        ]
        if mig and cards:  # the last card of each node in MIG mode, 7 slices of 16 GiB
            cards[-1] |= {"mode": "mig", "count": 7, "migProfiles": MIG_PROFILES}
    return json.dumps(cards, separators=(",", ":"))


MIG_PROFILES = [
    {"name": "1g.2gb", "memoryMB": 2304, "core": 14, "sliceCount": 1}
    | {"placements": [{"start": s, "size": 1} for s in range(7)]},
    {"name": "2g.4gb", "memoryMB": 4608, "core": 28, "sliceCount": 2}
    | {"placements": [{"start": s, "size": 2} for s in (0, 2, 4)]},
    {"name": "4g.8gb", "memoryMB": 9216, "core": 57, "sliceCount": 4}
    | {"placements": [{"start": 0, "size": 4}]},
]
"""MIG profiles of a 16 GiB card (with ``--mig``)."""


def _node(
    i: int,
    affinity: bool,
    gpus: int = 0,
    npu: bool = False,
    mig: bool = False,
    advertise: bool = False,
) -> Node:
    name = f"node-{i:05d}"
    labels = {HOSTNAME: name, ZONE: f"zone-{i % ZONES}"} if affinity else {}
    key = f"hami.io/node-register-{NPU}" if npu else "hami.io/node-nvidia-register"
    annotations = {key: _register(name, gpus, npu, mig)} if gpus else {}
    allocatable = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    if advertise and gpus:  # the device plugin publishes each card's sharing slots
        count, slots = (f"huawei.com/{NPU}", 4) if npu else ("nvidia.com/gpu", 10)
        allocatable[count] = str(slots * gpus)
    return Node.model_validate(
        {
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "status": {"allocatable": allocatable, "capacity": allocatable},
        }
    )


GPU_GANG = 8


LEAVES_PER_SPINE = 16


def _hypernode(name: str, tier: int, kind: str, members: list[str]) -> HyperNode:
    return HyperNode.model_validate(
        {
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [
                    {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members
                ],
            },
        }
    )


def add_tree(state: ClusterState, nodes: int, leaf: int) -> None:
    """Leaves of ``leaf`` nodes, spines of 16 leaves, one root."""
    names = [f"node-{i:05d}" for i in range(nodes)]
    leaves = [f"leaf-{j:04d}" for j in range((nodes + leaf - 1) // leaf)]
    for j, name in enumerate(leaves):
        state.add(_hypernode(name, 1, "Node", names[j * leaf : (j + 1) * leaf]))
    spines = []
    for k in range(0, len(leaves), LEAVES_PER_SPINE):
        spines.append(f"spine-{k // LEAVES_PER_SPINE:03d}")
        state.add(_hypernode(spines[-1], 2, "HyperNode", leaves[k : k + LEAVES_PER_SPINE]))
    state.add(_hypernode("root", 3, "HyperNode", spines))


def build_state(
    nodes: int,
    pods: int,
    gang: int,
    affinity: bool = False,
    gpus: int = 0,
    leaf: int = 0,
    npu: bool = False,
    mig: bool = False,
    advertise: bool = False,
) -> ClusterState:
    state = ClusterState()
    if leaf:
        add_tree(state, nodes, leaf)
    apps = max(1, pods // APP_SIZE)
    for i in range(nodes):
        state.add(_node(i, affinity, gpus, npu, mig, advertise))
    state.add(Queue.model_validate({"metadata": {"name": "default"}, "spec": {"weight": 1}}))
    for i in range(RUNNING):
        app = f"app-{i % apps:04d}" if affinity else ""
        state.add(_pod(f"running-{i:05d}", node=f"node-{i % nodes:05d}", app=app))
    g = 0
    while g < pods:
        size = gang or (GPU_GANG if gpus and g < pods // 5 else 1)
        members = min(size, pods - g)
        group = f"pg-{g:05d}"
        state.add(
            PodGroup.model_validate(
                {
                    "metadata": {
                        "name": group,
                        "namespace": "default",
                        "creationTimestamp": 1_700_000_000.0 + g,
                    },
                    "spec": {
                        "minMember": members,
                        "queue": "default",
                        "minResources": {
                            "cpu": f"{100 * members}m",
                            "memory": f"{500 * members}Mi",
                        },
                        **(
                            {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}}
                            if leaf
                            else {}
                        ),
                    },
                    "status": {"phase": "Pending"},
                }
            )
        )
        for k in range(members):
            app = f"app-{(g + k) // APP_SIZE:04d}" if affinity else ""
            gpu = g + k if gpus else -1
            state.add(_pod(f"pending-{g + k:05d}", group=group, app=app, gpu=gpu, npu=npu))
        g += members
    return state


def _bind_all(state: ClusterState, binds: list[Any]) -> None:
    for b in binds:
        key = f"{b.namespace}/{b.name}"
        pod = state.pods[key]
        meta = pod.metadata
        if b.annotations:  # the device assignment, as the binder writes it
            meta = meta.model_copy(update={"annotations": {**meta.annotations, **b.annotations}})
        state.pods[key] = pod.model_copy(
            update={
                "metadata": meta,
                "spec": pod.spec.model_copy(update={"node_name": b.node}),
                "status": pod.status.model_copy(update={"phase": "Running"}),
            }
        )


GPU_POLICY = (
    DEFAULT_POLICY_YAML
    + "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n"
)
NPU_POLICY = GPU_POLICY + "      deviceshare.AscendEnable: true\n"
TOPOLOGY_POLICY = DEFAULT_POLICY_YAML + "  - name: network-topology-aware\n"
EXTRAS_POLICY = (
    DEFAULT_POLICY_YAML.replace(
        '"enqueue, allocate, backfill"', '"enqueue, allocate, backfill, shuffle"'
    )
    + "  - name: resourcequota\n  - name: nodegroup\n  - name: rescheduling\n"
    + "  - name: task-topology\n  - name: numa-aware\n"
    + '  - name: tdm\n    arguments:\n      tdm.revocable-zone.spot: "00:00-23:59"\n'
)
"""The default policy with the six plugins Volcano's other configs use (``--more-plugins``)."""
USAGE_POLICY = DEFAULT_POLICY_YAML + "  - name: usage\n"
"""The default policy with the usage plugin (``--usage``)."""


def node_usage(state: ClusterState, now: float) -> dict[str, NodeUsage]:
    """Fresh metrics for every node, their load spread over 5–85% (none above the threshold for
    most, some refused: every node is asked)."""
    return {
        name: NodeUsage(5.0 + (i * 37) % 81, 10.0 + (i * 53) % 71, now - 20.0)
        for i, name in enumerate(sorted(state.nodes))
    }


GROUPS = 4


def add_extras(state: ClusterState) -> None:
    """What those plugins read: nodes in four node groups the default queue prefers, every tenth
    revocable (zone ``spot``, open all day), and a roomy ResourceQuota in the namespace."""
    for i, (key, node) in enumerate(sorted(state.nodes.items())):
        labels = {**node.metadata.labels, "volcano.sh/nodegroup-name": f"group-{i % GROUPS}"}
        if i % 10 == 9:
            labels["volcano.sh/revocable-zone"] = "spot"
        meta = node.metadata.model_copy(update={"labels": labels})
        state.nodes[key] = node.model_copy(update={"metadata": meta})
    groups = [f"group-{g}" for g in range(GROUPS)]
    queue = {
        "metadata": {"name": "default"},
        "spec": {
            "weight": 1,
            "affinity": {
                "nodeGroupAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": groups,
                    "preferredDuringSchedulingIgnoredDuringExecution": groups[:2],
                }
            },
        },
    }
    state.add(Queue.model_validate(queue))
    quota = {
        "metadata": {"name": "compute", "namespace": "default"},
        "spec": {"hard": {"cpu": "1000000", "memory": "10000Ti"}},
    }
    state.add(ResourceQuota.model_validate(quota))


def run(
    nodes: int,
    pods: int,
    gang: int,
    affinity: bool = False,
    max_sessions: int = 20,
    gpus: int = 0,
    leaf: int = 0,
    extras: bool = False,
    usage: bool = False,
    npu: bool = False,
    mig: bool = False,
    advertise: bool = False,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    state = build_state(nodes, pods, gang, affinity, gpus, leaf, npu, mig, advertise)
    if extras:
        add_extras(state)
    objects_s = time.perf_counter() - t0
    registry = Registry.from_entry_points()
    if extras:
        policy = load_policy(EXTRAS_POLICY, registry, strict=True)
    elif usage:
        policy = load_policy(USAGE_POLICY, registry, strict=True)
    elif gpus:
        policy = load_policy(NPU_POLICY if npu else GPU_POLICY, registry)
    elif leaf:
        policy = load_policy(TOPOLOGY_POLICY, registry)
    else:
        policy = default_policy(registry)
    bound = 0
    sessions: list[dict[str, float]] = []
    snapshot_s = 0.0
    memo = BuildMemo()  # as the operator keeps one across sessions
    cached = node_usage(state, 1_700_100_000.0) if usage else {}
    """Measured once, as the operator hands each session the last values (21–40 s old)."""
    for n in range(1, max_sessions + 1):
        t1 = time.perf_counter()
        snapshot, _ = build_snapshot(
            state,
            scheduler_names=["volcano"],
            now=1_700_100_000.0 + n,
            session_id=f"s{n}",
            memo=memo,
            managed_resources=policy.managed_resources,
        )
        if usage:
            snapshot.node_usage = cached
        t2 = time.perf_counter()
        result = run_cycle(snapshot, policy, registry)
        t3 = time.perf_counter()
        snapshot_s += t2 - t1
        sessions.append({"seconds": t3 - t2, "binds": len(result.binds), **result.timings})
        bound += len(result.binds)
        if not result.binds:
            break
        _bind_all(state, result.binds)
    session_s = sum(s["seconds"] for s in sessions)
    return {
        "nodes": nodes,
        "pods": pods,
        "gang_size": gang,
        "affinity": affinity,
        "gpus_per_node": gpus,
        "npu": npu,
        "advertise": advertise,
        "mig": mig,
        "leaf_size": leaf,
        "more_plugins": extras,
        "usage": usage,
        "bound": bound,
        "sessions": len(sessions),
        "session_seconds": round(session_s, 4),
        "pods_per_second": round(bound / session_s, 1) if session_s else 0.0,
        "snapshot_build_seconds": round(snapshot_s, 4),
        "object_setup_seconds": round(objects_s, 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "per_session": [{k: round(v, 4) for k, v in s.items()} for s in sessions],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--gang-size", type=int, default=0)
    parser.add_argument(
        "--affinity",
        action="store_true",
        help="zone-labelled nodes; pods with hostname anti-affinity and zone spread per app",
    )
    parser.add_argument(
        "--gpus-per-node",
        type=int,
        default=0,
        help="shared GPUs per node (HAMi registration); pods ask a fraction of one",
    )
    parser.add_argument(
        "--npu",
        action="store_true",
        help="with --gpus-per-node: Ascend 910B3 NPUs the HAMi way instead of NVIDIA GPUs",
    )
    parser.add_argument(
        "--mig",
        action="store_true",
        help="with --gpus-per-node: the last GPU of every node in MIG mode (HAMi's dynamic MIG)",
    )
    parser.add_argument(
        "--advertise",
        action="store_true",
        help="with --gpus-per-node: nodes publish the device count (nvidia.com/gpu, "
        "huawei.com/Ascend910B3: every card's sharing slots) as the device plugins do",
    )
    parser.add_argument(
        "--leaf-size",
        type=int,
        default=0,
        help="HyperNode leaves of this many nodes (3 tiers); gangs must fit one leaf",
    )
    parser.add_argument(
        "--more-plugins",
        action="store_true",
        help="the policy adds resourcequota, nodegroup, tdm, rescheduling, task-topology and "
        "numa-aware (and shuffle): nodes in four node groups, every tenth revocable, a roomy "
        "namespace quota",
    )
    parser.add_argument(
        "--usage",
        action="store_true",
        help="the policy adds the usage plugin, with fresh metrics for every node (loads spread "
        "over 5-85%%)",
    )
    parser.add_argument(
        "--operator-gc",
        action="store_true",
        help="collect cyclic garbage as the operator's session process does (fewer collections)",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.operator_gc:
        fewer_collections()
    out = run(
        args.nodes,
        args.pods,
        args.gang_size,
        args.affinity,
        gpus=args.gpus_per_node,
        leaf=args.leaf_size,
        extras=args.more_plugins,
        usage=args.usage,
        npu=args.npu,
        mig=args.mig,
        advertise=args.advertise,
    )
    if args.json:
        print(json.dumps(out))
        return
    print(
        f"{out['nodes']} nodes, {out['pods']} pending pods"
        + (f" in gangs of {out['gang_size']}" if out["gang_size"] else "")
        + (" with anti-affinity and zone spread" if out["affinity"] else "")
        + (f", {out['gpus_per_node']} shared GPUs per node" if out["gpus_per_node"] else "")
        + (f", hard tier-1 in leaves of {out['leaf_size']}" if out["leaf_size"] else "")
        + f": {out['bound']} bound in {out['sessions']} session(s)"
    )
    print(f"  decision-only throughput: {out['pods_per_second']:.0f} pods/s")
    print(f"  session time:             {out['session_seconds']:.3f} s")
    print(f"  snapshot build:           {out['snapshot_build_seconds']:.3f} s")
    print(f"  peak RSS:                 {out['peak_rss_mb']:.0f} MiB")
    for i, s in enumerate(out["per_session"], 1):
        phases = ", ".join(f"{k} {v:.3f}s" for k, v in s.items() if k not in ("seconds", "binds"))
        print(f"  session {i}: {s['binds']} binds, {s['seconds']:.3f}s ({phases})")


if __name__ == "__main__":
    main()
