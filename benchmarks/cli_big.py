"""``caldera simulate`` end to end on a big manifest directory, phase by phase.

Writes a directory of manifests shaped like a busy cluster dumped with ``kubectl get -o yaml``:
N nodes (four sizes, zone and instance-type labels, every tenth a tainted GPU node), four queues,
and P pods of which a fifth already run on a node (another scheduler's, with nodeName), about
two thirds come in Volcano jobs (a PodGroup with minMember and minResources, 2 to 32 members)
and the rest are bare pods for the ``volcano`` scheduler. Pods carry labels, annotations,
images, ports, environment, volume mounts and the default tolerations, as the API returns them.
The objects are spread over files of at most 500 objects, in block style. ``--lean`` leaves out of
the pods what the scheduler never reads (command, ports, env, volumes, ...): half the YAML.

Then it times ``caldera simulate DIR`` as a whole process (a fresh interpreter each run, stdout
and stderr to /dev/null) and, once in this process, each phase: reading and parsing the YAML,
validating the objects, the scheduling cycles (snapshot build and session apart) and the report.

    python benchmarks/cli_big.py [--nodes 2000] [--pods 20000] [--runs 3] [--cycles 1]
        [--lean] [--dir DIR] [--keep] [--write-only] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))

NODE_SIZES = (
    ("m6.2xlarge", "8", "32Gi"),
    ("m6.4xlarge", "16", "64Gi"),
    ("c6.8xlarge", "32", "64Gi"),
)
ZONES = ("zone-a", "zone-b", "zone-c")
QUEUES = (("research", 4), ("production", 3), ("batch", 1), ("default", 1))
PER_FILE = 500
TOLERATIONS = [
    {
        "key": f"node.kubernetes.io/{what}",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    }
    for what in ("not-ready", "unreachable")
]

try:
    DUMPER: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    DUMPER = yaml.SafeDumper


def _node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    gpu = i % 10 == 9
    kind, cpu, memory = ("p4d.2xlarge", "32", "128Gi") if gpu else NODE_SIZES[i % len(NODE_SIZES)]
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
    if gpu:
        allocatable["nvidia.com/gpu"] = "8"
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
                "node.kubernetes.io/instance-type": kind,
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": f"10.{i // 250}.{i % 250}.0/24"},
        "status": {
            "capacity": dict(allocatable),
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }
    if gpu:
        node["spec"]["taints"] = [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        ]
    return node


def _queue(name: str, weight: int) -> dict[str, Any]:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": True}
    if name == "batch":
        spec["capability"] = {"cpu": "2000", "memory": "8000Gi"}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def _pod(
    name: str,
    namespace: str,
    app: str,
    *,
    cpu: str,
    memory: str,
    node: str = "",
    group: str = "",
    queue: str = "",
    gpu: bool = False,
) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "requests": {"cpu": cpu, "memory": memory},
        "limits": {"memory": memory},
    }
    if gpu:
        resources["requests"]["nvidia.com/gpu"] = "1"
        resources["limits"]["nvidia.com/gpu"] = "1"
    annotations = {"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
    if group:
        annotations["scheduling.k8s.io/group-name"] = group
    if queue:
        annotations["scheduling.volcano.sh/queue-name"] = queue
    tolerations = list(TOLERATIONS)
    if gpu:
        tolerations.append({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    spec: dict[str, Any] = {
        "schedulerName": "default-scheduler" if node else "volcano",
        "restartPolicy": "Never" if group else "Always",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "containers": [
            {
                "name": "main",
                "image": f"registry.example.com/{app}:1.4.2",
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/run", "--config", "/etc/app/config.yaml"],
                "ports": [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                "env": [
                    {"name": "APP", "value": app},
                    {"name": "LOG_LEVEL", "value": "info"},
                ],
                "resources": resources,
                "volumeMounts": [{"name": "config", "mountPath": "/etc/app", "readOnly": True}],
            }
        ],
        "volumes": [{"name": "config", "configMap": {"name": f"{app}-config"}}],
        "tolerations": tolerations,
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": app, "team": namespace, "tier": "batch" if group else "service"},
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending", "qosClass": "Burstable"},
    }


def _podgroup(
    name: str, namespace: str, queue: str, members: int, cpu_m: int, mem_mi: int
) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "minMember": members,
            "queue": queue,
            "minResources": {"cpu": f"{cpu_m * members}m", "memory": f"{mem_mi * members}Mi"},
        },
        "status": {"phase": "Pending"},
    }


GANG_SIZES = (2, 4, 8, 16, 32, 4, 8, 2)
SHAPES = ((500, 1024), (1000, 2048), (2000, 4096), (250, 512))
"""(cpu millicores, memory MiB) the pending pods cycle through."""


def objects(nodes: int, pods: int) -> list[dict[str, Any]]:
    """The whole cluster, in the order the files will hold it."""
    out: list[dict[str, Any]] = [_node(i) for i in range(nodes)]
    out += [_queue(name, weight) for name, weight in QUEUES]
    running = pods // 5
    for i in range(running):
        app = f"svc-{i % 97:03d}"
        out.append(
            _pod(
                f"{app}-{i:06d}",
                "services",
                app,
                cpu="250m",
                memory="512Mi",
                node=f"node-{i % nodes:05d}",
            )
        )
    pending = pods - running
    in_jobs = pending * 2 // 3
    made = job = 0
    while made < in_jobs:
        members = min(GANG_SIZES[job % len(GANG_SIZES)], in_jobs - made)
        queue, _ = QUEUES[job % 3]
        cpu_m, mem_mi = SHAPES[job % len(SHAPES)]
        group = f"job-{job:05d}"
        gpu = job % 25 == 0
        out.append(_podgroup(group, queue, queue, members, cpu_m, mem_mi))
        for k in range(members):
            out.append(
                _pod(
                    f"{group}-worker-{k}",
                    queue,
                    group,
                    cpu=f"{cpu_m}m",
                    memory=f"{mem_mi}Mi",
                    group=group,
                    queue=queue,
                    gpu=gpu,
                )
            )
        made += members
        job += 1
    for i in range(pending - in_jobs):
        cpu_m, mem_mi = SHAPES[i % len(SHAPES)]
        app = f"task-{i % 53:03d}"
        out.append(_pod(f"{app}-{i:06d}", "batch", app, cpu=f"{cpu_m}m", memory=f"{mem_mi}Mi"))
    return out


LEAN_SPEC = ("serviceAccountName", "terminationGracePeriodSeconds", "dnsPolicy", "volumes")
LEAN_CONTAINER = ("imagePullPolicy", "command", "ports", "env", "volumeMounts")


def _lean(obj: dict[str, Any]) -> dict[str, Any]:
    """A pod without what the scheduler never reads (about half its lines)."""
    if obj["kind"] == "Pod":
        for key in LEAN_SPEC:
            obj["spec"].pop(key, None)
        for container in obj["spec"]["containers"]:
            for key in LEAN_CONTAINER:
                container.pop(key, None)
        for key in ("prometheus.io/scrape", "prometheus.io/port"):
            obj["metadata"]["annotations"].pop(key, None)
    return obj


def write(directory: Path, nodes: int, pods: int, lean: bool = False) -> int:
    """The manifests, ``PER_FILE`` documents a file; returns the number of files."""
    directory.mkdir(parents=True, exist_ok=True)
    objs = objects(nodes, pods)
    if lean:
        objs = [_lean(o) for o in objs]
    files = 0
    for start in range(0, len(objs), PER_FILE):
        chunk = objs[start : start + PER_FILE]
        text = yaml.dump_all(chunk, Dumper=DUMPER, sort_keys=False, default_flow_style=False)
        (directory / f"{files:03d}.yaml").write_text(text, encoding="utf-8")
        files += 1
    return files


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def whole_process(directory: Path, runs: int, cycles: int) -> list[tuple[float, float]]:
    """(wall, cpu) seconds of ``caldera simulate`` as a fresh process, ``runs`` times."""
    cmd = [sys.executable, "-m", "caldera", "simulate", "--cycles", str(cycles), str(directory)]
    env = {"PYTHONPATH": str(ROOT / "operator"), "PATH": "/usr/bin:/bin"}
    times = []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), _children_cpu()
        subprocess.run(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True
        )
        times.append((time.perf_counter() - t0, _children_cpu() - c0))
    return times


def phases(directory: Path, cycles: int) -> dict[str, float]:
    """Wall seconds of each phase of one run, in this process (the imports are already done;
    worker processes parse the YAML while this one validates)."""
    from caldera.cache.snapshot import build_snapshot
    from caldera.collector import batch_process, keep_what_is_read
    from caldera.framework import cycle as cycle_module
    from caldera.framework.policy_source import installed_policy
    from caldera.framework.registry import Registry
    from caldera.simulate import manifests as manifests_module
    from caldera.simulate import runner
    from caldera.simulate.progress import Progress
    from caldera.simulate.report import to_table

    batch_process()  # as the command line does
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    for _ in manifests_module._documents([str(directory)], manifests_module.Loaded(), Progress()):
        pass
    out["yaml_parse"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    loaded = manifests_module.load_manifests([str(directory)])
    out["load_total"] = time.perf_counter() - t0
    out["validate"] = out["load_total"] - out["yaml_parse"]
    keep_what_is_read()
    registry = Registry.from_entry_points()
    policy = installed_policy(registry)  # the policy the command line uses
    spent = {"snapshot": 0.0, "session": 0.0}

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - t

        return wrapper

    # the runner's own loop, with its two engine calls timed
    with (
        mock.patch.object(runner, "build_snapshot", timed("snapshot", build_snapshot)),
        mock.patch.object(runner, "run_cycle", timed("session", cycle_module.run_cycle)),
    ):
        t0 = time.perf_counter()
        sim = runner.simulate(
            loaded.state, policy, registry, scheduler_names=["volcano"], cycles=cycles
        )
        out["cycles_total"] = time.perf_counter() - t0
    out["snapshot_build"] = spent["snapshot"]
    out["session"] = spent["session"]
    out["apply_and_rest"] = out["cycles_total"] - spent["snapshot"] - spent["session"]
    t0 = time.perf_counter()
    to_table(sim)
    out["report"] = time.perf_counter() - t0
    out["bound"] = float(sum(len(rec.result.binds) for rec in sim.cycles))
    return out


def _median(values: list[float]) -> float:
    return round(sorted(values)[len(values) // 2], 2) if values else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3, help="whole-process runs")
    parser.add_argument("--cycles", type=int, default=1)
    parser.add_argument("--dir", help="write (or reuse, if it has manifests) this directory")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument(
        "--lean", action="store_true", help="pods without the fields the scheduler never reads"
    )
    parser.add_argument("--write-only", action="store_true", help="write the manifests, no timing")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    directory = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="caldera-big-"))
    try:
        t0 = time.perf_counter()
        if not any(directory.glob("*.yaml")):
            write(directory, args.nodes, args.pods, args.lean)
        generate_s = time.perf_counter() - t0
        if args.write_only:
            print(directory)
            return
        wall = whole_process(directory, args.runs, args.cycles)
        phase = phases(directory, args.cycles)
    finally:
        if not args.dir and not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    out = {
        "nodes": args.nodes,
        "pods": args.pods,
        "cycles": args.cycles,
        "generate_seconds": round(generate_s, 2),
        "whole_process_wall_seconds": [round(w, 2) for w, _ in wall],
        "whole_process_cpu_seconds": [round(c, 2) for _, c in wall],
        "median_wall_seconds": _median([w for w, _ in wall]),
        "median_cpu_seconds": _median([c for _, c in wall]),
        "phases": {k: round(v, 3) for k, v in phase.items()},
    }
    if args.json:
        print(json.dumps(out))
        return
    print(f"{args.nodes} nodes, {args.pods} pods, {args.cycles} cycle(s): {directory}")
    if wall:
        print(
            f"  caldera simulate, whole process: median {out['median_wall_seconds']:.2f} s wall, "
            f"{out['median_cpu_seconds']:.2f} s cpu "
            f"(runs: {', '.join(f'{w:.2f}/{c:.2f}' for w, c in wall)})"
        )
    print(f"  phases in one process, wall seconds ({int(phase.pop('bound'))} pods bound):")
    for name, seconds in phase.items():
        print(f"    {name:<16}{seconds:8.3f} s")


if __name__ == "__main__":
    main()
