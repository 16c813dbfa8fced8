"""What gets installed on a cluster: the CRDs, the manifests, the image recipe and skaffold.yaml.

The CRDs are a compatibility contract with Volcano (shared/reference/volcano.md §1): the expected
names, columns and validation below are transcribed from that document's tables, not from the YAML
under test. The pydantic models must be able to read every field the CRDs admit. The RBAC is pinned
verb by verb, and the Deployment is checked against the rest of the install (ConfigMap, RBAC,
Service, Dockerfile) so the pieces cannot drift apart.
"""

from __future__ import annotations

import fnmatch
import itertools
import re
import tomllib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from caldera.admission.hooks import enabled_hooks
from caldera.framework.policy import load_policy
from caldera.framework.policy_source import CONFIGMAP_KEY, INSTALLED_POLICY, installed_policy_text
from caldera.framework.registry import Registry
from caldera.models.kinds import KINDS
from caldera.models.record import Record
from caldera.models.topology import HyperNode
from caldera.models.volcano import PodGroup, Queue
from caldera.operator.settings import Settings
from crd_schema import JSON_TYPES, cel_subset

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "crds"
MANIFEST_DIR = ROOT / "manifests"
YAML_FILES = sorted(CRD_DIR.glob("*.yaml")) + sorted(MANIFEST_DIR.glob("*.yaml"))

NAMESPACE = "volcano-system"
SERVICE_ACCOUNT = "caldera-scheduler"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def load_docs(path: Path) -> list[Obj]:
    with path.open(encoding="utf-8") as stream:
        return [doc for doc in yaml.safe_load_all(stream) if doc is not None]


def manifest_objects() -> list[Obj]:
    return [doc for path in sorted(MANIFEST_DIR.glob("*.yaml")) for doc in load_docs(path)]


def find(kind: str, name: str) -> Obj:
    matches = [o for o in manifest_objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected exactly one {kind} {name}, found {len(matches)}"
    return matches[0]


def crds() -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for path in sorted(CRD_DIR.glob("*.yaml")):
        for doc in load_docs(path):
            assert doc["kind"] == "CustomResourceDefinition", path.name
            out[doc["metadata"]["name"]] = doc
    return out


def only_version(crd: Obj) -> Obj:
    versions: list[Obj] = crd["spec"]["versions"]
    assert len(versions) == 1
    return versions[0]


def root_schema(crd_name: str) -> Obj:
    schema: Obj = only_version(crds()[crd_name])["schema"]["openAPIV3Schema"]
    return schema


def node_at(schema: Obj, path: str) -> Obj:
    """The schema node for a dotted path; ``name[]`` steps into the items of array ``name``."""
    node = schema
    for step in path.split("."):
        is_list = step.endswith("[]")
        key = step.removesuffix("[]")
        properties = node.get("properties", {})
        assert key in properties, f"{path}: no property {key!r} (have {sorted(properties)})"
        node = properties[key]
        if is_list:
            assert node.get("type") == "array", f"{path}: {key} is not an array"
            node = node["items"]
    return node


# -- every file parses ----------------------------------------------------------------------------


def test_the_install_has_six_crds_and_the_manifests() -> None:
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == [
        "commands.yaml",
        "hypernodes.yaml",
        "nodeshards.yaml",
        "numatopologies.yaml",
        "podgroups.yaml",
        "queues.yaml",
    ]
    kinds = sorted(o["kind"] for o in manifest_objects())
    assert kinds == [
        "ClusterRole",
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterRoleBinding",
        "ConfigMap",
        "Deployment",
        "Namespace",
        "Role",
        "Role",
        "RoleBinding",
        "RoleBinding",
        "Service",
        "Service",
        "ServiceAccount",
    ]


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_yaml_file_parses_into_kubernetes_objects(path: Path) -> None:
    docs = load_docs(path)
    assert docs, f"{path.name} holds no object"
    for doc in docs:
        assert isinstance(doc, dict)
        assert isinstance(doc.get("apiVersion"), str) and doc["apiVersion"]
        assert isinstance(doc.get("kind"), str) and doc["kind"]
        assert isinstance(doc["metadata"]["name"], str) and doc["metadata"]["name"]


def test_namespaced_objects_live_in_volcano_system_and_the_namespace_is_applied_first() -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for obj in manifest_objects():
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] in cluster_scoped:
            assert namespace is None, f"{obj['kind']} {obj['metadata']['name']}"
        else:
            assert namespace == NAMESPACE, f"{obj['kind']} {obj['metadata']['name']}"
    # kubectl applies a directory's files in name order; the namespace must exist first.
    first = load_docs(min(MANIFEST_DIR.glob("*.yaml")))
    assert [(o["kind"], o["metadata"]["name"]) for o in first] == [("Namespace", NAMESPACE)]


# -- CRDs: names, scope, subresources and printer columns (volcano.md §1) -------------------------


