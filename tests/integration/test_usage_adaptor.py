"""The usage plugin's ``prometheus_adaptor`` source: node load from the custom metrics API
(``custom.metrics.k8s.io``) through the API server, as a Prometheus adapter serves it."""

from __future__ import annotations

from datetime import datetime

from caldera.k8s.client import load_configuration
from caldera.k8s.rest import Rest
from caldera.outside.metrics import MetricsSettings, UsageSource
from emulator.handles import K8sHandle


async def test_prometheus_adaptor_reads_the_custom_metrics_api(k8s: K8sHandle) -> None:
    """``type: prometheus_adaptor``: fractions per node from ``custom.metrics.k8s.io``, through
    the API server, with the adapter's timestamps (``metrics_client_prometheus_adapt.go``)."""
    k8s.needs_emulator("serves a custom metrics API answer")
    base = "/apis/custom.metrics.k8s.io/v1beta1/nodes/*/"
    stamp = "2026-11-27T12:00:00Z"
    for metric, values in (
        ("node_cpu_usage_avg", ("900m", "0.2")),
        ("node_memory_usage_avg", ("750m", "250m")),
    ):
        k8s.emulator.documents[base + metric] = {
            "kind": "MetricValueList",
            "apiVersion": "custom.metrics.k8s.io/v1beta1",
            "items": [
                {
                    "describedObject": {"kind": "Node", "name": name, "apiVersion": "/v1"},
                    "metricName": metric,
                    "timestamp": stamp,
                    "value": value,
                }
                for name, value in zip(("hot", "cool"), values, strict=True)
            ],
        }
    rest = Rest(await load_configuration(str(k8s.kubeconfig_path)))
    try:
        source = UsageSource(dict, lambda: ["hot", "cool"], rest=lambda: rest)
        await source.refresh(MetricsSettings("prometheus_adaptor", "", 30.0, False))
    finally:
        await rest.close()
    assert source.problem == ""
    hot, cool = source.usage["hot"], source.usage["cool"]
    assert (hot.cpu, hot.memory, cool.cpu, cool.memory) == (90.0, 75.0, 20.0, 25.0)
    assert hot.measured == datetime.fromisoformat(stamp).timestamp()
