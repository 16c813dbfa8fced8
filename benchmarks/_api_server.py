"""The API-server side of ``operator_throughput.py``: the objects it creates, their pacing, and
the two places they go, the test emulator in a child process or a real cluster.

:func:`serve` runs in a spawned child process (its own core, as a real API server would have). It
creates the nodes and any pre-existing pods straight in the emulator's store (no HTTP, so none of
it shows up in the request log), then obeys the parent's commands: start a load, mark the request
log, report. Binds are timed by a store subscriber, i.e. when the write that set
``spec.nodeName`` was committed, whatever request the operator made it with.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing as mp
import queue
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

JsonDict = dict[str, Any]
NAMESPACE = "caldera-bench"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
RUN_LABEL = "caldera-bench-run"
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", NAMESPACE, "podgroups")
Scrape = Callable[[], Awaitable[str | None]]  # the operator's /metrics ("" before it starts)


class BenchError(Exception):
    """Ends the run with one line."""


GPU_LIMITS = ({"nvidia.com/gpu": "1", "nvidia.com/gpumem": "2000", "nvidia.com/gpucores": "20"},)
"""What a pod asks with ``gpus``: a fraction of one card (HAMi's resources)."""


def node(i: int, *, big: bool = False, gpus: int = 0) -> JsonDict:
    """A node; with ``gpus``, registering that many 16 GiB cards the HAMi way."""
    alloc = {"cpu": "64", "memory": "256Gi", "pods": "200"} if big else {}
    alloc = alloc or {"cpu": "4", "memory": "32Gi", "pods": "110"}
    name = f"node-{i:05d}"
    meta: JsonDict = {"name": name}
    if gpus:
        cards = [
            {"id": f"GPU-{name}-{g}", "index": g, "count": 10, "devmem": 16384, "devcore": 100}
            | {"type": "NVIDIA-A10", "mode": "hami-core", "health": True}
            for g in range(gpus)
        ]
        meta["annotations"] = {"hami.io/node-nvidia-register": json.dumps(cards)}
        alloc = {**alloc, "nvidia.com/gpu": str(10 * gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "status": {
            "allocatable": alloc,
            "capacity": alloc,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str,
    run: str,
    *,
    group: str | None = None,
    node_name: str = "",
    gpu: bool = False,
    scheduler: str = "volcano",
) -> JsonDict:
    """A 100m / 500Mi pod for the ``volcano`` scheduler (or ``scheduler``); with ``node_name``,
    bound and Running; with ``gpu``, asking a fraction of one shared card."""
    meta: JsonDict = {"name": name, "namespace": NAMESPACE, "labels": {RUN_LABEL: run}}
    if group:
        meta["annotations"] = {GROUP_ANNOTATION: group}
    requests = {"cpu": "100m", "memory": "500Mi"}
    obj: JsonDict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "pause", "resources": {"requests": requests}}],
        },
    }
    if gpu:
        obj["spec"]["containers"][0]["resources"]["limits"] = dict(GPU_LIMITS[0])
    if node_name:
        obj["spec"]["nodeName"] = node_name
        obj["status"] = {"phase": "Running"}
    return obj


def podgroup(name: str, run: str, min_member: int) -> JsonDict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {RUN_LABEL: run}},
        "spec": {"minMember": min_member, "queue": "default"},
    }


@dataclass(frozen=True)
class Unit:
    """What arrives at once: one bare pod, or a PodGroup (``group``) and then its pods."""

    group: str | None
    pods: tuple[str, ...]


