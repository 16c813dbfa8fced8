"""Node load from Prometheus, as Volcano's scheduler cache collects it for the ``usage`` plugin.

The policy file's ``metrics:`` section configures it, with Volcano's keys: ``type``
(``prometheus``; ``prometheus_adaptor``: the custom metrics API through the API server,
:mod:`caldera.k8s.custom_metrics`; or ``elasticsearch``: metricbeat's documents, with the
``elasticsearch.*`` keys), ``address``, ``interval`` (default 30 s) and
``tls.insecureSkipVerify``. Every ``interval`` the source asks Prometheus for each node's CPU
and memory use, averaged over 10 minutes, with the queries of Volcano's
``PrometheusMetricsClient`` (``NodeMetricsAvg``); Caldera asks them once for all nodes
(grouped by ``instance``) rather than twice per node. A series belongs to the node its
``instance`` label names (``n1``, or ``n1:9100``).

A source that is down, slow or misconfigured leaves the last answer in place; it ages, and the
plugin stops using it once it is 5 minutes old (nodes are then neither filtered nor scored by
load). The first failure and the recovery are one log line each; ``caldera_metrics_source_up``
says which state it is in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from caldera.api.usage import NodeUsage
from caldera.framework.duration import DEFAULT_METRICS_INTERVAL, metrics_interval
from caldera.k8s.custom_metrics import CPU_METRIC, MEMORY_METRIC, node_metric
from caldera.k8s.errors import API_ERRORS
from caldera.k8s.rest import Rest

if TYPE_CHECKING:  # imported when a metrics source is configured
    import httpx

__all__ = ["CPU_QUERY", "MEMORY_QUERY", "MetricsSettings", "UsageSource"]

log = logging.getLogger(__name__)

PERIOD = "10m"
"""Volcano's ``NODE_METRICS_PERIOD``."""
CPU_QUERY = (
    "avg_over_time(clamp_min(100 - (avg by (instance) "
    f'(rate(node_cpu_seconds_total{{mode="idle"}}[5m])) * 100), 0)[{PERIOD}:30s])'
)
MEMORY_QUERY = (
    "100*avg_over_time(((1-node_memory_MemAvailable_bytes/node_memory_MemTotal_bytes))"
    f"[{PERIOD}:30s])"
)
TIMEOUT = 10.0
"""Seconds one query may take."""
TYPES = ("prometheus", "prometheus_adaptor", "elasticsearch")
ES_INDEX = "metricbeat-*"
ES_HOSTNAME_FIELD = "host.hostname"
ES_CPU_FIELD = "host.cpu.usage"
ES_MEMORY_FIELD = "system.memory.actual.used.pct"
"""Volcano's ``ElasticsearchMetricsClient`` defaults: metricbeat's index and fields."""
ES_BATCH = 10_000
"""Nodes asked about per search (Elasticsearch takes at most 65,536 terms in one query)."""


@dataclass(frozen=True, slots=True)
class MetricsSettings:
    type: str
    address: str
    interval: float
    insecure: bool
    options: Mapping[str, str] = field(default_factory=dict)
    """Every key of the section as text (``elasticsearch.index``, ``elasticsearch.username``...)."""

    @classmethod
    def of(cls, metrics: Mapping[str, Any]) -> MetricsSettings | None:
        """The policy's ``metrics:`` section, or None when it names no source (no collection,
        as in Volcano)."""
        kind = str(metrics.get("type") or "")
        if not kind:
            return None
        insecure = str(metrics.get("tls.insecureSkipVerify", "")).lower() == "true"
        return cls(
            kind,
            str(metrics.get("address") or ""),
            metrics_interval(metrics),
            insecure,
            {str(k): str(v) for k, v in metrics.items() if v is not None},
        )


