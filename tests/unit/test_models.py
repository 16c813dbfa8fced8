"""API models at the boundary: readable validation errors, defaults and the small pieces of
Kubernetes semantics the models carry (allocatable, readiness, tolerations, node selectors).

Kubernetes references: ``ToleratesTaint`` in k8s.io/api ``core/v1/toleration.go``;
``ValidateNodeSelectorRequirement`` in ``pkg/apis/core/validation`` and the integer parsing of
Gt/Lt values (``strconv.ParseInt``) in k8s.io/apimachinery ``labels/selector.go``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from builders import snapshot_of
from caldera.models.core import Node, NodeSelectorRequirement, Pod, Taint, Toleration
from caldera.models.parse import ObjectError, describe, parse_object
from caldera.models.record import RecordError
from caldera.models.volcano import PodGroup, Queue

GI = 1024.0**3


def pod_raw(
    *, namespace: str | None = None, spec: dict[str, Any] | None = None, **meta: Any
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "x", **meta}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec if spec is not None else {"containers": [{"name": "main"}]},
    }


def requests(**quantities: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "resources": {"requests": quantities}}]}


def node_raw(
    status: dict[str, Any] | None = None, spec: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": "n1"}, "spec": spec or {}, "status": status or {}}


def parsed(kind: str, raw: dict[str, Any]) -> Any:
    obj = parse_object(kind, raw)
    assert not isinstance(obj, ObjectError), str(obj)
    return obj


def error(kind: str, raw: dict[str, Any]) -> ObjectError:
    obj = parse_object(kind, raw)
    assert isinstance(obj, ObjectError), f"expected a validation error, got {obj!r}"
    return obj


# --- error messages -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        pytest.param(
            "Pod",
            pod_raw(spec=requests(cpu="1x")),
            "Pod default/x: spec.containers[0].resources.requests: cpu: "
            "invalid quantity '1x': unknown suffix 'x'",
            id="a bad cpu request names the pod, the container path and the resource",
        ),
        pytest.param(
            "Pod",
            pod_raw(namespace="team", spec=requests(memory="-1Gi")),
            "Pod team/x: spec.containers[0].resources.requests: memory: "
            "invalid quantity '-1Gi': must not be negative",
            id="a negative memory request names the namespace the pod states",
        ),
        pytest.param(
            "Pod",
            pod_raw(
                spec={
                    "containers": [{"name": "main"}],
                    "initContainers": [
                        {"name": "a"},
                        {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "one"}}},
                    ],
                }
            ),
            "Pod default/x: spec.initContainers[1].resources.limits: nvidia.com/gpu: "
            "invalid quantity 'one'",
            id="an init container error uses the camelCase field and the list index",
        ),
        pytest.param(
            "Pod",
            pod_raw(spec={"containers": [{"name": "main"}], "overhead": {"cpu": "-1"}}),
            "Pod default/x: spec.overhead: cpu: invalid quantity '-1': must not be negative",
            id="a negative overhead is rejected",
        ),
        pytest.param(
            "Pod",
            pod_raw(spec={}),
            "Pod default/x: spec.containers: Field required",
            id="a pod without containers is rejected",
        ),
        pytest.param(
            "Pod",
            pod_raw(creationTimestamp="yesterday"),
            "Pod default/x: metadata: creationTimestamp: invalid RFC 3339 time 'yesterday'",
            id="a creation time that is not RFC 3339 is rejected",
        ),
        pytest.param(
            "Pod",
            {"kind": "Pod", "metadata": {"namespace": "ns"}, "spec": {"containers": [{}]}},
            "Pod ns/<unnamed>: metadata.name: Field required",
            id="an object without a name is reported as unnamed",
        ),
        pytest.param(
            "Node",
            node_raw(spec={"taints": [{"key": "k", "effect": "Sometimes"}]}),
            "Node n1: spec.taints[0].effect: Invalid enum value 'Sometimes' "
            "(expected 'NoExecute' or 'NoSchedule' or 'PreferNoSchedule')",
            id="a node names no namespace and reports the bad taint effect",
        ),
        pytest.param(
            "Node",
            node_raw(status={"allocatable": {"memory": "lots"}}),
            "Node n1: status.allocatable: memory: invalid quantity 'lots'",
            id="a bad node allocatable names the resource",
        ),
        pytest.param(
            "PodGroup",
            {"kind": "PodGroup", "metadata": {"name": "pg"}, "spec": {"minMember": -1}},
            (
                "PodGroup (podgroups.scheduling.volcano.sh) "
                "default/pg: spec.minMember: Input should be greater than or equal to 0"
            ),
            id="a negative minMember is rejected",
        ),
        pytest.param(
            "PodGroup",
            {
                "kind": "PodGroup",
                "metadata": {"name": "pg", "namespace": "ml"},
                "spec": {"minResources": {"cpu": "4 cores"}},
            },
            "PodGroup (podgroups.scheduling.volcano.sh) ml/pg: spec.minResources: cpu: "
            "invalid quantity '4 cores': unknown suffix ' cores'",
            id="bad minResources name the PodGroup and the resource",
        ),
        pytest.param(
            "Queue",
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": 65536}},
            "Queue q: spec.weight: Input should be less than or equal to 65535",
            id="a queue weight above the CRD maximum is rejected",
        ),
        pytest.param(
            "Queue",
            {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"capability": {"cpu": "x"}}},
            "Queue q: spec.capability: cpu: invalid quantity 'x'",
            id="a bad queue capability names the resource",
        ),
        pytest.param(
            "PriorityClass",
            {"kind": "PriorityClass", "metadata": {"name": "high"}},
            "PriorityClass high: value: Field required",
            id="a PriorityClass without a value is rejected",
        ),
    ],
)
def test_errors_name_the_kind_the_object_and_the_field(
    kind: str, raw: dict[str, Any], expected: str
) -> None:
    assert str(error(kind, raw)) == expected


def test_object_error_carries_its_parts() -> None:
    err = error("Pod", pod_raw(namespace="team", spec=requests(cpu="1x")))
    assert (err.kind, err.name) == ("Pod", "team/x")
    assert err.message.startswith("spec.containers[0].resources.requests: cpu: ")


def test_a_failing_only_container_is_not_also_reported_as_a_missing_container() -> None:
    err = error("Pod", pod_raw(spec=requests(cpu="1x")))
    assert "at least 1 item" not in str(err)
    assert "and 1 more" not in str(err)


def test_an_empty_container_list_is_reported() -> None:
    err = error("Pod", pod_raw(spec={"containers": []}))
    assert str(err) == "Pod default/x: spec.containers: Expected `array` of length >= 1"


def test_the_first_field_at_fault_of_a_slim_kind_is_spelled_out() -> None:
    # Pods and nodes are decoded by msgspec, which stops at the first error.
    bad = [{"resources": {"requests": {"cpu": f"{i}x"}}} for i in range(5)]
    text = str(error("Pod", pod_raw(spec={"containers": bad})))
    assert text == (
        "Pod default/x: spec.containers[0].resources.requests: cpu: invalid quantity '0x': "
        "unknown suffix 'x'"
    )


def test_at_most_three_errors_of_a_volcano_kind_are_spelled_out() -> None:
    raw = {
        "metadata": {"name": "q"},
        "spec": {"weight": -1, "capability": {"cpu": "1x"}, "reclaimable": "maybe", "parent": 3},
    }
    text = str(error("Queue", raw))
    assert text.startswith("Queue q: spec.")
    assert text.endswith(" (and 1 more)")


def test_parsing_does_not_modify_the_raw_object() -> None:
    raw = pod_raw(spec=requests(cpu="1"))
    before = repr(raw)
    parsed("Pod", raw)
    assert repr(raw) == before


# --- namespaces and names -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "raw", "namespace"),
    [
        pytest.param("Pod", pod_raw(), "default", id="a pod without namespace is in default"),
        pytest.param(
            "Pod", pod_raw(namespace=""), "default", id="an empty namespace means default"
        ),
        pytest.param("Pod", pod_raw(namespace="ml"), "ml", id="a stated namespace is kept"),
        pytest.param(
            "PodGroup",
            {"kind": "PodGroup", "metadata": {"name": "pg"}},
            "default",
            id="a PodGroup without namespace is in default",
        ),
        pytest.param(
            "Queue",
            {"kind": "Queue", "metadata": {"name": "q"}},
            "",
            id="a queue is cluster-scoped and gets no namespace",
        ),
        pytest.param("Node", node_raw(), "", id="a node is cluster-scoped and gets no namespace"),
    ],
)
def test_missing_namespace_defaults_for_namespaced_kinds(
    kind: str, raw: dict[str, Any], namespace: str
) -> None:
    assert parsed(kind, raw).metadata.namespace == namespace


@pytest.mark.parametrize(
    ("kind", "raw", "expected"),
    [
        pytest.param("Pod", {"metadata": {"name": "a"}}, "default/a", id="pod without namespace"),
        pytest.param(
            "PodGroup", {"metadata": {"name": "a", "namespace": "ml"}}, "ml/a", id="podgroup"
        ),
        pytest.param("Node", {"metadata": {"name": "n"}}, "n", id="a node is named alone"),
        pytest.param(
            "Queue",
            {"metadata": {"name": "q", "namespace": "ignored"}},
            "q",
            id="a queue is named alone even if a namespace is stated",
        ),
        pytest.param(
            "Deployment",
            {"metadata": {"name": "web", "namespace": "shop"}},
            "shop/web",
            id="an unknown kind shows the namespace it states",
        ),
        pytest.param(
            "Secret", {"metadata": {"name": "cm"}}, "cm", id="an unknown kind without namespace"
        ),
        pytest.param("Pod", {}, "default/<unnamed>", id="no metadata at all"),
        pytest.param("Pod", {"metadata": "x"}, "default/<unnamed>", id="metadata is not a map"),
    ],
)
def test_describe(kind: str, raw: dict[str, Any], expected: str) -> None:
    assert describe(kind, raw) == expected


# --- nodes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            {"capacity": {"cpu": "8", "memory": "16Gi"}},
            {"cpu": 8000.0, "memory": 16 * GI},
            id="without allocatable the capacity is used",
        ),
        pytest.param(
            {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "7500m"}},
            {"cpu": 7500.0},
            id="allocatable wins over capacity",
        ),
        pytest.param(
            {
                "capacity": {"cpu": "8", "nvidia.com/gpu": "4"},
                "allocatable": {"cpu": "7"},
            },
            {"cpu": 7000.0, "nvidia.com/gpu": 4.0},
            id="the fallback is per resource",
        ),
        pytest.param(
            {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "0"}},
            {"cpu": 0.0},
            id="an allocatable of zero is not replaced by the capacity",
        ),
        pytest.param({}, {}, id="a node stating neither has nothing allocatable"),
    ],
)
def test_node_allocatable_falls_back_to_capacity(
    status: dict[str, Any], expected: dict[str, float]
) -> None:
    node: Node = parsed("Node", node_raw(status))
    assert node.allocatable == expected


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        pytest.param([], True, id="a node without conditions is ready"),
        pytest.param(
            [{"type": "MemoryPressure", "status": "True"}],
            True,
            id="a node without a Ready condition is ready",
        ),
        pytest.param([{"type": "Ready", "status": "True"}], True, id="Ready True is ready"),
        pytest.param([{"type": "Ready", "status": "False"}], False, id="Ready False is not ready"),
        pytest.param(
            [{"type": "Ready", "status": "Unknown"}], False, id="Ready Unknown is not ready"
        ),
        pytest.param([{"type": "Ready"}], False, id="a Ready condition without status is unknown"),
        pytest.param(
            [{"type": "DiskPressure", "status": "False"}, {"type": "Ready", "status": "False"}],
            False,
            id="the Ready condition is found among others",
        ),
    ],
)
def test_node_readiness(conditions: list[dict[str, str]], ready: bool) -> None:
    node: Node = parsed("Node", node_raw({"conditions": conditions}))
    assert node.ready is ready


# --- tolerations ----------------------------------------------------------------------------------


def tol(**fields: Any) -> Toleration:
    return Toleration.model_validate(fields)


def taint(key: str = "gpu", value: str = "", effect: str = "NoSchedule") -> Taint:
    return Taint.model_validate({"key": key, "value": value, "effect": effect})


@pytest.mark.parametrize(
    ("toleration", "taint_", "tolerated"),
    [
        pytest.param(
            tol(key="gpu", operator="Exists", effect="NoSchedule"),
            taint(),
            True,
            id="Exists with the same key and effect tolerates",
        ),
        pytest.param(
            tol(key="gpu", operator="Exists", effect="NoExecute"),
            taint(),
            False,
            id="a different effect does not tolerate",
        ),
        pytest.param(
            tol(key="gpu", operator="Exists"),
            taint(effect="NoExecute"),
            True,
            id="an empty effect matches every effect",
        ),
        pytest.param(
            tol(operator="Exists"),
            taint(key="anything", value="v", effect="PreferNoSchedule"),
            True,
            id="Exists with an empty key and effect tolerates every taint",
        ),
        pytest.param(
            tol(operator="Exists", effect="NoSchedule"),
            taint(key="anything"),
            True,
            id="Exists with an empty key matches every key of that effect",
        ),
        pytest.param(
            tol(operator="Exists", effect="NoSchedule"),
            taint(key="anything", effect="NoExecute"),
            False,
            id="Exists with an empty key still checks the effect",
        ),
        pytest.param(
            tol(key="gpu", operator="Exists"),
            taint(value="a100"),
            True,
            id="Exists ignores the taint value",
        ),
        pytest.param(
            tol(key="gpu", operator="Equal", value="a100", effect="NoSchedule"),
            taint(value="a100"),
            True,
            id="Equal with the same value tolerates",
        ),
        pytest.param(
            tol(key="gpu", operator="Equal", value="a100"),
            taint(value="h100"),
            False,
            id="Equal with a different value does not tolerate",
        ),
        pytest.param(
            tol(key="gpu", operator="Equal"),
            taint(value=""),
            True,
            id="Equal with empty values on both sides tolerates",
        ),
        pytest.param(
            tol(key="gpu", operator="Equal"),
            taint(value="a100"),
            False,
            id="Equal with an empty value does not match a taint with a value",
        ),
        pytest.param(
            tol(key="gpu", value="a100"),
            taint(value="a100"),
            True,
            id="an empty operator means Equal and matching values tolerate",
        ),
        pytest.param(
            tol(key="gpu", value="a100"),
            taint(value="h100"),
            False,
            id="an empty operator means Equal and different values do not tolerate",
        ),
        pytest.param(
            tol(key="gpu", operator="Equal", value="a100"),
            taint(key="tpu", value="a100"),
            False,
            id="a different key does not tolerate",
        ),
        pytest.param(
            tol(key="GPU", operator="Exists"),
            taint(key="gpu"),
            False,
            id="keys are case-sensitive",
        ),
        pytest.param(
            tol(),
            taint(key="anything", value=""),
            True,
            id="an empty toleration compares only values, like ToleratesTaint",
        ),
        pytest.param(
            tol(),
            taint(key="anything", value="v"),
            False,
            id="an empty toleration does not match a taint with a value",
        ),
    ],
)
def test_toleration_matches_kubernetes_tolerates_taint(
    toleration: Toleration, taint_: Taint, tolerated: bool
) -> None:
    assert toleration.tolerates(taint_) is tolerated


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"operator": "Contains"}, id="unknown toleration operator"),
        pytest.param({"effect": "Sometimes"}, id="unknown toleration effect"),
    ],
)
def test_invalid_tolerations_are_rejected(fields: dict[str, str]) -> None:
    with pytest.raises(RecordError):
        Toleration.model_validate(fields)


# --- node selector requirements -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operator", "values"),
    [
        pytest.param("In", ["a"], id="In with one value"),
        pytest.param("NotIn", ["a", "b"], id="NotIn with two values"),
        pytest.param("Exists", [], id="Exists without values"),
        pytest.param("DoesNotExist", [], id="DoesNotExist without values"),
        pytest.param("Gt", ["5"], id="Gt with one integer"),
        pytest.param("Lt", ["-3"], id="Lt with a negative integer"),
        pytest.param("Gt", ["+7"], id="Gt with an explicitly positive integer"),
    ],
)
def test_valid_node_selector_requirements(operator: str, values: list[str]) -> None:
    req = NodeSelectorRequirement.model_validate(
        {"key": "k", "operator": operator, "values": values}
    )
    assert (req.operator, req.values) == (operator, tuple(values))


@pytest.mark.parametrize(
    ("operator", "values", "message"),
    [
        pytest.param("In", [], "needs at least one value", id="In without values"),
        pytest.param("NotIn", [], "needs at least one value", id="NotIn without values"),
        pytest.param("Exists", ["a"], "takes no values", id="Exists with a value"),
        pytest.param("DoesNotExist", ["a"], "takes no values", id="DoesNotExist with a value"),
        pytest.param("Gt", [], "exactly one value", id="Gt without a value"),
        pytest.param("Lt", ["1", "2"], "exactly one value", id="Lt with two values"),
        pytest.param("Like", ["a"], "Invalid enum value", id="an unknown operator"),
    ],
)
def test_invalid_node_selector_requirements(operator: str, values: list[str], message: str) -> None:
    with pytest.raises(RecordError, match=message):
        NodeSelectorRequirement.model_validate({"key": "k", "operator": operator, "values": values})


@pytest.mark.parametrize(
    ("key", "operator", "values"),
    [
        pytest.param("k", "Gt", ["x"], id="Gt with a word"),
        pytest.param("k", "Lt", ["1.5"], id="Lt with a decimal"),
        pytest.param("k", "Gt", [" 5"], id="Gt with a padded integer"),
        pytest.param("k", "Gt", ["1_000"], id="Gt with digit separators"),
        pytest.param("k", "Gt", ["\u0665"], id="Gt with a non-ASCII digit"),
        pytest.param("k", "Gt", ["9223372036854775808"], id="Gt beyond int64"),
        pytest.param("k", "NotIn", ["$"], id="a value with a symbol"),
        pytest.param("k", "In", ["ok", "-a"], id="a value starting with a dash"),
        pytest.param("k", "In", ["a" * 64], id="a value of 64 characters"),
        pytest.param("k k", "Exists", [], id="a key with a space"),
        pytest.param("Example.com/k", "Exists", [], id="a key with an upper-case prefix"),
        pytest.param("a/b/c", "Exists", [], id="a key with two slashes"),
        pytest.param("/k", "Exists", [], id="a key with an empty prefix"),
    ],
)
def test_requirements_the_api_server_stores_but_the_scheduler_cannot_parse_still_load(
    key: str, operator: str, values: list[str]
) -> None:
    req = NodeSelectorRequirement.model_validate(
        {"key": key, "operator": operator, "values": values}
    )
    assert req.label_ok is False


@pytest.mark.parametrize(
    ("key", "values"),
    [
        pytest.param("example.com/k_1", ["", "A-b.c_9"], id="a prefixed key, empty and mixed"),
        pytest.param("k", ["a" * 63], id="a value of 63 characters"),
    ],
)
def test_label_syntax_the_scheduler_accepts(key: str, values: list[str]) -> None:
    req = NodeSelectorRequirement(key=key, operator="In", values=tuple(values))
    assert req.label_ok is True


@pytest.mark.parametrize(
    ("operator", "values", "ok"),
    [
        pytest.param("In", ["n1"], True, id="In with one value"),
        pytest.param("NotIn", ["n1"], True, id="NotIn with one value"),
        pytest.param("In", ["n1", "n2"], False, id="In with two values"),
        pytest.param("Exists", [], False, id="Exists"),
    ],
)
def test_match_fields_take_in_or_not_in_with_one_value(
    operator: str, values: list[str], ok: bool
) -> None:
    req = NodeSelectorRequirement.model_validate(
        {"key": "metadata.name", "operator": operator, "values": values}
    )
    assert req.field_ok is ok


def test_a_node_selector_requirement_needs_a_key() -> None:
    with pytest.raises(RecordError):
        NodeSelectorRequirement.model_validate({"key": "", "operator": "Exists"})


def test_a_bad_requirement_inside_a_pod_names_its_path() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": []}]}
                ]
            }
        }
    }
    spec = {"containers": [{"name": "main"}], "affinity": affinity}
    assert str(error("Pod", pod_raw(spec=spec))) == (
        "Pod default/x: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0]: operator Gt needs exactly one value"
    )


# --- Volcano kinds --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "weight"),
    [
        pytest.param({}, 1, id="an absent weight defaults to 1"),
        pytest.param({"weight": 0}, 0, id="weight 0 is accepted as the webhook would fix it"),
        pytest.param({"weight": 65535}, 65535, id="the CRD maximum is accepted"),
    ],
)
def test_queue_weight(spec: dict[str, Any], weight: int) -> None:
    queue: Queue = parsed("Queue", {"kind": "Queue", "metadata": {"name": "q"}, "spec": spec})
    assert queue.spec.weight == weight


def test_a_negative_queue_weight_is_rejected() -> None:
    err = error("Queue", {"kind": "Queue", "metadata": {"name": "q"}, "spec": {"weight": -1}})
    assert str(err) == "Queue q: spec.weight: Input should be greater than or equal to 0"


def test_the_snapshot_treats_queue_weight_0_as_1() -> None:
    # Volcano's mutating webhook turns weight 0 into 1; objects that never went through it (plain
    # manifests) must schedule the same way.
    snapshot = snapshot_of(
        parsed("Queue", {"kind": "Queue", "metadata": {"name": name}, "spec": {"weight": weight}})
        for name, weight in (("zero", 0), ("three", 3))
    )
    assert snapshot.queues["zero"].weight == 1
    assert snapshot.queues["three"].weight == 3


@pytest.mark.parametrize(
    ("spec", "min_member"),
    [
        pytest.param({}, 0, id="an absent minMember is 0"),
        pytest.param({"minMember": 0}, 0, id="minMember 0 is accepted"),
        pytest.param({"minMember": 3}, 3, id="a positive minMember is kept"),
    ],
)
def test_podgroup_min_member(spec: dict[str, Any], min_member: int) -> None:
    pg: PodGroup = parsed(
        "PodGroup", {"kind": "PodGroup", "metadata": {"name": "pg"}, "spec": spec}
    )
    assert pg.spec.min_member == min_member


def test_podgroup_min_resources_absent_and_empty_differ() -> None:
    # nil minResources means "best effort, always enqueueable" in Volcano; {} is a stated zero.
    absent: PodGroup = parsed("PodGroup", {"kind": "PodGroup", "metadata": {"name": "a"}})
    empty: PodGroup = parsed(
        "PodGroup", {"kind": "PodGroup", "metadata": {"name": "b"}, "spec": {"minResources": {}}}
    )
    assert absent.spec.min_resources is None
    assert empty.spec.min_resources == {}


# --- timestamps -----------------------------------------------------------------------------------

JAN_2 = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        pytest.param("2024-01-02T03:04:05Z", JAN_2, id="RFC 3339 in UTC"),
        pytest.param("2024-01-02T05:04:05+02:00", JAN_2, id="RFC 3339 with an offset"),
        pytest.param("2024-01-02T03:04:05.5Z", JAN_2 + 0.5, id="fractional seconds"),
        pytest.param(
            "2024-01-02T03:04:05.123456789Z", JAN_2 + 0.123456, id="nanoseconds keep micros"
        ),
        pytest.param("2024-01-02T03:04:05", JAN_2, id="a time without offset is taken as UTC"),
        pytest.param(JAN_2, JAN_2, id="seconds since the epoch pass through"),
        pytest.param(None, None, id="no time"),
        pytest.param("", None, id="an empty time is no time"),
    ],
)
def test_creation_timestamps(stamp: Any, expected: float | None) -> None:
    pod: Pod = parsed("Pod", pod_raw(creationTimestamp=stamp))
    if expected is None:
        assert pod.metadata.creation_timestamp is None
    else:
        assert pod.metadata.creation_timestamp == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "stamp",
    [
        pytest.param("yesterday", id="a word"),
        pytest.param("2024-13-01T00:00:00Z", id="month 13"),
        pytest.param(True, id="a boolean"),
        pytest.param(["2024-01-02T03:04:05Z"], id="a list"),
    ],
)
def test_invalid_timestamps_are_rejected(stamp: Any) -> None:
    err = error("Pod", pod_raw(creationTimestamp=stamp))
    assert err.message.startswith(
        ("metadata.creationTimestamp: Expected", "metadata: creationTimestamp: invalid")
    )


def test_deletion_timestamp_and_condition_times_are_parsed() -> None:
    pod: Pod = parsed("Pod", pod_raw(deletionTimestamp="2024-01-02T03:04:05Z"))
    assert pod.metadata.deletion_timestamp == JAN_2
    raw = {
        "kind": "PodGroup",
        "metadata": {"name": "pg"},
        "status": {
            "conditions": [
                {
                    "type": "Scheduled",
                    "status": "True",
                    "transitionID": "abc",
                    "lastTransitionTime": "2024-01-02T03:04:05Z",
                }
            ]
        },
    }
    pg: PodGroup = parsed("PodGroup", raw)
    (cond,) = pg.status.conditions
    assert (cond.transition_id, cond.last_transition_time) == ("abc", JAN_2)
