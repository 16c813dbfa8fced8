"""The queue rules that look at other queues: hierarchy annotations, parent, depth and resources.

Follows ``validate_queue.go``: ``validateHierarchicalAttributes``, ``validateHierarchicalQueue``
with ``validateQueueDepth``, and ``validateHierarchicalQueueResources`` with
``validateChildAgainstAncestor``, ``validateSiblingsSum`` and ``validateChildrenConstraints``.
The queue under review comes from the request; every other queue from the cache.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from caldera.admission.cluster import ROOT, children, not_found, placed_pods
from caldera.admission.resources import (
    ResourceAmounts,
    add,
    from_engine,
    from_raw,
    less_partly,
    names_of,
    resource_text,
    typed_text,
)
from caldera.admission.review import Denied, FieldErrors, Missing, Review, resource_lists
from caldera.models.volcano import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION, Queue

__all__ = ["check_parent", "check_resources", "hierarchy_annotations"]


def hierarchy_annotations(review: Review, errors: FieldErrors) -> None:
    """``validateHierarchicalAttributes``: as many weights as levels, each a number > 0, and no
    other queue's path under this one's."""
    notes = review.annotations
    hierarchy = str(notes.get(HIERARCHY_ANNOTATION) or "")
    weights = str(notes.get(HIERARCHY_WEIGHTS_ANNOTATION) or "")
    if not hierarchy and not weights:
        return
    path = "requestBody.metadata.annotations"
    if len(hierarchy.split("/")) != len(weights.split("/")):
        errors.invalid(
            path,
            hierarchy,
            f"{HIERARCHY_ANNOTATION} must have the same length with {HIERARCHY_WEIGHTS_ANNOTATION}",
        )
        return
    for weight in weights.split("/"):
        try:
            value = float(weight)
        except ValueError:
            errors.invalid(
                path,
                weights,
                f"{weight} in the {weights} is invalid number: "
                f'strconv.ParseFloat: parsing "{weight}": invalid syntax',
            )
            return
        if not value > 0 or math.isnan(value):
            errors.invalid(path, weights, f"{weight} in the {weights} must be larger than 0")
            return
    for name, other in sorted(review.state.queues.items()):
        theirs = other.metadata.annotations.get(HIERARCHY_ANNOTATION, "")
        if name != review.name and theirs.startswith(hierarchy + "/"):
            errors.invalid(
                path,
                hierarchy,
                f"{hierarchy} is not allowed to be in the sub path of {theirs} of queue {name}",
            )
            return


def check_parent(review: Review) -> None:
    """``validateHierarchicalQueue``: not its own parent, not too deep, a parent that exists and
    is not a leaf holding pods."""
    name, parent = review.name, str(review.spec.get("parent") or "")
    if parent in ("", ROOT):
        return
    if parent == name:
        raise Denied(f"queue {name} cannot use itself as parent")
    queues = review.state.queues
    depth, above = 1, parent
    while above not in ("", ROOT):
        depth += 1
        if depth > review.options.max_queue_depth:
            most = review.options.max_queue_depth
            raise Denied(f"queue {name} exceeds the maximum allowed depth of {most}")
        ancestor = queues.get(above)
        if ancestor is None:
            raise Missing(f"failed to get parent queue {above} of queue {name}: {not_found(above)}")
        above = ancestor.spec.parent
    if parent not in queues:
        raise Missing(f"failed to get parent queue of queue {name}: {not_found(parent)}")
    if not children(review.state, parent):
        placed = placed_pods(review.state, parent, review.options.default_queue)
        if placed:
            raise Denied(
                f"queue {parent} cannot be the parent queue of queue {name} because it has "
                f"allocated Pods: {placed}"
            )


Amounts = tuple[ResourceAmounts, ResourceAmounts, ResourceAmounts]
"""A queue's capability, deserved and guarantee."""


def _amounts(review: Review) -> Amounts:
    """The reviewed queue's capability, deserved and guarantee."""
    capability, deserved, guarantee = (_raw(v) for v in resource_lists(review.spec))
    return capability, deserved, guarantee


