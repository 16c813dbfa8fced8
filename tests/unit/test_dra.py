"""DynamicResources (structured parameters, ``resource.k8s.io/v1``) behind
``predicate.DynamicResourceAllocationEnable``: PreFilter, Filter, Reserve/Unreserve, the PreBind
writes on the Bind intent, preemption's simulate, and the DRA kinds in manifests.

Expectations are written from kube-scheduler's documented behaviour (Kubernetes 1.36):

- a claim from a template is the one ``status.resourceClaimStatuses`` names; before the
  ResourceClaim controller created it the pod waits (``pod "ns/name": ResourceClaim not created
  yet``); a missing claim, a deleting claim, a generated claim the pod does not control, a request
  naming a DeviceClass that does not exist, and an allocated claim with 256 other consumers make
  the pod unschedulable everywhere;
- an allocated claim restricts the pod to the nodes its allocation's ``nodeSelector`` matches
  (``resourceclaim not available on the node``);
- an unallocated claim needs, on the node, devices from complete pools (``nodeName``,
  ``allNodes`` or a matching ``nodeSelector``) that no claim holds, accepted by every selector of
  the class and then of the request: ``count`` of them (``ExactCount``) or all matching devices of
  the node, which must all be free (``All``); otherwise ``cannot allocate all claims``;
- selectors are CEL over ``device.driver``, ``device.attributes[domain].name`` (names without a
  domain are in the driver's) and ``device.capacity[domain].name`` quantities; a selector failing
  on a device is kube's ``CEL runtime error`` text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from builders import NOW, REGISTRY, Obj, node, pod, podgroup, policy, policy_text, state_of
from caldera.api.task import Task, TaskStatus
from caldera.cache.snapshot import build_snapshot
from caldera.cache.state import ClusterState, StateObject
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import Bind, ClaimReservation
from caldera.framework.session import Session
from caldera.models.core import Pod, PodResourceClaim, PodResourceClaimStatus
from caldera.models.dra import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceSlice,
)
from caldera.models.parse import parse_object
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.predicates.base import SKIP
from caldera.plugins.predicates.dra import CANNOT_ALLOCATE, IN_USE, NOT_AVAILABLE
from caldera.simulate.manifests import load_manifests
from caldera.simulate.report import report
from caldera.simulate.runner import Simulation, simulate

DRIVER = "gpu.example.com"
POD_UID = "uid-of-p"
ON = {"predicate.DynamicResourceAllocationEnable": True}

# -- builders ------------------------------------------------------------------------------------


def _parse(kind: str, raw: dict[str, Any]) -> Any:
    obj = parse_object(kind, raw)
    assert isinstance(obj, StateObject), obj
    return obj


def gpu(name: str, model: str = "a100", memory: str = "40Gi", **more: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {"model": {"string": model}}
    attributes.update(more)
    return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def rslice(
    name: str,
    devices: Sequence[dict[str, Any]],
    *,
    node_name: str | None = None,
    all_nodes: bool = False,
    selector: Mapping[str, Any] | None = None,
    pool: str | None = None,
    count: int = 1,
    generation: int = 0,
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {
            "name": pool or node_name or name,
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": list(devices),
    }
    if node_name:
        spec["nodeName"] = node_name
    if all_nodes:
        spec["allNodes"] = True
    if selector is not None:
        spec["nodeSelector"] = dict(selector)
    slice_: ResourceSlice = _parse("ResourceSlice", {"metadata": {"name": name}, "spec": spec})
    return slice_


def device_class(name: str = "gpu", *selectors: str) -> DeviceClass:
    exprs = selectors or (f'device.driver == "{DRIVER}"',)
    spec = {"selectors": [{"cel": {"expression": e}} for e in exprs]}
    cls: DeviceClass = _parse("DeviceClass", {"metadata": {"name": name}, "spec": spec})
    return cls


def request(
    name: str = "gpu",
    *,
    cls: str = "gpu",
    count: int | None = None,
    mode: str | None = None,
    selectors: Iterable[str] = (),
) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls}
    if count is not None:
        exactly["count"] = count
    if mode is not None:
        exactly["allocationMode"] = mode
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exactly}


def claim(
    name: str = "c",
    *requests: dict[str, Any],
    allocated: Sequence[tuple[str, str]] = (),
    on_node: str | None = None,
    reserved: int = 0,
    owner: str | None = None,
    deleting: bool = False,
    constraints: Sequence[dict[str, Any]] = (),
) -> ResourceClaim:
    """``allocated``: (pool, device) results; ``on_node``: the allocation's node selector."""
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    meta["resourceVersion"] = f"rv-{name}"
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if allocated or on_node:
        allocation: dict[str, Any] = {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": p, "device": d}
                    for p, d in allocated
                ]
            }
        }
        if on_node:
            field = {"key": "metadata.name", "operator": "In", "values": [on_node]}
            allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [field]}]}
        status["allocation"] = allocation
    if reserved:
        status["reservedFor"] = [
            {"resource": "pods", "name": f"o{i}", "uid": f"o{i}"} for i in range(reserved)
        ]
    devices = {"requests": list(requests or (request(),)), "constraints": list(constraints)}
    raw = {"metadata": meta, "spec": {"devices": devices}, "status": status}
    parsed: ResourceClaim = _parse("ResourceClaim", raw)
    return parsed


