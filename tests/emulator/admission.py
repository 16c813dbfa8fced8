"""The per-kind rules a real apiserver applies on writes, kept to what a scheduler can trip over.

A scheduler that works against a permissive fake but fails on a cluster is the failure these
tests exist to prevent, so the emulator applies the rules that matter to one:

* pods are defaulted on create (``schedulerName``, ``status.phase: Pending``, the
  DefaultTolerationSeconds tolerations) and get ``spec.priority`` from the Priority admission
  plugin (403 for an unknown ``priorityClassName``);
* a pod's spec is immutable after create except for the fields the apiserver allows
  (``spec.nodeName`` can only be set through ``pods/binding``);
* ``pods/binding`` sets ``spec.nodeName``, merges the Binding's annotations and the
  ``PodScheduled`` condition, and refuses (409) a pod that is already bound or still gated;
* object names must be DNS subdomains.

References: ``pkg/registry/core/pod/strategy.go`` and ``storage/storage.go`` (BindingREST),
``plugin/pkg/admission/priority``, ``plugin/pkg/admission/defaulttolerationseconds``,
``pkg/apis/core/validation`` (``ValidatePodUpdate``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from emulator.discovery import ResourceType
from emulator.errors import ApiError, bad_request, conflict, invalid, not_found

JsonDict = dict[str, Any]
Lookup = Callable[[str, str | None, str], JsonDict | None]  # (resource, namespace, name)

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# Fields of a pod's spec that ValidatePodUpdate lets an update change.
_MUTABLE_POD_SPEC = ("activeDeadlineSeconds", "terminationGracePeriodSeconds", "tolerations")
_DEFAULT_TOLERATIONS: tuple[JsonDict, ...] = (
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_name(rt: ResourceType, name: str) -> None:
    pattern = _DNS_LABEL if rt.plural == "namespaces" else _DNS_SUBDOMAIN
    if len(name) > 253 or not pattern.match(name):
        raise invalid(
            rt.kind,
            name,
            f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
            "consist of lower case alphanumeric characters, '-' or '.', and must start and end "
            "with an alphanumeric character",
        )


def prepare_create(rt: ResourceType, obj: JsonDict, lookup: Lookup, keep_status: bool) -> None:
    """Default and validate a new object in place, as the create strategy + admission would."""
    if rt.plural == "pods":
        _prepare_pod(obj, lookup, keep_status)
    elif rt.plural == "namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif rt.plural == "priorityclasses" and not isinstance(obj.get("value"), int):
        raise invalid(rt.kind, obj["metadata"]["name"], "value: Required value")


def _prepare_pod(pod: JsonDict, lookup: Lookup, keep_status: bool) -> None:
    name = pod["metadata"]["name"]
    spec = pod.setdefault("spec", {})
    containers = spec.get("containers")
    if not containers or not all(c.get("name") and c.get("image") for c in containers):
        raise invalid("Pod", name, "spec.containers: Required value (each needs a name and image)")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    tolerations = spec.setdefault("tolerations", [])
    for default in _DEFAULT_TOLERATIONS:
        if not any(t.get("key") == default["key"] for t in tolerations):
            tolerations.append(dict(default))
    _admit_priority(pod, lookup)
    status = pod.get("status") if keep_status else None
    pod["status"] = dict(status or {})
    pod["status"].setdefault("phase", "Pending")


def _admit_priority(pod: JsonDict, lookup: Lookup) -> None:
    spec = pod["spec"]
    class_name = spec.get("priorityClassName")
    if class_name:
        pc = lookup("priorityclasses", None, class_name)
        if pc is None:
            raise ApiError(
                403,
                f'pods "{pod["metadata"]["name"]}" is forbidden: no PriorityClass with name '
                f"{class_name} was found",
            )
        value = pc["value"]
        preemption = pc.get("preemptionPolicy", "PreemptLowerPriority")
    else:
        value, preemption = 0, "PreemptLowerPriority"
    if "priority" in spec and spec["priority"] != value:
        raise ApiError(
            403,
            f'pods "{pod["metadata"]["name"]}" is forbidden: the integer value of priority '
            f"({spec['priority']}) must not be provided in pod spec; priority admission "
            f"controller computed {value} from the given PriorityClass name",
        )
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", preemption)


def validate_update(rt: ResourceType, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Reject updates a real apiserver rejects (only pods have rules here)."""
    if rt.plural == "pods":
        _validate_pod_update(old, new)


