"""Composition root of ``caldera run``: the kopf registry and everything it starts.

Watching uses only ``kopf.index`` and ``kopf.on.event`` handlers, which keep no state on the
objects: kopf never writes annotations or finalizers onto Pods, Nodes or PodGroups. The indexes
*are* the cache: kopf keeps them current from watch events (relisting after errors and ``410
Gone``) and holds every other handler back until all of them have their initial listing, so the
first session never sees a half-synced cluster. A malformed object is logged naming the object and
the field and left out of the index; the rest keep flowing.

The session runs from a kopf timer on the ``root`` Queue (the only object kopf's timer machinery
marks, with its finalizer), every ``--schedule-period``. kopf's own per-handler event posting is
off, so no Kubernetes event is written per tick.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kopf
from kubernetes_asyncio import client
from prometheus_client import CollectorRegistry

from caldera.cache.queues import ROOT_QUEUE
from caldera.cache.state import ClusterState, table_of
from caldera.errors import ConfigError
from caldera.framework.intents import Bind
from caldera.framework.registry import Registry
from caldera.k8s.client import connection_info, load_configuration, make_api_client
from caldera.models.parse import KINDS, NAMESPACED, ObjectError, parse_object
from caldera.operator import logs
from caldera.operator.assume import Assumptions
from caldera.operator.binder import Binder
from caldera.operator.controllers import Controllers
from caldera.operator.events import EventPoster
from caldera.operator.evictor import Evictor
from caldera.operator.health import serve_health, serve_metrics
from caldera.operator.leader import LeaderGate
from caldera.operator.logs import about
from caldera.operator.metrics import Metrics
from caldera.operator.policywatch import PolicyHolder
from caldera.operator.scheduler import Scheduler, Writers
from caldera.operator.status import StatusWriter
from caldera.operator.worker import SessionWorker

__all__ = ["RunSettings", "Runtime", "build_registry", "operate", "run"]

log = logging.getLogger(__name__)

WATCHED = {
    "Pod": ("", "v1", "pods"),
    "Node": ("", "v1", "nodes"),
    "PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
    "Queue": ("scheduling.volcano.sh", "v1beta1", "queues"),
    "PriorityClass": ("scheduling.k8s.io", "v1", "priorityclasses"),
    "Namespace": ("", "v1", "namespaces"),
    "PersistentVolume": ("", "v1", "persistentvolumes"),
    "PersistentVolumeClaim": ("", "v1", "persistentvolumeclaims"),
    "StorageClass": ("storage.k8s.io", "v1", "storageclasses"),
    "CSINode": ("storage.k8s.io", "v1", "csinodes"),
    "ResourceClaim": ("resource.k8s.io", "v1", "resourceclaims"),
    "DeviceClass": ("resource.k8s.io", "v1", "deviceclasses"),
    "ResourceSlice": ("resource.k8s.io", "v1", "resourceslices"),
}


@dataclass(slots=True)
class RunSettings:
    scheduler_names: list[str] = field(default_factory=lambda: ["volcano"])
    scheduler_conf: str | None = None
    schedule_period: float = 1.0
    default_queue: str = "default"
    listen_address: str = ":8080"
    healthz_address: str = ":11251"
    kubeconfig: str | None = None
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    lock_namespace: str = "volcano-system"
    lock_name: str = ""
    bind_workers: int = 32
    bind_timeout: float = 10.0
    policy_check_interval: float = 2.0
    log_format: str = "full"
    verbose: bool = False
    session_process: bool = True
    """Run sessions in a process of their own (see :mod:`caldera.operator.worker`)."""

    @property
    def lock(self) -> str:
        return self.lock_name or self.scheduler_names[0]


@dataclass(slots=True)
class Runtime:
    """What the handlers share; filled in by the startup handler."""

    settings: RunSettings
    registry: Registry
    policy: PolicyHolder
    metrics: Metrics
    leader: LeaderGate
    stop: asyncio.Event
    started: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the API client, writers and scheduler exist."""
    scheduler: Scheduler | None = None
    controllers: Controllers | None = None
    api: client.ApiClient | None = None
    writers: Writers | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    loop_lag_max: float = 0.0
    lost_lease: bool = False
    own_registry: bool = False
    """The plugin registry was given in code rather than loaded from entry points."""
    bind_listeners: list[Callable[[Bind], None]] = field(default_factory=list)
    """Called after each successful bind (metrics, benchmarks)."""
    malformed: dict[str, str] = field(default_factory=dict)
    podgroup_bodies: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The last PodGroup objects the watch delivered, for status updates without a re-read."""

    @classmethod
    def create(cls, settings: RunSettings, registry: Registry | None = None) -> Runtime:
        own = registry is not None
        registry = registry or Registry.from_entry_points()
        return cls(
            own_registry=own,
            settings=settings,
            registry=registry,
            policy=PolicyHolder(settings.scheduler_conf, registry),
            metrics=Metrics(CollectorRegistry()),
            leader=LeaderGate(settings.leader_elect),
            stop=asyncio.Event(),
        )


def _key(kind: str, meta: Mapping[str, Any]) -> str:
    name = str(meta.get("name", ""))
    return f"{meta.get('namespace') or 'default'}/{name}" if kind in NAMESPACED else name


def _state(indexes: Mapping[str, Any]) -> ClusterState:
    """The indexes as a ClusterState (copies of the mappings; the models are immutable)."""

    def table(name: str) -> dict[str, Any]:
        return {key: value for key, store in indexes[name].items() for value in store}

    tables = {table_of(KINDS[kind]): table(f"{kind.lower()}_index") for kind in WATCHED}
    return ClusterState(**tables, hypernodes=table("hypernode_index"))


def _report_malformed(runtime: Runtime, kind: str, raw: Mapping[str, Any], message: str) -> None:
    """A Warning event on the object itself, so ``kubectl describe`` shows what is wrong."""
    if runtime.writers is None:
        return
    meta = raw.get("metadata") or {}
    group, version, _ = WATCHED[kind]
    runtime.writers.events.emit(
        kind=kind,
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        type_="Warning",
        reason="InvalidObject",
        message=f"ignored by the scheduler: {message}",
        api_version=f"{group}/{version}" if group else version,
    )


def build_registry(rt: RunSettings | Runtime) -> kopf.OperatorRegistry:
    runtime = rt if isinstance(rt, Runtime) else Runtime.create(rt)
    settings = runtime.settings
    registry = kopf.OperatorRegistry()

    def indexer(kind: str) -> Any:
        async def index(body: kopf.Body, **_: Any) -> dict[str, Any]:
            raw = dict(body)
            key = _key(kind, raw.get("metadata") or {})
            obj = parse_object(kind, raw)
            if isinstance(obj, ObjectError):
                text = str(obj)
                if runtime.malformed.get(f"{kind}/{key}") != text:
                    runtime.malformed[f"{kind}/{key}"] = text
                    log.warning(
                        "skipping malformed object: %s",
                        text,
                        extra=about(
                            kind,
                            str((raw.get("metadata") or {}).get("name", "")),
                            (raw.get("metadata") or {}).get("namespace"),
                        ),
                    )
                    _report_malformed(runtime, kind, raw, obj.message)
                return {}
            runtime.malformed.pop(f"{kind}/{key}", None)
            if kind == "PodGroup":
                runtime.podgroup_bodies[key] = raw
            return {key: obj}

        index.__name__ = f"{kind.lower()}_index"
        return index

    for kind, (group, version, plural) in WATCHED.items():
        kopf.index(group, version, plural, registry=registry, id=f"{kind.lower()}_index")(
            indexer(kind)
        )

    @kopf.index(
        "topology.volcano.sh", "v1alpha1", "hypernodes", registry=registry, id="hypernode_index"
    )
    async def hypernode_index(body: kopf.Body, name: str, **_: Any) -> dict[str, Any]:
        return {name: dict(body)}

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(await load_configuration(settings.kubeconfig))

    @kopf.on.startup(registry=registry)
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.scanning.disabled = True
        # when root is deleted, kopf waits for the running session to end before removing its
        # finalizer, and re-checks only this often (kopf's default is a minute)
        settings.background.cancellation_polling = 1.0
        settings.persistence.finalizer = "scheduling.volcano.sh/caldera-session-timer"
        await _start(runtime)

    @kopf.on.cleanup(registry=registry)
    async def cleanup(**_: Any) -> None:
        await _stop(runtime)

    def needs_podgroup(body: kopf.Body, **_: Any) -> bool:
        return runtime.controllers is not None and runtime.controllers.needs_podgroup(body)

    @kopf.on.event("", "v1", "pods", registry=registry, when=needs_podgroup)
    async def bare_pod(body: kopf.Body, **_: Any) -> None:
        if runtime.controllers is not None:
            await runtime.controllers.on_pod(body)

    @kopf.on.event("scheduling.volcano.sh", "v1beta1", "queues", registry=registry)
    async def queue_defaults(body: kopf.Body, name: str, type: str | None, **_: Any) -> None:
        if runtime.controllers is not None:
            await runtime.controllers.on_queue(type, name, body)

    def is_root(name: str, **_: Any) -> bool:
        return name == ROOT_QUEUE

    @kopf.timer(
        "scheduling.volcano.sh",
        "v1beta1",
        "queues",
        registry=registry,
        interval=settings.schedule_period,
        when=is_root,
    )
    async def session(**kwargs: Any) -> None:
        if runtime.scheduler is not None:
            state = _state(kwargs)
            for gone in runtime.podgroup_bodies.keys() - state.podgroups.keys():
                del runtime.podgroup_bodies[gone]
            await runtime.scheduler.tick(state)

    return registry


async def _start(runtime: Runtime) -> None:
    s = runtime.settings
    cfg = await load_configuration(s.kubeconfig)
    api = make_api_client(cfg)
    runtime.api = api
    events = EventPoster(api, s.scheduler_names[0])
    assumed = Assumptions()
    status = StatusWriter(api, events, cached_podgroup=runtime.podgroup_bodies.get)
    m = runtime.metrics

    def bound(bind: Bind) -> None:
        m.binds.labels(result="bound").inc()
        for listener in runtime.bind_listeners:
            listener(bind)

    writers = Writers(
        binder=Binder(
            api,
            assumed,
            events,
            status.pod,
            workers=s.bind_workers,
            timeout=s.bind_timeout,
            on_bound=bound,
        ),
        evictor=Evictor(api, events, s.scheduler_names[0]),
        status=status,
        events=events,
    )
    runtime.writers = writers
    runtime.controllers = Controllers(api, s.scheduler_names, s.default_queue)
    runtime.scheduler = Scheduler(
        scheduler_names=s.scheduler_names,
        default_queue=s.default_queue,
        policy=runtime.policy,
        registry=runtime.registry,
        assumed=assumed,
        writers=writers,
        leader=runtime.leader,
        metrics=m,
        # the worker process loads the plugins from entry points, so a registry built in code
        # (tests, embedding) keeps sessions in a thread of this process
        worker=SessionWorker(s.scheduler_names, s.default_queue)
        if s.session_process and not runtime.own_registry
        else None,
    )
    await runtime.controllers.ensure_builtin_queues()

    async def policy_error(error: ConfigError) -> None:
        # The scheduler's own pod (Downward API) carries the event when running in a cluster.
        pod, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
        if pod and namespace:
            events.emit(
                kind="Pod",
                namespace=namespace,
                name=pod,
                uid="",
                type_="Warning",
                reason="InvalidPolicy",
                message=f"kept the previous policy: {error}",
            )

    spawn = runtime.tasks.append
    for queue in (
        writers.binder.queue,
        writers.evictor.queue,
        status.podgroups,
        status.queues,
        status.pods,
    ):
        spawn(asyncio.create_task(queue.run(), name=f"writer-{queue.name}"))
    spawn(asyncio.create_task(runtime.policy.watch(s.policy_check_interval, policy_error)))
    spawn(asyncio.create_task(_watch_loop_lag(runtime)))
    spawn(
        asyncio.create_task(
            runtime.leader.run(
                api,
                name=s.lock,
                namespace=s.lock_namespace,
                lease=s.lease_duration,
                renew=s.renew_deadline,
                retry=s.retry_period,
                on_lost=lambda: _lose(runtime),
            )
        )
    )
    if s.healthz_address:
        health = await serve_health(s.healthz_address, runtime.scheduler.ready)
        spawn(asyncio.create_task(_hold(health.cleanup)))
    if s.listen_address:
        metrics = await serve_metrics(s.listen_address, m.registry)
        spawn(asyncio.create_task(_hold(metrics.cleanup)))
    runtime.started.set()


def _lose(runtime: Runtime) -> None:
    runtime.lost_lease = True
    runtime.stop.set()


async def _hold(cleanup: Any) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await cleanup()


async def _watch_loop_lag(runtime: Runtime, interval: float = 0.05, window: float = 10.0) -> None:
    """Sample how late the loop wakes up; export the worst delay of each window."""
    loop = asyncio.get_running_loop()
    worst, started = 0.0, loop.time()
    while True:
        before = loop.time()
        await asyncio.sleep(interval)
        lag = max(loop.time() - before - interval, 0.0)
        worst = max(worst, lag)
        runtime.loop_lag_max = max(runtime.loop_lag_max, lag)
        if loop.time() - started >= window:
            runtime.metrics.loop_lag.set(worst)
            worst, started = 0.0, loop.time()


async def _stop(runtime: Runtime) -> None:
    if runtime.writers is not None:
        await runtime.writers.events.drain()
    for task in runtime.tasks:
        task.cancel()
    await asyncio.gather(*runtime.tasks, return_exceptions=True)
    runtime.tasks.clear()
    if runtime.api is not None:
        await runtime.api.close()
    if runtime.scheduler is not None and runtime.scheduler.worker is not None:
        runtime.scheduler.worker.close()


async def operate(runtime: Runtime) -> None:
    """Run the operator in the current event loop until ``runtime.stop`` is set."""
    await kopf.operator(
        registry=build_registry(runtime),
        standalone=True,
        clusterwide=True,
        stop_flag=runtime.stop,
    )


def run(settings: RunSettings) -> int:
    """Run the operator until interrupted or the lease is lost; returns the exit code."""
    logs.configure(settings.log_format, verbose=settings.verbose)
    runtime = Runtime.create(settings)
    asyncio.run(operate(runtime))
    return 1 if runtime.lost_lease else 0