def with_claims(
    p: Pod, refs: Sequence[Mapping[str, str]], statuses: Mapping[str, str | None] | None = None
) -> Pod:
    spec = p.spec.model_copy(
        update={"resource_claims": tuple(PodResourceClaim.model_validate(r) for r in refs)}
    )
    status = p.status
    if statuses is not None:
        entries = tuple(
            PodResourceClaimStatus(name=k, resource_claim_name=v) for k, v in statuses.items()
        )
        status = status.model_copy(update={"resource_claim_statuses": entries})
    return p.model_copy(update={"spec": spec, "status": status})


def claimant(
    name: str = "p", group: str = "pg", claims: Sequence[str] = ("c",), **kwargs: Any
) -> Pod:
    refs = [{"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    return with_claims(pod(name, group=group, **kwargs), refs)


def hosts(*names: str) -> list[Obj]:
    return [node(n, labels={"kubernetes.io/hostname": n}) for n in names]


THREE = hosts("n1", "n2", "n3")

# -- sessions ------------------------------------------------------------------------------------


def dra_policy(args: Mapping[str, Any] | None = ON) -> str:
    return policy_text("enqueue, allocate", ["gang", "predicates"], arguments={"predicates": args})


def cluster(objects: Iterable[Obj | Pod], dra: Iterable[StateObject]) -> ClusterState:
    state = state_of(objects)
    for obj in dra:
        state.add(obj)
    return state


def open_dra_session(
    objects: Iterable[Obj | Pod], dra: Iterable[StateObject], args: Mapping[str, Any] | None = ON
) -> Session:
    snapshot, problems = build_snapshot(
        cluster(objects, dra), scheduler_names=["volcano"], now=NOW, session_id="test"
    )
    assert not problems, problems
    ssn = Session(snapshot, policy(dra_policy(args)), REGISTRY)
    ssn.open()
    return ssn


def only_task(ssn: Session, job: str = "default/pg") -> Task:
    return next(iter(ssn.jobs[job].tasks.values()))


def verdict(nodes: Sequence[Obj], dra: Sequence[StateObject], p: Pod) -> str | dict[str, list[str]]:
    """The pre-predicate message for ``p``, or reason → rejected node names."""
    ssn = open_dra_session([*nodes, podgroup("pg"), p], dra)
    task = only_task(ssn)
    message = ssn.pre_predicate(task)
    if message is not None:
        return message
    out: dict[str, list[str]] = {}
    for reason, mask in ssn.predicate(task):
        out.setdefault(reason, []).extend(ssn.nodes.names[i] for i in np.flatnonzero(mask))
    return {k: sorted(v) for k, v in out.items()}


def run(objects: Iterable[Obj | Pod], dra: Iterable[StateObject], cycles: int = 1) -> Simulation:
    return simulate(
        cluster(objects, dra),
        policy(dra_policy()),
        REGISTRY,
        scheduler_names=["volcano"],
        cycles=cycles,
    )


def all_binds(sim: Simulation) -> dict[str, Bind]:
    return {f"{b.namespace}/{b.name}": b for rec in sim.cycles for b in rec.result.binds}


def unschedulable(sim: Simulation) -> dict[str, str]:
    waiting: dict[str, str] = report(sim)["unschedulable"]
    return waiting


def devices_of(bind: Bind) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    for write in bind.claims:
        assert write.allocation is not None
        results = write.allocation["devices"]["results"]
        out.extend((write.claim, r["request"], f"{r['pool']}/{r['device']}") for r in results)
    return out


GPU_N1 = rslice("n1-gpus", [gpu("g0"), gpu("g1", model="h100", memory="80Gi")], node_name="n1")
GPU_N2 = rslice("n2-gpus", [gpu("g0", model="h100", memory="80Gi")], node_name="n2")
GPUS: list[StateObject] = [device_class(), GPU_N1, GPU_N2]

# -- models and manifests ------------------------------------------------------------------------


def test_requests_default_as_the_api_server_does() -> None:
    c = claim("c", {"name": "gpu", "exactly": {"deviceClassName": "gpu"}})
    exactly = c.spec.devices.requests[0].exactly
    assert exactly is not None
    assert (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)
    s = rslice("s", [gpu("g0")], node_name="n1")
    assert s.spec.devices[0].attributes["model"].string == "a100"


# -- PreFilter -----------------------------------------------------------------------------------


def _template_pod(statuses: Mapping[str, str | None] | None) -> Pod:
    refs = [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
    return with_claims(pod("p", group="pg", uid=POD_UID), refs, statuses)


@pytest.mark.parametrize(
    ("p", "dra", "expected"),
    [
        pytest.param(
            claimant(claims=("missing",)),
            GPUS,
            'could not find ResourceClaim "default/missing"',
            id="missing-claim",
        ),
        pytest.param(
            _template_pod(None),
            GPUS,
            'pod "default/p": ResourceClaim not created yet',
            id="template-claim-not-created-yet",
        ),
        pytest.param(
            _template_pod({"gpu": "p-gpu-x"}),
            [*GPUS, claim("p-gpu-x", owner="someone-else")],
            "ResourceClaim default/p-gpu-x was not created for pod default/p (pod is not owner)",
            id="template-claim-of-another-pod",
        ),
        pytest.param(
            claimant(),
            [*GPUS, claim("c", deleting=True)],
            'resourceclaim "c" is being deleted',
            id="deleting-claim",
        ),
        pytest.param(
            claimant(),
            [GPU_N1, claim("c", request(cls="missing"))],
            "request gpu: device class missing does not exist",
            id="missing-device-class",
        ),
        pytest.param(
            claimant(),
            [*GPUS, claim("c", allocated=[("n1", "g0")], reserved=256)],
            IN_USE,
            id="allocated-claim-with-256-consumers",
        ),
    ],
)
def test_prefilter_makes_the_pod_unschedulable(
    p: Pod, dra: list[StateObject], expected: str
) -> None:
    assert verdict(THREE, dra, p) == expected


@pytest.mark.parametrize(
    ("p", "dra"),
    [
        pytest.param(pod("p", group="pg"), GPUS, id="no-claims"),
        pytest.param(_template_pod({"gpu": None}), GPUS, id="template-needs-no-claim"),
    ],
)
def test_prefilter_skips_pods_without_claims(p: Pod, dra: list[StateObject]) -> None:
    ssn = open_dra_session([*THREE, podgroup("pg"), p], dra)
    plugin = next(pl for pl in ssn.plugins if isinstance(pl, PredicatesPlugin))
    dra_filter = next(f for f in plugin.filters if f.name == "DynamicResources")
    assert dra_filter.pre_filter is not None
    assert dra_filter.pre_filter(only_task(ssn)) is SKIP


def test_a_generated_claim_of_the_pod_is_used() -> None:
    dra = [*GPUS, claim("p-gpu-x", owner=POD_UID)]
    assert verdict(THREE, dra, _template_pod({"gpu": "p-gpu-x"})) == {CANNOT_ALLOCATE: ["n3"]}


# -- Filter --------------------------------------------------------------------------------------

MODEL = f'device.attributes["{DRIVER}"].model == "h100"'
BIG = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'
SHORT_NAME_BIG = 'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("79Gi"))'


@pytest.mark.parametrize(
    ("dra", "expected"),
    [
        pytest.param(
            [*GPUS, claim("c", allocated=[("n2", "g0")], on_node="n2")],
            {NOT_AVAILABLE: ["n1", "n3"]},
            id="allocated-claim-fits-only-its-node-selector",
        ),
        pytest.param(
            [*GPUS, claim("c", allocated=[("shared", "g0")])],
            {},
            id="allocated-claim-without-node-selector-fits-everywhere",
        ),
        pytest.param(
            [*GPUS, claim("c")],
            {CANNOT_ALLOCATE: ["n3"]},
            id="one-device-on-nodes-with-a-slice",
        ),
        pytest.param(
            [*GPUS, claim("c", request(count=2))],
            {CANNOT_ALLOCATE: ["n2", "n3"]},
            id="exact-count-two",
        ),
        pytest.param(
            [*GPUS, claim("c", request(mode="All"))],
            {CANNOT_ALLOCATE: ["n3"]},
            id="all-devices-of-the-node",
        ),
        pytest.param(
            [*GPUS, claim("c", request(mode="All")), claim("other", allocated=[("n1", "g1")])],
            {CANNOT_ALLOCATE: ["n1", "n3"]},
            id="all-devices-must-be-free",
        ),
        pytest.param(
            [*GPUS, claim("c", request(selectors=[MODEL]))],
            {CANNOT_ALLOCATE: ["n3"]},
            id="request-selector-on-an-attribute",
        ),
        pytest.param(
            [*GPUS, claim("c", request(count=2, selectors=[MODEL]))],
            {CANNOT_ALLOCATE: ["n1", "n2", "n3"]},
            id="request-selector-leaves-too-few",
        ),
        pytest.param(
            [device_class("gpu", BIG), GPU_N1, GPU_N2, claim("c", request(count=2))],
            {CANNOT_ALLOCATE: ["n1", "n2", "n3"]},
            id="class-selector-on-capacity",
        ),
        pytest.param(
            [device_class("gpu", SHORT_NAME_BIG), GPU_N1, GPU_N2, claim("c")],
            {CANNOT_ALLOCATE: ["n3"]},
            id="capacity-is-greater-than",
        ),
        pytest.param(
            [
                device_class("gpu", 'device.driver == "other.example.com"'),
                GPU_N1,
                GPU_N2,
                claim("c"),
            ],
            {CANNOT_ALLOCATE: ["n1", "n2", "n3"]},
            id="class-selector-on-the-driver",
        ),
        pytest.param(
            [*GPUS, claim("c"), claim("other", allocated=[("n2", "g0")], on_node="n2")],
            {CANNOT_ALLOCATE: ["n2", "n3"]},
            id="devices-taken-by-other-claims",
        ),
        pytest.param(
            [
                device_class(),
                rslice("part-1", [gpu("g0")], node_name="n1", pool="p", count=2),
                claim("c"),
            ],
            {CANNOT_ALLOCATE: ["n1", "n2", "n3"]},
            id="incomplete-pool-is-not-used",
        ),
        pytest.param(
            [
                device_class(),
                rslice("old", [gpu("g0")], node_name="n1", pool="p", generation=1),
                rslice("new", [gpu("g0", model="v100")], node_name="n1", pool="p", generation=2),
                claim(
                    "c", request(selectors=['device.attributes["gpu.example.com"].model == "a100"'])
                ),
            ],
            {CANNOT_ALLOCATE: ["n1", "n2", "n3"]},
            id="only-the-newest-generation-counts",
        ),
        pytest.param(
            [device_class(), rslice("net", [gpu("g0")], all_nodes=True), claim("c")],
            {},
            id="all-nodes-slice",
        ),
        pytest.param(
            [
                device_class(),
                rslice(
                    "rack",
                    [gpu("g0")],
                    selector={
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["n2", "n3"],
                                    }
                                ]
                            }
                        ]
                    },
                ),
                claim("c"),
            ],
            {CANNOT_ALLOCATE: ["n1"]},
            id="node-selector-slice",
        ),
        pytest.param(
            [
                device_class(),
                rslice(
                    "rack",
                    [gpu("g0")],
                    selector={
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "rack", "operator": "NotIn", "values": ["$"]}
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": ["n2", "n3"],
                                    }
                                ]
                            },
                        ]
                    },
                ),
                claim("c"),
            ],
            {CANNOT_ALLOCATE: ["n1", "n2", "n3"]},
            id="a-slice-selector-with-a-term-that-does-not-parse-matches-no-node",
        ),
        pytest.param(
            [
                *GPUS,
                claim(
                    "c",
                    request("a", count=1),
                    request("b", count=1, selectors=[MODEL]),
                ),
            ],
            {CANNOT_ALLOCATE: ["n2", "n3"]},
            id="two-requests-need-two-devices-searched-with-backtracking",
        ),
        pytest.param(
            [
                device_class(),
                rslice(
                    "n1-gpus",
                    [gpu("g0", numa={"int": 0}), gpu("g1", numa={"int": 1})],
                    node_name="n1",
                ),
                rslice(
                    "n2-gpus",
                    [gpu("g0", numa={"int": 0}), gpu("g1", numa={"int": 0})],
                    node_name="n2",
                ),
                claim(
                    "c",
                    request(count=2),
                    constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
                ),
            ],
            {CANNOT_ALLOCATE: ["n1", "n3"]},
            id="match-attribute-constraint",
        ),
        pytest.param(
            [
                *GPUS,
                claim(
                    "c",
                    {
                        "name": "gpu",
                        "firstAvailable": [
                            {"name": "two", "deviceClassName": "gpu", "count": 2},
                            {
                                "name": "one-big",
                                "deviceClassName": "gpu",
                                "selectors": [{"cel": {"expression": MODEL}}],
                            },
                        ],
                    },
                ),
            ],
            {CANNOT_ALLOCATE: ["n3"]},
            id="first-available-alternatives",
        ),
    ],
)
def test_dynamic_resources_filter(dra: list[StateObject], expected: dict[str, list[str]]) -> None:
    assert verdict(THREE, dra, claimant()) == expected