def _comparable_pod_spec(spec: Mapping[str, Any]) -> JsonDict:
    stripped = {k: copy.deepcopy(v) for k, v in spec.items() if k not in _MUTABLE_POD_SPEC}
    for key in ("containers", "initContainers"):
        for container in stripped.get(key) or []:
            container.pop("image", None)
    stripped.pop("schedulingGates", None)
    return stripped


def _validate_pod_update(old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    name = old["metadata"]["name"]
    if _comparable_pod_spec(old_spec) != _comparable_pod_spec(new_spec):
        raise invalid(
            "Pod",
            name,
            "spec: Forbidden: pod updates may not change fields other than "
            "`spec.containers[*].image`, `spec.initContainers[*].image`, "
            "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing "
            "tolerations), `spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it "
            "was previously negative), `spec.schedulingGates` (only removals)",
        )
    old_tolerations = old_spec.get("tolerations") or []
    new_tolerations = new_spec.get("tolerations") or []
    if any(t not in new_tolerations for t in old_tolerations):
        raise invalid(
            "Pod", name, "spec.tolerations: Forbidden: existing toleration can not be modified"
        )
    old_gates = old_spec.get("schedulingGates") or []
    if any(g not in old_gates for g in new_spec.get("schedulingGates") or []):
        raise invalid("Pod", name, "spec.schedulingGates: Forbidden: only deletion is allowed")


def bind(pod: JsonDict, binding: Mapping[str, Any], url_name: str) -> JsonDict:
    """The pod after a ``pods/binding`` create; raises what ``BindingREST.Create`` raises."""
    meta = binding.get("metadata") or {}
    if meta.get("name", url_name) != url_name:
        raise bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind", "") not in ("", "Node"):
        raise invalid("Binding", url_name, 'target.kind: Invalid value: must be empty or "Node"')
    node_name = target.get("name")
    if not node_name:
        raise invalid("Binding", url_name, "target.name: Required value")

    name = pod["metadata"]["name"]

    def refuse(why: str) -> ApiError:
        return conflict("pods/binding", name, why=why)

    if meta.get("uid") and meta["uid"] != pod["metadata"].get("uid"):
        raise refuse(f"Precondition failed: UID in precondition: {meta['uid']}")
    if (
        meta.get("resourceVersion")
        and meta["resourceVersion"] != pod["metadata"]["resourceVersion"]
    ):
        raise refuse(
            "the object has been modified; please apply your changes to the latest version"
        )
    if pod["metadata"].get("deletionTimestamp"):
        raise refuse(f"pod {name} is being deleted, cannot be assigned to a host")
    spec = pod.setdefault("spec", {})
    if spec.get("nodeName"):
        raise refuse(f'pod {name} is already assigned to node "{spec["nodeName"]}"')
    if spec.get("schedulingGates"):
        raise refuse(f"pod {name} has non-empty .spec.schedulingGates")

    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node_name
    annotations = meta.get("annotations") or {}
    if annotations:
        bound["metadata"].setdefault("annotations", {}).update(annotations)
    set_condition(bound.setdefault("status", {}), {"type": "PodScheduled", "status": "True"})
    return bound


def set_condition(status: JsonDict, condition: JsonDict) -> None:
    """``podutil.UpdatePodCondition``: replace by type, bump the transition time on change."""
    conditions: list[JsonDict] = status.setdefault("conditions", [])
    stamp = now()
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition["type"]:
            merged = {**existing, **condition, "lastProbeTime": None}
            if existing.get("status") != condition["status"]:
                merged["lastTransitionTime"] = stamp
            conditions[index] = merged
            return
    conditions.append({**condition, "lastProbeTime": None, "lastTransitionTime": stamp})


def require_namespace(lookup: Lookup, namespace: str) -> None:
    if lookup("namespaces", None, namespace) is None:
        raise not_found("namespaces", namespace)
