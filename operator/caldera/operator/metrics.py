"""Prometheus metrics under Volcano's names, so existing dashboards keep working.

Names and buckets follow volcano.md §5 (milliseconds, ``volcano_`` prefix). Volcano's Go counters
without a ``_total`` suffix (``job_retry_counts``, ``total_preemption_attempts``) are exposed as
gauges that only go up, because the Python client would rename a counter. Labels stay bounded
(queue, action, plugin, stage); ``job_id`` follows Volcano. Every metric lives in the registry
passed in, so tests can use their own.

Volcano has no metric saying *why* work waits, so two ``caldera_`` gauges add it with bounded
labels: pods by the reason of their ``PodScheduled`` condition, and PodGroups by phase and the
reason of their ``Unschedulable`` condition. Both are rewritten whole after every session, so a
reason nothing waits for any more disappears instead of keeping its last count.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["Metrics", "exponential_range"]


def exponential_range(low: float, high: float, count: int) -> list[float]:
    """Go's ``prometheus.ExponentialBucketsRange``."""
    factor = (high / low) ** (1.0 / (count - 1))
    return [low * factor**i for i in range(count)]


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def hist(
            name: str, doc: str, buckets: list[float], labels: tuple[str, ...] = ()
        ) -> Histogram:
            return Histogram(f"volcano_{name}", doc, labels, buckets=buckets, registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(f"volcano_{name}", doc, labels, registry=registry)

        self.e2e = hist(
            "e2e_scheduling_latency_milliseconds",
            "One session end to end",
            exponential_range(1, 5000, 20),
        )
        self.open_session = hist(
            "open_session_duration_milliseconds",
            "Opening a session",
            exponential_range(1, 5000, 20),
        )
        self.e2e_job = hist(
            "e2e_job_scheduling_latency_milliseconds",
            "PodGroup creation to a task's allocation",
            exponential_range(100, 120000, 30),
        )
        self.plugin = hist(
            "plugin_scheduling_latency_milliseconds",
            "Plugin open/close",
            exponential_range(0.1, 100, 15),
            ("plugin", "OnSession"),
        )
        self.action = hist(
            "action_scheduling_latency_milliseconds",
            "One action",
            exponential_range(1, 2000, 20),
            ("action",),
        )
        self.task = hist(
            "task_scheduling_latency_milliseconds",
            "Pod creation to a stage",
            exponential_range(50, 60000, 30),
            ("stage",),
        )
        self.stage = hist(
            "scheduling_stage_duration_milliseconds",
            "Bind and other stages",
            exponential_range(0.1, 500, 20),
            ("stage",),
        )
        self.attempts = Counter(
            "volcano_schedule_attempts",
            "Scheduling attempts by result",
            ("result",),
            registry=registry,
        )
        self.evictions = Counter(
            "volcano_eviction_transactions", "Evictions by action", ("action",), registry=registry
        )
        self.preemption_victims = gauge(
            "pod_preemption_victims", "Pods chosen as victims by the last session"
        )
        self.preemption_attempts = gauge(
            "total_preemption_attempts", "Tasks preempt and reclaim tried to make room for"
        )
        self.unschedule_tasks = gauge(
            "unschedule_task_count", "Unschedulable tasks per job", ("job_id",)
        )
        self.unschedule_jobs = gauge("unschedule_job_count", "Unschedulable jobs")
        self.job_retries = gauge("job_retry_counts", "Unready sessions per job", ("job_id",))
        self.pending_pods = Gauge(
            "caldera_pending_pods",
            "Pods the last session left waiting, by the reason of their PodScheduled condition",
            ("reason",),
            registry=registry,
        )
        self.pending_podgroups = Gauge(
            "caldera_pending_podgroups",
            "PodGroups not running after the last session, by phase and the reason of the "
            "session's Unschedulable condition (empty: none)",
            ("phase", "reason"),
            registry=registry,
        )
        self.queue: dict[str, Gauge] = {}
        for kind in ("allocated", "request", "deserved"):
            self.queue[f"{kind}_milli_cpu"] = gauge(
                f"queue_{kind}_milli_cpu", f"Queue {kind} cpu", ("queue_name",)
            )
            self.queue[f"{kind}_memory_bytes"] = gauge(
                f"queue_{kind}_memory_bytes", f"Queue {kind} memory", ("queue_name",)
            )
            self.queue[f"{kind}_scalar_resources"] = gauge(
                f"queue_{kind}_scalar_resources",
                f"Queue {kind} other resources",
                ("queue_name", "resource"),
            )
        self.queue_share = gauge("queue_share", "Queue dominant share", ("queue_name",))
        self.queue_weight = gauge("queue_weight", "Queue weight", ("queue_name",))
        self.queue_overused = gauge("queue_overused", "Queue overused (0 or 1)", ("queue_name",))
        self.loop_lag = Gauge(
            "caldera_event_loop_lag_seconds",
            "Largest event-loop delay seen in the last sampling window",
            registry=registry,
        )
        self.work_queue = Gauge(
            "caldera_work_queue_depth",
            "Items waiting per writer queue",
            ("queue",),
            registry=registry,
        )
        self.snapshots = Counter(
            "caldera_snapshots",
            "Session snapshots by how the model made them: from the changes since the last "
            "session, or from nothing (a node added, gone or not Ready, queue names or resource "
            "names changed; the periodic check, if set)",
            ("build",),
            registry=registry,
        )
        self.snapshot_seconds = hist(
            "snapshot_duration_milliseconds",
            "Making a session's snapshot from the model",
            exponential_range(0.1, 5000, 20),
            ("build",),
        )
        self.binds = Counter(
            "caldera_binds", "Binding calls by result", ("result",), registry=registry
        )
        self.api_requests = Counter(
            "caldera_api_requests",
            "Requests sent to the API server, by verb and resource",
            ("verb", "resource"),
            registry=registry,
        )
        self.metrics_source_up = Gauge(
            "caldera_metrics_source_up",
            "1 while the policy's metrics source (the usage plugin's node load) answers, 0 while "
            "it does not (its last values age and are not used past 5 minutes)",
            registry=registry,
        )
        self.metrics_source_up.set(1)
        self.extender_calls = Counter(
            "caldera_extender_calls",
            "Calls to the policy's HTTP extenders, by hook (predicate, prioritize...) and outcome "
            "(ok, failed, invalid)",
            ("hook", "outcome"),
            registry=registry,
        )
        self.gates_lifted = Counter(
            "caldera_queue_gates_lifted",
            "Pods whose queue-allocation gate was lifted because their queue had room, by queue",
            ("queue",),
            registry=registry,
        )
        self.admission = Counter(
            "caldera_admission_reviews",
            "Admission requests answered, by webhook path and answer (allowed, patched, denied, "
            "error)",
            ("webhook", "result"),
            registry=registry,
        )
        self.api_unreachable = Counter(
            "caldera_api_unreachable_requests",
            "Requests that found no API server (refused, reset or dropped connections)",
            registry=registry,
        )
        self.api_reachable = Gauge(
            "caldera_api_reachable",
            "1 while the API server answers, 0 during an outage",
            registry=registry,
        )
        self.api_reachable.set(1)
        self.policy_warnings = Gauge(
            "caldera_policy_warnings",
            "Places in the policy in force that are passed over: keys nothing reads, plugins "
            "Caldera does not have, configurations of actions it does not run",
            registry=registry,
        )

    def count_request(self, verb: str, resource: str) -> None:
        self.api_requests.labels(verb=verb, resource=resource).inc()

    @staticmethod
    def set_counts(gauge: Gauge, counts: Mapping[tuple[str, ...], int]) -> None:
        """Replace every series of a labelled gauge with ``counts`` (label values → count)."""
        gauge.clear()
        for labels, count in counts.items():
            gauge.labels(*labels).set(count)
