"""What the admission webhooks cost the API server's callers: round-trip time and operator CPU.

Why: with the pod webhooks on, every pod created in the cluster waits for one call to the
scheduler; this measures that wait. The operator runs as ``python -m caldera run
--enabled-admission all`` in a process of its own against the test emulator (in this process,
with N nodes and queues); the benchmark sends AdmissionReviews over HTTPS to the URL and with the
CA bundle of the webhook configuration the operator wrote, as the API server would: one at a time
(``trickle``: the latency a user feels) and ``--concurrency`` at once (``burst``). It reports p50
and p99 per webhook and the operator's CPU per review (its processes, from /proc).

    python benchmarks/admission_latency.py [--reviews 2000] [--concurrency 32] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]

from emulator import Emulator  # noqa: E402
from emulator.handles import EmulatorHandle  # noqa: E402
from integration.harness import node, pod, queue  # noqa: E402
from integration.webhook_client import WebhookClient  # noqa: E402

WEBHOOKS = ("/pods/validate", "/pods/mutate", "/queues/validate", "/podgroups/validate")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its children (the session process), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for p in pids:
        fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _request(path: str, i: int) -> tuple[str, dict[str, Any]]:
    if path.startswith("/pods"):
        obj = pod(f"p{i}", annotations={"scheduling.volcano.sh/queue-allocation-gate": "true"})
    elif path.startswith("/queues"):
        obj = queue(f"q{i}")
    else:
        obj = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"pg{i}", "namespace": "default"},
            "spec": {"minMember": 1, "queue": "default"},
        }
    return path, obj


async def _measure(client: WebhookClient, path: str, n: int, concurrency: int) -> list[float]:
    times: list[float] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with gate:
            start = time.perf_counter()
            where, obj = _request(path, i)
            answer = await client.send(where, "CREATE", obj)
            times.append(time.perf_counter() - start)
            assert answer.allowed, answer.message

    await asyncio.gather(*(one(i) for i in range(n)))
    return times


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    emulator = Emulator()
    await emulator.start()
    with tempfile.TemporaryDirectory() as tmp:
        k8s = EmulatorHandle(emulator, Path(tmp) / "kubeconfig")
        for i in range(args.nodes):
            await k8s.create("nodes", node(f"n{i}"))
        port = _free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT / "operator")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "caldera", "run", "--kubeconfig", str(k8s.kubeconfig_path),
            "--leader-elect=false", "--listen-address", "", "--healthz-address", "",
            "--enabled-admission", "all", "--webhook-port", str(port),
            "--webhook-url", f"https://127.0.0.1:{port}", "--webhook-namespace", "default",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, env=env,
        )  # fmt: skip
        try:
            configs = "mutatingwebhookconfigurations"
            await k8s.wait_for(configs, "caldera-scheduler", bool, timeout=60)
            client = await WebhookClient.from_cluster(k8s)
            await _measure(client, "/pods/validate", 50, 1)  # warm up
            out: dict[str, Any] = {"nodes": args.nodes, "reviews": args.reviews}
            for mode, concurrency in (("trickle", 1), ("burst", args.concurrency)):
                for path in WEBHOOKS:
                    cpu = _cpu_seconds(proc.pid)
                    start = time.perf_counter()
                    times = await _measure(client, path, args.reviews, concurrency)
                    wall = time.perf_counter() - start
                    cpu = _cpu_seconds(proc.pid) - cpu
                    out[f"{mode} {path}"] = {
                        "p50_ms": round(statistics.median(times) * 1000, 2),
                        "p99_ms": round(_pct(times, 0.99) * 1000, 2),
                        "reviews_per_s": round(len(times) / wall),
                        "operator_cpu_ms_per_review": round(cpu * 1000 / len(times), 3),
                    }
            await client.close()
            return out
        finally:
            proc.terminate()
            await proc.wait()
            await emulator.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reviews", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    result = asyncio.run(main(parser.parse_args()))
    if parser.parse_args().json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