def test_a_selector_error_is_kubes_text_on_the_nodes_it_reaches() -> None:
    dra = [*GPUS, claim("c", request(selectors=['device.attributes["gpu.example.com"].numa == 0']))]
    hint = (
        ". Consider using CEL optional chaining (?), has() macro, or orValue() for optional fields"
    )
    assert verdict(THREE, dra, claimant()) == {
        CANNOT_ALLOCATE: ["n3"],
        "claim default/c: selector #0 on device gpu.example.com/n1/g0: CEL runtime error: "
        f"no such key: numa{hint}": ["n1"],
        "claim default/c: selector #0 on device gpu.example.com/n2/g0: CEL runtime error: "
        f"no such key: numa{hint}": ["n2"],
    }


def test_a_class_selector_that_does_not_compile_is_kubes_error() -> None:
    dra: list[StateObject] = [device_class("gpu", "device.driver =="), GPU_N2, claim("c")]
    found = verdict(THREE, dra, claimant())
    assert isinstance(found, dict)
    assert found[CANNOT_ALLOCATE] == ["n1", "n3"]
    (message,) = (k for k in found if k != CANNOT_ALLOCATE)
    assert message.startswith("class gpu: selector #0: CEL compile error: compilation failed:")
    assert found[message] == ["n2"]


