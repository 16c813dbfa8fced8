"""Shared-device usage of a whole cluster state (``caldera simulate``'s card table, ``/metrics``).

The pods that may hold cards are those on a node that are neither Succeeded nor Failed; the rest
is :func:`caldera.devices.usage.cluster_usage`.
"""

from __future__ import annotations

from collections.abc import Sequence

from caldera.cache.converters import device_view
from caldera.cache.state import ClusterState
from caldera.devices.usage import CardState, HeldPod, PodShare, cluster_usage
from caldera.devices.vendor import Vendor
from caldera.models.core import FINISHED_PHASES

__all__ = ["device_usage"]


def device_usage(
    state: ClusterState, vendors: Sequence[Vendor]
) -> tuple[list[CardState], list[PodShare]]:
    held = [
        HeldPod(
            pod.metadata.namespace or "default",
            pod.metadata.name,
            pod.spec.node_name,
            len(pod.spec.init_containers),
            pod.metadata.annotations,
        )
        for pod in state.pods.values()
        if pod.spec.node_name and pod.status.phase not in FINISHED_PHASES
    ]
    nodes = {name: device_view(node) for name, node in state.nodes.items()}
    return cluster_usage(vendors, nodes, held)
