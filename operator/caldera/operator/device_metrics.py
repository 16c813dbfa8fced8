"""HAMi's scheduler metrics on our ``/metrics``, under HAMi's names, so its dashboards keep working.

Computed when Prometheus scrapes, from the cache (nodes' registrations, pods' allocations) with
the same rebuild the sessions use (:mod:`caldera.devices.usage`); nothing is kept between
scrapes. Units follow hami.md §8: memory in bytes, cores in percent. Emitted only while the
policy enables shared devices (``deviceshare.VGPUEnable``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from caldera.cache.devices import device_usage
from caldera.cache.state import ClusterState
from caldera.devices.usage import PodShare
from caldera.devices.vendor import Vendor

__all__ = ["DeviceCollector"]

MIB = 1024 * 1024
_CARD = ("node", "device_uuid", "device_index", "device_type")


class DeviceCollector(Collector):
    def __init__(
        self,
        state: Callable[[], ClusterState | None],
        vendors: Callable[[], Sequence[Vendor]],
    ) -> None:
        self._state = state
        self._vendors = vendors

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state, vendors = self._state(), self._vendors()
        if state is None or not vendors:
            return
        cards, shares = device_usage(state, vendors)

        def family(name: str, doc: str, labels: Sequence[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=list(labels))

        mem_limit = family("hami_gpu_memory_limit_bytes", "Device memory", _CARD)
        core_limit = family("hami_gpu_core_limit_ratio", "Device cores (percent)", _CARD)
        mem_alloc = family(
            "hami_gpu_memory_allocated_bytes",
            "Device memory allocated",
            ("node", "device_uuid", "device_index", "device_cores", "device_type"),
        )
        shared = family("hami_gpu_shared_count", "Containers sharing the device", _CARD)
        core_alloc = family("hami_gpu_core_allocated_ratio", "Device cores allocated", _CARD)
        overview = family(
            "hami_node_gpu_overview",
            "Device memory allocated, with the device's totals",
            (
                "node",
                "device_uuid",
                "device_index",
                "device_cores",
                "device_memory_limit",
                "device_type",
            ),
        )
        mem_ratio = family(
            "hami_node_gpu_memory_allocated_ratio", "Share of device memory allocated", _CARD
        )
        for c in cards:
            card = [c.node, c.card.id, str(c.card.index), c.card.type]
            used_bytes = float(c.use.usedmem * MIB)
            mem_limit.add_metric(card, float(c.card.devmem * MIB))
            core_limit.add_metric(card, float(c.card.devcore))
            mem_alloc.add_metric(
                [c.node, c.card.id, str(c.card.index), str(c.use.usedcores), c.card.type],
                used_bytes,
            )
            shared.add_metric(card, float(c.use.used))
            core_alloc.add_metric(card, float(c.use.usedcores))
            overview.add_metric(
                [
                    c.node,
                    c.card.id,
                    str(c.card.index),
                    str(c.use.usedcores),
                    str(c.card.devmem * MIB),
                    c.card.type,
                ],
                used_bytes,
            )
            mem_ratio.add_metric(card, c.use.usedmem / c.card.devmem if c.card.devmem else 0.0)
        pod_labels = ("namespace", "node", "pod", "container_index", "device_uuid")
        vmem = family("hami_vgpu_memory_allocated_bytes", "Device memory per container", pod_labels)
        vcore = family("hami_vgpu_core_allocated_ratio", "Device cores per container", pod_labels)
        for s in shares:
            labels = [s.namespace, s.node, s.pod, str(s.container), s.uuid]
            vmem.add_metric(labels, float(s.memory * MIB))
            vcore.add_metric(labels, float(s.cores))
        yield from (mem_limit, core_limit, mem_alloc, shared, core_alloc, overview, mem_ratio)
        yield from (vmem, vcore)
        yield from self._quota(state, vendors, shares)

    def _quota(
        self, state: ClusterState, vendors: Sequence[Vendor], shares: Sequence[PodShare]
    ) -> Iterator[GaugeMetricFamily]:
        """``hami_resource_quota_used`` / ``_limit`` for every namespace quota on a device
        resource (memory in bytes, cores in percent, as the cards' metrics)."""
        used_by: dict[tuple[str, str], float] = {}
        for s in shares:
            for resource, value in (
                (s.vendor.quota_memory, float(s.memory * MIB)),
                (s.vendor.quota_cores, float(s.cores)),
            ):
                used_by[(s.namespace, resource)] = used_by.get((s.namespace, resource), 0.0) + value
        used = GaugeMetricFamily(
            "hami_resource_quota_used",
            "Device quota used per namespace",
            labels=["namespace", "quota_name", "limit"],
        )
        limit = GaugeMetricFamily(
            "hami_resource_quota_limit",
            "Device quota limit per namespace",
            labels=["namespace", "quota_name"],
        )
        for quota in state.resource_quotas.values():
            namespace = quota.metadata.namespace or "default"
            for v in vendors:
                for resource, scale in ((v.quota_memory, MIB), (v.quota_cores, 1)):
                    hard = quota.spec.hard.get(f"limits.{resource}")
                    if hard is None:
                        continue
                    value = hard * scale
                    used.add_metric(
                        [namespace, resource, str(int(value))],
                        used_by.get((namespace, resource), 0.0),
                    )
                    limit.add_metric([namespace, resource], value)
        yield used
        yield limit
