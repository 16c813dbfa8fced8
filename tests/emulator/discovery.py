"""The resource types the emulator serves, and the discovery documents that describe them.

kopf resolves every handler's resource through ``/api``, ``/apis`` and the per-version
``APIResourceList`` (it reads ``name``, ``singularName``, ``kind``, ``namespaced``, ``verbs``,
``shortNames`` and infers subresources from ``plural/sub`` entries), so the emulator must serve the
same documents a real apiserver does. One :class:`ResourceType` carries both the discovery data
and the per-type semantics the store needs (status subresource, strategic-merge keys, which field
selectors exist, whether unconditional updates are allowed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.errors import ApiError

JsonDict = dict[str, Any]

_OBJECT_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_STATUS_VERBS = ("get", "patch", "update")

# Strategic-merge-patch list strategies shared by every built-in type: ``""`` merges a list of
# scalars as a set; any other value is the merge key of a list of objects.
_META_MERGE_KEYS: Mapping[str, str] = {
    "metadata.finalizers": "",
    "metadata.ownerReferences": "uid",
}

_POD_FIELDS = frozenset(
    {
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    }
)
_EVENT_FIELDS = frozenset(
    {
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    }
)


@dataclass(frozen=True)
class ResourceType:
    """One served resource (e.g. core/v1 pods) with its discovery data and write semantics."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = _OBJECT_VERBS
    subresources: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Custom resources (CRDs) differ from built-ins: no strategic merge patch, no unconditional
    # update, kind/apiVersion are required in bodies, list items keep their kind/apiVersion.
    custom: bool = False
    merge_keys: Mapping[str, str] = field(default_factory=dict)
    field_selectors: frozenset[str] = frozenset()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``plural.group`` as kubectl and error messages spell it (``pods`` for core)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def supports_field(self, path: str) -> bool:
        return path in ("metadata.name", "metadata.namespace") or path in self.field_selectors

    def base_path(self, namespace: str | None = None) -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, of one object, or of one object's subresource."""
        path = self.base_path(namespace)
        if name:
            path += f"/{name}"
            if subresource:
                path += f"/{subresource}"
        return path

    def resource_entries(self) -> list[JsonDict]:
        """This type's entries in its group-version's ``APIResourceList``."""
        entry: JsonDict = {
            "name": self.plural,
            "singularName": self.singular or self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        entries = [entry]
        for sub, verbs in self.subresources.items():
            sub_kind = "Binding" if sub == "binding" else self.kind
            entries.append(
                {
                    "name": f"{self.plural}/{sub}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": sub_kind,
                    "verbs": list(verbs),
                }
            )
        return entries


def _core(plural: str, kind: str, namespaced: bool, **kwargs: Any) -> ResourceType:
    merge_keys = dict(_META_MERGE_KEYS)
    merge_keys.update(kwargs.pop("merge_keys", {}))
    return ResourceType("", "v1", plural, kind, namespaced, merge_keys=merge_keys, **kwargs)


def _builtin(
    group: str, version: str, plural: str, kind: str, namespaced: bool, **kwargs: Any
) -> ResourceType:
    merge_keys = dict(_META_MERGE_KEYS)
    merge_keys.update(kwargs.pop("merge_keys", {}))
    return ResourceType(group, version, plural, kind, namespaced, merge_keys=merge_keys, **kwargs)


def _crd(
    group: str, version: str, plural: str, kind: str, namespaced: bool, **kwargs: Any
) -> ResourceType:
    return ResourceType(group, version, plural, kind, namespaced, custom=True, **kwargs)


PODS = _core(
    "pods",
    "Pod",
    True,
    short_names=("po",),
    categories=("all",),
    subresources={"binding": ("create",), "status": _STATUS_VERBS},
    field_selectors=_POD_FIELDS,
    merge_keys={
        "spec.containers": "name",
        "spec.initContainers": "name",
        "spec.containers.env": "name",
        "spec.containers.ports": "containerPort",
        "spec.containers.volumeMounts": "mountPath",
        "spec.initContainers.env": "name",
        "spec.volumes": "name",
        "spec.imagePullSecrets": "name",
        "spec.schedulingGates": "name",
        "status.conditions": "type",
        "status.podIPs": "ip",
    },
)
NODES = _core(
    "nodes",
    "Node",
    False,
    short_names=("no",),
    subresources={"status": _STATUS_VERBS},
    field_selectors=frozenset({"spec.unschedulable"}),
    merge_keys={"status.conditions": "type", "status.addresses": "type", "spec.podCIDRs": ""},
)
NAMESPACES = _core(
    "namespaces",
    "Namespace",
    False,
    short_names=("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    subresources={"status": _STATUS_VERBS},
    field_selectors=frozenset({"status.phase"}),
    merge_keys={"status.conditions": "type"},
)
EVENTS = _core("events", "Event", True, short_names=("ev",), field_selectors=_EVENT_FIELDS)
CONFIGMAPS = _core("configmaps", "ConfigMap", True, short_names=("cm",))
SECRETS = _core("secrets", "Secret", True)
BINDINGS = _core("bindings", "Binding", True, verbs=("create",))
LEASES = _builtin("coordination.k8s.io", "v1", "leases", "Lease", True)
VALIDATING_WEBHOOKS = _builtin(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
MUTATING_WEBHOOKS = _builtin(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)
PRIORITY_CLASSES = _builtin(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=("pc",)
)
PDBS = _builtin(
    "policy",
    "v1",
    "poddisruptionbudgets",
    "PodDisruptionBudget",
    True,
    short_names=("pdb",),
    subresources={"status": _STATUS_VERBS},
)
CRDS = _builtin(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    False,
    short_names=("crd", "crds"),
    categories=("api-extensions",),
    subresources={"status": _STATUS_VERBS},
)
QUEUES = _crd(
    "scheduling.volcano.sh",
    "v1beta1",
    "queues",
    "Queue",
    False,
    short_names=("q", "queue-v1beta1"),
    subresources={"status": _STATUS_VERBS},
)
PODGROUPS = _crd(
    "scheduling.volcano.sh",
    "v1beta1",
    "podgroups",
    "PodGroup",
    True,
    short_names=("pg", "podgroup-v1beta1"),
)
HYPERNODES = _crd(
    "topology.volcano.sh",
    "v1alpha1",
    "hypernodes",
    "HyperNode",
    False,
    short_names=("hn",),
    subresources={"status": _STATUS_VERBS},
)

NUMATOPOLOGIES = _crd(
    "nodeinfo.volcano.sh",
    "v1alpha1",
    "numatopologies",
    "Numatopology",
    False,
    short_names=("numatopo",),
)
NODESHARDS = _crd(
    "shard.volcano.sh",
    "v1alpha1",
    "nodeshards",
    "NodeShard",
    False,
    short_names=("nsh",),
    subresources={"status": _STATUS_VERBS},
)
COMMANDS = _crd("bus.volcano.sh", "v1alpha1", "commands", "Command", True)
"""Volcano's bus Commands (``vcctl queue operate`` creates one to open or close a queue)."""

WORKLOAD_PODGROUPS = {
    version: _builtin(
        "scheduling.k8s.io",
        version,
        "podgroups",
        "PodGroup",
        True,
        subresources={"status": _STATUS_VERBS},
        merge_keys={"status.conditions": "type"},
    )
    for version in ("v1alpha2", "v1alpha3")
}
"""Kubernetes' own PodGroups (1.36: v1alpha2, 1.37: v1alpha3), served only when a test
registers one: a cluster without the GenericWorkload feature serves neither."""

DEFAULT_RESOURCES: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    EVENTS,
    CONFIGMAPS,
    SECRETS,
    BINDINGS,
    LEASES,
    VALIDATING_WEBHOOKS,
    MUTATING_WEBHOOKS,
    PRIORITY_CLASSES,
    PDBS,
    CRDS,
    QUEUES,
    PODGROUPS,
    HYPERNODES,
    NUMATOPOLOGIES,
    NODESHARDS,
    COMMANDS,
)


class ResourceRegistry:
    """The set of served types: lookup by URL parts or by a human-friendly name."""

    def __init__(self, resources: Iterable[ResourceType] = DEFAULT_RESOURCES) -> None:
        self._types: list[ResourceType] = []
        for rt in resources:
            self.register(rt)

    def register(self, rt: ResourceType) -> None:
        self._types = [
            t
            for t in self._types
            if (t.group, t.version, t.plural) != (rt.group, rt.version, rt.plural)
        ]
        self._types.append(rt)

    def __iter__(self) -> Any:
        return iter(self._types)

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        for rt in self._types:
            if (rt.group, rt.version, rt.plural) == (group, version, plural):
                return rt
        return None

    def resolve(self, name: str) -> ResourceType:
        """Find a type by plural, ``plural.group``, ``group/version/plural``, kind or short name."""
        candidates = [rt for rt in self._types if self._names(rt, name)]
        if len(candidates) != 1:
            known = ", ".join(sorted(rt.qualified for rt in self._types))
            why = "is ambiguous" if candidates else "is not served"
            raise KeyError(f"resource {name!r} {why}; served: {known}")
        return candidates[0]

    @staticmethod
    def _names(rt: ResourceType, name: str) -> bool:
        names = {
            rt.plural,
            rt.qualified,
            f"{rt.api_version}/{rt.plural}",
            rt.kind,
            rt.kind.lower(),
            *rt.short_names,
        }
        if not rt.group:
            names.add(f"v1/{rt.plural}")
        return name in names

    # -- discovery documents ---------------------------------------------------------------------

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for rt in self._types:
            if rt.group:
                versions = groups.setdefault(rt.group, [])
                if rt.version not in versions:
                    versions.append(rt.version)
        return groups

    def api_versions(self) -> JsonDict:
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        }

    def api_group(self, group: str) -> JsonDict:
        versions = self._groups().get(group)
        if not versions:
            raise ApiError(404, "the server could not find the requested resource")
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def api_group_list(self) -> JsonDict:
        groups = []
        for group in self._groups():
            doc = self.api_group(group)
            del doc["kind"], doc["apiVersion"]
            groups.append(doc)
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def api_resource_list(self, group: str, version: str) -> JsonDict:
        served = [rt for rt in self._types if (rt.group, rt.version) == (group, version)]
        if not served:
            raise ApiError(404, "the server could not find the requested resource")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": [entry for rt in served for entry in rt.resource_entries()],
        }


VERSION_INFO: JsonDict = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-caldera-emulator",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}
