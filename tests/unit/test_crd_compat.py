"""Every object Volcano's CRDs admit is admitted by ours and read by our models.

``kubectl apply -f crds/`` over a Volcano install replaces Volcano's CRDs with ours, so a schema
stricter than Volcano's (a missing field, a tighter bound, a required field Volcano leaves
optional) would refuse objects that worked the day before. The table below holds objects valid
under Volcano's schemas (volcano.md §1, checked against Volcano's generated CRDs: every field,
boundary values, and objects that leave out what Volcano does not require). Each must pass our
schema, checked as the API server checks it (:mod:`crd_schema`, unknown fields refused as
``kubectl``'s strict field validation does), and load into our model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from caldera.models.numa import Numatopology
from caldera.models.topology import HyperNode
from caldera.models.volcano import PodGroup, Queue
from crd_schema import errors

CRD_DIR = Path(__file__).resolve().parents[2] / "crds"
Obj = dict[str, Any]

NUMATOPOLOGY: Obj = {
    "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
    "kind": "Numatopology",
    "metadata": {"name": "node-1"},
    "spec": {
        "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
        "resReserved": {"cpu": "1", "memory": "1Gi"},
        "numares": {"cpu": {"allocatable": "1-7,9-15", "capacity": 16}},
        "cpuDetail": {
            str(cpu): {"numa": cpu // 8, "socket": cpu // 8, "core": cpu % 8} for cpu in range(16)
        },
        "MemoryDetail": {"0": {"total": 1000}},
        "podAllocations": [{"uid": "u1", "name": "p", "namespace": "default"}],
    },
}

QUANTITIES = {"cpu": "1500m", "memory": "64Gi", "nvidia.com/gpu": 8, "ephemeral-storage": "1e3"}
DNS_253 = ".".join(["a" * 63] * 3 + ["a" * 61])  # 253 characters, a valid DNS subdomain
SELECTOR = {
    "matchLabels": {"volcano.sh/role": "worker"},
    "matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["a", "b"]},
        {"key": "spot", "operator": "DoesNotExist"},
    ],
}
CONDITION = {
    "type": "Ready",
    "status": "True",
    "observedGeneration": 3,
    "lastTransitionTime": "2025-01-02T03:04:05Z",
    "reason": "NodesFound",
    "message": "",
}


def queue(spec: Obj | None = None, status: Obj | None = None) -> Obj:
    obj: Obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    obj["metadata"] = {"name": "q1"}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def podgroup(spec: Obj | None = None, status: Obj | None = None) -> Obj:
    obj: Obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup"}
    obj["metadata"] = {"name": "pg1", "namespace": "team"}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def hypernode(spec: Obj | None = None, status: Obj | None = None) -> Obj:
    obj: Obj = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode"}
    obj["metadata"] = {"name": "rack-1"}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


FULL_QUEUE_SPEC = {
    "weight": 65535,
    "capability": QUANTITIES,
    "reclaimable": False,
    "extendClusters": [{"name": "east", "weight": 2, "capacity": QUANTITIES}, {}],
    "guarantee": {"resource": {"cpu": 2, "memory": "4Gi"}},
    "affinity": {
        "nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["ng-a"],
            "preferredDuringSchedulingIgnoredDuringExecution": ["ng-b"],
        },
        "nodeGroupAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["ng-c"],
            "preferredDuringSchedulingIgnoredDuringExecution": [],
        },
    },
    "type": "x" * 253,
    "parent": DNS_253,
    "deserved": {"cpu": "0", "memory": 0},
    "priority": 0,
    "dequeueStrategy": "fifo",
}
FULL_QUEUE_STATUS = {
    "state": "Closing",
    "unknown": 0,
    "pending": 1,
    "running": 2,
    "inqueue": 3,
    "completed": 2147483647,
    "reservation": {"nodes": ["n1"], "resource": QUANTITIES},
    "allocated": {"cpu": "0", "memory": "0", "pods": "0"},
}
TOPOLOGY = {"mode": "soft", "highestTierName": "volcano.sh/hypernode"}
FULL_PODGROUP_SPEC = {
    "minMember": 0,
    "minTaskMember": {"master": 1, "worker": 0},
    "queue": DNS_253,
    "priorityClassName": "p" * 253,
    "minResources": QUANTITIES,
    "networkTopology": TOPOLOGY,
    "subGroupPolicy": [
        {
            "name": "n" * 253,
            "networkTopology": {"mode": "hard", "highestTierAllowed": 0},
            "subGroupSize": 1,
            "minSubGroups": 0,
            "labelSelector": SELECTOR,
            "matchLabelKeys": ["volcano.sh/shard"],
        },
        {},  # every field of a policy is optional
    ],
}
FULL_PODGROUP_STATUS = {
    "phase": "Unknown",
    "conditions": [
        {
            "type": "Unschedulable",
            "status": "True",
            "transitionID": "0b2c",
            "lastTransitionTime": "2025-01-02T03:04:05Z",
            "reason": "NotEnoughResources",
            "message": "3/4 tasks in gang unschedulable",
        },
        {},  # no field of a condition is required
    ],
    "running": 0,
    "succeeded": 2147483647,
    "failed": 0,
}

ADMITTED_BY_VOLCANO = [
    pytest.param(queue(), Queue, id="queue-without-spec"),
    pytest.param(queue({}), Queue, id="queue-with-empty-spec"),
    pytest.param(queue({"weight": 1, "dequeueStrategy": "traverse"}), Queue, id="queue-minimum"),
    pytest.param(queue(FULL_QUEUE_SPEC, FULL_QUEUE_STATUS), Queue, id="queue-every-field"),
    pytest.param(queue({"parent": "root"}, {"state": "Unknown"}), Queue, id="queue-child-of-root"),
    pytest.param(podgroup(), PodGroup, id="podgroup-without-spec"),
    pytest.param(podgroup({"minMember": 3}), PodGroup, id="podgroup-minimum"),
    pytest.param(
        podgroup(FULL_PODGROUP_SPEC, FULL_PODGROUP_STATUS), PodGroup, id="podgroup-every-field"
    ),
    pytest.param(
        podgroup({"networkTopology": {}, "minResources": {}}, {"phase": "Inqueue"}),
        PodGroup,
        id="podgroup-empty-topology",
    ),
    *[
        pytest.param(podgroup({}, {"phase": phase}), PodGroup, id=f"podgroup-{phase}")
        for phase in ("Pending", "Running", "Inqueue", "Completed")
    ],
    pytest.param(hypernode(), HyperNode, id="hypernode-without-spec"),
    pytest.param(hypernode({"tier": 0}), HyperNode, id="hypernode-without-members"),
    pytest.param(
        hypernode(
            {
                "tier": 2,
                "tierName": "t" * 253,
                "members": [
                    {"type": "Node", "selector": {"exactMatch": {"name": DNS_253}}},
                    {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}},
                    {"type": "Node", "selector": {"labelMatch": SELECTOR}},
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-1"}}},
                    {"type": "Node"},  # the selector is optional; its rules apply when present
                ],
            },
            {"conditions": [CONDITION], "nodeCount": 0},
        ),
        HyperNode,
        id="hypernode-every-field",
    ),
    pytest.param(
        hypernode({"tier": 1, "members": [{"type": "Node", "selector": {"labelMatch": {}}}]}),
        HyperNode,
        id="hypernode-empty-label-match",
    ),
    pytest.param(
        # the CRD checks neither operators nor values (the tree builder reports the member)
        hypernode(
            {
                "tier": 1,
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchExpressions": [e]}}}
                    for e in ({"key": "z", "operator": "Near"}, {"key": "z", "operator": "In"})
                ],
            }
        ),
        HyperNode,
        id="hypernode-unusable-label-match",
    ),
    pytest.param(NUMATOPOLOGY, Numatopology, id="numatopology-as-the-exporter-writes-it"),
    pytest.param(
        {
            "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
            "kind": "Numatopology",
            "metadata": {"name": "node-2"},
        },
        Numatopology,
        id="numatopology-without-spec",
    ),
]

REFUSED_BY_VOLCANO = [
    pytest.param(queue({"weight": 0}), "spec.weight", id="queue-weight-0"),
    pytest.param(queue({"weight": 65536}), "spec.weight", id="queue-weight-too-big"),
    pytest.param(queue({"parent": "Team_A"}), "spec.parent", id="queue-parent-not-dns"),
    pytest.param(queue({"dequeueStrategy": "lifo"}), "spec.dequeueStrategy", id="queue-strategy"),
    pytest.param(queue({"capability": {"cpu": "2GB"}}), "spec.capability", id="queue-quantity"),
    pytest.param(queue({"colour": "red"}), "spec.colour", id="queue-unknown-field"),
    pytest.param(podgroup({"minMember": -1}), "spec.minMember", id="podgroup-negative-min"),
    pytest.param(podgroup({}, {"phase": "Lost"}), "status.phase", id="podgroup-phase"),
    pytest.param(
        podgroup({"subGroupPolicy": [{"subGroupSize": 0}]}),
        "spec.subGroupPolicy[0].subGroupSize",
        id="podgroup-subgroup-size-0",
    ),
    pytest.param(hypernode({"members": []}), "spec", id="hypernode-without-tier"),
    pytest.param(hypernode({"tier": 0, "members": []}), "spec.members", id="hypernode-no-members"),
    pytest.param(
        hypernode({"tier": 0, "members": [{"type": "Node", "selector": {}}]}),
        "spec.members[0].selector",
        id="hypernode-empty-selector",
    ),
]


def schema_of(kind: str) -> Any:
    for path in sorted(CRD_DIR.glob("*.yaml")):
        with path.open(encoding="utf-8") as stream:
            crd = yaml.safe_load(stream)
        if crd["spec"]["names"]["kind"] == kind:
            (version,) = crd["spec"]["versions"]
            return version["schema"]["openAPIV3Schema"]
    raise AssertionError(f"no CRD for {kind}")


@pytest.mark.parametrize(("obj", "model"), ADMITTED_BY_VOLCANO)
def test_an_object_volcano_admits_is_admitted_and_read(obj: Obj, model: type[BaseModel]) -> None:
    assert errors(schema_of(obj["kind"]), obj) == []
    model.model_validate(obj)


@pytest.mark.parametrize(("obj", "field"), REFUSED_BY_VOLCANO)
def test_an_object_volcano_refuses_is_refused_naming_the_field(obj: Obj, field: str) -> None:
    # the other half of "identical": the checker above is not one that admits everything
    found = errors(schema_of(obj["kind"]), obj)
    assert found, obj
    assert all(e.startswith(field) for e in found), found