@dataclass(frozen=True)
class CrdContract:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: str
    short_names: tuple[str, ...]
    status_subresource: bool
    columns: tuple[tuple[str, str, str, int], ...]
    """(name, type, jsonPath, priority), in order."""


CONTRACTS = {
    "queues.scheduling.volcano.sh": CrdContract(
        group="scheduling.volcano.sh",
        version="v1beta1",
        kind="Queue",
        plural="queues",
        singular="queue",
        scope="Cluster",
        short_names=("q", "queue-v1beta1"),
        status_subresource=True,
        columns=(("PARENT", "string", ".spec.parent", 0),),
    ),
    "podgroups.scheduling.volcano.sh": CrdContract(
        group="scheduling.volcano.sh",
        version="v1beta1",
        kind="PodGroup",
        plural="podgroups",
        singular="podgroup",
        scope="Namespaced",
        short_names=("pg", "podgroup-v1beta1"),
        status_subresource=False,
        columns=(
            ("STATUS", "string", ".status.phase", 0),
            ("minMember", "integer", ".spec.minMember", 0),
            ("RUNNINGS", "integer", ".status.running", 0),
            ("AGE", "date", ".metadata.creationTimestamp", 0),
            ("QUEUE", "string", ".spec.queue", 1),
        ),
    ),
    "hypernodes.topology.volcano.sh": CrdContract(
        group="topology.volcano.sh",
        version="v1alpha1",
        kind="HyperNode",
        plural="hypernodes",
        singular="hypernode",
        scope="Cluster",
        short_names=("hn",),
        status_subresource=True,
        columns=(
            ("Tier", "string", ".spec.tier", 0),
            ("TierName", "string", ".spec.tierName", 0),
            ("NodeCount", "integer", ".status.nodeCount", 0),
            ("Age", "date", ".metadata.creationTimestamp", 0),
        ),
    ),
    "numatopologies.nodeinfo.volcano.sh": CrdContract(
        group="nodeinfo.volcano.sh",
        version="v1alpha1",
        kind="Numatopology",
        plural="numatopologies",
        singular="numatopology",
        scope="Cluster",
        short_names=("numatopo",),
        status_subresource=False,
        columns=(),
    ),
    "commands.bus.volcano.sh": CrdContract(
        group="bus.volcano.sh",
        version="v1alpha1",
        kind="Command",
        plural="commands",
        singular="command",
        scope="Namespaced",
        short_names=(),
        status_subresource=False,
        columns=(),
    ),
    "nodeshards.shard.volcano.sh": CrdContract(
        group="shard.volcano.sh",
        version="v1alpha1",
        kind="NodeShard",
        plural="nodeshards",
        singular="nodeshard",
        scope="Cluster",
        short_names=("nsh",),
        status_subresource=True,
        columns=(("AGE", "date", ".metadata.creationTimestamp", 0),),
    ),
}


def test_exactly_the_contracted_crds_are_shipped() -> None:
    assert sorted(crds()) == sorted(CONTRACTS)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_crd_identity_matches_volcano(name: str) -> None:
    crd, want = crds()[name], CONTRACTS[name]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    spec = crd["spec"]
    assert name == f"{want.plural}.{want.group}"
    assert spec["group"] == want.group
    assert spec["scope"] == want.scope
    assert spec["names"] == {
        "kind": want.kind,
        "listKind": f"{want.kind}List",
        "plural": want.plural,
        "singular": want.singular,
        **({"shortNames": list(want.short_names)} if want.short_names else {}),
    }
    version = only_version(crd)
    assert (version["name"], version["served"], version["storage"]) == (want.version, True, True)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_crd_subresources_match_volcano(name: str) -> None:
    subresources = only_version(crds()[name]).get("subresources", {})
    if CONTRACTS[name].status_subresource:
        assert subresources == {"status": {}}
    else:
        # PodGroup status is part of the object: Volcano updates the whole PodGroup.
        assert subresources == {}


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_crd_printer_columns_match_volcano(name: str) -> None:
    columns = only_version(crds()[name]).get("additionalPrinterColumns", [])
    got = tuple((c["name"], c["type"], c["jsonPath"], c.get("priority", 0)) for c in columns)
    assert got == CONTRACTS[name].columns


# -- CRDs: structural schemas ---------------------------------------------------------------------

JUNCTORS = ("allOf", "anyOf", "oneOf", "not")


def walk(node: Obj, path: str = "") -> Iterator[tuple[str, Obj]]:
    """Every schema node with a type of its own (not the value validations under junctors)."""
    yield path or "<root>", node
    for key, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{key}" if path else key)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")


