"""``/podgroups/mutate`` and ``/podgroups/validate``.

Follows ``pkg/webhooks/admission/podgroups/mutate/mutate_podgroup.go`` (``createQueuePatch``: a
PodGroup left in the default queue goes to its namespace's ``scheduling.volcano.sh/queue-name``)
and ``podgroups/validate/validate_podgroup.go`` (``checkQueueState`` and the network-topology
rule), with their messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from caldera.admission.cluster import not_found
from caldera.admission.review import Denied, Missing, Patch, Review
from caldera.models.volcano import QUEUE_NAME_ANNOTATION

__all__ = ["mutate_podgroup", "queue_state_problem", "validate_podgroup"]

_TIERS = ("highestTierAllowed", "highestTierName")


def mutate_podgroup(review: Review) -> Patch:
    """The namespace's queue for a PodGroup that names none or the default one."""
    queue = str(review.spec.get("queue") or "")
    default = review.options.default_queue
    if queue not in ("", default):
        return {}
    namespace = review.state.namespaces.get(review.namespace)
    chosen = namespace.metadata.annotations.get(QUEUE_NAME_ANNOTATION, "") if namespace else ""
    if chosen and chosen != queue:
        return {"spec": {"queue": chosen}}
    if not queue:
        return {"spec": {"queue": default}}
    return {}


def queue_state_problem(review: Review, queue: str) -> tuple[str, str] | None:
    """Why ``queue`` takes no new work: ``("missing", message)`` or ``("closed", state)``.

    A queue whose state is not yet set counts as open: Volcano's queue controller (and Caldera's
    queue handler) opens every new queue moments after it is created, and a Queue and a PodGroup
    applied together would otherwise race."""
    cached = review.state.queues.get(queue)
    if cached is None:
        return ("missing", not_found(queue))
    state = cached.status.state
    if state not in ("", "Open"):
        return ("closed", state)
    return None


def validate_podgroup(review: Review) -> None:
    """On create, the queue must exist and be open; a network topology names its highest tier
    once (by number or by name), in the PodGroup and in each sub-group policy."""
    problems: list[str] = []
    missing = False
    spec = review.spec
    if review.operation == "CREATE":
        queue = str(spec.get("queue") or "")
        problem = queue_state_problem(review, queue) if queue else None
        if problem is not None and problem[0] == "missing":
            missing = True
            problems.append(f"unable to find queue: {problem[1]}")
        elif problem is not None:
            problems.append(
                "can only submit PodGroup to queue with state `Open`, "
                f"queue `{queue}` status is `{problem[1]}`."
            )
    if _both_tiers(spec.get("networkTopology")):  # validateNetworkTopology, job and sub-groups
        problems.append(
            "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology "
            "simultaneously."
        )
    problems.extend(
        f"in subGroupPolicy '{policy.get('name', '')}': must not specify "
        "'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."
        for policy in spec.get("subGroupPolicy") or ()
        if isinstance(policy, Mapping) and _both_tiers(policy.get("networkTopology"))
    )
    if problems:
        message = "; ".join(p.rstrip(".") for p in problems) + "."
        raise Missing(message) if missing else Denied(message)


def _both_tiers(topology: Any) -> bool:
    return isinstance(topology, Mapping) and all(
        topology.get(key) not in (None, "") for key in _TIERS
    )