def test_switched_off_the_filter_is_not_built() -> None:
    ssn = open_dra_session([*THREE, podgroup("pg"), claimant()], [claim("c")], args={})
    plugin = next(pl for pl in ssn.plugins if isinstance(pl, PredicatesPlugin))
    assert "DynamicResources" not in [f.name for f in plugin.filters]
    assert plugin.dynamic_resources is None
    assert ssn.predicate(only_task(ssn)) == []


# -- Reserve / Unreserve and PreBind, through the engine -------------------------------------------


@pytest.mark.parametrize(
    ("objects", "dra", "bound", "waiting"),
    [
        pytest.param(
            [
                *hosts("n1"),
                podgroup("first", created=1.0),
                claimant("a", group="first", claims=("ca",)),
                podgroup("second", created=2.0),
                claimant("b", group="second", claims=("cb",)),
                podgroup("third", created=3.0),
                claimant("c", group="third", claims=("cc",)),
            ],
            [GPUS[0], GPU_N1, claim("ca"), claim("cb"), claim("cc")],
            {"default/a": [("ca", "gpu", "n1/g0")], "default/b": [("cb", "gpu", "n1/g1")]},
            {"default/c": f"0/1 nodes are available: 1 {CANNOT_ALLOCATE}."},
            id="each claim gets its own device and the next pod waits",
        ),
        pytest.param(
            [
                *hosts("n1"),
                podgroup("gang", min_member=2, created=1.0),
                claimant("g-0", group="gang", claims=("g0",)),
                claimant("g-1", group="gang", claims=("g1",)),
                podgroup("later", created=2.0),
                claimant("solo", group="later", claims=("solo",)),
            ],
            [
                device_class(),
                rslice("n1-gpus", [gpu("g0")], node_name="n1"),
                claim("g0"),
                claim("g1"),
                claim("solo"),
            ],
            {"default/solo": [("solo", "gpu", "n1/g0")]},
            {},
            id="a discarded gang gives its devices back",
        ),
    ],
)
def test_the_devices_placements_take_in_a_session_are_held_until_discarded(
    objects: list[Obj | Pod],
    dra: list[StateObject],
    bound: dict[str, list[tuple[str, str, str]]],
    waiting: dict[str, str],
) -> None:
    """``bound``: each bound pod's (claim, request, device) triples; ``waiting``: the reasons of
    pods expected to wait."""
    sim = run(objects, dra)
    assert {k: devices_of(b) for k, b in all_binds(sim).items()} == bound
    said = unschedulable(sim)
    for name, reason in waiting.items():
        assert said[name] == reason