def _raw(value: object) -> ResourceAmounts:
    return from_raw(value) if isinstance(value, Mapping) else {}


def _cached(queue: Queue) -> Amounts:
    spec = queue.spec
    return (
        from_engine(spec.capability),
        from_engine(spec.deserved),
        from_engine(spec.guarantee.resource),
    )


def check_resources(review: Review) -> None:
    """``validateHierarchicalQueueResources``: within its ancestors' capability, its siblings
    and itself within the parent's guarantee and deserved, its children within its own."""
    name, parent_name = review.name, str(review.spec.get("parent") or "")
    queues = review.state.queues
    amounts = _amounts(review)
    capability = amounts[0]
    if parent_name not in ("", ROOT):
        parent = queues.get(parent_name)
        if parent is None:
            raise Missing(f"parent queue {parent_name} not found: {not_found(parent_name)}")
        for resource in names_of(capability):
            limit = _ancestor_capability(review, parent_name, resource)
            if limit is not None and capability[resource] > limit:
                own = typed_text(resource, capability[resource])
                raise Denied(
                    f"queue {name} capability[{resource}]={own} "
                    f"exceeds its ancestor's capability={typed_text(resource, limit)}"
                )
        siblings = [q for q in children(review.state, parent_name) if q.metadata.name != name]
        _sums(f"parent queue {parent_name}", _cached(parent), [*map(_cached, siblings), amounts])
    kids = children(review.state, name)
    if not kids:
        return
    if review.spec.get("capability") is not None:
        for resource in names_of(capability):
            most = max(_subtree_capability(review, kid, resource) for kid in kids)
            if capability[resource] < most:
                own = typed_text(resource, capability[resource])
                raise Denied(
                    f"queue {name} capability[{resource}]={own} "
                    f"is smaller than its descendants' max capability={typed_text(resource, most)}"
                )
    _sums(f"queue {name}", amounts, [_cached(q) for q in kids])


def _sums(who: str, limits: Amounts, parts: list[Amounts]) -> None:
    """``validateSiblingsSum`` / the sums of ``validateChildrenConstraints``: the parts'
    guarantees and deserved within ``limits``'s, checked after each part is added, guarantee
    before deserved."""
    _, deserved, guarantee = limits
    total_guarantee: ResourceAmounts = {}
    total_deserved: ResourceAmounts = {}
    for _, part_deserved, part_guarantee in parts:
        add(total_guarantee, part_guarantee)
        if less_partly(guarantee, total_guarantee):
            raise Denied(
                f"{who} validation failed: sum of children's guarantee "
                f"({resource_text(total_guarantee)}) exceeds parent's guarantee limit "
                f"({resource_text(guarantee)})"
            )
        add(total_deserved, part_deserved)
        if less_partly(deserved, total_deserved):
            raise Denied(
                f"{who} validation failed: sum of children's deserved "
                f"({resource_text(total_deserved)}) exceeds parent's deserved limit "
                f"({resource_text(deserved)})"
            )


def _ancestor_capability(review: Review, start: str, resource: str) -> float | None:
    """``findNearestAncestorCapability``: the first ancestor that caps ``resource``."""
    name, seen = start, set()
    while name not in ("", ROOT) and name not in seen:
        seen.add(name)
        queue = review.state.queues.get(name)
        if queue is None:
            return None
        value = from_engine(queue.spec.capability).get(resource, 0.0)
        if value > 0:
            return value
        name = queue.spec.parent
    return None


def _subtree_capability(review: Review, queue: Queue, resource: str, depth: int = 0) -> float:
    """``findSubtreeMaxCapability``: the queue's own cap on ``resource``, else its subtree's."""
    value = from_engine(queue.spec.capability).get(resource, 0.0)
    if value > 0 or depth > review.options.max_queue_depth:
        return value
    below = children(review.state, queue.metadata.name)
    return max((_subtree_capability(review, q, resource, depth + 1) for q in below), default=0.0)
