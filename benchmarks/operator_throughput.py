"""End-to-end operator throughput, with the operator as a black box in a process of its own.

Why: the scheduling benchmarks time the engine in-process; this one times what a user gets, i.e.
``python -m caldera run`` against a Kubernetes API, and it only relies on the operator's command
line, its ``/readyz`` and ``/metrics`` endpoints and what it writes to the API, so it keeps
working whatever the operator's internals become.

The API server is the test emulator, served from a spawned child process (its own core, as a real
API server would have), or with ``--kubeconfig`` a real cluster whose nodes already exist (pods
go to namespace ``caldera-bench``). The benchmark creates its objects straight in the emulator's
store, so every request the emulator logs was made by the operator. It reports: time from process
start to ready; pods bound per second (first pod created to last pod bound) and create-to-bind
latency (bind time = when the write setting ``spec.nodeName`` was committed; on a real cluster,
when the benchmark's watch saw it); the operator's CPU (its process and every descendant, from
/proc) and the emulator's, per bound pod; the operator's requests per pod (emulator log, or the
operator's ``caldera_api_requests_total`` counter on a real cluster), in the window and in the
``--settle`` seconds after it (statuses and events trail the binds); how it stops on SIGTERM.
The window runs from the start of the load to the last bind.

Loads: a burst of ``--pods`` pods once ready (default); ``--rate`` R pods/s; ``--gang-size`` G
(each G pods with a PodGroup of minMember G; with ``--mixed-gangs`` a gang of G, then G bare pods,
in turn, and the latencies of both reported apart); ``--lifetime`` S (churn: each bound pod turns
Running, succeeds after S seconds and is deleted, its PodGroup with its last pod, so the steady
state has deletions, gang decisions and queue shares moving); ``--pending-at-start`` N pods
created before the operator starts; ``--restart``: ``--running`` bound pods exist and one pod
arrives as the operator starts. In the last two modes the window and the latencies start at the
operator's start.
``--nodes`` and ``--running`` (bound, Running pods, in any mode) shape the emulator; a real cluster
is used as it is. The peak resident memory of the operator's processes together is sampled every
0.1 s (``peak_rss_mib``), and the same as proportional set size (``peak_pss_mib``: a page shared
by several processes, as a forked session process shares the operator's state, counts once).
``--compare CHECKOUT`` runs the same load on another checkout's operator (the commit before a
change) and prints both figures side by side.

    python benchmarks/operator_throughput.py --nodes 1000 --pods 5000 [--rate 500]
        [--gang-size 10] [--operator-arg=--schedule-period=500ms] [--json]
    python benchmarks/operator_throughput.py --restart --nodes 5000 --running 50000
    python benchmarks/operator_throughput.py --nodes 5000 --running 50000 --rate 100 \
        --pods 3000 --gang-size 8 --mixed-gangs --lifetime 10
    python benchmarks/operator_throughput.py --nodes 1000 --running 3000 --rate 100 --pods 1000 \
        --compare ../the-commit-before
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _api_server as api
from _api_server import BenchError

ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")
Tree = dict[tuple[int, int], float]  # (pid, start time) -> CPU seconds
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
GPU_POLICY = (ROOT / "policies" / "default.yaml").read_text() + (
    "  - name: deviceshare\n    arguments:\n      deviceshare.VGPUEnable: true\n"
)
"""Volcano's default policy with GPU sharing on (``--gpus-per-node``)."""


# -- CPU from /proc ------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int, float] | None:
    """(state, ppid, start time, CPU seconds including waited-for children) of a process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    f = text[text.rindex(")") + 2 :].split()  # fields 3.. (the name may hold spaces)
    return f[0], int(f[1]), int(f[19]), sum(int(x) for x in f[11:15]) / _TICK


def cpu_tree(root: int | None) -> Tree:
    """CPU of ``root`` and all its descendants. A child that exited and was waited for counts in
    its parent's cutime/cstime, so nothing is counted twice or lost while the tree lives."""
    if root is None:
        return {}
    stats: dict[int, tuple[str, int, int, float]] = {}
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = stat
            children.setdefault(stat[1], []).append(int(entry.name))
    tree: Tree = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            tree[(pid, stats[pid][2])] = stats[pid][3]
            todo.extend(children.get(pid, []))
    return tree


