"""End-to-end operator throughput: pods bound per second through a Kubernetes API.

A child process serves the API emulator (its own core, as a real API server would have) with N
Ready nodes. This process runs ``caldera run`` (kopf watches, sessions, binder) against it. Once
the operator has run its first session, the emulator creates P pending pods in one burst; the
benchmark records when each bind call returned, and reports pods bound per second (first pod
created to last pod bound), p50/p99 creation-to-bind latency, sessions, and the worst event-loop
lag the operator saw. With ``--kubeconfig`` it runs against a real cluster instead (nodes must
exist; pods are created in namespace ``caldera-bench``).

    python benchmarks/operator_throughput.py --nodes 1000 --pods 5000 [--profile] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import multiprocessing as mp
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "operator"))

from caldera.framework.intents import Bind  # noqa: E402 - needs the sys.path above
from caldera.operator.app import RunSettings, Runtime, operate  # noqa: E402


def _node(i: int) -> dict[str, Any]:
    alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:05d}"},
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"bench-{i:05d}", "namespace": "default"},
        "spec": {
            "schedulerName": "volcano",
            "containers": [
                {
                    "name": "c",
                    "image": "pause",
                    "resources": {"requests": {"cpu": "100m", "memory": "500Mi"}},
                }
            ],
        },
    }


def _serve(nodes: int, pods: int, url_q: Any, go: Any, stamps_q: Any, stop: Any) -> None:
    from emulator import Emulator

    async def main() -> None:
        emulator = Emulator(history_limit=200_000)
        await emulator.start()
        for i in range(nodes):
            emulator.create("nodes", _node(i))
        url_q.put(emulator.url)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, go.wait)
        stamps = {}
        for i in range(pods):
            emulator.create("pods", _pod(i), namespace="default")
            stamps[f"bench-{i:05d}"] = time.time()
            if i % 200 == 199:
                await asyncio.sleep(0)  # keep serving watches during the burst
        stamps_q.put(stamps)
        await loop.run_in_executor(None, stop.wait)
        counts: dict[str, int] = {}
        for r in emulator.requests:
            if r.verb == "watch":
                continue
            what = f"{r.verb} {r.resource}{'/' + r.subresource if r.subresource else ''}"
            if r.resource == "events" and isinstance(r.body, dict):
                what += f" ({r.body.get('reason')})"
            counts[what] = counts.get(what, 0) + 1
        stamps_q.put(counts)
        await emulator.stop()

    asyncio.run(main())


def _kubeconfig(url: str) -> str:
    path = Path(tempfile.mkdtemp()) / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "bench",
                "clusters": [{"name": "bench", "cluster": {"server": url}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "users": [{"name": "bench", "user": {}}],
            }
        )
    )
    return str(path)


class LongestCallback:
    """The longest single event-loop callback (the loop is *blocked* while one runs), as
    opposed to the loop lag, which also counts callbacks queued behind each other when the loop
    is merely busy. Times every ``Handle._run`` while installed."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.where = ""
        self._original = asyncio.events.Handle._run

    def __enter__(self) -> Self:
        original, probe = self._original, self

        def timed(handle: asyncio.events.Handle) -> None:
            start = time.perf_counter()
            original(handle)
            spent = time.perf_counter() - start
            if spent > probe.longest:
                probe.longest, probe.where = spent, _describe(handle)

        asyncio.events.Handle._run = timed  # type: ignore[method-assign,assignment]
        return self

    def __exit__(self, *_: object) -> None:
        asyncio.events.Handle._run = self._original  # type: ignore[method-assign]


def _describe(handle: asyncio.events.Handle) -> str:
    """The coroutine a task step ran, else the callback."""
    owner = getattr(getattr(handle, "_callback", None), "__self__", None)
    if isinstance(owner, asyncio.Task):
        coro = owner.get_coro()
        frame = getattr(coro, "cr_frame", None)
        where = (
            f" at {frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}" if frame else ""
        )
        return f"task {owner.get_name()}: {getattr(coro, '__qualname__', coro)}{where}"
    return repr(handle)[:160]


async def _measure(
    url: str, go: Any, stamps_q: Any, pods: int, period: float, timeout: float
) -> dict[str, Any]:
    runtime = Runtime.create(
        RunSettings(
            kubeconfig=_kubeconfig(url),
            leader_elect=False,
            listen_address="",
            healthz_address="",
            schedule_period=period,
        )
    )
    bound: dict[str, float] = {}

    def record(bind: Bind) -> None:
        bound.setdefault(bind.name, time.time())

    runtime.bind_listeners.append(record)
    task = asyncio.create_task(operate(runtime))
    while runtime.scheduler is None or runtime.scheduler.sessions < 1:
        await asyncio.sleep(0.05)
    runtime.loop_lag_max = 0.0
    go.set()
    loop = asyncio.get_running_loop()
    with LongestCallback() as probe:
        stamps: dict[str, float] = await loop.run_in_executor(None, stamps_q.get)
        deadline = time.time() + timeout
        while len(bound) < pods and time.time() < deadline:
            await asyncio.sleep(0.1)
    sessions = runtime.scheduler.sessions if runtime.scheduler else 0
    runtime.stop.set()
    go.set()
    await asyncio.wait_for(task, timeout=30)
    lat = sorted(bound[n] - stamps[n] for n in bound if n in stamps)
    first = min(stamps.values())
    last = max(bound.values()) if bound else first
    return {
        "pods": pods,
        "bound": len(bound),
        "seconds": round(last - first, 3),
        "pods_per_second": round(len(bound) / (last - first), 1) if bound else 0.0,
        "p50_latency_seconds": round(lat[len(lat) // 2], 3) if lat else None,
        "p99_latency_seconds": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 3)
        if lat
        else None,
        "sessions": sessions,
        "max_event_loop_lag_ms": round(runtime.loop_lag_max * 1000, 1),
        "longest_callback_ms": round(probe.longest * 1000, 1),
        "longest_callback": probe.where,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--period", type=float, default=1.0, help="schedule period (s)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--profile", action="store_true", help="print where the time goes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    ctx = mp.get_context("spawn")
    url_q, stamps_q = ctx.Queue(), ctx.Queue()
    go, stop = ctx.Event(), ctx.Event()
    server = ctx.Process(target=_serve, args=(args.nodes, args.pods, url_q, go, stamps_q, stop))
    server.start()
    try:
        url = url_q.get(timeout=120)
        profiler = cProfile.Profile() if args.profile else None
        if profiler:
            profiler.enable()
        out = asyncio.run(_measure(url, go, stamps_q, args.pods, args.period, args.timeout))
        if profiler:
            profiler.disable()
        stop.set()
        out["api_requests"] = dict(sorted(stamps_q.get(timeout=60).items(), key=lambda kv: -kv[1]))
    finally:
        stop.set()
        server.join(timeout=30)
    out["nodes"] = args.nodes
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key:>24}: {value}")
    if profiler:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
