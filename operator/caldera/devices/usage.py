"""Who holds what on every shared card, for people and for metrics.

The scheduling session keeps usage in arrays; this is the same rebuild (HAMi's §3.5) done once
over a cluster's nodes and pods, as ``caldera simulate`` prints it and as the operator's
``/metrics`` exports it under HAMi's metric names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from caldera.devices.fit import CardUse, pod_usage
from caldera.devices.model import Card, NodeView
from caldera.devices.vendor import Vendor
from caldera.devices.vendors import decoded, node_cards

__all__ = ["CardState", "HeldPod", "PodShare", "cluster_usage"]


@dataclass(frozen=True, slots=True)
class HeldPod:
    """A pod that may hold cards: not Succeeded or Failed, with its annotations."""

    namespace: str
    name: str
    node: str
    init_containers: int
    annotations: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class CardState:
    node: str
    vendor: str
    card: Card
    use: CardUse


@dataclass(frozen=True, slots=True)
class PodShare:
    """One container's share of one card."""

    vendor: Vendor
    namespace: str
    pod: str
    node: str
    container: int
    uuid: str
    memory: int
    cores: int


def cluster_usage(
    vendors: Sequence[Vendor],
    nodes: Mapping[str, NodeView],
    pods: Iterable[HeldPod],
) -> tuple[list[CardState], list[PodShare]]:
    """Every registered card with its usage (nodes by name, cards in registration order), and
    every container's share; ``nodes`` maps node name → what the vendors read of it."""
    cards: dict[tuple[str, str], list[Card]] = {}
    uses: dict[tuple[str, str, str], CardUse] = {}
    for node, view in sorted(nodes.items()):
        for vendor in vendors:
            registered = node_cards(vendor, view)
            if isinstance(registered, tuple) and registered:
                cards[(node, vendor.name)] = list(registered)
                for c in registered:
                    uses[(node, vendor.name, c.id)] = CardUse()
    shares: list[PodShare] = []
    for pod in pods:
        for vendor in vendors:
            keys = vendor.keys
            text = pod.annotations.get(keys.allocated)
            if text is None or keys.node not in pod.annotations:
                continue
            if pod.annotations.get(keys.phase) == "failed":
                continue  # the device plugin handed nothing over
            containers = decoded(vendor, text)
            if isinstance(containers, str):
                continue
            for uuid, use in pod_usage(pod.init_containers, containers).items():
                held = uses.get((pod.node, vendor.name, uuid))
                if held is None:
                    continue  # a card the node does not register
                held.used += use.used
                held.usedmem += use.usedmem
                held.usedcores += use.usedcores
            shares.extend(
                PodShare(vendor, pod.namespace, pod.name, pod.node, i, g.uuid, g.memory, g.cores)
                for i, grants in enumerate(containers)
                for g in grants
            )
    states = [
        CardState(node, vendor, c, uses[(node, vendor, c.id)])
        for (node, vendor), registered in cards.items()
        for c in registered
    ]
    return states, shares