def all_keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, child in value.items():
            yield key
            yield from all_keys(child)
    elif isinstance(value, list):
        for child in value:
            yield from all_keys(child)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_crd_schema_is_structural(name: str) -> None:
    schema = root_schema(name)
    assert not {"$ref", "definitions", "$schema", "id"} & set(all_keys(schema))
    assert schema["properties"]["metadata"] == {"type": "object"}
    for path, node in walk(schema):
        if node.get("x-kubernetes-int-or-string"):
            # The one shape Kubernetes allows without a type: anyOf integer/string.
            assert "type" not in node, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, (
            f"{path} has no valid type"
        )
        for junctor in JUNCTORS:
            assert junctor not in node, f"{path}: {junctor} only appears on int-or-string nodes"
        if "properties" in node or "additionalProperties" in node:
            assert node["type"] == "object", path
            assert not ("properties" in node and "additionalProperties" in node), path
        if "items" in node:
            assert node["type"] == "array", path
        # YAML reads an unquoted True/False as a boolean; a string enum must hold strings.
        for value in node.get("enum", []):
            assert type(value) in JSON_TYPES[node["type"]], f"{path}: enum value {value!r}"
        if node["type"] == "array":
            assert isinstance(node.get("items"), dict), f"{path}: array without items"
        for required in node.get("required", []):
            assert required in node.get("properties", {}), f"{path}: required {required}"


def value_fits(node: Obj, value: Any) -> bool:
    kind: str = node["type"]
    if type(value) not in JSON_TYPES[kind]:  # exact: a bool is not an integer here
        return False
    checks = [
        "enum" not in node or value in node["enum"],
        "minimum" not in node or value >= node["minimum"],
        "maximum" not in node or value <= node["maximum"],
        "maxLength" not in node or len(value) <= node["maxLength"],
        "pattern" not in node or re.search(node["pattern"], value) is not None,
    ]
    return all(checks)


@pytest.mark.parametrize("name", sorted(CONTRACTS))
def test_crd_defaults_satisfy_their_own_validation(name: str) -> None:
    # The API server rejects a CRD whose defaults fail the schema they sit in.
    defaults = [(path, node) for path, node in walk(root_schema(name)) if "default" in node]
    for path, node in defaults:
        assert value_fits(node, node["default"]), f"{path}: default {node['default']!r}"


# -- CRDs: fields, types, defaults and validation (volcano.md §1 tables) --------------------------

QUEUE = "queues.scheduling.volcano.sh"
PODGROUP = "podgroups.scheduling.volcano.sh"
HYPERNODE = "hypernodes.topology.volcano.sh"