def test_the_bind_carries_the_allocation_and_the_consumer() -> None:
    sim = run(
        [*THREE, podgroup("pg"), claimant(uid=POD_UID)],
        [*GPUS, claim("c", request(selectors=[MODEL]))],
    )
    bind = all_binds(sim)["default/p"]
    assert bind.node == "n1"
    node_selector = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
        ]
    }
    assert bind.claims == (
        ClaimReservation(
            namespace="default",
            claim="c",
            claim_uid="uid-c",
            claim_resource_version="rv-c",
            allocation={
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "g1"}]
                },
                "nodeSelector": node_selector,
            },
            reserved_for=(("p", POD_UID),),
        ),
    )
    # Between cycles the claim carries what the binder wrote.
    written = sim.state.resource_claims["default/c"]
    assert written.status.allocation is not None
    assert [r.device for r in written.status.allocation.devices.results] == ["g1"]
    assert [(r.name, r.uid) for r in written.status.reserved_for] == [("p", POD_UID)]


def test_a_bind_sent_ahead_of_the_session_end_already_carries_its_claim_writes() -> None:
    # the operator starts binding as soon as a job commits, long before the session closes
    snapshot, _ = build_snapshot(
        cluster(
            [*THREE, podgroup("pg"), claimant(uid=POD_UID)],
            [*GPUS, claim("c", request(selectors=[MODEL]))],
        ),
        scheduler_names=["volcano"],
        now=NOW,
        session_id="test",
    )
    told: list[Bind] = []
    result = run_cycle(snapshot, policy(dra_policy()), REGISTRY, on_bind=told.append)
    assert [b.name for b in told] == ["p"]
    assert devices_of(told[0]) == [("c", "gpu", "n1/g1")]
    assert told == result.binds


