"""Decision-only preemption and reclaim on two published shapes.

- ``preempt`` (kube-scheduler's PreemptionAsync): 5000 nodes of 4 cpu, 20,000 low-priority
  900m pods running (four a node), 5,000 high-priority 3-cpu preemptors, each in its own
  PodGroup. One session of ``enqueue, allocate, preempt``: every preemptor needs three victims on
  one node. Reported: preemptors placed per second of session time (each pipelined onto the room
  its victims free), victims, and the plain SchedulingBasic figure of the same session for scale.
- ``reclaim`` (KAI-scheduler's ReclaimLargeJobs): 500 nodes of 8 GPUs, 4,000 one-GPU jobs running
  in queue ``busy``, one 400-GPU gang (400 pods of one GPU) in queue ``starved`` under its share.
  One session of ``enqueue, allocate, reclaim``; reported: its seconds and the victims.

    python benchmarks/preemption.py [--shape preempt|reclaim|both] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scheduling_basic
from caldera.cache.snapshot import build_snapshot
from caldera.cache.state import ClusterState
from caldera.framework.cycle import run_cycle
from caldera.framework.policy import load_policy
from caldera.framework.registry import Registry
from caldera.models.core import Node, Pod, PriorityClass
from caldera.models.volcano import PodGroup, Queue

POLICY = (Path(__file__).resolve().parent.parent / "policies" / "volcano-helm.yaml").read_text()


def _node(name: str, alloc: dict[str, str]) -> Node:
    return Node.model_validate({"metadata": {"name": name}, "status": {"allocatable": alloc}})


def _group(name: str, queue: str, members: int, phase: str, prio: str = "") -> PodGroup:
    spec: dict[str, Any] = {"minMember": members, "queue": queue}
    if prio:
        spec["priorityClassName"] = prio
    return PodGroup.model_validate(
        {
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": 1.7e9},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def _pod(name: str, group: str, requests: dict[str, str], *, node: str = "", prio: str = "") -> Pod:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    if node:
        spec["nodeName"] = node
    if prio:
        spec["priorityClassName"] = prio
    return Pod.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "default",
                "uid": name,
                "creationTimestamp": 1.7e9,
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": spec,
            "status": {"phase": "Running" if node else "Pending"},
        }
    )


def preempt_state(nodes: int = 5000, running: int = 20_000, preemptors: int = 5000) -> ClusterState:
    state = ClusterState()
    state.add(Queue.model_validate({"metadata": {"name": "default"}, "spec": {"weight": 1}}))
    for name, value in (("low", 10), ("high", 1000)):
        state.add(PriorityClass.model_validate({"metadata": {"name": name}, "value": value}))
    for i in range(nodes):
        state.add(_node(f"node-{i:05d}", {"cpu": "4", "memory": "32Gi", "pods": "110"}))
    for i in range(running):
        state.add(_group(f"low-{i:05d}", "default", 1, "Running", "low"))
        state.add(
            _pod(
                f"low-{i:05d}",
                f"low-{i:05d}",
                {"cpu": "900m", "memory": "1Gi"},
                node=f"node-{i % nodes:05d}",
                prio="low",
            )
        )
    for i in range(preemptors):
        state.add(_group(f"high-{i:05d}", "default", 1, "Inqueue", "high"))
        state.add(
            _pod(f"high-{i:05d}", f"high-{i:05d}", {"cpu": "3", "memory": "1Gi"}, prio="high")
        )
    return state


def reclaim_state(
    nodes: int = 500, gpus: int = 8, running: int = 4000, gang: int = 400
) -> ClusterState:
    state = ClusterState()
    for name in ("busy", "starved"):
        state.add(Queue.model_validate({"metadata": {"name": name}, "spec": {"weight": 1}}))
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    for i in range(nodes):
        state.add(_node(f"node-{i:04d}", alloc))
    one = {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"}
    for i in range(running):
        state.add(_group(f"busy-{i:05d}", "busy", 1, "Running"))
        state.add(_pod(f"busy-{i:05d}", f"busy-{i:05d}", one, node=f"node-{i % nodes:04d}"))
    state.add(_group("big", "starved", gang, "Inqueue"))
    for i in range(gang):
        state.add(_pod(f"big-{i:04d}", "big", one))
    return state


def _session(state: ClusterState, actions: str) -> tuple[float, Any]:
    registry = Registry.from_entry_points()
    policy = load_policy(
        POLICY.replace('actions: "enqueue, allocate, backfill"', f'actions: "{actions}"'),
        registry,
    )
    snapshot, _ = build_snapshot(
        state, scheduler_names=["volcano"], now=1.7e9 + 100, session_id="bench"
    )
    start = time.perf_counter()
    result = run_cycle(snapshot, policy, registry)
    return time.perf_counter() - start, result


def run_preempt() -> dict[str, Any]:
    seconds, result = _session(preempt_state(), "enqueue, allocate, preempt")
    placed = len(result.evictions) // 3  # each preemptor needs exactly three victims
    plain = scheduling_basic.run(5000, 10_000, 0, max_sessions=1)["pods_per_second"]
    return {
        "shape": "PreemptionAsync: 5000 nodes, 20,000 low pods running, 5,000 preemptors",
        "session_seconds": round(seconds, 3),
        "victims": len(result.evictions),
        "preemptors_placed": placed,
        "preemptors_per_second": round(placed / seconds, 1),
        "timings": {k: round(v, 3) for k, v in result.timings.items()},
        "scheduling_basic_same_session": plain,
    }


def run_reclaim() -> dict[str, Any]:
    seconds, result = _session(reclaim_state(), "enqueue, allocate, reclaim")
    return {
        "shape": "ReclaimLargeJobs: 500 nodes x 8 GPUs, 4,000 one-GPU jobs, a 400-GPU gang",
        "session_seconds": round(seconds, 3),
        "victims": len(result.evictions),
        "timings": {k: round(v, 3) for k, v in result.timings.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=("preempt", "reclaim", "both"), default="both")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out = []
    if args.shape in ("reclaim", "both"):
        out.append(run_reclaim())
    if args.shape in ("preempt", "both"):
        out.append(run_preempt())
    if args.json:
        print(json.dumps(out))
        return
    for res in out:
        print(res.pop("shape"))
        for key, value in res.items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
