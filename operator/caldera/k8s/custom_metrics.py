"""Node metrics from the custom metrics API (``custom.metrics.k8s.io``), as a Prometheus adapter
serves them: the ``prometheus_adaptor`` source of the usage plugin.

Follows Volcano's ``metrics_client_prometheus_adapt.go``: one list per metric for every node
(``RootScopedMetrics().GetForObjects`` on ``Node``), the object's name as the node, the value a
fraction (0–1), and the adapter's own timestamp as when it was measured.
"""

from __future__ import annotations

from datetime import datetime

from caldera.k8s.rest import Rest
from caldera.quantity import QuantityError, parse_quantity

__all__ = ["CPU_METRIC", "MEMORY_METRIC", "node_metric"]

CPU_METRIC = "node_cpu_usage_avg"
MEMORY_METRIC = "node_memory_usage_avg"
_PATH = "/apis/custom.metrics.k8s.io/v1beta1/nodes/*/{}"


async def node_metric(rest: Rest, metric: str) -> dict[str, tuple[float, float | None]]:
    """Node → (the metric's value, when it was measured in seconds since the epoch)."""
    reply = await rest.get_path(_PATH.format(metric))
    out: dict[str, tuple[float, float | None]] = {}
    for item in (reply or {}).get("items") or ():
        name = (item.get("describedObject") or {}).get("name")
        try:
            value = float(parse_quantity(item.get("value")))
        except (QuantityError, TypeError):
            continue
        stamp = item.get("timestamp")
        measured = None
        if isinstance(stamp, str):
            try:
                measured = datetime.fromisoformat(stamp).timestamp()
            except ValueError:
                measured = None
        if isinstance(name, str):
            out[name] = (value, measured)
    return out
