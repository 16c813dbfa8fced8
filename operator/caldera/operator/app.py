"""Composition root of ``caldera run``: what runs, wired together, started and stopped in order.

The data flows: informers (one per kind in :data:`caldera.models.kinds.KINDS`, one per label
selector of a kind read by selectors) list and watch the API into the cache → news starts a
session (the trigger) → the session's decisions go to the writers → the writers send them through
:mod:`caldera.k8s`. Imports go the other way, each layer only downward (enforced by
import-linter): ``app`` → ``loop`` → ``watch`` → ``writers`` → ``caldera.k8s``; callbacks wired
here carry news upward (the cache pokes the trigger, the binder forgets a failed bind's
assumption).

kopf does what it does well: the operator's lifecycle (startup, cleanup, signals, login) and the
Queue handler that gives queues their defaults and brings ``root`` back. It writes no bookkeeping
anywhere (no timers, no finalizers, no annotations); Pods, Nodes and every other watched kind go
through the informers, which ingest an event for a fraction of kopf's cost and drop the ones that
change nothing the scheduler reads before parsing them.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import kopf
from prometheus_client import CollectorRegistry

from caldera.admission.hooks import enabled_hooks
from caldera.collector import fewer_collections
from caldera.devices.vendors import enabled_vendors
from caldera.errors import ConfigError
from caldera.framework.intents import Bind, PodCondition
from caldera.framework.registry import Registry
from caldera.k8s.client import connection_info, load_configuration
from caldera.k8s.endpoints import serve_health, serve_metrics
from caldera.k8s.lease import LeaderGate
from caldera.k8s.preflight import preflight
from caldera.k8s.reachability import Reachability
from caldera.k8s.resources import COMMANDS, QUEUES
from caldera.k8s.rest import Rest
from caldera.models.kinds import KINDS, Kind, with_named
from caldera.operator import logs
from caldera.operator.arenas import one_arena
from caldera.operator.device_metrics import DeviceCollector
from caldera.operator.loop.scheduler import Scheduler, Writers
from caldera.operator.loop.trigger import Trigger
from caldera.operator.loop.worker import SessionConfig, SessionWorker
from caldera.operator.metrics import Metrics
from caldera.operator.settings import Settings
from caldera.operator.startup import ready_when_warm, say_synced, watch_loop_lag
from caldera.operator.watch.assume import Assumptions
from caldera.operator.watch.bare import BarePods
from caldera.operator.watch.cache import Cache
from caldera.operator.watch.devicefail import DeviceFailures
from caldera.operator.watch.informer import Informer
from caldera.operator.watch.policy import PolicyHolder
from caldera.operator.writers.binder import Binder
from caldera.operator.writers.controllers import Controllers
from caldera.operator.writers.events import EventPoster
from caldera.operator.writers.evictor import Evictor
from caldera.operator.writers.gates import GateLifter
from caldera.operator.writers.recheck import NodeRecheck
from caldera.operator.writers.status import StatusWriter
from caldera.outside.metrics import UsageSource
from caldera.sharding.scope import WHOLE_CLUSTER, Scope

if TYPE_CHECKING:  # imported when webhooks are switched on (cryptography, kopf's server)
    from caldera.operator.webhooks.handlers import Admission
    from caldera.operator.webhooks.server import Server

__all__ = ["Runtime", "build_registry", "operate", "run"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Runtime:
    """What the handlers share; filled in by the startup handler."""

    settings: Settings
    registry: Registry
    policy: PolicyHolder
    metrics: Metrics
    leader: LeaderGate
    stop: asyncio.Event
    started: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the client, cache, writers and scheduler exist."""
    rest: Rest | None = None
    cache: Cache | None = None
    informers: list[Informer] = field(default_factory=list)
    scheduler: Scheduler | None = None
    controllers: Controllers | None = None
    writers: Writers | None = None
    bare: BarePods | None = None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    loop_lag_max: float = 0.0
    lost_lease: bool = False
    own_registry: bool = False
    scope: Scope = WHOLE_CLUSTER
    """This instance's share of the cluster (``--node-selector``, Volcano's hash split)."""
    """The plugin registry was given in code rather than loaded from entry points."""
    bind_listeners: list[Callable[[Bind], None]] = field(default_factory=list)
    """Called after each successful bind (metrics, benchmarks)."""
    usage: UsageSource | None = None
    """Nodes' real load from the policy's metrics source (the usage plugin)."""
    admission: Admission | None = None
    """The admission webhooks, when ``--enabled-admission`` names any."""
    webhook_server: Server | None = None

    @classmethod
    def create(
        cls,
        settings: Settings,
        registry: Registry | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Runtime:
        """The runtime of ``settings``; ``environ`` (default: the process's) holds Volcano's
        multi-scheduler variables (:meth:`Settings.scope`)."""
        own = registry is not None
        registry = registry or Registry.from_entry_points()
        hooks = enabled_hooks(settings.enabled_admission)
        runtime = cls(
            own_registry=own,
            settings=settings,
            registry=registry,
            policy=PolicyHolder(settings.scheduler_conf, registry, strict=settings.strict_policy),
            metrics=Metrics(CollectorRegistry()),
            leader=LeaderGate(settings.leader_elect),
            stop=asyncio.Event(),
            scope=settings.scope(environ),
        )
        if hooks:
            from caldera.operator.webhooks.handlers import Admission

            runtime.admission = Admission(
                settings,
                hooks,
                runtime.metrics,
                cache=lambda: runtime.cache,
                events=lambda: runtime.writers.events if runtime.writers else None,
            )
        return runtime


def build_registry(runtime: Runtime) -> kopf.OperatorRegistry:
    settings = runtime.settings
    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry, id="login")
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(await load_configuration(settings.kubeconfig))

    @kopf.on.startup(registry=registry, id="start")
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.scanning.disabled = True
        if runtime.admission is not None:
            from caldera.operator.webhooks.server import server_for

            runtime.webhook_server = server_for(
                runtime.settings, lambda: runtime.rest, runtime.admission.served
            )
            settings.admission.server = runtime.webhook_server
        await _start(runtime)

    @kopf.on.cleanup(registry=registry, id="stop")
    async def cleanup(**_: Any) -> None:
        await _stop(runtime)

    @kopf.on.event(
        QUEUES.group, QUEUES.version, QUEUES.plural, registry=registry, id="queue-defaults"
    )
    async def queue_defaults(body: kopf.Body, name: str, type: str | None, **_: Any) -> None:
        if runtime.controllers is not None:
            await runtime.controllers.on_queue(type, name, body)

    @kopf.on.event(
        COMMANDS.group, COMMANDS.version, COMMANDS.plural, registry=registry, id="queue-commands"
    )
    async def queue_commands(
        body: kopf.Body, namespace: str | None, name: str, type: str | None, **_: Any
    ) -> None:
        if runtime.controllers is not None:
            await runtime.controllers.on_command(type, namespace or "", name, body)

    if runtime.admission is not None:
        runtime.admission.register(registry)
    return registry


