"""What ``caldera explain`` says of a pod's shared devices on one node.

Kept apart from the session's device state (:mod:`caldera.plugins.deviceshare.state`), which
only decides: this module reads that state to answer "why is my device pod pending?" per node,
down to each card, in the vendor's own words, for every vendor (each tried by its own walk).
"""

from __future__ import annotations

import dataclasses

from caldera.api.task import Task
from caldera.devices.fit import NO_GIVEN, hami_walk
from caldera.devices.model import NodeView
from caldera.devices.vendors import node_cards
from caldera.plugins.deviceshare.state import DeviceState, PodNeed

__all__ = ["card_verdicts", "explain"]


def card_verdicts(state: DeviceState, need: PodNeed, row: int) -> list[str]:
    """Each of the vendor's cards on node ``row`` tried alone, as the vendor's walk tries it,
    by each container's request for one card: what refuses it (HAMi's words:
    ``CardInsufficientMemory``, ``CardTypeMismatch``, ``CardNotHealth``...), or that it has
    room."""
    table = state.tables[need.vendor]
    vendor = state.vendors[need.vendor]
    walk = vendor.walk or hami_walk
    opts = state.node_options(need, row)
    word = vendor.name.lower()
    out: list[str] = []
    for card, use in zip(table.cards[row], table.uses(row), strict=True):
        if word not in card.type.lower():
            continue
        refused: set[str] = set()
        for _, request in need.containers:
            if request is not None:
                one = dataclasses.replace(request, nums=1)
                grants, counts, _ = walk([card], [use.copy()], one, opts, vendor.name, NO_GIVEN)
                if grants is None:
                    refused.update(counts)
        out.append(f"{card.id}: {', '.join(sorted(refused)) if refused else 'has room'}")
    return out


def explain(state: DeviceState, task: Task, row: int) -> tuple[bool, str] | None:
    """The cards ``task`` would get on node ``row`` (True), or why none (False): HAMi's reason
    string, then each card's own refusal; None when the pod asks for no shared device."""
    needs = state.needs(task)
    if isinstance(needs, str):
        return False, needs
    if not needs:
        return None
    parts: list[str] = []
    nodes = state.nodes
    for need in needs:
        vendor = state.vendors[need.vendor]
        capacity = state.names.inward(nodes.capacity[row])
        view = NodeView(nodes.names[row], nodes.annotations[row], capacity, nodes.labels[row])
        registered = node_cards(vendor, view)
        if isinstance(registered, str):
            return False, f"{vendor.source} cannot be read: {registered}"
        fit = state.fit(need, row)
        if fit.grants is None:
            cards = card_verdicts(state, need, row)
            return False, f"{fit.reason} ({'; '.join(cards)})" if cards else fit.reason
        unit = "% cores" if need.opts.soft_split else vendor.core_unit
        parts.extend(f"{g.uuid} ({g.memory} MiB, {g.cores}{unit})" for c in fit.grants for g in c)
    return True, ", ".join(parts)