def units(run: str, first: int, count: int, gang_size: int, *, mixed: bool = False) -> list[Unit]:
    """``count`` pods numbered from ``first``; in gangs of ``gang_size`` unless it is 0, or
    with ``mixed`` a gang of ``gang_size`` then as many bare pods, in turn."""
    names = [f"{run}-{i:06d}" for i in range(first, first + count)]
    if gang_size <= 0:
        return [Unit(None, (name,)) for name in names]
    out: list[Unit] = []
    for i in range(0, count, gang_size):
        chunk = tuple(names[i : i + gang_size])
        if mixed and (i // gang_size) % 2:
            out.extend(Unit(None, (name,)) for name in chunk)
        else:
            out.append(Unit(f"{run}-pg-{(first + i) // gang_size:05d}", chunk))
    return out


async def due(load: list[Unit], rate: float) -> AsyncIterator[Unit]:
    """Each unit when due: at once (``rate`` 0), else pod k at start + k / rate by the wall clock
    (whatever is due is created, then it sleeps until the next one is due)."""
    start, sent = time.monotonic(), 0
    for unit in load:
        if rate > 0 and (delay := start + sent / rate - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        yield unit
        sent += len(unit.pods)


@dataclass(frozen=True)
class Setup:
    nodes: int
    big_nodes: bool
    running: int  # bound, Running pods spread round-robin over the nodes
    backlog: list[Unit]  # pending pods created before the operator starts
    expected: int  # pending pods the benchmark creates in all (backlog included)
    run: str  # name prefix and label value of this run's objects
    gpus: int = 0  # shared GPUs registered per node; pending pods then ask a fraction of one
    lifetime: float = 0.0  # > 0: a bound pod runs this long, succeeds, and is deleted
    schedulers: tuple[str, ...] = ()  # pending pod k names schedulers[k % n] (none: volcano)
    shards: int = 0  # > 0: the nodes split into this many NodeShards, volcano-0 ... (in turn)


@dataclass
class Report:
    created: dict[str, float]  # pod -> wall-clock time it was created
    bound: dict[str, float]  # pod -> when its spec.nodeName was set
    requests: dict[str, int] | None  # in the window, "verb resource[/sub]" -> n; None: unknown
    after: dict[str, int] | None  # the same, from the window's end to the stop
    failed: dict[str, int] | None  # "verb resource[/sub] status" -> n, window and after
    notes: list[str]
    gang_pods: frozenset[str] = frozenset()  # the pods that came in PodGroups


class Backend(Protocol):
    nodes: int
    api_pid: int | None

    async def start(self) -> str: ...  # nodes, running pods, backlog; returns the kubeconfig
    async def load(self, load: list[Unit], rate: float) -> None: ...  # returns at once
    async def wait(self, timeout: float, alive: Callable[[], bool]) -> None: ...  # all bound
    async def mark(self, scrape: Scrape) -> None: ...  # window start, window end, stop
    async def report(self) -> Report: ...
    async def close(self) -> None: ...


# -- the emulator --------------------------------------------------------------------------------


class _Binds:
    """A store subscriber: when each benchmark pod's ``spec.nodeName`` was committed."""

    def __init__(self, expected: int, done: Any) -> None:
        self.expected, self.done = expected, done
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.gangs: dict[str, str] = {}
        """Pod → its PodGroup, for the pods that came in one."""
        self.sizes: dict[str, int] = {}
        """PodGroup → its pods."""
        self.newly_bound: list[str] = []
        """Bound since the churn last looked (only kept with a lifetime)."""
        self.churn = False

    def deliver(self, event: Any) -> None:
        if event.type != "MODIFIED" or event.rt.plural != "pods":
            return
        name = event.obj["metadata"]["name"]
        if name in self.created and name not in self.bound and event.obj["spec"].get("nodeName"):
            self.bound[name] = time.time()
            if self.churn:
                self.newly_bound.append(name)
            if len(self.bound) >= self.expected:
                self.done.set()


async def _churn(emulator: Any, binds: _Binds, lifetime: float) -> None:
    """What a kubelet and a job controller do to the benchmark's pods: Running shortly after
    the bind, Succeeded after ``lifetime`` seconds, deleted half a second later; a PodGroup is
    deleted with its last pod."""
    started: deque[tuple[float, str]] = deque()  # (due, pod) in order
    finished: deque[tuple[float, str]] = deque()
    left: dict[str, int] = {}
    """PodGroup → its pods not deleted yet."""

    def phase(name: str, value: str) -> None:
        with contextlib.suppress(Exception):  # deleted meanwhile
            emulator.patch(
                "pods",
                name,
                {"status": {"phase": value}},
                namespace=NAMESPACE,
                subresource="status",
            )

    while True:
        await asyncio.sleep(0.05)
        now = time.time()
        started.extend((now + 0.2, name) for name in binds.newly_bound)
        binds.newly_bound.clear()
        while started and started[0][0] <= now:
            _, name = started.popleft()
            phase(name, "Running")
            finished.append((now + lifetime, name))
        while finished and finished[0][0] <= now:
            _, name = finished.popleft()
            phase(name, "Succeeded")
            asyncio.get_running_loop().call_later(0.5, _delete, emulator, binds, left, name)


def _delete(emulator: Any, binds: _Binds, left: dict[str, int], name: str) -> None:
    with contextlib.suppress(Exception):
        emulator.delete("pods", name, NAMESPACE)
    group = binds.gangs.get(name)
    if group is not None:
        left[group] = left.get(group, binds.sizes[group]) - 1
        if left[group] <= 0:
            with contextlib.suppress(Exception):
                emulator.delete("podgroups", group, NAMESPACE)


def _count(records: list[Any], failed: dict[str, int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for record in records:
        sub = f"/{record.subresource}" if record.subresource else ""
        key = f"{record.verb} {record.resource}{sub}".strip()
        counts[key] = counts.get(key, 0) + 1
        if record.status is not None and record.status >= 400:
            failed[f"{key} {record.status}"] = failed.get(f"{key} {record.status}", 0) + 1
    return counts


def _millicores(text: str) -> int:
    return int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)


def _overcommitted(emulator: Any) -> list[str]:
    """The nodes whose pods (not finished) request more cpu than the node has."""
    used: dict[str, int] = {}
    for obj in emulator.list("pods", namespace=None):
        where = obj["spec"].get("nodeName")
        if not where or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in obj["spec"]["containers"]:
            cpu = ((c.get("resources") or {}).get("requests") or {}).get("cpu", "0")
            used[where] = used.get(where, 0) + _millicores(cpu)
    out = []
    for obj in emulator.list("nodes"):
        name = obj["metadata"]["name"]
        if used.get(name, 0) > _millicores(obj["status"]["allocatable"]["cpu"]):
            out.append(name)
    return out


def serve(setup: Setup, commands: Any, replies: Any, done: Any) -> None:
    """The child process: serve the emulator until told to stop (see the module docstring)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    # A client hanging up mid-watch is logged as an error by aiohttp; the emulator's own errors
    # are collected in ``internal_errors`` and reported.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    asyncio.run(_serve(setup, commands, replies, done))


async def _serve(setup: Setup, commands: Any, replies: Any, done: Any) -> None:
    from emulator import Emulator

    emulator = Emulator(history_limit=max(200_000, 2 * (setup.running + setup.expected)))
    await emulator.start()
    binds = _Binds(setup.expected, done)
    emulator.store.subscribe(binds)
    emulator.create("namespaces", {"metadata": {"name": NAMESPACE}})
    for i in range(setup.nodes):
        emulator.create("nodes", node(i, big=setup.big_nodes, gpus=setup.gpus))
    for s in range(setup.shards):  # what a sharding controller would write
        desired = [f"node-{i:05d}" for i in range(s, setup.nodes, setup.shards)]
        shard = {"metadata": {"name": f"volcano-{s}"}, "spec": {"nodesDesired": desired}}
        emulator.create("nodeshards", {"apiVersion": "shard.volcano.sh/v1alpha1", **shard})
    for i in range(setup.running):
        running = pod(
            f"{setup.run}-running-{i:06d}", setup.run, node_name=f"node-{i % setup.nodes:05d}"
        )
        emulator.create("pods", running, namespace=NAMESPACE)

    async def create(load: list[Unit], rate: float) -> None:
        since_yield = 0
        async for unit in due(load, rate):
            if unit.group:
                group = podgroup(unit.group, setup.run, len(unit.pods))
                emulator.create("podgroups", group, namespace=NAMESPACE)
            for name in unit.pods:
                names = setup.schedulers
                scheduler = names[len(binds.created) % len(names)] if names else "volcano"
                body = pod(
                    name, setup.run, group=unit.group, gpu=bool(setup.gpus), scheduler=scheduler
                )
                emulator.create("pods", body, namespace=NAMESPACE)
                binds.created[name] = time.time()
                if unit.group:
                    binds.gangs[name] = unit.group
            if unit.group:
                binds.sizes[unit.group] = len(unit.pods)
            since_yield += len(unit.pods)
            if since_yield >= 100:  # keep serving the operator during a burst
                since_yield = 0
                await asyncio.sleep(0)

    await create(setup.backlog, 0.0)
    replies.put(emulator.url)
    loop = asyncio.get_running_loop()
    tasks: list[asyncio.Task[None]] = []
    if setup.lifetime > 0:
        binds.churn = True
        tasks.append(asyncio.create_task(_churn(emulator, binds, setup.lifetime)))
    while True:
        command, *args = await loop.run_in_executor(None, commands.get)
        if command == "load":
            tasks.append(asyncio.create_task(create(*args)))
            replies.put(None)
        elif command == "mark":
            replies.put(len(emulator.requests))
        elif command == "overcommitted":
            replies.put(_overcommitted(emulator))
        elif command == "report":
            log, failed = emulator.requests, dict[str, int]()
            window = _count(log[args[0] : args[1]], failed)
            after = _count(log[args[1] : args[2]], failed)
            notes = [f"emulator error: {exc!r}" for exc in emulator.internal_errors[:5]]
            report = Report(binds.created, binds.bound, window, after, failed, notes)
            report.gang_pods = frozenset(binds.gangs)
            replies.put(report)
        else:
            break
    for task in tasks:
        task.cancel()
    await emulator.stop()


class Emulated:
    """The emulator served by :func:`serve` in a spawned child process."""

    def __init__(self, setup: Setup, workdir: Path) -> None:
        self.setup, self.nodes, self.workdir = setup, setup.nodes, workdir
        ctx = mp.get_context("spawn")
        self.commands, self.replies, self.done = ctx.Queue(), ctx.Queue(), ctx.Event()
        self.child = ctx.Process(
            target=serve, args=(setup, self.commands, self.replies, self.done), daemon=True
        )
        self.marks: list[int] = []
        self.api_pid: int | None = None

    async def _reply(self, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                return await asyncio.to_thread(self.replies.get, True, 0.5)
            if not self.child.is_alive():
                raise BenchError(f"the emulator process died (exit code {self.child.exitcode})")
        raise BenchError(f"the emulator did not answer within {timeout:g} s")

    async def _ask(self, *command: Any) -> Any:
        self.commands.put(command)
        return await self._reply()

    async def start(self) -> str:
        self.child.start()
        self.api_pid = self.child.pid
        url = await self._reply(timeout=3600)
        cluster = {"name": "bench", "cluster": {"server": url}}
        context = {"name": "bench", "context": {"cluster": "bench", "user": "bench"}}
        config: JsonDict = {"apiVersion": "v1", "kind": "Config", "current-context": "bench"}
        config |= {"clusters": [cluster], "contexts": [context]}
        config["users"] = [{"name": "bench", "user": {}}]
        path = self.workdir / "kubeconfig"
        path.write_text(json.dumps(config))
        return str(path)

    async def load(self, load: list[Unit], rate: float) -> None:
        await self._ask("load", load, rate)

    async def wait(self, timeout: float, alive: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive():
            if await asyncio.to_thread(self.done.wait, 0.2):
                return

    async def mark(self, scrape: Scrape) -> None:
        self.marks.append(await self._ask("mark"))

    async def report(self) -> Report:
        report: Report = await self._ask("report", *self.marks[:3])
        return report

    async def overcommitted(self) -> list[str]:
        """Nodes holding pods that request more cpu than they have."""
        found: list[str] = await self._ask("overcommitted")
        return found

    async def close(self) -> None:
        if self.child.is_alive():
            self.commands.put(("stop",))
            await asyncio.to_thread(self.child.join, 30)
        if self.child.is_alive():
            self.child.kill()


# -- a real cluster ------------------------------------------------------------------------------


class Cluster:
    """A real cluster through kubernetes_asyncio; bind times from a watch on the namespace."""

    def __init__(self, kubeconfig: str, setup: Setup) -> None:
        self.kubeconfig, self.setup = kubeconfig, setup
        self.nodes = 0
        self.api_pid: int | None = None
        self.api: Any = None
        self.created: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.all_bound = asyncio.Event()
        self.marks: list[dict[str, float] | None] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.errors: list[str] = []

    async def start(self) -> str:
        from kubernetes_asyncio import client, config

        self.api = await config.new_client_from_config(config_file=self.kubeconfig)
        self.core, self.custom = client.CoreV1Api(self.api), client.CustomObjectsApi(self.api)
        self.nodes = len((await self.core.list_node()).items)
        if not self.nodes:
            raise BenchError("the cluster has no nodes")
        with contextlib.suppress(client.ApiException):  # 409: it exists
            await self.core.create_namespace({"metadata": {"name": NAMESPACE}})
        self.tasks.append(asyncio.create_task(self._watch(await self._list())))
        await self._create(self.setup.backlog, 0.0)
        return self.kubeconfig

    async def _list(self) -> str:
        response = await self.core.list_namespaced_pod(NAMESPACE, _preload_content=False)
        doc = json.loads(await response.read())
        for obj in doc["items"]:
            self._seen(obj)
        return str(doc["metadata"]["resourceVersion"])

    def _seen(self, pod: Any) -> None:
        name, labels = pod["metadata"]["name"], pod["metadata"].get("labels") or {}
        if labels.get(RUN_LABEL) == self.setup.run and pod["spec"].get("nodeName"):
            self.bound.setdefault(name, time.time())
            if len(self.bound) >= self.setup.expected:
                self.all_bound.set()

    async def _watch(self, rv: str) -> None:
        while True:
            response = await self.core.list_namespaced_pod(
                NAMESPACE,
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=300,
                _preload_content=False,
            )
            async with response:
                async for line in response.content:
                    event = json.loads(line)
                    if event["type"] == "ERROR":  # 410 Gone: list again
                        rv = await self._list()
                        break
                    rv = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._seen(event["object"])

    async def _create(self, load: list[Unit], rate: float) -> None:
        slots = asyncio.Semaphore(32)  # requests in flight

        async def post(call: Any, *args: Any) -> None:
            response = await call(*args, _preload_content=False)
            async with response:
                if response.status >= 300:
                    self.errors.append(f"create: {response.status} {(await response.text())[:200]}")

        async def create(unit: Unit) -> None:
            try:
                if unit.group:
                    body = podgroup(unit.group, self.setup.run, len(unit.pods))
                    await post(self.custom.create_namespaced_custom_object, *PODGROUPS, body)
                for name in unit.pods:
                    body = pod(name, self.setup.run, group=unit.group)
                    await post(self.core.create_namespaced_pod, NAMESPACE, body)
                    self.created[name] = time.time()
            finally:
                slots.release()

        tasks = []
        async for unit in due(load, rate):
            await slots.acquire()
            tasks.append(asyncio.create_task(create(unit)))
        await asyncio.gather(*tasks)

    async def load(self, load: list[Unit], rate: float) -> None:
        self.tasks.append(asyncio.create_task(self._create(load, rate)))

    async def wait(self, timeout: float, alive: Callable[[], bool]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive() and not self.all_bound.is_set():
            for task in self.tasks:
                if task.done() and task.exception():
                    raise BenchError(f"the benchmark's client failed: {task.exception()!r}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.all_bound.wait(), 0.2)

    async def mark(self, scrape: Scrape) -> None:
        text = await scrape()
        self.marks.append(None if text is None else _api_counter(text))

    async def report(self) -> Report:
        def diff(a: dict[str, float] | None, b: dict[str, float] | None) -> dict[str, int] | None:
            if a is None or not b:  # no counter: unknown
                return None
            return {k: n for k, v in b.items() if (n := round(v - a.get(k, 0.0)))}

        marks = [*self.marks, None, None, None]
        window, after = diff(marks[0], marks[1]), diff(marks[1], marks[2])
        return Report(self.created, self.bound, window, after, None, self.errors[:5])

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.api is not None:
            selector = f"{RUN_LABEL}={self.setup.run}"
            with contextlib.suppress(Exception):
                # at once: pods bound to fake nodes have no kubelet to confirm a graceful end
                await self.core.delete_collection_namespaced_pod(
                    NAMESPACE, label_selector=selector, grace_period_seconds=0
                )
                await self.custom.delete_collection_namespaced_custom_object(
                    *PODGROUPS, label_selector=selector
                )
            await self.api.close()


def _api_counter(text: str) -> dict[str, float]:
    """``caldera_api_requests_total`` by "verb resource[/subresource]" ({} when absent)."""
    from prometheus_client.parser import text_string_to_metric_families

    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "caldera_api_requests_total":
                labels = sample.labels
                sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
                key = f"{labels.get('verb', '?')} {labels.get('resource', '?')}{sub}"
                counts[key] = counts.get(key, 0.0) + sample.value
    return counts