FIELDS = [
    # Queue spec
    (QUEUE, "spec.weight", {"type": "integer", "default": 1, "minimum": 1, "maximum": 65535}),
    (QUEUE, "spec.reclaimable", {"type": "boolean"}),
    (QUEUE, "spec.extendClusters[].name", {"type": "string"}),
    (QUEUE, "spec.extendClusters[].weight", {"type": "integer", "format": "int32"}),
    (QUEUE, "spec.affinity.nodeGroupAffinity.requiredDuringSchedulingIgnoredDuringExecution[]",
     {"type": "string"}),
    (QUEUE, "spec.affinity.nodeGroupAffinity.preferredDuringSchedulingIgnoredDuringExecution[]",
     {"type": "string"}),
    (QUEUE,
     "spec.affinity.nodeGroupAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[]",
     {"type": "string"}),
    (QUEUE,
     "spec.affinity.nodeGroupAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[]",
     {"type": "string"}),
    (QUEUE, "spec.type", {"type": "string", "maxLength": 253}),
    (QUEUE, "spec.parent", {"type": "string", "maxLength": 253, "pattern": DNS_SUBDOMAIN}),
    (QUEUE, "spec.priority", {"type": "integer", "minimum": 0}),
    (QUEUE, "spec.dequeueStrategy",
     {"type": "string", "enum": ["fifo", "traverse"], "default": "traverse"}),
    # Queue status
    (QUEUE, "status.state", {"type": "string", "enum": ["Open", "Closed", "Closing", "Unknown"]}),
    *[
        (QUEUE, f"status.{counter}", {"type": "integer", "format": "int32", "minimum": 0})
        for counter in ("unknown", "pending", "running", "inqueue", "completed")
    ],
    (QUEUE, "status.reservation.nodes[]", {"type": "string"}),
    # PodGroup spec
    (PODGROUP, "spec.minMember", {"type": "integer", "format": "int32", "minimum": 0}),
    (PODGROUP, "spec.minTaskMember", {"type": "object"}),
    (PODGROUP, "spec.queue",
     {"type": "string", "default": "default", "maxLength": 253, "pattern": DNS_SUBDOMAIN}),
    (PODGROUP, "spec.priorityClassName", {"type": "string", "maxLength": 253}),
    (PODGROUP, "spec.networkTopology.mode",
     {"type": "string", "enum": ["hard", "soft"], "default": "hard"}),
    (PODGROUP, "spec.networkTopology.highestTierAllowed", {"type": "integer", "minimum": 0}),
    (PODGROUP, "spec.networkTopology.highestTierName", {"type": "string", "maxLength": 253}),
    (PODGROUP, "spec.subGroupPolicy[].name", {"type": "string", "maxLength": 253}),
    (PODGROUP, "spec.subGroupPolicy[].networkTopology.mode",
     {"type": "string", "enum": ["hard", "soft"], "default": "hard"}),
    (PODGROUP, "spec.subGroupPolicy[].subGroupSize",
     {"type": "integer", "format": "int32", "default": 1, "minimum": 1}),
    (PODGROUP, "spec.subGroupPolicy[].minSubGroups",
     {"type": "integer", "format": "int32", "default": 0, "minimum": 0}),
    (PODGROUP, "spec.subGroupPolicy[].labelSelector",
     {"type": "object", "x-kubernetes-map-type": "atomic"}),
    (PODGROUP, "spec.subGroupPolicy[].matchLabelKeys",
     {"type": "array", "x-kubernetes-list-type": "atomic"}),
    # PodGroup status
    (PODGROUP, "status.phase",
     {"type": "string", "enum": ["Pending", "Running", "Unknown", "Inqueue", "Completed"]}),
    *[
        (PODGROUP, f"status.conditions[].{field}", {"type": "string"})
        for field in ("type", "status", "transitionID", "reason", "message")
    ],
    (PODGROUP, "status.conditions[].lastTransitionTime", {"type": "string", "format": "date-time"}),
    *[
        (PODGROUP, f"status.{counter}", {"type": "integer", "format": "int32", "minimum": 0})
        for counter in ("running", "succeeded", "failed")
    ],
    # HyperNode
    (HYPERNODE, "spec.tier", {"type": "integer", "minimum": 0}),
    (HYPERNODE, "spec.tierName", {"type": "string", "maxLength": 253}),
    (HYPERNODE, "spec.members", {"type": "array", "minItems": 1}),
    (HYPERNODE, "spec.members[].type", {"type": "string", "enum": ["Node", "HyperNode"]}),
    (HYPERNODE, "spec.members[].selector.exactMatch.name",
     {"type": "string", "minLength": 1, "maxLength": 253, "pattern": DNS_SUBDOMAIN}),
    (HYPERNODE, "spec.members[].selector.regexMatch.pattern", {"type": "string", "minLength": 1}),
    (HYPERNODE, "spec.members[].selector.labelMatch",
     {"type": "object", "x-kubernetes-map-type": "atomic"}),
    (HYPERNODE, "status.conditions[].type", {"type": "string"}),
    (HYPERNODE, "status.conditions[].lastTransitionTime",
     {"type": "string", "format": "date-time"}),
    (HYPERNODE, "status.nodeCount", {"type": "integer", "format": "int64", "minimum": 0}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("crd", "path", "want"), FIELDS, ids=[f"{c.split('.')[0]}:{p}" for c, p, _ in FIELDS]
)
def test_crd_field_matches_volcano(crd: str, path: str, want: Obj) -> None:
    node = node_at(root_schema(crd), path)
    got = {key: node.get(key) for key in want}
    assert got == want


RESOURCE_LISTS = [
    (QUEUE, "spec.capability"),
    (QUEUE, "spec.extendClusters[].capacity"),
    (QUEUE, "spec.guarantee.resource"),
    (QUEUE, "spec.deserved"),
    (QUEUE, "status.reservation.resource"),
    (QUEUE, "status.allocated"),
    (PODGROUP, "spec.minResources"),
]


@pytest.mark.parametrize(("crd", "path"), RESOURCE_LISTS, ids=[p for _, p in RESOURCE_LISTS])
def test_resource_lists_are_maps_of_quantities(crd: str, path: str) -> None:
    node = node_at(root_schema(crd), path)
    assert node["type"] == "object"
    value = node["additionalProperties"]
    assert value["x-kubernetes-int-or-string"] is True
    quantity = re.compile(value["pattern"])
    for good in ("1", "500m", "2Gi", "1.5", ".5", "+3", "1e3", "100M", "8E", "0"):
        assert quantity.search(good), good
    for bad in ("2GB", "1B", "abc", "1.2.3", "m", "", "1 Gi", "5mi", "1Ki2"):
        assert not quantity.search(bad), bad


def test_names_that_refer_to_queues_and_nodes_must_be_dns_subdomains() -> None:
    parent = re.compile(node_at(root_schema(QUEUE), "spec.parent")["pattern"])
    for good in ("root", "default", "team-a", "ml.research", "a1"):
        assert parent.search(good), good
    for bad in ("Team", "team_a", "-a", "a-", "a..b", ""):
        assert not parent.search(bad), bad


@pytest.mark.parametrize(
    ("crd", "path", "required"),
    [
        (HYPERNODE, "spec", ["tier"]),
        (HYPERNODE, "spec.members[]", ["type"]),
        (HYPERNODE, "spec.members[].selector.exactMatch", ["name"]),
        (HYPERNODE, "spec.members[].selector.regexMatch", ["pattern"]),
    ],
)
def test_required_fields(crd: str, path: str, required: list[str]) -> None:
    schema = root_schema(crd)
    node = node_at(schema, path) if path else schema
    assert node["required"] == required


# The two selector rules are CEL; crd_schema.cel_subset checks them by what they do, not by how
# they are spelled.


def test_hypernode_selector_takes_exactly_one_way_of_matching() -> None:
    selector = node_at(root_schema(HYPERNODE), "spec.members[].selector")
    rules = selector["x-kubernetes-validations"]
    assert len(rules) == 2
    assert all(rule["message"] for rule in rules)
    kinds = ("exactMatch", "regexMatch", "labelMatch")
    for chosen in itertools.product((False, True), repeat=3):
        present: Obj = {kind: {} for kind, on in zip(kinds, chosen, strict=True) if on}
        admitted = all(cel_subset(rule["rule"], present) for rule in rules)
        assert admitted == (len(present) == 1), sorted(present)


# -- the pydantic models read every field the CRDs admit ------------------------------------------


def _unwrap(annotation: Any) -> Any:
    """Strip Optional[...] and Annotated[...] down to the type that carries data."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(annotation) if a is not type(None)]
            assert len(args) == 1, f"unsupported union {annotation}"
            annotation = args[0]
        else:
            return annotation


def model_paths(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(aliased path, data type, field metadata) for every field, nested models included."""
    for name, field in model.model_fields.items():
        if field.exclude:
            continue  # not an API field: what the model noted while reading one
        path = f"{prefix}.{field.alias or name}" if prefix else (field.alias or name)
        annotation = _unwrap(field.annotation)
        yield path, annotation, field.metadata
        origin = get_origin(annotation)
        if origin in (tuple, list):
            item = _unwrap(get_args(annotation)[0])
            if isinstance(item, type) and issubclass(item, BaseModel):
                yield from model_paths(item, f"{path}[]")
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from model_paths(annotation, path)


def check_type(path: str, annotation: Any, node: Obj) -> None:
    origin = get_origin(annotation)
    if origin is Literal:
        values = set(get_args(annotation))
        assert node["type"] == "string", path
        # The model reads every value the CRD admits, and invents none beyond "" (unset).
        assert values - {""} == set(node["enum"]), path
    elif origin in (tuple, list):
        assert node["type"] == "array", path
    elif origin is dict:
        assert node["type"] == "object", path
        value_type = get_args(annotation)[1]
        if value_type is float:  # ResourceList: quantities
            assert node["additionalProperties"].get("x-kubernetes-int-or-string") is True, path
        else:
            assert (
                node["additionalProperties"]["type"] == {int: "integer", str: "string"}[value_type]
            ), path
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel | Record):
        assert node["type"] == "object", path  # a Record (metav1.LabelSelector) is not walked
    elif annotation is bool:
        assert node["type"] == "boolean", path
    elif annotation is int:
        assert node["type"] == "integer", path
    elif annotation is str:
        assert node["type"] == "string", path
    elif annotation is float:  # Timestamp: an RFC 3339 string on the wire
        assert (node["type"], node.get("format")) == ("string", "date-time"), path
    else:
        raise AssertionError(f"{path}: no rule for {annotation!r}")