def _report_malformed(runtime: Runtime) -> Callable[[Kind, Mapping[str, Any], str], None]:
    def report(kind: Kind, raw: Mapping[str, Any], message: str) -> None:
        """A Warning event on the object itself, so ``kubectl describe`` shows what is wrong."""
        if runtime.writers is None:
            return
        meta = raw.get("metadata") or {}
        runtime.writers.events.emit(
            kind=kind.name,
            namespace=str(meta.get("namespace") or "default"),
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            type_="Warning",
            reason="InvalidObject",
            message=f"ignored by the scheduler: {message}",
            api_version=kind.api_version,
        )

    return report


async def _start(runtime: Runtime) -> None:
    s = runtime.settings
    m = runtime.metrics
    m.policy_warnings.set_function(lambda: len(runtime.policy.policy.warnings))
    reach = Reachability(
        on_failure=m.api_unreachable.inc,
        on_change=lambda reachable: m.api_reachable.set(1 if reachable else 0),
    )
    rest = Rest(await load_configuration(s.kubeconfig), counter=m.count_request, reachability=reach)
    runtime.rest = rest
    events = EventPoster(rest, s.scheduler_names[0], enabled=s.post_events)
    status = StatusWriter(rest, events)
    assumed = Assumptions()
    trigger = Trigger(debounce=s.session_debounce, period=s.schedule_period)
    controllers = Controllers(rest, s.default_queue)
    runtime.controllers = controllers
    # what plugins read by name is watched from the start (a policy naming more: a restart)
    kinds, bad = with_named(KINDS, runtime.policy.policy.read_objects), _report_malformed(runtime)

    def news() -> None:
        trigger.poke()
        controllers.poke()

    cache = Cache(s.scheduler_names, kinds=kinds.values(), on_news=news, on_malformed=bad)
    runtime.cache = cache
    if runtime.scope.writes_queues:  # Closing → Closed needs every PodGroup in view
        controllers.settle_closing(
            lambda: cache.state if cache.synced.is_set() else None, s.scheduler_names
        )
    runtime.metrics.registry.register(
        DeviceCollector(
            lambda: cache.state,
            lambda: enabled_vendors(runtime.policy.policy.managed_resources),
        )
    )
    bare = BarePods(rest, cache, controllers, create_podgroups=s.create_podgroups)
    runtime.bare = bare
    cache.on_bare_pod = bare.seen

    def pod_condition(condition: PodCondition) -> None:
        status.pod(condition)
        if runtime.scheduler is not None:  # a failed bind: its Kubernetes PodGroup says so too
            runtime.scheduler.bind_failed(condition)

    def bound(bind: Bind) -> None:
        m.binds.labels(result="bound").inc()
        for listener in runtime.bind_listeners:
            listener(bind)

    writers = Writers(
        binder=Binder(
            rest,
            events,
            pod_condition,
            forget=assumed.forget,
            workers=s.bind_workers,
            timeout=s.bind_timeout,
            on_bound=bound,
            recheck=NodeRecheck(rest, lambda: cache.state),
        ),
        evictor=Evictor(rest, events, s.scheduler_names[0]),
        status=status,
        events=events,
        gates=GateLifter(rest, forget=assumed.lift_failed),
    )
    runtime.writers = writers
    cache.on_bound_pod = DeviceFailures(events, writers.evictor).seen
    binds = writers.binder.queue
    # events give way while binds wait for their first try (a burst); binds waiting out a retry
    # backoff do not hold them back
    events.busy = lambda: len(binds) > binds.retrying
    usage = UsageSource(
        lambda: runtime.policy.policy.metrics,
        lambda: cache.state.nodes.keys(),
        on_state=lambda up: m.metrics_source_up.set(1 if up else 0),
        rest=lambda: runtime.rest,
    )
    runtime.usage = usage
    config = SessionConfig(
        s.scheduler_names,
        s.default_queue,
        not s.create_podgroups,
        s.full_rebuild_every,
        runtime.scope,
    )
    if not (runtime.scope.writes_queues or runtime.scope.counts_others):
        log.info(
            "queues' status not written: this instance sees only its own part of the cluster "
            "(--node-selector or --scheduler-sharding-mode); --peer-scheduler-name naming the "
            "other instances' schedulers makes queue shares cluster-wide"
        )
    # the worker process loads the plugins from entry points, so a registry built in code
    # (tests, embedding) keeps sessions in a thread of this process
    worker = SessionWorker(config) if s.session_process and not runtime.own_registry else None
    cache.keep_json = "none" if worker is None else "sent" if worker.fork else "all"
    runtime.scheduler = Scheduler(
        config=config,
        cache=cache,
        trigger=trigger,
        policy=runtime.policy,
        registry=runtime.registry,
        assumed=assumed,
        writers=writers,
        leader=runtime.leader,
        metrics=m,
        worker=worker,
        served_version=lambda kind: next(
            (i.version for i in runtime.informers if i.kind.name == kind), KINDS[kind].version
        ),
        node_usage=lambda: (usage.version, usage.usage),
    )

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
    if runtime.scheduler.worker is not None:
        runtime.scheduler.worker.start()  # spawned: it imports while the informers list
    ready = asyncio.Event()
    spawn(asyncio.create_task(ready_when_warm(runtime, ready), name="ready"))
    if s.healthz_address:
        health = await serve_health(s.healthz_address, ready)
        spawn(asyncio.create_task(_hold(health.cleanup)))
    if s.listen_address:
        metrics = await serve_metrics(s.listen_address, m.registry)
        spawn(asyncio.create_task(_hold(metrics.cleanup)))
    runtime.informers = [
        Informer(rest, kind, cache, selector=selector)
        for kind in kinds.values()
        for selector in kind.selectors
    ]
    for informer in runtime.informers:
        if informer.kind.listed_in_pages and runtime.scheduler is not None:
            informer.after_page = runtime.scheduler.prepare
    for informer in runtime.informers:
        suffix = f"-{informer.selector}" if informer.selector else ""
        spawn(asyncio.create_task(informer.run(), name=f"watch-{informer.kind.plural}{suffix}"))
    for queue in (
        writers.binder.queue,
        writers.evictor.queue,
        writers.gates.queue,
        status.podgroups,
        status.queues,
        status.hypernodes,
        status.shards,
        status.workloads,
        status.pods,
        events.queue,
    ):
        spawn(asyncio.create_task(queue.run(), name=f"writer-{queue.name}"))
    spawn(asyncio.create_task(runtime.scheduler.run(ready), name="sessions"))
    spawn(asyncio.create_task(say_synced(runtime, asyncio.get_running_loop().time())))
    spawn(asyncio.create_task(runtime.policy.watch(s.policy_check_interval, policy_error)))
    spawn(asyncio.create_task(watch_loop_lag(runtime)))
    spawn(asyncio.create_task(usage.run(), name="node-usage"))
    spawn(asyncio.create_task(controllers.ensure_builtin_queues()))
    if runtime.admission is not None:
        configure = runtime.admission.keep_configurations(lambda: runtime.rest)
        spawn(asyncio.create_task(configure, name="webhook-configurations"))
    spawn(
        asyncio.create_task(
            runtime.leader.run(
                rest.api_client,
                name=s.lock(runtime.scope),
                namespace=s.lock_namespace,
                lease=s.lease_duration,
                renew=s.renew_deadline,
                retry=s.retry_period,
                on_lost=lambda: _lose(runtime),
            ),
            name="leader",
        )
    )
    runtime.started.set()


