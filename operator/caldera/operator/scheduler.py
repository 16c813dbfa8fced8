"""One scheduling session per tick, decided off the event loop, carried out by the writers.

On each tick (only on the leader) the watched objects are copied into an immutable
:class:`~caldera.cache.state.ClusterState` on the loop (cheap: dictionaries of frozen models), with
binds still in flight applied as assumptions. Building the snapshot and running the session happen
in the session worker process (:mod:`caldera.operator.worker`), or in a thread with
``--session-process=false``, so watch handling never waits for a session. The result is then
handed out: binds to the binder, evictions to the evictor, changed statuses to the status writer;
events are posted only when what they say changed, never once per tick.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from caldera.cache.snapshot import PodMemo, stable_uid
from caldera.cache.state import ClusterState
from caldera.framework.intents import CycleResult, PodGroupStatus
from caldera.framework.policy import Policy
from caldera.framework.registry import Registry
from caldera.models.parse import ObjectError
from caldera.models.volcano import PodGroupCondition
from caldera.operator.assume import Assumptions
from caldera.operator.binder import Binder
from caldera.operator.events import EventPoster
from caldera.operator.evictor import Evictor
from caldera.operator.leader import LeaderGate
from caldera.operator.memo import Lasting, Recent
from caldera.operator.metrics import Metrics
from caldera.operator.policywatch import PolicyHolder
from caldera.operator.status import StatusWriter
from caldera.operator.worker import SessionWorker, decide
from caldera.quantity import to_engine_units

__all__ = ["Scheduler", "Writers"]

log = logging.getLogger(__name__)
_WAITING_PHASES = ("Pending", "Inqueue", "Unknown")


@dataclass(slots=True)
class Writers:
    binder: Binder
    evictor: Evictor
    status: StatusWriter
    events: EventPoster


class Scheduler:
    def __init__(
        self,
        *,
        scheduler_names: list[str],
        default_queue: str,
        policy: PolicyHolder,
        registry: Registry,
        assumed: Assumptions,
        writers: Writers,
        leader: LeaderGate,
        metrics: Metrics,
        problem_grace: float = 30.0,
        worker: SessionWorker | None = None,
    ) -> None:
        self.scheduler_names = scheduler_names
        self.default_queue = default_queue
        self.policy = policy
        self.registry = registry
        self.assumed = assumed
        self.writers = writers
        self.leader = leader
        self.metrics = metrics
        self.ready = asyncio.Event()
        self.sessions = 0
        self._problems = Lasting(grace=problem_grace)
        self._writes = Recent(ttl=30.0)
        self._pods = PodMemo()
        """Pod requests per watched pod version, across sessions (used by one session at a
        time: sessions do not overlap)."""
        self._news = Recent(ttl=float("inf"))
        self.worker = worker
        """Where sessions run: a process of their own, or (None) a thread of this one."""

    async def tick(self, state: ClusterState) -> CycleResult | None:
        """Run one session on ``state`` if this replica leads; returns its result."""
        self.ready.set()
        if not self.leader.leading:
            return None
        self.sessions += 1
        in_flight = self.assumed.current(state.pods)
        policy = self.policy.policy
        session_id = stable_uid("Session", f"{time.time_ns()}")
        start = time.perf_counter()
        if self.worker is not None:
            result, problems = await self.worker.decide(state, in_flight, policy, session_id)
        else:
            result, problems = await asyncio.to_thread(
                self._decide, state, in_flight, policy, session_id
            )
        self._observe(result, time.perf_counter() - start)
        self._report(problems)
        self._dispatch(result, state)
        return result

    def _decide(
        self,
        state: ClusterState,
        in_flight: dict[str, str],
        policy: Policy,
        session_id: str,
    ) -> tuple[CycleResult, list[ObjectError]]:
        """Runs in a worker thread: the state is immutable, ``in_flight`` a private copy."""
        return decide(
            state,
            in_flight,
            policy,
            self.registry,
            scheduler_names=self.scheduler_names,
            default_queue=self.default_queue,
            session_id=session_id,
            memo=self._pods,
        )

    def _report(self, problems: list[ObjectError]) -> None:
        """Warn about what the snapshot left out once it has lasted past the grace period.

        A burst of bare pods is always seen before their PodGroups are; such states fix
        themselves within a session or two and are not worth a warning each.
        """
        for text in self._problems.seen(str(p) for p in problems):
            log.warning("%s (for more than %.0f s)", text, self._problems.grace)

    def _dispatch(self, result: CycleResult, state: ClusterState) -> None:
        w = self.writers
        for bind in result.binds:
            w.binder.submit(bind)
        for evict in result.evictions:
            w.evictor.submit(evict)
            self.metrics.evictions.labels(action=evict.reason).inc()
        for st in result.podgroups:
            key = f"{st.namespace}/{st.name}"
            if st.changed and self._writes.fresh(f"pg/{key}", _status_value(st)):
                w.status.podgroup(st)
            self._podgroup_events(st, state)
        for qs in result.queues:
            if qs.changed and self._writes.fresh(f"queue/{qs.name}", qs.allocated):
                w.status.queue(qs)
        for cond in result.pod_conditions:
            key = f"{cond.namespace}/{cond.name}"
            if key in self.assumed:
                continue
            pod = state.pods.get(key)
            old = pod.status.condition("PodScheduled") if pod else None
            value = (cond.reason, cond.message)
            if (old is None or (old.reason, old.message) != value) and self._writes.fresh(
                f"pod/{key}", value
            ):
                w.status.pod(cond)

    def _podgroup_events(self, st: PodGroupStatus, state: ClusterState) -> None:
        """Volcano's PodGroup events, but only when the news is new."""
        pg = state.podgroups.get(f"{st.namespace}/{st.name}")
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
        if "open" in result.timings:
            m.open_session.observe(result.timings["open"] * 1000)
        for name, spent in result.timings.items():
            if name not in ("open", "close"):
                m.action.labels(action=name).observe(spent * 1000)
        unschedulable = 0
        for st in result.podgroups:
            cond = _unschedulable(st.conditions)
            if cond is not None and cond.transition_id == result.session_id:
                unschedulable += 1
                m.job_retries.labels(job_id=st.name).inc()
        m.unschedule_jobs.set(unschedulable)
        m.attempts.labels(result="scheduled").inc(len(result.binds))
        m.attempts.labels(result="unschedulable").inc(len(result.pod_conditions))
        for qs in result.queues:
            self._queue_metrics(qs.name, "allocated", qs.allocated)
        for name, deserved in result.deserved.items():
            self._queue_metrics(name, "deserved", deserved)

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


def _status_value(st: PodGroupStatus) -> tuple[object, ...]:
    """A PodGroup status without its per-session stamps, for change comparison."""
    return (
        st.phase,
        st.running,
        st.succeeded,
        st.failed,
        tuple((c.type, c.status, c.reason, c.message) for c in st.conditions),
    )


def _unschedulable(conditions: tuple[PodGroupCondition, ...]) -> PodGroupCondition | None:
    return next((c for c in conditions if c.type == "Unschedulable" and c.status == "True"), None)