def check_bounds(path: str, metadata: list[Any], node: Obj) -> None:
    """A model bound may be looser than the CRD's, never stricter: objects the API server accepts
    must always parse."""
    for constraint in metadata:
        if hasattr(constraint, "ge"):
            assert "minimum" in node and constraint.ge <= node["minimum"], path
        if hasattr(constraint, "le"):
            assert "maximum" in node and constraint.le >= node["maximum"], path


@pytest.mark.parametrize(
    ("model", "crd"),
    [(PodGroup, PODGROUP), (Queue, QUEUE), (HyperNode, HYPERNODE)],
    ids=["PodGroup", "Queue", "HyperNode"],
)
def test_every_model_field_exists_in_the_crd_with_a_compatible_type(
    model: type[BaseModel], crd: str
) -> None:
    schema = root_schema(crd)
    checked = []
    for path, annotation, metadata in model_paths(model):
        if path == "metadata" or path.startswith("metadata."):
            continue  # ObjectMeta belongs to Kubernetes; CRD schemas leave it as a bare object.
        node = node_at(schema, path)
        check_type(path, annotation, node)
        check_bounds(path, metadata, node)
        checked.append(path)
    # The walk reached the nested models, not just the top level.
    assert any("[]." in path or path.count(".") >= 2 for path in checked), checked


def test_the_model_walk_sees_nested_aliases() -> None:
    paths = {path for path, _, _ in model_paths(PodGroup)}
    assert {"spec.minMember", "spec.minResources", "status.conditions[].transitionID"} <= paths
    assert "spec.guarantee.resource" in {path for path, _, _ in model_paths(Queue)}


# -- RBAC -----------------------------------------------------------------------------------------

