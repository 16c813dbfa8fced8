"""Tables a snapshot carries beside nodes and jobs, derived from the policy objects the cluster
holds: the ResourceQuotas per namespace (the tightest limit of each resource for the device
quota, and each quota's status for the resourcequota plugin), and the selectors of Services and
controllers (PodTopologySpread's system defaults)."""

from __future__ import annotations

from caldera.api.snapshot import QuotaStatus
from caldera.cache.state import ClusterState
from caldera.models.workloads import SpreadOwners

__all__ = ["quota_statuses", "quotas", "spread_owners"]


def quota_statuses(state: ClusterState) -> dict[str, list[QuotaStatus]]:
    """Per namespace, each ResourceQuota's enforced limits and usage, by name. The limits are
    ``status.hard``, or ``spec.hard`` for a quota the quota controller has not seen yet (a
    manifest given to ``simulate``)."""
    out: dict[str, list[QuotaStatus]] = {}
    for _, quota in sorted(state.resource_quotas.items()):
        ns = quota.metadata.namespace or "default"
        hard = quota.status.hard or quota.spec.hard
        out.setdefault(ns, []).append(
            QuotaStatus(quota.metadata.name, dict(hard), dict(quota.status.used))
        )
    return out


def spread_owners(state: ClusterState) -> SpreadOwners:
    """Per namespace, the selectors of its Services; the controllers by key."""
    services: dict[str, list[dict[str, str]]] = {}
    for _, service in sorted(state.services.items()):
        if service.spec.selector is not None:  # a Service without a selector selects nothing
            ns = service.metadata.namespace or "default"
            services.setdefault(ns, []).append(service.spec.selector)
    return SpreadOwners(
        services=services,
        replication_controllers=dict(state.replication_controllers),
        replica_sets=dict(state.replica_sets),
        stateful_sets=dict(state.stateful_sets),
    )


def quotas(state: ClusterState) -> dict[str, dict[str, float]]:
    """Per namespace, the tightest ``spec.hard`` of each resource over its ResourceQuotas."""
    out: dict[str, dict[str, float]] = {}
    for quota in state.resource_quotas.values():
        hard = out.setdefault(quota.metadata.namespace or "default", {})
        for name, value in quota.spec.hard.items():
            hard[name] = min(value, hard.get(name, value))
    return out
