"""The volume filters: VolumeBinding (PreFilter, Filter, Reserve/Unreserve, Score and the PreBind
decisions on the Bind intent), VolumeZone and NodeVolumeLimits, and the storage kinds they read.

Expectations are written from kube-scheduler's documented behaviour (Kubernetes 1.36):

- a claim is bound when it names a volume *and* carries ``pv.kubernetes.io/bind-completed``; an
  unbound claim of a class that does not wait for the first consumer makes the pod wait
  (``pod has unbound immediate PersistentVolumeClaims``);
- a ``WaitForFirstConsumer`` claim takes the smallest available volume of its class that fits
  (capacity, access modes, volume mode, selector, node affinity), smaller claims first, or is
  provisioned when its class has a real provisioner whose allowed topologies admit the node;
- volume node affinity is matched against the node's labels only: a node without fields skips
  matchFields that parse, and a term kube cannot parse (``NotIn ["$"]``, matchFields with two
  values) matches no node, while the other terms still count;
- VolumeZone compares the zone/region labels of bound volumes with the node's, beta volume labels
  also matching the node's GA labels; nodes without any zone label fit;
- NodeVolumeLimits counts distinct volumes per CSI driver against CSINode's
  ``allocatable.count``; a volume shared with a pod already on the node does not count again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from builders import (
    NOW,
    REGISTRY,
    Obj,
    node,
    pod,
    podgroup,
    policy,
    policy_text,
    state_of,
    summary,
)
from caldera.cache.snapshot import build_snapshot
from caldera.cache.state import ClusterState, StateObject
from caldera.cli import main
from caldera.framework.cycle import run_cycle
from caldera.framework.intents import Bind, VolumeBind
from caldera.framework.session import Session
from caldera.models.parse import parse_object
from caldera.models.storage import (
    BIND_COMPLETED_ANNOTATION,
    NO_PROVISIONER,
    SELECTED_NODE_ANNOTATION,
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.predicates import volume_binding as vb
from caldera.plugins.predicates.base import SKIP
from caldera.plugins.predicates.volume_binding import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
    capacity_score,
)
from caldera.plugins.predicates.volumes import MAX_VOLUME_COUNT, ZONE_CONFLICT
from caldera.simulate.manifests import load_manifests
from caldera.simulate.runner import Simulation, simulate

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
CSI = "ebs.csi.aws.com"

# -- builders for the storage kinds ---------------------------------------------------------------


S = TypeVar("S", PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode)


def _parse(cls: type[S], raw: dict[str, Any]) -> S:
    obj = parse_object(cls.__name__, {"kind": cls.__name__, **raw})
    assert isinstance(obj, cls), obj
    return obj


def hostname_affinity(*hosts: str) -> dict[str, Any]:
    return {
        "required": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOST, "operator": "In", "values": list(hosts)}]}
            ]
        }
    }


def terms(*node_selector_terms: Mapping[str, Any]) -> dict[str, Any]:
    """A volume nodeAffinity whose required selector ORs ``node_selector_terms``."""
    return {"required": {"nodeSelectorTerms": list(node_selector_terms)}}


def name_in(*names: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def pv(
    name: str,
    *,
    storage: str = "10Gi",
    cls: str = "local",
    modes: Sequence[str] = ("ReadWriteOnce",),
    hosts: Sequence[str] = (),
    affinity: Mapping[str, Any] | None = None,
    phase: str = "Available",
    labels: Mapping[str, str] | None = None,
    claim: str | None = None,
    csi: str | None = None,
    volume_mode: str | None = None,
) -> PersistentVolume:
    spec: dict[str, Any] = {
        "capacity": {"storage": storage},
        "accessModes": list(modes),
        "storageClassName": cls,
    }
    if hosts:
        spec["nodeAffinity"] = hostname_affinity(*hosts)
    if affinity is not None:
        spec["nodeAffinity"] = dict(affinity)
    if claim is not None:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    if csi is not None:
        spec["csi"] = {"driver": csi, "volumeHandle": f"handle-{name}"}
    if volume_mode is not None:
        spec["volumeMode"] = volume_mode
    meta = {"name": name, "labels": dict(labels or {}), "resourceVersion": f"rv-{name}"}
    return _parse(PersistentVolume, {"metadata": meta, "spec": spec, "status": {"phase": phase}})


def pvc(
    name: str,
    *,
    cls: str | None = "local",
    storage: str = "5Gi",
    modes: Sequence[str] = ("ReadWriteOnce",),
    volume: str = "",
    bound: bool = False,
    phase: str = "Pending",
    selector: Mapping[str, Any] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner: str | None = None,
    deleting: bool = False,
) -> PersistentVolumeClaim:
    ann = dict(annotations or {})
    if bound:
        ann[BIND_COMPLETED_ANNOTATION] = "yes"
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"uid-{name}",
        "resourceVersion": f"rv-{name}",
        "annotations": ann,
    }
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Pod", "name": "p", "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "accessModes": list(modes),
        "resources": {"requests": {"storage": storage}},
        "volumeName": volume,
    }
    if cls is not None:
        spec["storageClassName"] = cls
    if selector is not None:
        spec["selector"] = dict(selector)
    return _parse(
        PersistentVolumeClaim, {"metadata": meta, "spec": spec, "status": {"phase": phase}}
    )


def storage_class(
    name: str,
    *,
    provisioner: str = NO_PROVISIONER,
    mode: str = "WaitForFirstConsumer",
    zones: Sequence[Sequence[str]] = (),
) -> StorageClass:
    raw: dict[str, Any] = {
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if zones:
        raw["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": ZONE, "values": list(values)}]} for values in zones
        ]
    return _parse(StorageClass, raw)


def csinode(name: str, drivers: Mapping[str, int | None]) -> CSINode:
    listed = [
        {"name": d, "nodeID": name, **({} if n is None else {"allocatable": {"count": n}})}
        for d, n in drivers.items()
    ]
    return _parse(CSINode, {"metadata": {"name": name}, "spec": {"drivers": listed}})


def claim_volume(claim: str, name: str | None = None) -> dict[str, Any]:
    return {"name": name or claim, "persistentVolumeClaim": {"claimName": claim}}


def ephemeral_volume(name: str) -> dict[str, Any]:
    template = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {}}}}
    return {"name": name, "ephemeral": {"volumeClaimTemplate": template}}


LOCAL = storage_class("local")
POD_UID = "uid-of-p"

# -- sessions ------------------------------------------------------------------------------------


def predicates_policy(args: Mapping[str, Any] | None = None) -> str:
    return policy_text("enqueue, allocate", ["gang", "predicates"], arguments={"predicates": args})


def cluster(objects: Iterable[Obj], storage: Iterable[StateObject]) -> ClusterState:
    state = state_of(objects)
    for obj in storage:
        state.add(obj)
    return state


def open_volume_session(
    objects: Iterable[Obj], storage: Iterable[StateObject], args: Mapping[str, Any] | None = None
) -> Session:
    snapshot, problems = build_snapshot(
        cluster(objects, storage), scheduler_names=["volcano"], now=NOW, session_id="test"
    )
    assert not problems, problems
    ssn = Session(snapshot, policy(predicates_policy(args)), REGISTRY)
    ssn.open()
    return ssn


def run(
    objects: Iterable[Obj],
    storage: Iterable[StateObject],
    policy_yaml: str | None = None,
) -> Simulation:
    return simulate(
        cluster(objects, storage), policy(policy_yaml), REGISTRY, scheduler_names=["volcano"]
    )


def verdict(
    nodes: Sequence[Obj],
    storage: Sequence[StateObject],
    args: Mapping[str, Any] | None = None,
    **pod_kwargs: Any,
) -> str | dict[str, list[str]]:
    """The pre-predicate message for one pending pod ``p``, or reason → rejected node names."""
    ssn = open_volume_session(
        [*nodes, podgroup("pg"), pod("p", group="pg", uid=POD_UID, **pod_kwargs)], storage, args
    )
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    message = ssn.pre_predicate(task)
    if message is not None:
        return message
    out: dict[str, list[str]] = {}
    for reason, mask in ssn.predicate(task):
        out.setdefault(reason, []).extend(ssn.nodes.names[i] for i in np.flatnonzero(mask))
    return {k: sorted(v) for k, v in out.items()}


def all_binds(sim: Simulation) -> dict[str, Bind]:
    return {f"{b.namespace}/{b.name}": b for rec in sim.cycles for b in rec.result.binds}


def unschedulable(sim: Simulation) -> dict[str, str]:
    waiting: dict[str, str] = summary(sim)["unschedulable"]
    return waiting


def hosts(*names: str, **labels: str) -> list[Obj]:
    return [node(n, labels={HOST: n, **labels}) for n in names]


THREE = hosts("n1", "n2", "n3")

# -- models and manifests ------------------------------------------------------------------------


def test_storage_kinds_default_as_the_api_server_does() -> None:
    sc = _parse(StorageClass, {"metadata": {"name": "s"}, "provisioner": "x"})
    assert sc.volume_binding_mode == "Immediate"
    volume = _parse(PersistentVolume, {"metadata": {"name": "v"}})
    assert (volume.status.phase, volume.storage) == ("Pending", 0)
    claim = pvc("c", storage="1Gi", volume="v")
    assert (claim.request, claim.fully_bound) == (1024**3, False)
    assert pvc("c", volume="v", bound=True).fully_bound


def test_pod_volumes_name_their_claims() -> None:
    spec = pod("web", volumes=[claim_volume("data"), ephemeral_volume("scratch")]).spec
    assert [v.name for v in spec.volumes] == ["data", "scratch"]
    assert spec.volumes[0].persistent_volume_claim is not None
    assert spec.volumes[0].persistent_volume_claim.claim_name == "data"
    assert spec.volumes[1].ephemeral is not None


# -- VolumeBinding: PreFilter ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("volumes", "storage", "expected"),
    [
        pytest.param(
            [claim_volume("data")],
            [LOCAL],
            'persistentvolumeclaim "data" not found',
            id="a missing claim: the lister's not-found message",
        ),
        pytest.param(
            [ephemeral_volume("scratch")],
            [LOCAL],
            "waiting for ephemeral volume controller to create the persistentvolumeclaim "
            '"p-scratch"',
            id="a missing ephemeral claim is waited for",
        ),
        pytest.param(
            [ephemeral_volume("scratch")],
            [LOCAL, pvc("p-scratch", owner="someone-else")],
            "PVC default/p-scratch was not created for pod default/p (pod is not owner)",
            id="an ephemeral volume's claim must be controlled by the pod",
        ),
        pytest.param(
            [claim_volume("data")],
            [LOCAL, pvc("data", volume="gone", phase="Lost")],
            'persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"',
            id="a Lost claim",
        ),
        pytest.param(
            [claim_volume("data")],
            [LOCAL, pvc("data", deleting=True)],
            'persistentvolumeclaim "data" is being deleted',
            id="a claim being deleted",
        ),
        pytest.param(
            [claim_volume("data")],
            [storage_class("fast", mode="Immediate"), pvc("data", cls="fast")],
            UNBOUND_IMMEDIATE,
            id="an unbound claim of an Immediate class",
        ),
        pytest.param(
            [claim_volume("data")],
            [pvc("data", cls="nowhere")],
            UNBOUND_IMMEDIATE,
            id="an unbound claim of a class that does not exist binds immediately",
        ),
        pytest.param(
            [claim_volume("data")],
            [pvc("data", cls=None)],
            UNBOUND_IMMEDIATE,
            id="an unbound claim without a class binds immediately",
        ),
        pytest.param(
            [claim_volume("data")],
            [LOCAL, pvc("data", volume="pv1"), pv("pv1")],
            UNBOUND_IMMEDIATE,
            id="a pre-bound claim (volumeName, binding not completed) counts as immediate",
        ),
    ],
)
def test_volume_binding_prefilter_rejects_the_pod(
    volumes: list[dict[str, Any]], storage: list[StateObject], expected: str
) -> None:
    assert verdict(THREE, storage, volumes=volumes) == expected


@pytest.mark.parametrize(
    ("volumes", "storage", "expected"),
    [
        pytest.param([], [], SKIP, id="no volumes: skipped"),
        pytest.param(
            [{"name": "tmp", "emptyDir": {}}], [], SKIP, id="volumes without claims: skipped"
        ),
        pytest.param(
            [claim_volume("data")],
            [LOCAL, pvc("data", volume="pv1", bound=True), pv("pv1")],
            None,
            id="a bound claim goes on to the filter",
        ),
        pytest.param(
            [ephemeral_volume("scratch")],
            [LOCAL, pvc("p-scratch", owner=POD_UID)],
            None,
            id="an ephemeral claim the pod owns, waiting for its first consumer",
        ),
    ],
)
def test_volume_binding_prefilter_passes(
    volumes: list[dict[str, Any]], storage: list[StateObject], expected: object
) -> None:
    ssn = open_volume_session(
        [*THREE, podgroup("pg"), pod("p", group="pg", uid=POD_UID, volumes=volumes)], storage
    )
    plugin = next(p for p in ssn.plugins if isinstance(p, PredicatesPlugin))
    assert plugin.volume_binding is not None
    pre_filter = plugin.volume_binding.node_filter.pre_filter
    assert pre_filter is not None
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    assert pre_filter(task) is expected


# -- VolumeBinding: Filter ------------------------------------------------------------------------

DATA = [claim_volume("data")]
WAITING = pvc("data", storage="10Gi")


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        pytest.param(
            [LOCAL, pvc("data", volume="pv1", bound=True), pv("pv1", hosts=["n2"])],
            {NODE_CONFLICT: ["n1", "n3"]},
            id="a bound claim's volume admits only its node",
        ),
        pytest.param(
            [LOCAL, pvc("data", volume="pv1", bound=True), pv("pv1")],
            {},
            id="a bound volume without node affinity fits every node",
        ),
        pytest.param(
            [LOCAL, pvc("data", volume="gone", bound=True)],
            {
                PV_NOT_EXIST: ["n1", "n2", "n3"],
                'persistentvolume "gone" not found': ["n1", "n2", "n3"],  # VolumeZone's
            },
            id="a bound claim whose volume does not exist",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("small", storage="5Gi", hosts=["n1"]), pv("big", hosts=["n2"])],
            {BIND_CONFLICT: ["n1", "n3"]},
            id="an available volume at least as large as the request, on the node",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", hosts=["n2"], modes=["ReadOnlyMany"])],
            {BIND_CONFLICT: ["n1", "n2", "n3"]},
            id="the volume must offer every access mode the claim asks for",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", hosts=["n2"], phase="Released")],
            {BIND_CONFLICT: ["n1", "n2", "n3"]},
            id="only Available volumes are taken",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", hosts=["n2"], claim="other")],
            {BIND_CONFLICT: ["n1", "n2", "n3"]},
            id="a volume claimed by another claim",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", hosts=["n2"], claim="data", phase="Pending")],
            {BIND_CONFLICT: ["n1", "n3"]},
            id="a volume pre-bound to the claim is taken whatever its phase",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", cls="other", hosts=["n2"])],
            {BIND_CONFLICT: ["n1", "n2", "n3"]},
            id="only volumes of the claim's class",
        ),
        pytest.param(
            [
                LOCAL,
                pvc("data", storage="10Gi", selector={"matchLabels": {"tier": "gold"}}),
                pv("plain", hosts=["n1"]),
                pv("gold", hosts=["n2"], labels={"tier": "gold"}),
            ],
            {BIND_CONFLICT: ["n1", "n3"]},
            id="the claim's selector must match the volume's labels",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", hosts=["n2"], volume_mode="Block")],
            {BIND_CONFLICT: ["n1", "n2", "n3"]},
            id="a Block volume does not serve a Filesystem claim",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", affinity=terms({"matchFields": [name_in("n2")]}))],
            {},
            id="volume node affinity sees the node's labels only: matchFields are skipped",
        ),
        pytest.param(
            [LOCAL, WAITING, pv("pv1", affinity=terms({"matchFields": [name_in("n2", "n3")]}))],
            {BIND_CONFLICT: ["n1", "n2", "n3"]},
            id="matchFields that do not parse make the volume's term match nothing",
        ),
        pytest.param(
            [
                LOCAL,
                WAITING,
                pv(
                    "pv1",
                    affinity=terms(
                        {"matchExpressions": [{"key": ZONE, "operator": "NotIn", "values": ["$"]}]},
                        {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["n3"]}]},
                    ),
                ),
            ],
            {BIND_CONFLICT: ["n1", "n2"]},
            id="an invalid volume affinity term matches nothing while the others still count",
        ),
        pytest.param(
            [storage_class("local", provisioner=CSI), WAITING],
            {},
            id="no volume, but the class provisions dynamically anywhere",
        ),
        pytest.param(
            [storage_class("local", provisioner=CSI, zones=[["a"]]), WAITING],
            {BIND_CONFLICT: ["n3"]},
            id="dynamic provisioning only where the class's allowed topologies match",
        ),
        pytest.param(
            [
                storage_class("local", provisioner=CSI),
                pvc("data", storage="10Gi", annotations={SELECTED_NODE_ANNOTATION: "n2"}),
            ],
            {BIND_CONFLICT: ["n1", "n3"]},
            id="a claim already given a node fits only there",
        ),
        pytest.param(
            [
                LOCAL,
                pvc("data", volume="pv1", bound=True),
                pv("pv1", hosts=["n1"], claim="data", phase="Bound"),
                pvc("more", storage="1Gi"),
                pv("pv2", hosts=["n2"]),
            ],
            {NODE_CONFLICT: ["n2", "n3"], BIND_CONFLICT: ["n1", "n3"]},
            id="bound and unbound claims are both checked",
        ),
    ],
)
def test_volume_binding_filter(storage: list[StateObject], expected: dict[str, list[str]]) -> None:
    nodes = [
        node("n1", labels={HOST: "n1", ZONE: "a"}),
        node("n2", labels={HOST: "n2", ZONE: "a"}),
        node("n3", labels={HOST: "n3", ZONE: "b"}),
    ]
    claims = {o.metadata.name for o in storage if isinstance(o, PersistentVolumeClaim)}
    volumes = [claim_volume(c) for c in sorted(claims)]
    assert verdict(nodes, storage, volumes=volumes) == expected


def test_each_claim_needs_its_own_volume() -> None:
    storage: list[StateObject] = [
        LOCAL,
        pvc("a", storage="1Gi"),
        pvc("b", storage="1Gi"),
        pv("n1-x", hosts=["n1"]),
        pv("n1-y", hosts=["n1"]),
        pv("n2-x", hosts=["n2"]),
    ]
    got = verdict(THREE, storage, volumes=[claim_volume("a"), claim_volume("b")])
    assert got == {BIND_CONFLICT: ["n2", "n3"]}


# -- VolumeBinding: which volumes, Reserve and Unreserve, the Bind intent --------------------------


def volumes_of(bind: Bind) -> list[tuple[str, str]]:
    return [(v.claim, v.volume) for v in bind.volumes]


def taken_on(
    node_name: str, storage: list[StateObject], claims: Sequence[str]
) -> list[tuple[str, str]]:
    """(claim, volume) Reserve assumes when pod ``p`` (using ``claims``) is placed on the node."""
    ssn = open_volume_session(
        [*THREE, podgroup("pg"), pod("p", group="pg", volumes=[claim_volume(c) for c in claims])],
        storage,
    )
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    ssn.statement().allocate(task, ssn.nodes.index[node_name])
    plugin = next(p for p in ssn.plugins if isinstance(p, PredicatesPlugin))
    assert plugin.volume_binding is not None
    decision = plugin.volume_binding.decisions[task.uid]
    return [(c.metadata.name, v.metadata.name) for c, v in decision.static]


@pytest.mark.parametrize(
    ("node_name", "storage", "claims", "expected"),
    [
        pytest.param(
            "n1",
            [
                LOCAL,
                pvc("a", storage="10Gi"),
                pv("local-n1", hosts=["n1"]),
                pv("any", storage="20Gi"),
            ],
            ["a"],
            [("a", "local-n1")],
            id="a node's own smaller volume before a larger one every node can use",
        ),
        pytest.param(
            "n2",
            [
                LOCAL,
                pvc("a", storage="10Gi"),
                pv("local-n1", hosts=["n1"]),
                pv("any", storage="20Gi"),
            ],
            ["a"],
            [("a", "any")],
            id="elsewhere the larger one",
        ),
        pytest.param(
            "n1",
            [
                LOCAL,
                pvc("a", storage="1Gi"),
                pv("b-pv", storage="10Gi"),
                pv("a-pv", storage="10Gi"),
            ],
            ["a"],
            [("a", "a-pv")],
            id="equal sizes: the name that sorts first",
        ),
        pytest.param(
            "n1",
            [
                LOCAL,
                pvc("a", storage="1Gi", selector={"matchLabels": {"tier": "gold"}}),
                pv("small", storage="2Gi"),
                pv("gold", storage="20Gi", labels={"tier": "gold"}),
            ],
            ["a"],
            [("a", "gold")],
            id="the selector skips a smaller volume",
        ),
        pytest.param(
            "n1",
            [
                LOCAL,
                pvc("a", storage="1Gi"),
                pv("small", storage="2Gi"),
                pv("mine", storage="50Gi", claim="a"),
            ],
            ["a"],
            [("a", "mine")],
            id="a volume pre-bound to the claim wins over a smaller one",
        ),
        pytest.param(
            "n1",
            [
                LOCAL,
                pvc("a", storage="1Gi"),
                pvc("b", storage="1Gi"),
                pv("x", storage="5Gi"),
                pv("y", storage="5Gi", hosts=["n1"]),
                pv("z", storage="9Gi"),
            ],
            ["a", "b"],
            [("a", "x"), ("b", "y")],
            id="the second claim skips the volume the first took, whichever kind",
        ),
    ],
)
def test_the_volume_a_claim_takes(
    node_name: str,
    storage: list[StateObject],
    claims: list[str],
    expected: list[tuple[str, str]],
) -> None:
    assert taken_on(node_name, storage, claims) == expected


def test_the_smallest_fitting_volume_is_taken_and_smaller_claims_choose_first() -> None:
    storage: list[StateObject] = [
        LOCAL,
        pvc("big", storage="15Gi"),
        pvc("small", storage="5Gi"),
        pv("pv-10", storage="10Gi"),
        pv("pv-20", storage="20Gi"),
        pv("pv-50", storage="50Gi"),
    ]
    sim = run(
        [
            node("n1"),
            podgroup("pg"),
            pod("p", group="pg", volumes=[claim_volume("big"), claim_volume("small")]),
        ],
        storage,
    )
    bind = all_binds(sim)["default/p"]
    assert bind.node == "n1"
    assert volumes_of(bind) == [("small", "pv-10"), ("big", "pv-20")]
    assert bind.volumes[0] == VolumeBind(
        namespace="default",
        claim="small",
        claim_uid="uid-small",
        claim_resource_version="rv-small",
        volume="pv-10",
        volume_resource_version="rv-pv-10",
    )


def test_a_bind_sent_ahead_of_the_session_end_already_carries_its_volume_writes() -> None:
    storage: list[StateObject] = [LOCAL, pvc("small", storage="5Gi"), pv("pv-10", storage="10Gi")]
    objects: list[Obj] = [
        node("n1"),
        podgroup("pg"),
        pod("p", group="pg", volumes=[claim_volume("small")]),
    ]
    snapshot, _ = build_snapshot(
        cluster(objects, storage), scheduler_names=["volcano"], now=NOW, session_id="test"
    )
    told: list[Bind] = []
    result = run_cycle(snapshot, policy(predicates_policy()), REGISTRY, on_bind=told.append)
    assert [volumes_of(b) for b in told] == [[("small", "pv-10")]]
    assert told == result.binds


@pytest.mark.parametrize(
    ("objects", "storage", "bound", "waiting"),
    [
        pytest.param(
            [
                *hosts("n1"),
                podgroup("first", created=1.0),
                pod("pa", group="first", volumes=[claim_volume("a")]),
                podgroup("second", created=2.0),
                pod("pb", group="second", volumes=[claim_volume("b")]),
            ],
            [LOCAL, pvc("a"), pvc("b"), pv("only", hosts=["n1"])],
            {"default/pa": [("a", "only")]},
            {"default/pb": f"0/1 nodes are available: 1 {BIND_CONFLICT}."},
            id="a volume taken in the session is not given to a second claim",
        ),
        pytest.param(
            [
                *hosts("n1"),
                podgroup("gang", min_member=2, created=1.0),
                pod("g-0", group="gang", volumes=[claim_volume("g0")]),
                pod("g-1", group="gang", volumes=[claim_volume("g1")]),
                podgroup("later", created=2.0),
                pod("solo", group="later", volumes=[claim_volume("solo")]),
            ],
            [LOCAL, pvc("g0"), pvc("g1"), pvc("solo"), pv("only", hosts=["n1"])],
            {"default/solo": [("solo", "only")]},
            {},
            id="a discarded gang gives its volumes back",
        ),
    ],
)
def test_the_volumes_placements_take_in_a_session_are_held_until_discarded(
    objects: list[Obj],
    storage: list[StateObject],
    bound: dict[str, list[tuple[str, str]]],
    waiting: dict[str, str],
) -> None:
    """``bound``: each bound pod's (claim, volume) pairs; ``waiting``: the reasons of pods
    expected to wait."""
    sim = run(objects, storage)
    assert {k: volumes_of(b) for k, b in all_binds(sim).items()} == bound
    said = unschedulable(sim)
    for name, reason in waiting.items():
        assert said[name] == reason


def test_pods_sharing_a_claim_share_its_volume() -> None:
    storage: list[StateObject] = [LOCAL, pvc("shared"), pv("local-n2", hosts=["n2"])]
    sim = run(
        [
            *THREE,
            podgroup("pg", min_member=2),
            pod("a", group="pg", volumes=[claim_volume("shared")]),
            pod("b", group="pg", volumes=[claim_volume("shared")]),
        ],
        storage,
    )
    placed = all_binds(sim)
    assert {k: (b.node, volumes_of(b)) for k, b in placed.items()} == {
        "default/a": ("n2", [("shared", "local-n2")]),
        "default/b": ("n2", [("shared", "local-n2")]),
    }


def test_dynamic_provisioning_travels_as_a_selected_node_request() -> None:
    storage: list[StateObject] = [
        storage_class("fast", provisioner=CSI, zones=[["b"]]),
        pvc("scratch", cls="fast"),
    ]
    sim = run(
        [
            node("n1", labels={ZONE: "a"}),
            node("n2", labels={ZONE: "b"}),
            podgroup("pg"),
            pod("p", group="pg", volumes=[claim_volume("scratch")]),
        ],
        storage,
    )
    bind = all_binds(sim)["default/p"]
    assert (bind.node, bind.volumes) == (
        "n2",
        (VolumeBind("default", "scratch", "uid-scratch", "rv-scratch"),),
    )


def test_a_claim_given_a_node_in_the_session_pulls_the_next_pod_there() -> None:
    storage: list[StateObject] = [storage_class("fast", provisioner=CSI), pvc("shared", cls="fast")]
    ssn = open_volume_session(
        [
            *THREE,
            podgroup("pg", min_member=2),
            pod("a", group="pg", volumes=[claim_volume("shared")]),
            pod("b", group="pg", volumes=[claim_volume("shared")]),
        ],
        storage,
    )
    tasks = {t.name: t for t in ssn.jobs["default/pg"].tasks.values()}
    stmt = ssn.statement()
    stmt.allocate(tasks["a"], ssn.nodes.index["n3"])
    assert [
        (r, ssn.nodes.names[i]) for r, m in ssn.predicate(tasks["b"]) for i in np.flatnonzero(m)
    ] == [
        (BIND_CONFLICT, "n1"),
        (BIND_CONFLICT, "n2"),
    ]
    stmt.discard()
    assert ssn.predicate(tasks["b"]) == []


# -- VolumeBinding: Score ------------------------------------------------------------------------


def arr(*values: int) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize(
    ("requested", "capacity", "expected"),
    [
        pytest.param([[50]], [[100]], [50], id="half used: 100 - 50"),
        pytest.param([[100]], [[100]], [0], id="full"),
        pytest.param([[0]], [[100]], [100], id="empty"),
        pytest.param([[150]], [[100]], [0], id="more than the capacity scores as full"),
        pytest.param([[10]], [[0]], [0], id="no capacity scores as full"),
        pytest.param([[1]], [[3]], [67], id="utilisation is truncated: 33 %"),
        pytest.param(
            [[50], [75]], [[100], [100]], [38], id="classes averaged, rounded half up (37.5)"
        ),
    ],
)
def test_capacity_score(
    requested: list[list[int]], capacity: list[list[int]], expected: list[int]
) -> None:
    present = [np.ones(len(r), dtype=bool) for r in requested]
    got = capacity_score([arr(*r) for r in requested], [arr(*c) for c in capacity], present)
    assert got.tolist() == expected


def test_capacity_score_interpolates_with_go_integer_division() -> None:
    # 10 + (0 - 10) * 1 / 3 truncates toward zero (-3), it does not floor (-4)
    got = capacity_score([arr(1)], [arr(100)], [np.ones(1, dtype=bool)], shape=((0, 10), (3, 0)))
    assert got.tolist() == [7]


def score_storage() -> list[StateObject]:
    return [
        LOCAL,
        pvc("data", storage="10Gi"),
        pv("tight", storage="10Gi", hosts=["n1"]),
        pv("roomy", storage="20Gi", hosts=["n2"]),
    ]


def only_predicates() -> str:
    return policy_text("enqueue, allocate", ["gang", "predicates"])


def test_volume_binding_score_is_off_as_in_kubernetes_1_36() -> None:
    sim = run(
        [*hosts("n1", "n2"), podgroup("pg"), pod("p", group="pg", volumes=DATA)],
        score_storage(),
        only_predicates(),
    )
    # no score: the tie goes to the first node by name
    assert all_binds(sim)["default/p"].node == "n1"


def test_volume_binding_score_with_the_feature_gate_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vb, "STORAGE_CAPACITY_SCORING", True)
    objects: list[Obj] = [*hosts("n1", "n2"), podgroup("pg"), pod("p", group="pg", volumes=DATA)]
    ssn = open_volume_session(objects, score_storage(), {"volumebinding.weight": 3})
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    scores = ssn.node_order(task, np.array([0, 1], dtype=np.intp))
    assert scores.tolist() == [0.0, 150.0]  # 10/10 used: 0; 10/20 used: 50; weight 3
    sim = run(objects, score_storage(), only_predicates())
    assert all_binds(sim)["default/p"].node == "n2"


# -- VolumeZone ----------------------------------------------------------------------------------

ZONED = [
    node("z1", labels={ZONE: "a", REGION: "r1"}),
    node("z2", labels={ZONE: "b"}),
    node("z3"),
    node("z4", labels={BETA_ZONE: "a"}),
]
NO_BINDING = {"predicate.VolumeBindingEnable": False}
ONLY_ZONE = {**NO_BINDING, "predicate.NodeVolumeLimitsEnable": False}
ONLY_LIMITS = {**NO_BINDING, "predicate.VolumeZoneEnable": False}


def bound_to(labels: Mapping[str, str]) -> list[StateObject]:
    return [LOCAL, pvc("data", volume="pv1", bound=True), pv("pv1", labels=labels)]


@pytest.mark.parametrize(
    ("storage", "expected"),
    [
        pytest.param(
            bound_to({ZONE: "a"}),
            {ZONE_CONFLICT: ["z2", "z4"]},
            id="a GA zone label: nodes with a zone label elsewhere, or only the beta one, fail",
        ),
        pytest.param(
            bound_to({BETA_ZONE: "a"}),
            {ZONE_CONFLICT: ["z2"]},
            id="a beta zone label also matches the node's GA label",
        ),
        pytest.param(bound_to({ZONE: "a__b"}), {ZONE_CONFLICT: ["z4"]}, id="multi-zone value"),
        pytest.param(bound_to({ZONE: "a__"}), {}, id="a value with an empty zone is ignored"),
        pytest.param(
            bound_to({REGION: "r1"}),
            {ZONE_CONFLICT: ["z2", "z4"]},
            id="region: a node with only a zone label is constrained and lacks it",
        ),
        pytest.param(bound_to({}), {}, id="a volume without zone labels fits everywhere"),
        pytest.param([LOCAL, pvc("data")], {}, id="an unbound WaitForFirstConsumer claim"),
        pytest.param(
            [LOCAL],
            {'persistentvolumeclaim "data" not found': ["z1", "z2", "z3", "z4"]},
            id="a missing claim rejects every node",
        ),
        pytest.param(
            [storage_class("local", mode="Immediate"), pvc("data")],
            {"PersistentVolume had no name": ["z1", "z2", "z3", "z4"]},
            id="an unbound Immediate claim",
        ),
        pytest.param(
            [pvc("data", cls=None)],
            {
                "PersistentVolumeClaim had no pv name and storageClass name": [
                    "z1",
                    "z2",
                    "z3",
                    "z4",
                ]
            },
            id="an unbound claim without a class",
        ),
        pytest.param(
            [pvc("data", cls="gone")],
            {'storageclass.storage.k8s.io "gone" not found': ["z1", "z2", "z3", "z4"]},
            id="an unbound claim of a missing class",
        ),
        pytest.param(
            [LOCAL, pvc("data", volume="gone", bound=True)],
            {'persistentvolume "gone" not found': ["z1", "z2", "z3", "z4"]},
            id="a claim bound to a missing volume",
        ),
    ],
)
def test_volume_zone(storage: list[StateObject], expected: dict[str, list[str]]) -> None:
    assert verdict(ZONED, storage, ONLY_ZONE, volumes=DATA) == expected


def test_volume_zone_ignores_ephemeral_volumes() -> None:
    storage: list[StateObject] = [
        LOCAL,
        pvc("p-scratch", volume="pv1", bound=True, owner=POD_UID),
        pv("pv1", labels={ZONE: "a"}),
    ]
    assert verdict(ZONED, storage, ONLY_ZONE, volumes=[ephemeral_volume("scratch")]) == {}


# -- NodeVolumeLimits ----------------------------------------------------------------------------

LIMITED: list[Obj] = [
    node("c1"),
    node("c2"),
    node("c3"),
    pod("running", node_name="c1", scheduler="default-scheduler", volumes=[claim_volume("held")]),
]
CSI_CLASS = storage_class("csi", provisioner=CSI)


def limits_storage(*more: StateObject) -> list[StateObject]:
    return [
        CSI_CLASS,
        csinode("c1", {CSI: 2}),
        csinode("c2", {CSI: 1, "other.csi": None}),
        pvc("held", cls="csi", volume="vol-held", bound=True),
        pv("vol-held", cls="csi", csi=CSI),
        pvc("one", cls="csi", volume="vol-one", bound=True),
        pv("vol-one", cls="csi", csi=CSI),
        pvc("two", cls="csi", volume="vol-two", bound=True),
        pv("vol-two", cls="csi", csi=CSI),
        *more,
    ]


@pytest.mark.parametrize(
    ("volumes", "more", "expected"),
    [
        pytest.param([claim_volume("one")], [], {}, id="one new volume fits both limits"),
        pytest.param(
            [claim_volume("one"), claim_volume("two")],
            [],
            {MAX_VOLUME_COUNT: ["c1", "c2"]},
            id="two new volumes: over on c1 (1 attached + 2 > 2) and c2 (2 > 1); c3 has no limit",
        ),
        pytest.param(
            [claim_volume("held"), claim_volume("one")],
            [],
            {MAX_VOLUME_COUNT: ["c2"]},
            id="a volume already attached on the node does not count again",
        ),
        pytest.param(
            [claim_volume("one"), claim_volume("fresh")],
            [pvc("fresh", cls="csi")],
            {MAX_VOLUME_COUNT: ["c1", "c2"]},
            id="an unbound claim counts under its class's provisioner",
        ),
        pytest.param(
            [claim_volume("one"), claim_volume("elsewhere")],
            [storage_class("other", provisioner="other.csi"), pvc("elsewhere", cls="other")],
            {},
            id="a driver without allocatable.count has no limit",
        ),
        pytest.param(
            [claim_volume("one"), claim_volume("plain")],
            [pvc("plain", cls="csi", volume="nfs", bound=True), pv("nfs", cls="csi")],
            {},
            id="a volume that is not CSI is not counted",
        ),
        pytest.param(
            [claim_volume("missing")],
            [],
            {
                'looking up PVC default/missing: persistentvolumeclaim "missing" not found': [
                    "c1",
                    "c2",
                    "c3",
                ]
            },
            id="a missing claim rejects every node",
        ),
    ],
)
def test_node_volume_limits(
    volumes: list[dict[str, Any]], more: list[StateObject], expected: dict[str, list[str]]
) -> None:
    storage = limits_storage(*more)
    assert verdict(LIMITED, storage, ONLY_LIMITS, volumes=volumes) == expected


def test_placed_volumes_count_against_the_next_pod() -> None:
    sim = run(
        [
            node("c2"),
            podgroup("first", created=1.0),
            pod("a", group="first", volumes=[claim_volume("one")]),
            podgroup("second", created=2.0),
            pod("b", group="second", volumes=[claim_volume("two")]),
        ],
        limits_storage(),
    )
    assert set(all_binds(sim)) == {"default/a"}
    assert unschedulable(sim)["default/b"] == f"0/1 nodes are available: 1 {MAX_VOLUME_COUNT}."


def test_simulate_frees_the_volumes_of_removed_pods() -> None:
    objects: list[Obj] = [
        node("c2"),
        pod(
            "running", node_name="c2", scheduler="default-scheduler", volumes=[claim_volume("held")]
        ),
        podgroup("pg"),
        pod("p", group="pg", volumes=[claim_volume("one")]),
    ]
    ssn = open_volume_session(objects, limits_storage(), NO_BINDING)
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    running = next(iter(ssn.nodes.tasks[0].values()))
    assert ssn.simulate_predicate(task, 0) == [MAX_VOLUME_COUNT]
    assert ssn.simulate_predicate(task, 0, removed=[running]) == []
    assert ssn.simulate_predicate(task, 0, removed=[running], added=[running]) == [MAX_VOLUME_COUNT]


# -- switches and the whole engine ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(None, UNBOUND_IMMEDIATE, id="VolumeBinding on by default"),
        pytest.param(
            NO_BINDING,
            {"PersistentVolume had no name": ["n1", "n2", "n3"]},
            id="VolumeBindingEnable false leaves VolumeZone's verdict",
        ),
        pytest.param(
            {**NO_BINDING, "predicate.VolumeZoneEnable": False},
            {},
            id="VolumeZoneEnable false too",
        ),
    ],
)
def test_switches(args: Mapping[str, Any] | None, expected: object) -> None:
    storage: list[StateObject] = [storage_class("fast", mode="Immediate"), pvc("data", cls="fast")]
    assert verdict(THREE, storage, args, volumes=DATA) == expected


SCENARIO = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {kubernetes.io/hostname: n1, topology.kubernetes.io/zone: a}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2, labels: {kubernetes.io/hostname: n2, topology.kubernetes.io/zone: b}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec: {drivers: [{name: ebs.csi.aws.com, nodeID: n1, allocatable: {count: 0}}]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-n2}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/disk}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n2]}]
status: {phase: Available}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: ebs-1, labels: {topology.kubernetes.io/zone: a}}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: db-data, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {requests: {storage: 50Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: logs
  namespace: default
  annotations: {pv.kubernetes.io/bind-completed: "yes"}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  volumeName: ebs-1
  resources: {requests: {storage: 10Gi}}
status: {phase: Bound}
---
apiVersion: v1
kind: Pod
metadata: {name: db, namespace: default}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: db-data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: shipper, namespace: default}
spec:
  schedulerName: volcano
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  volumes: [{name: logs, persistentVolumeClaim: {claimName: logs}}]
"""