CLUSTER_GRANTS: dict[tuple[str, str], set[str]] = {
    ("", "pods"): {"get", "list", "watch", "patch", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "pods/status"): {"update", "patch"},
    ("", "nodes"): {"get", "list", "watch", "patch"},
    ("", "resourcequotas"): {"get", "list", "watch"},
    ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
    ("", "namespaces"): {"get", "list", "watch"},
    ("", "persistentvolumes"): {"get", "list", "watch", "patch"},
    ("", "persistentvolumeclaims"): {"get", "list", "watch", "patch"},
    ("storage.k8s.io", "storageclasses"): {"get", "list", "watch"},
    ("storage.k8s.io", "csinodes"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims/status"): {"patch"},
    ("resource.k8s.io", "deviceclasses"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"get", "list", "watch"},
    ("", "events"): {"create", "patch"},
    ("apps", "replicasets"): {"get", "list", "watch"},
    ("apps", "statefulsets"): {"get", "list", "watch"},
    ("", "services"): {"list", "watch"},
    ("", "replicationcontrollers"): {"list", "watch"},
    ("apps", "deployments"): {"get"},
    ("batch", "jobs"): {"get"},
    ("resource.k8s.io", "resourceclaimtemplates"): {"get", "list", "watch"},
    ("scheduling.volcano.sh", "podgroups"): {"get", "list", "watch", "create", "patch"},
    ("scheduling.volcano.sh", "queues"): {"get", "list", "watch", "create", "update", "patch"},
    ("scheduling.volcano.sh", "queues/status"): {"update", "patch"},
    ("topology.volcano.sh", "hypernodes"): {"get", "list", "watch"},
    ("topology.volcano.sh", "hypernodes/status"): {"update", "patch"},
    ("shard.volcano.sh", "nodeshards"): {"get", "list", "watch"},
    ("bus.volcano.sh", "commands"): {"get", "list", "watch", "delete"},
    ("shard.volcano.sh", "nodeshards/status"): {"update", "patch"},
    ("nodeinfo.volcano.sh", "numatopologies"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "priorityclasses"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "podgroups"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "podgroups/status"): {"patch"},
    ("", "configmaps"): {"list", "watch"},
}


def grants(rules: list[Obj]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        assert not rule.get("nonResourceURLs")
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def test_cluster_role_grants_exactly_what_the_scheduler_uses() -> None:
    role = find("ClusterRole", "caldera-scheduler")
    assert not role.get("aggregationRule")
    for rule in role["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        assert "resourceNames" not in rule, rule
    assert grants(role["rules"]) == CLUSTER_GRANTS


def test_every_kind_the_scheduler_reads_may_be_listed_and_watched() -> None:
    granted = grants(find("ClusterRole", "caldera-scheduler")["rules"])
    missing = [
        kind.name
        for kind in KINDS.values()
        if not {"list", "watch"} <= granted.get((kind.group, kind.plural), set())
    ]
    assert missing == []


def leader_election_arguments() -> tuple[str, str]:
    """(lease namespace, lease name) as the Deployment's command line sets them."""
    command = scheduler_container()["command"]

    def flag(name: str) -> str | None:
        return command[command.index(name) + 1] if name in command else None

    namespace = flag("--leader-elect-resource-namespace") or NAMESPACE
    # Volcano names the lock after the scheduler unless told otherwise.
    name = flag("--leader-elect-resource-name") or flag("--scheduler-name") or "volcano"
    return namespace, name


def test_leader_election_may_touch_only_its_own_lease() -> None:
    lease_namespace, lease_name = leader_election_arguments()
    role = find("Role", "caldera-scheduler-leader-election")
    assert role["metadata"]["namespace"] == lease_namespace
    granted = _rule_set(role["rules"])
    assert granted == {
        # create cannot be narrowed by name: the request has no name in its URL
        ("coordination.k8s.io", "leases", "create", ()),
        ("coordination.k8s.io", "leases", "get", (lease_name,)),
        ("coordination.k8s.io", "leases", "update", (lease_name,)),
    }


def _rule_set(rules: list[Obj]) -> set[tuple[str, str, str, tuple[str, ...]]]:
    out: set[tuple[str, str, str, tuple[str, ...]]] = set()
    for rule in rules:
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key], rule
        for group, resource, verb in itertools.product(
            rule["apiGroups"], rule["resources"], rule["verbs"]
        ):
            out.add((group, resource, verb, tuple(rule.get("resourceNames", ()))))
    return out


def test_the_webhooks_may_write_only_their_own_configurations() -> None:
    role = find("ClusterRole", "caldera-scheduler-webhooks")
    group = "admissionregistration.k8s.io"
    kinds = ("validatingwebhookconfigurations", "mutatingwebhookconfigurations")
    assert _rule_set(role["rules"]) == {
        # create cannot be narrowed by name: the request has no name in its URL
        *((group, kind, "create", ()) for kind in kinds),
        *((group, kind, "patch", ("caldera-scheduler",)) for kind in kinds),
    }


def test_the_webhook_certificate_is_one_secret_named_after_the_service() -> None:
    service = command_flag("--webhook-service-name")
    role = find("Role", "caldera-scheduler-webhook-tls")
    assert role["metadata"]["namespace"] == command_flag("--webhook-namespace") == NAMESPACE
    assert _rule_set(role["rules"]) == {
        ("", "secrets", "create", ()),
        ("", "secrets", "get", (f"{service}-tls",)),
    }


def test_the_webhook_service_reaches_the_webhook_port_on_443() -> None:
    service = find("Service", command_flag("--webhook-service-name"))
    assert (
        service["spec"]["selector"]
        == find("Deployment", "caldera-scheduler")["spec"]["selector"]["matchLabels"]
    )
    (port,) = service["spec"]["ports"]
    assert port["port"] == 443
    ports = {p["name"]: p["containerPort"] for p in scheduler_container()["ports"]}
    assert ports[port["targetPort"]] == Settings().webhook_port


def test_the_deployment_serves_the_webhooks_volcanos_chart_enables() -> None:
    hooks = enabled_hooks(command_flag("--enabled-admission"))
    assert [h.path for h in hooks] == [
        "/queues/mutate",
        "/queues/validate",
        "/podgroups/mutate",
        "/podgroups/validate",
        "/hypernodes/validate",
    ]
    strategy = find("Deployment", "caldera-scheduler")["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0  # webhooks served through a rollout


@pytest.mark.parametrize(
    ("binding_kind", "role_kind", "name"),
    [
        ("ClusterRoleBinding", "ClusterRole", "caldera-scheduler"),
        ("RoleBinding", "Role", "caldera-scheduler-leader-election"),
        ("ClusterRoleBinding", "ClusterRole", "caldera-scheduler-webhooks"),
        ("RoleBinding", "Role", "caldera-scheduler-webhook-tls"),
    ],
)
def test_roles_are_bound_to_the_scheduler_service_account(
    binding_kind: str, role_kind: str, name: str
) -> None:
    binding = find(binding_kind, name)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_kind,
        "name": name,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}
    ]
    find("ServiceAccount", SERVICE_ACCOUNT)


# -- Deployment, Service, ConfigMap ---------------------------------------------------------------


def pod_spec() -> Obj:
    spec: Obj = find("Deployment", "caldera-scheduler")["spec"]["template"]["spec"]
    return spec


def scheduler_container() -> Obj:
    containers: list[Obj] = pod_spec()["containers"]
    assert len(containers) == 1
    return containers[0]


def command_flag(name: str) -> str:
    command: list[str] = scheduler_container()["command"]
    assert command.count(name) == 1, name
    return command[command.index(name) + 1]


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def test_deployment_runs_caldera_with_volcanos_flags() -> None:
    deployment = find("Deployment", "caldera-scheduler")
    assert deployment["spec"]["replicas"] == 1
    assert pod_spec()["serviceAccountName"] == SERVICE_ACCOUNT
    container = scheduler_container()
    assert container["image"] == "caldera:dev"
    assert container["command"][:2] == ["caldera", "run"]
    assert command_flag("--scheduler-name") == "volcano"
    assert command_flag("--leader-elect-resource-namespace") == NAMESPACE
    assert "--leader-elect=false" not in container["command"]
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}