def _kib(path: str, field: str) -> int:
    """One ``<field>: <n> kB`` line of a /proc file (0 when unreadable)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def memory_mib(pids: list[int]) -> tuple[float, float]:
    """(resident, proportional) memory of ``pids`` together, MiB. Resident counts a page in
    every process that maps it; proportional splits a shared page between them, so a forked
    session process sharing the operator's state is not counted twice."""
    rss = sum(_kib(f"/proc/{pid}/status", "VmRSS:") for pid in pids)
    pss = sum(_kib(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in pids)
    return rss / 1024, pss / 1024


async def sample_peak_memory(root: int | None, peak: list[float], every: float = 0.1) -> None:
    """Keep ``peak`` at the largest summed RSS and PSS of ``root`` and its descendants, and its
    third entry at the PSS of the last sample."""
    while root is not None:
        pids = [pid for pid, _start in cpu_tree(root)]
        rss, pss = memory_mib(pids)
        peak[0], peak[1], peak[2] = max(peak[0], rss), max(peak[1], pss), pss
        await asyncio.sleep(every)


def _alive(pid: int, start: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[2] == start and stat[0] != "Z"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the operator --------------------------------------------------------------------------------


class Operator:
    """``python -m caldera run`` in a new session, its output in ``log``."""

    def __init__(
        self,
        extra: list[str],
        log: Path,
        source: Path = ROOT / "operator",
        env: dict[str, str] | None = None,
    ) -> None:
        self.health, self.metrics_port = _free_port(), _free_port()
        self.extra, self.log = extra, log
        self.env = env or {}
        """Set in its environment besides ours (Volcano's multi-scheduler variables)."""
        self.source = source
        """The operator's source root (another checkout's, for ``--compare``)."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, kubeconfig: str) -> None:
        argv = [
            sys.executable,
            *("-m", "caldera", "run", "--kubeconfig", kubeconfig, "--leader-elect=false"),
            *("--listen-address", f"127.0.0.1:{self.metrics_port}"),
            *("--healthz-address", f"127.0.0.1:{self.health}"),
            *self.extra,
        ]
        path = os.pathsep.join(filter(None, [str(self.source), os.environ.get("PYTHONPATH")]))
        with self.log.open("wb") as out:
            self.started = time.time()
            self.proc = subprocess.Popen(
                argv,
                env={**os.environ, **self.env, "PYTHONPATH": path},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    async def wait_ready(self, timeout: float) -> float:
        """Seconds from process start until ``/readyz`` answers 200."""
        url = f"http://127.0.0.1:{self.health}/readyz"
        deadline = time.monotonic() + timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise BenchError(f"operator exited with code {self.exit_code} before ready")
                with contextlib.suppress(TimeoutError, aiohttp.ClientError):
                    async with http.get(url) as response:
                        if response.status == 200:
                            return time.time() - self.started
                await asyncio.sleep(0.02)
        raise BenchError(f"operator not ready (/readyz) within {timeout:g} s")

    async def scrape(self) -> str | None:
        """Its /metrics ("" before it starts, None if it does not answer)."""
        if self.proc is None:
            return ""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
                http.get(url) as response,
            ):
                return await response.text() if response.status == 200 else None
        except (TimeoutError, aiohttp.ClientError):
            return None

    @property
    def exit_code(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def stop(self) -> tuple[float | None, int]:
        """SIGTERM, 10 s to exit (else SIGKILL to its process group); then kill any descendant
        left running. Returns (seconds it took to exit, or None; descendants left behind)."""
        if self.proc is None:
            return None, 0
        tree, within = cpu_tree(self.proc.pid), None
        if self.proc.poll() is None:
            sent = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
                within = round(time.monotonic() - sent, 3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        left = [key for key in tree if key[0] != self.proc.pid]
        for _ in range(10):  # let orphans notice their parent is gone
            left = [key for key in left if _alive(*key)]
            if not left:
                break
            time.sleep(0.1)
        for pid, _start in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return within, len(left)


# -- the run -------------------------------------------------------------------------------------


def _mode(args: argparse.Namespace) -> str:
    if args.restart:
        return "restart"
    if args.pending_at_start:
        return "pending-at-start"
    modes = (
        ("mixed-gang" if args.mixed_gangs else "gang", args.gang_size),
        ("rate", args.rate),
        ("churn", args.lifetime),
    )
    return "+".join(m for m, on in modes if on) or "burst"


async def bench(
    args: argparse.Namespace, workdir: Path, source: Path = ROOT / "operator"
) -> dict[str, Any]:
    run = f"bench-{secrets.token_hex(3)}" if args.kubeconfig else "bench"
    gang = args.gang_size or 0
    backlog = api.units(run, 0, args.pending_at_start, gang)
    after = (
        []
        if args.restart
        else api.units(run, args.pending_at_start, args.pods, gang, mixed=args.mixed_gangs)
    )
    pods = 1 if args.restart else args.pending_at_start + args.pods
    setup = api.Setup(
        args.nodes,
        args.restart,
        args.running,
        backlog,
        pods,
        run,
        args.gpus_per_node,
        args.lifetime,
    )
    extra = list(args.operator_arg)
    if args.gpus_per_node:
        conf = workdir / "volcano-scheduler.conf"
        conf.write_text(GPU_POLICY)
        extra.append(f"--scheduler-conf={conf}")
    backend: api.Backend = (
        api.Cluster(args.kubeconfig, setup) if args.kubeconfig else api.Emulated(setup, workdir)
    )
    op = Operator(extra, Path(args.operator_log or workdir / "operator.log"), source)
    peak = [0.0, 0.0, 0.0]
    sampler: asyncio.Task[None] | None = None
    prestart = bool(args.restart or args.pending_at_start)  # the window starts with the process
    out: dict[str, Any] = {"mode": _mode(args), "pods": pods}
    cpu: list[Tree] = [{}]
    api_cpu: list[Tree] = []
    try:
        kubeconfig = await backend.start()
        out["nodes"] = backend.nodes
        if prestart:
            api_cpu.append(cpu_tree(backend.api_pid))
            await backend.mark(op.scrape)
        op.start(kubeconfig)
        sampler = asyncio.create_task(sample_peak_memory(op.pid, peak))
        if args.restart:
            await backend.load(api.units(run, 0, 1, 0), 0.0)
        try:
            out["ready_seconds"] = round(await op.wait_ready(args.timeout), 3)
        except BenchError as exc:
            raise BenchError(f"{exc}; the end of its output:\n{op.tail()}") from None
        if after:
            if not prestart:
                cpu[0] = cpu_tree(op.pid)
                api_cpu.append(cpu_tree(backend.api_pid))
                await backend.mark(op.scrape)
            await backend.load(after, args.rate or 0.0)
        await backend.wait(args.timeout, op.alive)
        cpu.append(cpu_tree(op.pid))
        api_cpu.append(cpu_tree(backend.api_pid))
        await backend.mark(op.scrape)
        if not op.alive():
            raise BenchError(f"operator exited with code {op.exit_code}:\n{op.tail()}")
        await asyncio.sleep(args.settle)  # what the operator still writes for these pods
        await backend.mark(op.scrape)
        settled = (cpu_tree(op.pid), cpu_tree(backend.api_pid) if backend.api_pid else {})
        report = await backend.report()
    finally:
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        out["peak_rss_mib"] = round(peak[0], 1)
        out["peak_pss_mib"] = round(peak[1], 1)
        out["pss_at_end_mib"] = round(peak[2], 1)
        out["stopped_within_seconds"], out["leftover_processes"] = op.stop()
        out["operator_exit_code"] = op.exit_code
        await backend.close()
    out["operator_processes"] = len(cpu[1])
    main = [sum(v for (pid, _), v in tree.items() if pid == op.pid) for tree in cpu[:2]]
    bound = report.bound.keys() & report.created.keys()
    out["main_process_cpu_ms_per_pod"] = (
        round((main[1] - main[0]) * 1000 / len(bound), 3) if bound and len(cpu) > 1 else None
    )
    _results(out, report, op.started if prestart else 0.0, cpu, api_cpu if backend.api_pid else [])
    # CPU up to the end of the settle time too: events and statuses sent after the last bind
    # cost as much as those sent before it
    settled_op = sum(settled[0].values()) - sum(cpu[0].values())
    out["settled_cpu_ms_per_pod"] = (
        round(settled_op * 1000 / out["bound"], 3) if out["bound"] else None
    )
    if api_cpu and settled[1]:
        settled_api = sum(settled[1].values()) - sum(api_cpu[0].values())
        out["settled_api_server_cpu_ms_per_pod"] = (
            round(settled_api * 1000 / out["bound"], 3) if out["bound"] else None
        )
    return out


def _results(
    out: dict[str, Any], report: api.Report, origin: float, cpu: list[Tree], api_cpu: list[Tree]
) -> None:
    """Fill ``out`` in; latencies count from creation, or from ``origin`` if that is later."""
    names = [name for name in report.bound if name in report.created]
    since = {name: max(report.created[name], origin) for name in names}
    latency = {n: max(report.bound[n] - since[n], 0.0) for n in names}
    lat = sorted(latency.values())
    first = min((max(t, origin) for t in report.created.values()), default=0.0)
    last = max((report.bound[n] for n in names), default=first)
    bound = len(names)

    def pct(q: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(q * len(lat)))], 3) if lat else None

    def per_pod(value: float | None, scale: float = 1.0) -> float | None:
        return round(value * scale / bound, 3) if value is not None and bound else None

    def used(trees: list[Tree]) -> float | None:
        return sum(trees[1].values()) - sum(trees[0].values()) if trees else None

    def total(requests: dict[str, int] | None, verbs: Callable[[str], bool]) -> int | None:
        if requests is None:
            return None
        return sum(n for key, n in requests.items() if verbs(key.split(" ")[0]))

    def ranked(requests: dict[str, int] | None) -> dict[str, int] | None:
        return (
            dict(sorted(requests.items(), key=lambda kv: (-kv[1], kv[0]))) if requests else requests
        )

    op_cpu, api_used = used(cpu), used(api_cpu)
    writes = total(report.requests, WRITE_VERBS.__contains__)
    after = total(report.after, WRITE_VERBS.__contains__)
    out |= {
        "bound": bound,
        "seconds": round(last - first, 3),
        "pods_per_second": round(bound / (last - first), 1) if last > first else None,
        "p50_latency_seconds": pct(0.5),
        "p99_latency_seconds": pct(0.99),
        "max_latency_seconds": round(lat[-1], 3) if lat else None,
        "first_bind_seconds": round(min(report.bound[n] for n in names) - origin, 3)
        if origin and bound
        else None,
        "cpu_seconds": round(op_cpu or 0.0, 3),
        "cpu_ms_per_pod": per_pod(op_cpu, 1000),
        "api_server_cpu_seconds": None if api_used is None else round(api_used, 3),
        "api_server_cpu_ms_per_pod": per_pod(api_used, 1000),
        "writes_per_pod": per_pod(writes),
        "requests_per_pod": per_pod(total(report.requests, lambda verb: verb != "watch")),
        "watch_requests": total(report.requests, lambda verb: verb == "watch"),
        "requests": ranked(report.requests),
        "settled_writes_per_pod": per_pod(
            None if writes is None or after is None else writes + after
        ),
        "requests_after_window": ranked(report.after),
        "failed_requests": ranked(report.failed),
        "notes": report.notes or None,
    }
    gangs = report.gang_pods
    if gangs and len(gangs) < bound:  # bare pods and gangs mixed: each on its own
        for what, picked in (("bare", [n for n in names if n not in gangs]), ("gang", gangs)):
            values = sorted(latency[n] for n in picked if n in latency)
            for q in (0.5, 0.99):
                key = f"p{round(q * 100)}_{what}_latency_seconds"
                out[key] = round(values[min(len(values) - 1, int(q * len(values)))], 3)


ORDER = [
    "mode",
    "nodes",
    "pods",
    "bound",
    "seconds",
    "pods_per_second",
    "p50_latency_seconds",
    "p99_latency_seconds",
    "max_latency_seconds",
    "p50_bare_latency_seconds",
    "p99_bare_latency_seconds",
    "p50_gang_latency_seconds",
    "p99_gang_latency_seconds",
    "ready_seconds",
    "first_bind_seconds",
    "cpu_seconds",
    "cpu_ms_per_pod",
    "main_process_cpu_ms_per_pod",
    "api_server_cpu_seconds",
    "api_server_cpu_ms_per_pod",
    "writes_per_pod",
    "requests_per_pod",
    "watch_requests",
    "requests",
    "settled_writes_per_pod",
    "settled_cpu_ms_per_pod",
    "settled_api_server_cpu_ms_per_pod",
    "requests_after_window",
    "failed_requests",
    "operator_processes",
    "peak_rss_mib",
    "peak_pss_mib",
    "pss_at_end_mib",
    "operator_exit_code",
    "stopped_within_seconds",
    "leftover_processes",
    "notes",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--nodes", type=int, default=1000, help="emulated nodes (default 1000)")
    add(
        "--pods",
        type=int,
        default=5000,
        help="pods created once the operator is ready (default 5000)",
    )
    add("--rate", type=float, help="create them at R pods/s (default: all at once)")
    add("--gang-size", type=int, help="pods come in PodGroups of G (minMember G)")
    add(
        "--mixed-gangs",
        action="store_true",
        help="with --gang-size G: a PodGroup of G pods, then G bare pods, in turn; the "
        "latencies of both are reported apart",
    )
    add(
        "--lifetime",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="churn (emulator): a bound pod turns Running, succeeds after SECONDS and is "
        "deleted; a PodGroup goes with its last pod",
    )
    add(
        "--pending-at-start", type=int, default=0, metavar="N", help="pods created before it starts"
    )
    add(
        "--restart",
        action="store_true",
        help="--running pods run; one pod arrives at start (--pods unused)",
    )
    add(
        "--running",
        type=int,
        help="bound, Running pods spread over the nodes (default: 50000 with --restart, else 0)",
    )
    add(
        "--compare",
        metavar="CHECKOUT",
        help="run the same load on the operator of another checkout (say, the commit before) "
        "and print both, side by side",
    )
    add(
        "--gpus-per-node",
        type=int,
        default=0,
        metavar="N",
        help="emulated nodes register N shared GPUs (HAMi); pods ask a fraction of one and the "
        "policy adds deviceshare",
    )
    add("--kubeconfig", help="run against this cluster instead of the emulator")
    add(
        "--operator-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="extra `caldera run` argument, repeatable: --operator-arg=--schedule-period=500ms",
    )
    add("--operator-log", help="keep the operator's output in this file")
    add(
        "--timeout",
        type=float,
        default=300.0,
        help="seconds to wait for ready, then for binds (default 300)",
    )
    add(
        "--settle",
        type=float,
        default=2.0,
        help="seconds to count requests after the window (default 2)",
    )
    add("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.mixed_gangs and not args.gang_size:
        parser.error("--mixed-gangs needs --gang-size")
    if args.lifetime and (args.kubeconfig or args.restart):
        parser.error(
            "--lifetime is a churn of the emulator's new pods: not with --kubeconfig or --restart"
        )
    if args.gpus_per_node and args.kubeconfig:
        parser.error("--gpus-per-node shapes emulated nodes; a real cluster has its own")
    if args.restart and (args.rate or args.gang_size or args.pending_at_start):
        parser.error("--restart takes no --rate, --gang-size or --pending-at-start")
    if not args.restart and args.pods + args.pending_at_start <= 0:
        parser.error("nothing to schedule: give --pods or --pending-at-start")
    if args.running is None:
        args.running = 50_000 if args.restart else 0
    other = Path(args.compare).resolve() / "operator" if args.compare else None
    if other is not None and not (other / "caldera").is_dir():
        parser.error(f"--compare: no operator/caldera in {args.compare}")

    def one(source: Path) -> dict[str, Any]:
        with tempfile.TemporaryDirectory(prefix="caldera-bench-") as workdir:
            try:
                result = asyncio.run(bench(args, Path(workdir), source))
            except BenchError as exc:
                print(f"operator_throughput: {exc}", file=sys.stderr)
                sys.exit(1)
        return result

    result = one(ROOT / "operator")
    out = {key: result.get(key) for key in ORDER}
    if other is not None:
        before = one(other)
        _side_by_side({key: before.get(key) for key in ORDER}, out, args.json)
        return
    if args.json:
        print(json.dumps(out))
    else:
        for key, value in out.items():
            print(f"{key:>26}:" + ("" if isinstance(value, dict) and value else f" {value}"))
            for what, count in (value or {}).items() if isinstance(value, dict) else ():
                print(f"{count:>36}  {what}")
    if result["bound"] < result["pods"]:
        print(f"operator_throughput: {result['bound']} of {result['pods']} bound", file=sys.stderr)
        sys.exit(1)


def _side_by_side(before: dict[str, Any], after: dict[str, Any], as_json: bool) -> None:
    """The two runs of ``--compare``: every scalar figure, before and after, and their ratio."""
    if as_json:
        print(json.dumps({"before": before, "after": after}))
        return
    print(f"{'':>34}  {'before':>12}  {'after':>12}  {'after/before':>12}")
    for key in ORDER:
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) or isinstance(b, dict):
            continue
        ratio = ""
        if (
            isinstance(a, int | float)
            and isinstance(b, int | float)
            and a
            and not isinstance(a, bool)
        ):
            ratio = f"{b / a:.2f}"
        print(f"{key:>34}  {a!s:>12}  {b!s:>12}  {ratio:>12}")


if __name__ == "__main__":
    main()