def test_caldera_simulate_reads_storage_manifests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(SCENARIO)
    assert main(["simulate", "--output", "json", str(path)]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert out.err == ""
    # db: its local volume lives on n2; shipper: its EBS volume is in zone a (n1), where the
    # CSINode allows no EBS volume at all
    assert {b["pod"]: b["node"] for b in doc["binds"]} == {"default/db": "n2"}
    assert doc["unschedulable"]["default/shipper"] == (
        f"0/2 nodes are available: 1 {MAX_VOLUME_COUNT}, 1 {ZONE_CONFLICT}."
    )


def test_between_simulate_cycles_the_chosen_volume_is_bound_to_its_claim(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(SCENARIO)
    loaded = load_manifests([str(path)])
    sim = simulate(loaded.state, policy(), REGISTRY, scheduler_names=["volcano"], cycles=2)
    state = sim.state
    volume = state.persistent_volumes["local-n2"]
    claim = state.persistent_volume_claims["default/db-data"]
    assert volume.status.phase == "Bound"
    assert volume.spec.claim_ref is not None
    assert (volume.spec.claim_ref.namespace, volume.spec.claim_ref.name) == ("default", "db-data")
    assert claim.spec.volume_name == "local-n2"
    assert claim.status.phase == "Bound"
    assert claim.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    # the second cycle sees a bound claim on a running pod and decides nothing new
    assert [b.name for b in sim.cycles[1].result.binds] == []
    assert not sim.cycles[1].problems


def test_volumebinding_shape_reshapes_the_capacity_score(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vb, "STORAGE_CAPACITY_SCORING", True)
    objects: list[Obj] = [*hosts("n1", "n2"), podgroup("pg"), pod("p", group="pg", volumes=DATA)]
    # packing instead of spreading: full volumes score 10 (× 10), empty ones 0
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    ssn = open_volume_session(objects, score_storage(), {"volumebinding.shape": shape})
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    scores = ssn.node_order(task, np.array([0, 1], dtype=np.intp))
    assert scores.tolist() == [100.0, 50.0]  # 10/10 used: 100; 10/20 used: 50


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        pytest.param(
            [{"utilization": 50, "score": 1}, {"utilization": 20, "score": 2}],
            "utilization values must be sorted in increasing order",
            id="utilization must increase",
        ),
        pytest.param(
            [{"utilization": 0, "score": 11}], "less than or equal to 10", id="score above 10"
        ),
        pytest.param(
            [{"utilization": 101, "score": 1}],
            "less than or equal to 100",
            id="utilization above 100",
        ),
        pytest.param([], "at least 1 item", id="an empty shape"),
        pytest.param([{"utilization": 0}], "score", id="a point without a score"),
    ],
)
def test_an_invalid_volumebinding_shape_is_rejected_naming_the_key(
    shape: list[dict[str, int]], message: str
) -> None:
    from caldera.errors import ConfigError

    text = policy_text(
        "enqueue, allocate",
        ["gang", "predicates"],
        arguments={"predicates": {"volumebinding.shape": shape}},
    )
    with pytest.raises(ConfigError, match=r"volumebinding\.shape") as caught:
        policy(text)
    assert message in str(caught.value)