class UsageSource:
    """The last node usage the metrics source gave, refreshed in the background."""

    def __init__(
        self,
        metrics: Callable[[], Mapping[str, Any]],
        nodes: Callable[[], Collection[str]],
        *,
        on_state: Callable[[bool], None] = lambda up: None,
        clock: Callable[[], float] = time.time,
        rest: Callable[[], Rest | None] = lambda: None,
    ) -> None:
        self._rest = rest
        self._metrics = metrics
        self._nodes = nodes
        self._on_state = on_state
        self._clock = clock
        self.usage: dict[str, NodeUsage] = {}
        self.version = 0
        """Bumped on each refresh, so a session is sent the usage only when it changed."""
        self.problem = ""
        """Why the last refresh failed ("" while the source answers)."""

    async def run(self) -> None:
        """Refresh every ``interval`` of the policy in force (read again each time: a policy
        reload may change the source)."""
        while True:
            settings = MetricsSettings.of(self._metrics())
            if settings is None:
                await asyncio.sleep(DEFAULT_METRICS_INTERVAL)
                continue
            await self.refresh(settings)
            await asyncio.sleep(settings.interval)

    async def refresh(self, settings: MetricsSettings) -> None:
        import httpx

        failures: tuple[type[BaseException], ...] = (
            *API_ERRORS,  # the API server, for prometheus_adaptor
            httpx.HTTPError,
            ValueError,
            KeyError,
            TypeError,
        )

        try:
            if settings.type not in TYPES:
                raise ValueError(
                    f"metrics type {settings.type!r} is not supported (supported: "
                    f"{', '.join(TYPES)})"
                )
            if settings.type == "prometheus_adaptor":
                usage = await self._adapted()
            elif not settings.address:
                raise ValueError("metrics address is empty")
            elif settings.type == "elasticsearch":
                usage = await self._elastic(settings)
            else:
                usage = await self._query(settings)
        except failures as exc:
            self._failed(settings, exc)
            return
        self.usage = usage
        self.version += 1
        if self.problem:
            log.info("metrics source %s answers again", settings.address)
        self.problem = ""
        self._on_state(True)

    def _failed(self, settings: MetricsSettings, exc: BaseException) -> None:
        said = self.problem
        self.problem = str(exc) or type(exc).__name__
        self._on_state(False)
        if not said:
            log.warning(
                "metrics source %s (%s) gives no node load: %s; nodes are not filtered or "
                "scored by load once the last values are 5 minutes old",
                settings.address or "-",
                settings.type,
                self.problem,
            )

    async def _query(self, settings: MetricsSettings) -> dict[str, NodeUsage]:
        import httpx

        known = set(self._nodes())
        url = settings.address.rstrip("/") + "/api/v1/query"
        async with httpx.AsyncClient(timeout=TIMEOUT, verify=not settings.insecure) as client:
            cpu = await _vector(client, url, CPU_QUERY)
            memory = await _vector(client, url, MEMORY_QUERY)
        now = self._clock()
        out: dict[str, NodeUsage] = {}
        for instance in cpu.keys() | memory.keys():
            node = _node_of(instance, known)
            if node is not None:
                out[node] = NodeUsage(cpu.get(instance, 0.0), memory.get(instance, 0.0), now)
        return out

    async def _elastic(self, settings: MetricsSettings) -> dict[str, NodeUsage]:
        """``elasticsearch``: metricbeat's documents of the last 10 minutes, averaged per node
        (Volcano's ``ElasticsearchMetricsClient.NodeMetricsAvg``: the same index, fields, time
        range and factor of 100; asked in one search per 10,000 nodes, grouped by host, rather
        than one search per node). A node without documents gets no reading, not 0%."""
        import httpx

        opts = settings.options
        index = opts.get("elasticsearch.index") or ES_INDEX
        field_name = opts.get("elasticsearch.hostnameFieldName") or ES_HOSTNAME_FIELD
        user = opts.get("elasticsearch.username", "")
        password = opts.get("elasticsearch.password", "")
        auth = httpx.BasicAuth(user, password) if user else httpx.USE_CLIENT_DEFAULT
        url = f"{settings.address.rstrip('/')}/{index}/_search"
        nodes = sorted(self._nodes())
        out: dict[str, NodeUsage] = {}
        async with httpx.AsyncClient(timeout=TIMEOUT, verify=not settings.insecure) as client:
            for start in range(0, len(nodes), ES_BATCH):
                batch = nodes[start : start + ES_BATCH]
                reply = await client.post(url, json=_es_search(field_name, batch), auth=auth)
                reply.raise_for_status()
                now = self._clock()
                for bucket in reply.json()["aggregations"]["nodes"]["buckets"]:
                    cpu, memory = bucket["cpu"]["value"], bucket["mem"]["value"]
                    if cpu is not None or memory is not None:
                        usage = NodeUsage(float(cpu or 0) * 100, float(memory or 0) * 100, now)
                        out[str(bucket["key"])] = usage
        return out

    async def _adapted(self) -> dict[str, NodeUsage]:
        """``prometheus_adaptor``: the custom metrics API through the API server (fractions,
        with the adapter's timestamps)."""
        rest = self._rest()
        if rest is None:
            raise ValueError("the API client is not ready")
        cpu = await node_metric(rest, CPU_METRIC)
        memory = await node_metric(rest, MEMORY_METRIC)
        known = set(self._nodes())
        out: dict[str, NodeUsage] = {}
        for name in (cpu.keys() | memory.keys()) & known:
            c, when = cpu.get(name, (0.0, None))
            m, when_m = memory.get(name, (0.0, None))
            out[name] = NodeUsage(c * 100, m * 100, when if when is not None else when_m)
        return out


def _es_search(field_name: str, nodes: list[str]) -> dict[str, Any]:
    """The search: the period's documents of ``nodes``, average CPU and memory per host."""
    averages = {"cpu": {"avg": {"field": ES_CPU_FIELD}}, "mem": {"avg": {"field": ES_MEMORY_FIELD}}}
    return {
        "size": 0,
        "query": {
            "bool": {
                "must": [
                    {"range": {"@timestamp": {"gte": f"now-{PERIOD}", "lt": "now"}}},
                    {"terms": {field_name: nodes}},
                ]
            }
        },
        "aggs": {"nodes": {"terms": {"field": field_name, "size": len(nodes)}, "aggs": averages}},
    }


async def _vector(client: httpx.AsyncClient, url: str, query: str) -> dict[str, float]:
    """Instance → value of an instant query's vector result."""
    reply = await client.get(url, params={"query": query})
    reply.raise_for_status()
    body = reply.json()
    if body.get("status") != "success":
        raise ValueError(f"prometheus refused the query: {body.get('error', body)}")
    data = body["data"]
    if data.get("resultType") != "vector":
        raise ValueError(f"prometheus answered a {data.get('resultType')}, not a vector")
    out: dict[str, float] = {}
    for sample in data["result"]:
        instance = sample["metric"].get("instance")
        if instance is not None:
            out[str(instance)] = float(sample["value"][1])
    return out


def _node_of(instance: str, nodes: Collection[str]) -> str | None:
    """The node an ``instance`` label names: itself, or its host without the port."""
    if instance in nodes:
        return instance
    host = instance.rsplit(":", 1)[0]
    return host if host in nodes else None