def test_a_claim_allocated_earlier_pulls_its_pod_to_its_node_and_is_only_reserved() -> None:
    allocated = claim("c", allocated=[("n2", "g0")], on_node="n2")
    sim = run([*THREE, podgroup("pg"), claimant(uid=POD_UID)], [*GPUS, allocated])
    bind = all_binds(sim)["default/p"]
    assert bind.node == "n2"
    assert [(w.claim, w.allocation, w.reserved_for) for w in bind.claims] == [
        ("c", None, (("p", POD_UID),))
    ]


def test_a_pod_sharing_a_claim_another_pod_is_allocating_waits() -> None:
    sim = run(
        [
            *hosts("n1"),
            podgroup("first", created=1.0),
            claimant("a", group="first", claims=("shared",)),
            podgroup("second", created=2.0),
            claimant("b", group="second", claims=("shared",)),
        ],
        [*GPUS, claim("shared")],
    )
    assert list(all_binds(sim)) == ["default/a"]
    assert unschedulable(sim)["default/b"] == (
        "0/1 nodes are available: resource claim default/shared is in the process of being "
        "allocated."
    )


def test_reserve_and_unreserve_take_and_give_back_devices() -> None:
    ssn = open_dra_session(
        [*hosts("n1"), podgroup("pg"), claimant()], [*GPUS, claim("c", request(count=2))]
    )
    plugin = next(pl for pl in ssn.plugins if isinstance(pl, PredicatesPlugin))
    dra = plugin.dynamic_resources
    assert dra is not None
    task = only_task(ssn)
    assert ssn.predicate(task) == []
    handler = dra.node_filter.handler
    assert handler is not None and handler.allocate and handler.deallocate
    task.node, task.status = 0, TaskStatus.ALLOCATED
    handler.allocate(task)
    assert dra.inv.taken.tolist() == [True, True, False]
    assert dra.pending == {"default/c": task.uid}
    assert ssn.pre_predicate(task) is None  # its own in-flight claim does not block it
    handler.deallocate(task)
    assert dra.inv.taken.tolist() == [False, False, False]
    assert dra.pending == {}


