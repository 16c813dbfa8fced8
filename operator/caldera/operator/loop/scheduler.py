"""The session loop: one session whenever the trigger says so, decided off the event loop, its
decisions handed to the writers.

Sessions start once the cache has every initial listing, and only on the leader. Each takes the
cache's state (the objects are immutable models) and the binds still in flight, runs in the
session process (:mod:`caldera.operator.loop.worker`, fed only what changed since the last
session) or in a thread with ``--session-process=false``, and hands out its result: each bind is
assumed in the cache and given to the binder, evictions go to the evictor, changed statuses to the
status writer; events are posted only when what they say changed, never once per session. A
session that did something says so in one log line; a quiet one says nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from caldera.api.usage import NodeUsage
from caldera.cache.groups import workload_group_of
from caldera.cache.snapshot import stable_uid
from caldera.framework.intents import (
    Bind,
    CycleResult,
    PodCondition,
    PodGroupStatus,
    WorkloadGroupStatus,
)
from caldera.framework.registry import Registry
from caldera.k8s.lease import LeaderGate
from caldera.models.kinds import KINDS, kind_label
from caldera.models.parse import ObjectError
from caldera.models.volcano import PodGroupCondition
from caldera.models.workload import (
    CONDITION_BY_VERSION,
    DISRUPTION_TARGET,
    REASON_PREEMPTION,
    REASON_SCHEDULER_ERROR,
)
from caldera.operator.loop.thread import SessionThread
from caldera.operator.loop.trigger import Trigger
from caldera.operator.loop.worker import SessionConfig, SessionWorker, Streamed
from caldera.operator.memo import Lasting, Recent
from caldera.operator.metrics import Metrics
from caldera.operator.watch.assume import Assumptions
from caldera.operator.watch.cache import Cache
from caldera.operator.watch.policy import PolicyHolder
from caldera.operator.writers.binder import Binder
from caldera.operator.writers.events import EventPoster
from caldera.operator.writers.evictor import Evictor
from caldera.operator.writers.gates import GateLifter
from caldera.operator.writers.status import StatusWriter, WorkloadWrite
from caldera.quantity import to_engine_units

__all__ = ["Scheduler", "Writers", "by_condition"]

log = logging.getLogger(__name__)
_WAITING_PHASES = ("Pending", "Inqueue", "Unknown")


@dataclass(slots=True)
class Writers:
    binder: Binder
    evictor: Evictor
    status: StatusWriter
    events: EventPoster
    gates: GateLifter


NEWS_MEMORY = 600.0
"""Seconds a PodGroup event once posted is not posted again with the same news: far longer than
the status that says it takes to come back through the watch (after which the status itself
says the news is old)."""


class Scheduler:
    def __init__(
        self,
        *,
        config: SessionConfig,
        cache: Cache,
        trigger: Trigger,
        policy: PolicyHolder,
        registry: Registry,
        assumed: Assumptions,
        writers: Writers,
        leader: LeaderGate,
        metrics: Metrics,
        problem_grace: float = 30.0,
        worker: SessionWorker | None = None,
        served_version: Callable[[str], str] = lambda kind: KINDS[kind].version,
        node_usage: Callable[[], tuple[int, Mapping[str, NodeUsage]]] = lambda: (0, {}),
    ) -> None:
        self.node_usage = node_usage
        """(version, nodes' real load) as the metrics source last gave it."""
        self.config = config
        self.served_version = served_version
        """The version the server serves a kind at (the informer found it)."""
        self.cache = cache
        self.trigger = trigger
        self.policy = policy
        self.registry = registry
        self.assumed = assumed
        self.writers = writers
        self.leader = leader
        self.metrics = metrics
        self.sessions = 0
        self._problems = Lasting(grace=problem_grace)
        self._held = Lasting(grace=HELD_GRACE)
        self._writes = Recent(ttl=30.0)
        self._news = Recent(ttl=NEWS_MEMORY)
        self.worker = worker
        """Where sessions run: a process of their own, or (None) a thread of this one."""
        self.thread = SessionThread(config, cache, registry)
        """Sessions in a thread of this process (when there is no worker)."""
        if worker is not None:
            worker.on_binds = self._streamed
        self._running = ""
        """The id of the session running now, whose binds may arrive ahead of its result."""
        self._sent: set[str] = set()
        """Pods of the running session already handed to the binder."""

    async def run(self, ready: asyncio.Event | None = None) -> None:
        """Run sessions until cancelled: once ``ready`` (default: the initial sync), then as
        the trigger says."""
        await (ready or self.cache.synced).wait()
        while True:
            await self.trigger.wait()
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                # one failed session (a worker that died, a bug on one object) must not stop
                # scheduling: the next session starts afresh
                log.exception("session failed; the next one starts afresh")
            finally:
                self.trigger.done()

    async def tick(self) -> CycleResult | None:
        """Run one session if this replica leads; returns its result."""
        if not self.leader.leading:
            return None
        self.sessions += 1
        state = self.cache.state
        in_flight = self.assumed.current(state.pods)
        evicting = self.assumed.current_evictions(state.pods)
        lifting = self.assumed.current_lifts(state.pods)
        policy = self.policy.policy
        session_id = stable_uid("Session", f"{time.time_ns()}")
        start = time.perf_counter()
        self._running = session_id
        try:
            if self.worker is not None:
                result, problems = await self.worker.decide(
                    self.cache, in_flight, policy, session_id, evicting, lifting, self.node_usage()
                )
            else:
                result, problems = await self.thread.decide(
                    in_flight,
                    policy,
                    session_id,
                    evicting,
                    lifting,
                    self.node_usage()[1],
                    self._streamed,
                )
        finally:
            self._running = ""
        spent = time.perf_counter() - start
        self._observe(result, spent)
        self._report(problems)
        self._dispatch(result)
        if result.binds or result.evictions:
            log.info(
                "session: %d bound, %d evicted, %d waiting, in %.0f ms",
                len(result.binds),
                len(result.evictions),
                len(result.pod_conditions),
                spent * 1000,
            )
        return result

    def close(self) -> None:
        """Stop the session process (mid-session if need be) and close the session thread's
        connections to extenders."""
        if self.worker is not None:
            self.worker.close()
        self.thread.close()

    async def warm(self) -> None:
        """Build the session thread's model of the cluster before the first session (a session
        process is warmed by the operator through its worker)."""
        if self.worker is None:
            await self.thread.warm(self.policy.policy.managed_resources)

    async def prepare(self, keys: list[str]) -> None:
        """A page of pods was listed: the session thread makes ahead what the first build makes
        of each (only until the cache is synced)."""
        if self.worker is None and not self.cache.synced.is_set():
            await self.thread.prepare(keys, self.policy.policy.managed_resources)

    def _report(self, problems: list[ObjectError]) -> None:
        """One warning per kind of problem that has lasted past the grace period, however many
        objects have it (naming a few).

        A burst of pods is often seen before what they refer to; such states fix themselves
        within a session or two and are not worth a warning.
        """
        by_text = by_condition(problems)
        for text in self._problems.seen(by_text):
            log.warning("%s (%s; for more than %.0f s)", text, by_text[text], self._problems.grace)
        hypernodes = self.cache.state.hypernodes
        for p in problems:
            hn = hypernodes.get(p.name) if p.kind == "HyperNode" else None
            if hn is not None:  # on the object itself, so `kubectl describe hn` shows it
                self.writers.events.emit(
                    kind="HyperNode",
                    namespace="default",
                    name=p.name,
                    uid=hn.metadata.uid or "",
                    type_="Warning",
                    reason="InvalidHyperNode",
                    message=p.message,
                    api_version=KINDS["HyperNode"].api_version,
                )

    def _streamed(self, item: Streamed) -> None:
        """Binds sent ahead by the running session: bind them now. (Those of a session that has
        already ended are in its result, which was dispatched whole.)"""
        session_id, binds = item
        if session_id == self._running:
            for bind in binds:
                self._bind(bind)

    def _bind(self, bind: Bind) -> None:
        key = f"{bind.namespace}/{bind.name}"
        if key not in self._sent:
            self._sent.add(key)
            self.assumed.assume(key, bind.node, bind.uid, bind.annotations)
            self.writers.binder.submit(bind)

    def _dispatch(self, result: CycleResult) -> None:
        w = self.writers
        state = self.cache.state
        for bind in result.binds:
            self._bind(bind)
        self._sent.clear()
        for evict in result.evictions:
            self.assumed.evicting(f"{evict.namespace}/{evict.name}", evict.uid)
            w.evictor.submit(evict)
            self.metrics.evictions.labels(action=evict.reason).inc()
        for lift in result.gate_lifts:
            key = f"{lift.namespace}/{lift.name}"
            if self._writes.fresh(f"gate/{key}", lift.uid):
                self.assumed.lifting(key, lift.uid)
                w.gates.submit(lift)
                self.metrics.gates_lifted.labels(queue=lift.queue).inc()
        self.metrics.preemption_victims.set(len(result.evictions))
        self.metrics.preemption_attempts.inc(result.preemption_attempts)
        for st in result.podgroups:
            key = f"{st.namespace}/{st.name}"
            if key not in state.podgroups:
                continue  # an in-memory group of bare pods: no object to write to
            if st.changed and self._writes.fresh(f"pg/{key}", _status_value(st)):
                w.status.podgroup(st)
            self._podgroup_events(st)
        # an instance that sees part of the cluster sees part of each queue's use: writing it
        # would undo what the other instances write
        for qs in result.queues if self.config.scope.writes_queues else ():
            if qs.changed and self._writes.fresh(f"queue/{qs.name}", qs.allocated):
                w.status.queue(qs)
        for ws in result.workload_groups:
            self._workload(ws)
        shard = result.shard_status
        if shard is not None and self._writes.fresh(f"nodeshard/{shard.name}", shard):
            w.status.shard(shard)
        for hs in result.hypernodes:
            if self._writes.fresh(f"hypernode/{hs.name}", hs.node_count):
                w.status.hypernode(hs)
        self._engine_events(result)
        held = {f"{c.namespace}/{c.name}: {c.message}": c for c in result.pod_conditions if c.held}
        due = set(self._held.seen(held))
        for cond in result.pod_conditions:
            key = f"{cond.namespace}/{cond.name}"
            if key in self.assumed or (cond.held and f"{key}: {cond.message}" not in due):
                continue
            pod = state.pods.get(key)
            old = pod.status.condition("PodScheduled") if pod else None
            value = (cond.reason, cond.message, cond.nominated)
            renominated = bool(cond.nominated) and (
                pod is None or pod.status.nominated_node_name != cond.nominated
            )
            if (
                old is None or (old.reason, old.message) != value[:2] or renominated
            ) and self._writes.fresh(f"pod/{key}", value):
                w.status.pod(cond)

    def _workload_condition(self) -> tuple[str, str]:
        """(the version Kubernetes' PodGroups are served at, its scheduling condition type)."""
        version = self.served_version("WorkloadPodGroup")
        return version, CONDITION_BY_VERSION.get(version, CONDITION_BY_VERSION["v1alpha3"])

    def bind_failed(self, cond: PodCondition) -> None:
        """A pod's binding failed (``SchedulerError``): its Kubernetes PodGroup, if it has one
        not yet scheduled, says so too (kube-scheduler's ``PodGroupReasonSchedulerError``)."""
        if cond.reason != REASON_SCHEDULER_ERROR:
            return
        state = self.cache.state
        pod = state.pods.get(f"{cond.namespace}/{cond.name}")
        pg_key = workload_group_of(pod) if pod is not None else ""
        pg = state.workload_podgroups.get(pg_key) if pg_key else None
        if pg is None:
            return
        message = f"binding {cond.name} failed: {cond.message}"
        self._writes.forget(f"workload/{pg_key}")  # the session's own condition is overwritten
        self._workload(
            WorkloadGroupStatus(
                cond.namespace, pg.metadata.name, False, REASON_SCHEDULER_ERROR, message
            )
        )

    def _workload(self, ws: WorkloadGroupStatus) -> None:
        """A Kubernetes PodGroup's conditions, when they change: the scheduling condition of the
        version the server serves (never turned back to False once True, as kube-scheduler's
        ``updatePodGroupCondition``), and ``DisruptionTarget`` when its pods are preempted."""
        key = f"{ws.namespace}/{ws.name}"
        pg = self.cache.state.workload_podgroups.get(key)
        if pg is None:
            return
        version, kind = self._workload_condition()
        wanted: list[tuple[str, str, str, str]] = []
        old = pg.status.condition(kind)
        value = ("True" if ws.scheduled else "False", ws.reason, ws.message)
        regress = old is not None and old.status == "True" and not ws.scheduled
        if not regress and (old is None or (old.status, old.reason, old.message) != value):
            wanted.append((kind, *value))
        if ws.disrupted:
            hit = pg.status.condition(DISRUPTION_TARGET)
            if hit is None or (hit.status, hit.message) != ("True", ws.disrupted):
                wanted.append((DISRUPTION_TARGET, "True", REASON_PREEMPTION, ws.disrupted))
        if wanted and self._writes.fresh(f"workload/{key}", tuple(wanted)):
            self.writers.status.workload(
                WorkloadWrite(ws, version, pg.metadata.generation, tuple(wanted))
            )

    def _engine_events(self, result: CycleResult) -> None:
        """The events plugins and actions record that are news to a person: a preemptor's
        victims (on its PodGroup) and an invalid Queue. Each is posted once while it repeats
        (the poster drops repeats)."""
        state = self.cache.state
        for ev in result.events:
            obj: Any
            if ev.kind == "Queue":
                obj = state.queues.get(ev.name)
            elif ev.reason == "Preempted":
                obj = state.podgroups.get(f"{ev.namespace}/{ev.name}")
            else:
                continue  # enqueue and gang verdicts go out as the PodGroup's own events
            if obj is None:
                continue  # an in-memory group of bare pods has no object to carry it
            self.writers.events.emit(
                kind=ev.kind,
                namespace=ev.namespace,
                name=ev.name,
                uid=obj.metadata.uid,
                api_version="scheduling.volcano.sh/v1beta1",
                type_=ev.type,
                reason=ev.reason,
                message=ev.message,
            )

    def _podgroup_events(self, st: PodGroupStatus) -> None:
        """Volcano's PodGroup events, but only when the news is new."""
        pg = self.cache.state.podgroups.get(f"{st.namespace}/{st.name}")
        if pg is None:
            return
        new = _unschedulable(st.conditions)
        old = _unschedulable(pg.status.conditions)
        emit = self.writers.events.emit
        about = {
            "kind": "PodGroup",
            "namespace": st.namespace,
            "name": st.name,
            "uid": pg.metadata.uid,
            "api_version": "scheduling.volcano.sh/v1beta1",
        }
        key = f"{st.namespace}/{st.name}"
        if (
            new is not None
            and (old is None or old.message != new.message)
            and self._news.fresh(f"unschedulable/{key}", new.message)
        ):
            emit(**about, type_="Warning", reason="Unschedulable", message=new.message)
        if (
            st.changed
            and st.phase not in _WAITING_PHASES
            and pg.status.phase != st.phase
            and self._news.fresh(f"phase/{key}", st.phase)
        ):
            emit(**about, type_="Normal", reason="Scheduled", message="pod group is ready")

    def _observe(self, result: CycleResult, seconds: float) -> None:
        m = self.metrics
        m.e2e.observe(seconds * 1000)
        build, took = result.snapshot
        if build:
            m.snapshots.labels(build=build).inc()
            m.snapshot_seconds.labels(build=build).observe(took * 1000)
        if "open" in result.timings:
            m.open_session.observe(result.timings["open"] * 1000)
        for name, spent in result.timings.items():
            if name not in ("open", "close"):
                m.action.labels(action=name).observe(spent * 1000)
        unschedulable = 0
        waiting: Counter[tuple[str, ...]] = Counter()
        for st in result.podgroups:
            cond = _unschedulable(st.conditions)
            fresh = cond is not None and cond.transition_id == result.session_id
            if fresh:
                unschedulable += 1
                m.job_retries.labels(job_id=st.name).inc()
            if st.phase in _WAITING_PHASES:
                waiting[(st.phase, cond.reason if fresh and cond is not None else "")] += 1
        m.unschedule_jobs.set(unschedulable)
        m.set_counts(m.pending_podgroups, waiting)
        m.set_counts(m.pending_pods, Counter((c.reason,) for c in result.pod_conditions))
        m.attempts.labels(result="scheduled").inc(len(result.binds))
        m.attempts.labels(result="unschedulable").inc(len(result.pod_conditions))
        for qs in result.queues:
            self._queue_metrics(qs.name, "allocated", qs.allocated)
        for name, deserved in result.deserved.items():
            self._queue_metrics(name, "deserved", deserved)
        for key, n in result.calls.items():
            hook, _, outcome = key.partition(" ")
            m.extender_calls.labels(hook=hook, outcome=outcome).inc(n)

    def _queue_metrics(self, queue: str, kind: str, values: dict[str, str]) -> None:
        q = self.metrics.queue
        for resource, text in values.items():
            value = to_engine_units(resource, text)
            if resource == "cpu":
                q[f"{kind}_milli_cpu"].labels(queue_name=queue).set(value)
            elif resource == "memory":
                q[f"{kind}_memory_bytes"].labels(queue_name=queue).set(value)
            else:
                q[f"{kind}_scalar_resources"].labels(queue_name=queue, resource=resource).set(value)


HELD_GRACE = 3.0
"""Seconds a pod's PodGroup or queue may be missing before the pod is told: pods are often
created a moment before what they refer to."""


def by_condition(problems: list[ObjectError]) -> dict[str, str]:
    """Problems grouped by what is wrong: "<kind>: <message>" → the objects (a few named)."""
    names: dict[str, list[str]] = defaultdict(list)
    for p in problems:
        names[f"{kind_label(p.kind)}: {p.message}"].append(p.name)
    return {
        text: ", ".join(objs[:3]) + (f" and {len(objs) - 3} more" if len(objs) > 3 else "")
        for text, objs in names.items()
    }


def _status_value(st: PodGroupStatus) -> tuple[object, ...]:
    """A PodGroup status without its per-session stamps, for change comparison."""
    return (
        st.phase,
        st.running,
        st.succeeded,
        st.failed,
        tuple((c.type, c.status, c.reason, c.message) for c in st.conditions),
        st.hypernode,
    )


def _unschedulable(conditions: tuple[PodGroupCondition, ...]) -> PodGroupCondition | None:
    return next((c for c in conditions if c.type == "Unschedulable" and c.status == "True"), None)