def test_deployment_runs_non_root_with_a_read_only_root_filesystem() -> None:
    pod = pod_spec()["securityContext"]
    ctx = scheduler_container()["securityContext"]
    assert pod["runAsNonRoot"] is True and ctx["runAsNonRoot"] is True
    assert pod["runAsUser"] == ctx["runAsUser"] == 65532
    assert ctx["readOnlyRootFilesystem"] is True
    assert ctx["allowPrivilegeEscalation"] is False
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert not ctx.get("privileged", False)
    seccomp = ctx.get("seccompProfile") or pod.get("seccompProfile")
    assert seccomp == {"type": "RuntimeDefault"}
    assert not pod_spec().get("hostNetwork") and not pod_spec().get("hostPID")


def test_only_tmp_is_writable_and_it_is_an_empty_dir() -> None:
    volumes = {v["name"]: v for v in pod_spec()["volumes"]}
    mounts = scheduler_container()["volumeMounts"]
    writable = [m for m in mounts if not m.get("readOnly", False)]
    assert [m["mountPath"] for m in writable] == ["/tmp"]
    assert "emptyDir" in volumes[writable[0]["name"]]


def test_probes_hit_healthz_and_readyz_on_the_healthz_address() -> None:
    container = scheduler_container()
    port = port_of(command_flag("--healthz-address"))
    assert port == 11251
    liveness = container["livenessProbe"]["httpGet"]
    readiness = container["readinessProbe"]["httpGet"]
    assert (liveness["path"], liveness["port"]) == ("/healthz", port)
    assert (readiness["path"], readiness["port"]) == ("/readyz", port)


def test_resources_are_requested_and_memory_is_capped() -> None:
    resources = scheduler_container()["resources"]
    assert set(resources["requests"]) == {"cpu", "memory"}
    assert "memory" in resources["limits"]