def test_simulate_frees_the_devices_of_a_victim() -> None:
    victim_claim = claim("vc", allocated=[("n2", "g0")], on_node="n2")
    victim_claim = victim_claim.model_copy(
        update={
            "status": victim_claim.status.model_copy(
                update={
                    "reserved_for": (
                        ResourceClaimConsumerReference(resource="pods", name="v", uid="uid-v"),
                    )
                }
            )
        }
    )
    victim = with_claims(
        pod("v", node_name="n2", uid="uid-v"), [{"name": "r0", "resourceClaimName": "vc"}]
    )
    ssn = open_dra_session(
        [*hosts("n2"), victim, podgroup("pg"), claimant()],
        [device_class(), GPU_N2, victim_claim, claim("c")],
    )
    task = only_task(ssn)
    plugin = next(pl for pl in ssn.plugins if isinstance(pl, PredicatesPlugin))
    assert [r for r, _ in ssn.predicate(task)] == [CANNOT_ALLOCATE]
    on_n2 = next(t for t in ssn.nodes.tasks[0].values() if t.name == "v")
    assert plugin.simulate(task, 0, [], []) == [CANNOT_ALLOCATE]
    assert plugin.simulate(task, 0, [on_n2], []) == []


# -- caldera simulate ------------------------------------------------------------------------------


def test_simulate_reads_dra_manifests_and_allocates(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(
        """
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
kind: ResourceSlice
metadata: {name: n2-gpus}
spec:
  driver: gpu.example.com
  nodeName: n2
  pool: {name: n2, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: h100}}
    capacity: {memory: {value: 80Gi}}
---
kind: ResourceClaim
metadata: {name: big-gpu}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
        selectors:
        - cel:
            expression: >-
              device.capacity["gpu.example.com"].memory.compareTo(quantity("64Gi")) >= 0
---
kind: Pod
metadata: {name: trainer}
spec:
  schedulerName: volcano
  containers: [{name: main, image: busybox, resources: {requests: {cpu: "1"}}}]
  resourceClaims: [{name: gpu, resourceClaimName: big-gpu}]
"""
    )
    loaded = load_manifests([str(path)])
    assert loaded.warnings == []
    sim = simulate(
        loaded.state, policy(dra_policy()), REGISTRY, scheduler_names=["volcano"], cycles=2
    )
    bind = all_binds(sim)["default/trainer"]
    assert (bind.node, devices_of(bind)) == ("n2", [("big-gpu", "gpu", "n2/gpu-0")])
    allocation = sim.state.resource_claims["default/big-gpu"].status.allocation
    assert allocation is not None
    assert [r.device for r in allocation.devices.results] == ["gpu-0"]
