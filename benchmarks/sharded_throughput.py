"""Several Caldera instances on one API server: does splitting the work scale, and is it safe?

Why: one scheduler process decides on one core. Volcano's multi-scheduler StatefulSet splits jobs
and nodes by hash between replicas (``MULTI_SCHEDULER_ENABLE``, ``SCHEDULER_NUM``,
``SCHEDULER_POD_NAME``); with ``--mode hard`` or ``soft`` each instance has its own scheduler name
and NodeShard instead (the pods name the schedulers in turn, the nodes go to the NodeShards in
turn). This runs 1, 2 or 4 ``caldera run`` processes that way against the emulator (spawned in
a process of its own, as ``operator_throughput.py`` does), loads pods (a burst, or ``--rate`` R
pods/s) and reports, besides the drain rate and latencies:

- ``bound``, and ``bindings``: the binding calls the API server accepted (one per pod: a pod bound
  twice would show as more);
- ``binding_conflicts``: binding calls it refused (409: the pod was bound already);
- ``overcommitted_nodes``: nodes whose pods request more cpu than the node has, at the end;
- CPU per pod, of all instances together and of the busiest one.

The plain shape of the same run (``SchedulingBasic``, in-process, no API) is printed beside it,
since machines differ.

    python benchmarks/sharded_throughput.py --instances 2 --nodes 5000 --pods 10000 [--rate 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _api_server as api
import operator_throughput as ot
from _api_server import BenchError

ROOT = Path(__file__).resolve().parent.parent
NAME = "caldera-scheduler"


def hash_env(ordinal: int, count: int) -> dict[str, str]:
    """The environment the StatefulSet gives replica ``ordinal`` (one replica: none)."""
    if count == 1:
        return {}
    return {
        "MULTI_SCHEDULER_ENABLE": "true",
        "SCHEDULER_NUM": str(count),
        "SCHEDULER_POD_NAME": f"{NAME}-{ordinal}",
    }


def shard_args(ordinal: int, mode: str) -> list[str]:
    """Instance ``ordinal``'s flags in NodeShard mode ``mode``: its own scheduler name and the
    NodeShard of that name (the benchmark writes the NodeShards, a controller's round-robin)."""
    name = f"volcano-{ordinal}"
    return [
        *("--scheduler-name", name, "--scheduler-sharding-mode", mode),
        *("--scheduler-sharding-name", name),
    ]


async def bench(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    sharded = args.mode in ("hard", "soft")
    names = tuple(f"volcano-{i}" for i in range(args.instances)) if sharded else ()
    setup = api.Setup(
        args.nodes,
        False,
        args.running,
        [],
        args.pods,
        "bench",
        schedulers=names,
        shards=args.instances if sharded else 0,
    )
    backend = api.Emulated(setup, workdir)
    ops = [
        ot.Operator(
            shard_args(i, args.mode) if sharded else [],
            workdir / f"operator-{i}.log",
            env={} if sharded else hash_env(i, args.instances),
        )
        for i in range(args.instances)
    ]
    out: dict[str, Any] = {
        "mode": args.mode,
        "instances": args.instances,
        "nodes": args.nodes,
        "pods": args.pods,
    }
    try:
        kubeconfig = await backend.start()
        for op in ops:
            op.start(kubeconfig)
        for op in ops:
            try:
                await op.wait_ready(args.timeout)
            except BenchError as exc:
                raise BenchError(f"{exc}; the end of its output:\n{op.tail()}") from None
        cpu0 = [ot.cpu_tree(op.pid) for op in ops]
        api0 = ot.cpu_tree(backend.api_pid)
        await backend.mark(ops[0].scrape)
        await backend.load(api.units("bench", 0, args.pods, 0), args.rate or 0.0)
        await backend.wait(args.timeout, lambda: all(op.alive() for op in ops))
        cpu1 = [ot.cpu_tree(op.pid) for op in ops]
        api1 = ot.cpu_tree(backend.api_pid)
        await backend.mark(ops[0].scrape)
        await asyncio.sleep(args.settle)
        await backend.mark(ops[0].scrape)
        report = await backend.report()
        overcommitted = await backend.overcommitted()
    finally:
        for op in ops:
            op.stop()
        await backend.close()
    ot._results(out, report, 0.0, [{}, {}], [api0, api1])
    used = [sum(b.values()) - sum(a.values()) for a, b in zip(cpu0, cpu1, strict=True)]
    bound = out["bound"] or 1
    requests = {**(report.requests or {})}
    failed = report.failed or {}
    calls = requests.get("create pods/binding", 0)
    refused = sum(n for key, n in failed.items() if key.startswith("create pods/binding "))
    out |= {
        "bindings": calls - refused,
        "binding_conflicts": failed.get("create pods/binding 409", 0),
        "overcommitted_nodes": len(overcommitted),
        "cpu_ms_per_pod": round(sum(used) * 1000 / bound, 3),
        "busiest_instance_cpu_ms_per_pod": round(max(used) * 1000 / bound, 3),
        "instance_cpu_seconds": [round(u, 2) for u in used],
    }
    return out


def plain(nodes: int, pods: int) -> float:
    """SchedulingBasic's pods/s on this machine now (``scheduling_basic.py``)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scheduling_basic.py"), "--nodes", str(nodes),
         "--pods", str(pods), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rate: float = json.loads(done.stdout.strip().splitlines()[-1])["pods_per_second"]
    return rate


SHOWN = [
    "mode", "instances", "nodes", "pods", "bound", "bindings", "binding_conflicts",
    "overcommitted_nodes",
    "seconds", "pods_per_second", "p50_latency_seconds", "p99_latency_seconds", "cpu_ms_per_pod",
    "busiest_instance_cpu_ms_per_pod", "instance_cpu_seconds", "api_server_cpu_ms_per_pod",
    "requests_per_pod", "failed_requests", "scheduling_basic_pods_per_second",
]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--instances", type=int, default=2, help="caldera run processes (default 2)")
    add(
        "--mode",
        choices=("hash", "hard", "soft"),
        default="hash",
        help="hash split (one scheduler name), or NodeShards hard or soft (one name each)",
    )
    add("--nodes", type=int, default=1000, help="emulated nodes (default 1000)")
    add("--pods", type=int, default=5000, help="pods created once every instance is ready")
    add("--rate", type=float, help="create them at R pods/s (default: all at once)")
    add("--running", type=int, default=0, help="bound, Running pods spread over the nodes")
    add("--settle", type=float, default=2.0, help="seconds counted after the last bind")
    add("--timeout", type=float, default=600.0, help="seconds to wait for every bind")
    add("--no-plain", action="store_true", help="skip the SchedulingBasic run beside it")
    add("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = asyncio.run(bench(args, Path(tmp)))
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    if not args.no_plain:
        out["scheduling_basic_pods_per_second"] = plain(args.nodes, args.pods)
    if args.json:
        print(json.dumps({k: out.get(k) for k in SHOWN}))
        return
    for key in SHOWN:
        print(f"{key:36} {out.get(key)}")


if __name__ == "__main__":
    main()
