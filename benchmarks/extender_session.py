"""What an HTTP extender costs one session: SchedulingBasic's shape (``scheduling_basic.py``)
with P pending pods on N nodes, scheduled in one session by the default policy, then again
with an ``extender`` entry in the second tier whose server (the example,
``examples/extender/server.py``, run as its own process) answers every call after
``--delay-ms``.

Reported per variant: the session's wall time and this process's CPU time in it, the time spent
outside HTTP calls (the scheduler's own work, rendering bodies included), pods bound, the calls
made per hook and the bytes sent. Two extenders are measured: ``filter`` (the hooks a
filter-and-score extender uses: onSessionOpen, predicate, prioritize, allocateFunc,
onSessionClose) and ``every`` (all eleven verbs). The plain run is the SchedulingBasic figure of
the same sitting.

    python benchmarks/extender_session.py --nodes 1000 --pods 1000 [--delay-ms 1] [--json]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from caldera.cache.snapshot import BuildMemo, build_snapshot  # noqa: E402
from caldera.collector import fewer_collections  # noqa: E402
from caldera.framework.cycle import run_cycle  # noqa: E402
from caldera.framework.policy import DEFAULT_POLICY_YAML, load_policy  # noqa: E402
from caldera.framework.registry import Registry  # noqa: E402
from caldera.outside.http import HttpCaller  # noqa: E402
from scheduling_basic import build_state  # noqa: E402

FILTER = ("onSessionOpen", "predicate", "prioritize", "allocateFunc", "onSessionClose")
EVERY = (
    *FILTER,
    "preemptable",
    "reclaimable",
    "queueOverused",
    "jobEnqueueable",
    "jobReady",
    "deallocateFunc",
)


class CountingCaller(HttpCaller):
    """An HttpCaller that also counts the bytes it sends and the time it waits."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.waited = 0.0

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        self.sent += len(body)
        start = time.perf_counter()
        try:
            return super().post(url, body, timeout)
        finally:
            self.waited += time.perf_counter() - start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _policy(url: str, verbs: tuple[str, ...]) -> str:
    lines = "".join(f"      extender.{v}Verb: {v}\n" for v in verbs)
    entry = f"  - name: extender\n    arguments:\n      extender.urlPrefix: {url}\n{lines}"
    return DEFAULT_POLICY_YAML + entry


def one_session(nodes: int, pods: int, policy_yaml: str) -> dict[str, Any]:
    state = build_state(nodes, pods, 0)
    registry = Registry.from_entry_points()
    caller = CountingCaller()
    registry.caller = caller
    policy = load_policy(policy_yaml, registry, strict=True)
    snapshot, _ = build_snapshot(
        state,
        scheduler_names=["volcano"],
        now=1_700_100_000.0,
        session_id="s1",
        memo=BuildMemo(),
        managed_resources=policy.managed_resources,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    result = run_cycle(snapshot, policy, registry)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    calls = Counter(result.calls)
    caller.close()
    return {
        "bound": len(result.binds),
        "session_seconds": round(wall, 3),
        "cpu_seconds": round(cpu, 3),
        "pods_per_second": round(len(result.binds) / wall, 1) if wall else 0.0,
        "in_calls_seconds": round(caller.waited, 3),
        "own_ms_per_pod": round((wall - caller.waited) * 1000 / max(len(result.binds), 1), 2),
        "calls": sum(calls.values()),
        "calls_by_hook": dict(sorted(calls.items())),
        "mb_sent": round(caller.sent / 1e6, 2),
        "ms_per_pod": round(wall * 1000 / max(len(result.binds), 1), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    fewer_collections()  # as the session process
    port = _free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "examples" / "extender" / "server.py"),
            "--port",
            str(port),
            "--delay-ms",
            str(args.delay_ms),
        ],
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        out = {
            "nodes": args.nodes,
            "pods": args.pods,
            "delay_ms": args.delay_ms,
            "plain": one_session(args.nodes, args.pods, DEFAULT_POLICY_YAML),
            "filter": one_session(args.nodes, args.pods, _policy(url, FILTER)),
            "every": one_session(args.nodes, args.pods, _policy(url, EVERY)),
        }
    finally:
        server.terminate()
        server.wait(timeout=10)
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    for name in ("plain", "filter", "every"):
        r = out[name]
        sys.stdout.write(
            f"{name:7} {r['bound']:5} bound in {r['session_seconds']:7.3f} s "
            f"(cpu {r['cpu_seconds']:.3f} s, {r['ms_per_pod']} ms/pod, of which outside calls "
            f"{r['own_ms_per_pod']} ms/pod), "
            f"{r['calls']} calls, {r['mb_sent']} MB sent {r['calls_by_hook']}\n"
        )


if __name__ == "__main__":
    main()