def _lose(runtime: Runtime) -> None:
    runtime.lost_lease = True
    runtime.stop.set()


async def _hold(cleanup: Any) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await cleanup()


async def _stop(runtime: Runtime, grace: float = 5.0) -> None:
    """Stop scheduling first, then let the writers finish (briefly), then let go of the rest."""
    s = runtime.settings
    # kopf stopped on a signal of its own; its waiter on our stop flag would hold the exit back
    runtime.stop.set()
    first = [t for t in runtime.tasks if t.get_name() in ("sessions", "leader")]
    for task in first:
        task.cancel()  # no new session, and no renewal that would take the Lease back
    await asyncio.gather(*first, return_exceptions=True)
    if runtime.rest is not None:
        await runtime.leader.release(
            runtime.rest, name=s.lock(runtime.scope), namespace=s.lock_namespace
        )
    if runtime.writers is not None:
        w = runtime.writers
        queues = (
            w.binder.queue,
            w.gates.queue,
            w.status.podgroups,
            w.status.queues,
            w.status.hypernodes,
            w.status.shards,
            w.status.workloads,
            w.events.queue,
        )
        try:
            await asyncio.wait_for(asyncio.gather(*(q.join() for q in queues)), timeout=grace)
        except TimeoutError:
            log.warning("stopping with writes still queued (%s)", _depths(queues))
    if runtime.bare is not None:
        await runtime.bare.close()
    if runtime.controllers is not None:
        await runtime.controllers.close()
    for task in runtime.tasks:
        task.cancel()
    await asyncio.gather(*runtime.tasks, return_exceptions=True)
    runtime.tasks.clear()
    if runtime.scheduler is not None:
        await asyncio.to_thread(runtime.scheduler.close)
    if runtime.rest is not None:
        await runtime.rest.close()