def test_the_policy_is_mounted_as_a_directory_from_the_configmap() -> None:
    conf = Path(command_flag("--scheduler-conf"))
    mounts = {m["mountPath"]: m for m in scheduler_container()["volumeMounts"]}
    mount = mounts[str(conf.parent)]
    assert "subPath" not in mount, "a subPath mount never sees ConfigMap updates"
    assert mount["readOnly"] is True
    volume = next(v for v in pod_spec()["volumes"] if v["name"] == mount["name"])
    configmap = find("ConfigMap", volume["configMap"]["name"])
    assert configmap["metadata"]["name"] == "caldera-scheduler-config"
    assert conf.name == "volcano-scheduler.conf"
    assert conf.name in configmap["data"]
    assert "items" not in volume["configMap"]


def test_the_configmap_ships_the_packaged_policy_and_it_loads() -> None:
    # one policy text: the package's (simulate's and explain's default), which the ConfigMap
    # carries verbatim and policies/volcano-helm.yaml links to
    text = find("ConfigMap", "caldera-scheduler-config")["data"][CONFIGMAP_KEY]
    assert text == installed_policy_text()
    shipped = ROOT / "policies" / "volcano-helm.yaml"
    assert shipped.resolve() == (ROOT / "operator" / "caldera" / INSTALLED_POLICY).resolve()
    policy = load_policy(text, Registry.from_entry_points())
    assert [action.name for action in policy.actions] == ["enqueue", "allocate", "backfill"]
    assert policy.layout == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"],
    ]
    for plugin in ("gang", "drf"):
        option = policy.option(plugin)
        assert option is not None and not option.enabled("preemptable")


def test_the_installed_policy_is_package_data_so_installs_outside_the_repo_carry_it() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["caldera"]
    assert any(fnmatch.fnmatch(INSTALLED_POLICY, pattern) for pattern in package_data)


def test_the_metrics_service_reaches_the_listen_address() -> None:
    service = find("Service", "caldera-scheduler-metrics")
    ports = service["spec"]["ports"]
    assert len(ports) == 1 and ports[0]["name"] == "http-metrics" and ports[0]["port"] == 8080
    container_ports = {p["name"]: p["containerPort"] for p in scheduler_container()["ports"]}
    assert container_ports[ports[0]["targetPort"]] == port_of(command_flag("--listen-address"))
    assert port_of(command_flag("--listen-address")) == 8080
    labels = find("Deployment", "caldera-scheduler")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


# -- image and skaffold ---------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            op, _, rest = stripped.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def test_dockerfile_builds_a_venv_and_runs_as_the_deployments_user() -> None:
    steps = dockerfile_instructions()
    froms = [rest for op, rest in steps if op == "FROM"]
    assert len(froms) == 2 and froms[0].endswith(" AS builder")
    assert ("ARG", "PYTHON_IMAGE=python:3.11-slim") in steps
    assert all(f.startswith("${PYTHON_IMAGE}") for f in froms)
    copies = [rest for op, rest in steps if op == "COPY"]
    assert copies == [
        "pyproject.toml ./",
        "operator/ operator/",
        "--from=builder /opt/venv /opt/venv",
    ]
    installs = " ".join(rest for op, rest in steps if op == "RUN")
    assert "pip install --no-deps ." in installs
    assert "[dev]" not in installs and "pytest" not in installs and "-e " not in installs
    users = [rest for op, rest in steps if op == "USER"]
    assert users == ["65532:65532"]
    assert int(users[0].split(":")[0]) == scheduler_container()["securityContext"]["runAsUser"]
    assert steps[-1] == ("ENTRYPOINT", '["caldera"]')


def test_dockerignore_keeps_local_state_out_of_the_build_context() -> None:
    lines = set((ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines())
    assert {".git", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"} <= lines
    assert "**/__pycache__" in lines
    assert not {"pyproject.toml", "operator", "operator/"} & lines


def test_skaffold_builds_the_dockerfile_and_deploys_both_folders() -> None:
    config = yaml.safe_load((ROOT / "skaffold.yaml").read_text(encoding="utf-8"))
    assert re.fullmatch(r"skaffold/v4beta\d+", config["apiVersion"])
    assert config["kind"] == "Config"
    (artifact,) = config["build"]["artifacts"]
    assert artifact["docker"]["dockerfile"] == "Dockerfile"
    assert (ROOT / artifact["docker"]["dockerfile"]).is_file()
    # skaffold swaps its freshly built image in wherever the manifests name this image.
    assert scheduler_container()["image"].split(":")[0] == artifact["image"]
    assert config["build"]["local"]["push"] is False
    assert config["deploy"] == {"kubectl": {}}
    globs = config["manifests"]["rawYaml"]
    assert globs == ["crds/*.yaml", "manifests/*.yaml"]
    for path in YAML_FILES:
        relative = path.relative_to(ROOT).as_posix()
        assert any(fnmatch.fnmatch(relative, g) for g in globs), relative
