"""``/queues/mutate`` and ``/queues/validate``: Volcano's queue defaults and every queue rule.

Follows ``pkg/webhooks/admission/queues/mutate/mutate_queue.go`` (``createQueuePatch``) and
``queues/validate/validate_queue.go`` (``AdmitQueues``, ``validateQueue``,
``validateHierarchicalQueue``, ``validateQueueDepth``, ``validateHierarchicalQueueResources``,
``validateQueueDeleting``), in the order they check and with their messages. The hierarchy and
resource rules that look at other queues are in :mod:`.queue_tree`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from caldera.admission import queue_tree
from caldera.admission.cluster import ROOT, children, not_found, placed_pods
from caldera.admission.resources import canonical, is_integer_resource, parse
from caldera.admission.review import Denied, FieldErrors, Missing, Patch, Review, resource_lists
from caldera.models.volcano import HIERARCHY_ANNOTATION, HIERARCHY_WEIGHTS_ANNOTATION

__all__ = ["mutate_queue", "validate_queue"]

_BODY = "requestBody"
_STATES = ("Open", "Closed")


def mutate_queue(review: Review) -> Patch:
    """``createQueuePatch``: ``root/`` and ``1/`` in front of a hierarchy that lacks them,
    ``reclaimable: true`` when unset and weight 1 for a weight of 0 or none."""
    patch: Patch = {}
    notes = review.annotations
    hierarchy = str(notes.get(HIERARCHY_ANNOTATION) or "")
    weights = str(notes.get(HIERARCHY_WEIGHTS_ANNOTATION) or "")
    if hierarchy and weights and not hierarchy.startswith(ROOT):
        patch["metadata"] = {
            "annotations": {
                HIERARCHY_ANNOTATION: f"{ROOT}/{hierarchy}",
                HIERARCHY_WEIGHTS_ANNOTATION: f"1/{weights}",
            }
        }
    spec = review.spec
    defaults: dict[str, Any] = {}
    if spec.get("reclaimable") is None:
        defaults["reclaimable"] = True
    if not spec.get("weight"):
        defaults["weight"] = 1
    if defaults:
        patch["spec"] = defaults
    return patch


def validate_queue(review: Review) -> None:
    """``AdmitQueues``: raises :class:`Denied` with the first failing step's message."""
    if review.operation == "DELETE":
        _deleting(review)
        return
    if review.operation not in ("CREATE", "UPDATE"):
        raise Denied(
            f"invalid operation `{review.operation}`, expect operation to be `CREATE`, "
            "`UPDATE` or `DELETE`"
        )
    _fields(review)
    old = review.old if review.operation == "UPDATE" else None
    old_spec: Mapping[str, Any] = (old or {}).get("spec") or {}
    spec = review.spec
    parent_changed = old is None or old_spec.get("parent") != spec.get("parent")
    if parent_changed:
        queue_tree.check_parent(review)
    pairs = zip(resource_lists(spec), resource_lists(old_spec), strict=True)
    resources_changed = any(_differs(new, was) for new, was in pairs)
    protected = review.options.root_protection and review.name == ROOT
    if protected and old is not None and resources_changed:
        raise Denied(
            "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
        )
    # needsValidateHierarchicalQueue: a queue other than root, created, or whose parent or
    # resources changed
    if review.name != ROOT and (parent_changed or resources_changed):
        queue_tree.check_resources(review)


def _differs(new: Any, old: Any) -> bool:
    """``equality.Semantic.DeepEqual`` of two ResourceLists (quantities compared by value)."""
    new_value, old_value = new or {}, old or {}
    if not isinstance(new_value, Mapping) or not isinstance(old_value, Mapping):
        return new_value != old_value
    if new_value.keys() != old_value.keys():
        return True
    return any(parse(new_value[k]) != parse(old_value[k]) for k in new_value)


def _fields(review: Review) -> None:
    """``validateQueue``: quantities, state and hierarchy annotations, every error collected."""
    errors = FieldErrors()
    spec = review.spec
    capability, deserved, guarantee = (_resource_list(v) for v in resource_lists(spec))
    path = f"{_BODY}.spec"
    _quantities(errors, capability, f"{path}.capability")
    _quantities(errors, deserved, f"{path}.deserved")
    for name, text in guarantee.items():
        _quantity(errors, name, text, f"{path}.guarantee.resource.{name}")
        value = parse(text)
        if value is None:
            continue
        shown = canonical(text, value)
        if name not in deserved:
            errors.invalid(
                f"{path}.deserved.{name}",
                "<nil>",
                f"deserved[{name}] must be >= guarantee[{name}]={shown}",
            )
            continue
        wanted = parse(deserved[name])
        if wanted is not None and wanted < value:
            errors.invalid(
                f"{path}.deserved.{name}",
                canonical(deserved[name], wanted),
                f"deserved[{name}]={canonical(deserved[name], wanted)} must be >= "
                f"guarantee[{name}]={shown}",
            )
    if deserved and capability:
        for name, text in deserved.items():
            wanted, limit = parse(text), parse(capability.get(name))
            if name in capability and wanted is not None and limit is not None and wanted > limit:
                d, c = canonical(text, wanted), canonical(capability[name], limit)
                errors.invalid(
                    f"{path}.deserved.{name}",
                    d,
                    f"deserved[{name}]={d} must be <= capability[{name}]={c}",
                )
    status = review.obj.get("status")
    state = status.get("state", "") if isinstance(status, Mapping) else ""
    if state and state not in _STATES:
        errors.invalid(f"{path}.state", state, "queue state must be in [Open Closed]")
    queue_tree.hierarchy_annotations(review, errors)
    errors.raise_any()


def _resource_list(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _quantities(errors: FieldErrors, resources: Mapping[str, Any], path: str) -> None:
    for name, text in resources.items():
        _quantity(errors, name, text, f"{path}.{name}")


def _quantity(errors: FieldErrors, name: str, text: Any, path: str) -> None:
    """``ValidateResourceQuantityValue``: not negative, and whole for integer resources."""
    value = parse(text)
    if value is None:
        errors.invalid(path, text, "quantities must match the regular expression")
        return
    if value < 0:
        errors.invalid(path, canonical(text, value), "must be greater than or equal to 0")
    if is_integer_resource(name) and (value * 1000) % 1000 != 0:
        errors.invalid(path, canonical(text, value), "must be an integer")


def _deleting(review: Review) -> None:
    """``validateQueueDeleting``."""
    name = review.name
    if name in (review.options.default_queue, ROOT):
        raise Denied(f"`{name}` queue can not be deleted")
    if name not in review.state.queues:
        raise Missing(not_found(name))
    if review.options.allocated_pods_check:
        placed = placed_pods(review.state, name, review.options.default_queue)
        if placed:
            raise Denied(f"queue {name} cannot be deleted because it has allocated Pods: {placed}")
    kids = children(review.state, name)
    if kids:
        names = ", ".join(q.metadata.name for q in kids)
        raise Denied(
            f"queue {name} can not be deleted because it has {len(kids)} child queues: {names}"
        )