def _depths(queues: Any) -> str:
    return ", ".join(f"{q.name}: {len(q)}" for q in queues)


async def operate(runtime: Runtime) -> None:
    """Run the operator in the current event loop until ``runtime.stop`` is set."""
    await kopf.operator(
        registry=build_registry(runtime),
        standalone=True,
        clusterwide=True,
        stop_flag=runtime.stop,
    )


def run(settings: Settings) -> int:
    """Run the operator until stopped or the lease is lost; returns the exit code.

    Problems a restart cannot fix (a bad kubeconfig, an API server that does not answer, an
    invalid policy) are one line on stderr and exit code 2, before anything starts.
    """
    logs.configure(settings.log_format, verbose=settings.verbose)
    fewer_collections()  # the cache holds one model per watched object: no cycles among them
    one_arena()  # before the session thread and the executor's threads allocate
    try:
        enabled_hooks(settings.enabled_admission)
    except ConfigError as exc:
        logs.fail(str(exc))
        return 2
    problem = asyncio.run(preflight(settings.kubeconfig, settings.api_wait))
    if problem is not None:
        logs.fail(problem)
        return 2
    try:
        runtime = Runtime.create(settings)
    except ConfigError as exc:
        logs.fail(f"invalid policy: {exc}")
        return 2
    asyncio.run(operate(runtime))
    return 1 if runtime.lost_lease else 0
