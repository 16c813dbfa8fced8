"""DynamicResources' PreBind: what Reserve decided for a task, and the claim status writes that
travel with its bind.

The binder writes a claim's new allocation and adds the pod to ``status.reservedFor`` before the
binding (kube's PreBind); this module turns the session's decisions into those writes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from caldera.framework.intents import Bind, ClaimReservation
from caldera.models.dra import AllocationResult, ResourceClaim

__all__ = ["Decision", "with_claim_writes"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What Reserve assumed for a placed task."""

    claims: tuple[ResourceClaim, ...]
    allocations: dict[str, AllocationResult]
    devices: tuple[int, ...]


def with_claim_writes(decision: Decision, bind: Bind) -> Bind:
    """The bind of a task with claims, with the claim status writes of its PreBind."""
    writes = []
    for claim in decision.claims:
        allocation = decision.allocations.get(claim.key)
        consumers = tuple((r.name, r.uid) for r in claim.status.reserved_for)
        if allocation is None and any(uid == bind.uid for _n, uid in consumers):
            continue
        if not any(uid == bind.uid for _n, uid in consumers):
            consumers += ((bind.name, bind.uid),)
        writes.append(
            ClaimReservation(
                namespace=claim.metadata.namespace,
                claim=claim.metadata.name,
                claim_uid=claim.metadata.uid,
                claim_resource_version=claim.metadata.resource_version,
                allocation=None
                if allocation is None
                else allocation.model_dump(mode="json", by_alias=True, exclude_defaults=True),
                reserved_for=consumers,
            )
        )
    return replace(bind, claims=tuple(writes))
