"""MetaX sGPU app classes across pods, end to end: who already holds a card (HAMi's
``PodInfos``, rebuilt from the pods on the node and the session's own placements) decides
whether an online or offline pod may share it (``checkAppClass``), which card an online pod gets
(``prioritizeOnlineDevices``) and which node it prefers (``scoreOnlineDevices``), as
``pkg/device/metax/sdevice.go`` of HAMi v2.10.0 does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_deviceshare import deviceshare_policy

from builders import REGISTRY, Obj, binds, node, pod, policy, state_of
from caldera.devices.metax_colocation import APP_CLASS
from caldera.simulate.runner import Simulation, simulate

REGISTER = "metax-tech.com/node-gpu-devices"
ALLOCATED = "hami.io/metax-sgpu-devices-allocated"
SGPU = {"metax-tech.com/sgpu": "1", "metax-tech.com/vmemory": "4"}


def sgpu_node(name: str, cards: int = 1) -> Obj:
    """A node of ``cards`` C500 cards in sGPU mode, best-effort, 16 shares each."""
    registered = [
        {"uuid": f"{name}-{i}", "model": "C500", "totalDevCount": 16, "totalCompute": 100,
         "totalVRam": 65536, "numa": 0, "healthy": True, "qosPolicy": "best-effort"}
        for i in range(cards)
    ]  # fmt: skip
    capacity = {"metax-tech.com/sgpu": str(16 * cards)}
    return node(
        name,
        cpu="32",
        memory="64Gi",
        extra=capacity,
        capacity=capacity,
        annotations={REGISTER: json.dumps(registered)},
    )


def sgpu_pod(name: str, app_class: str, *, card: str = "", **more: Any) -> Obj:
    """A pod of ``app_class`` ("": none) asking a 4 GiB sGPU; with ``card``, running on it
    already."""
    notes = {APP_CLASS: app_class} if app_class else {}
    if card:
        notes |= {"hami.io/vgpu-node": card.rsplit("-", 1)[0],
                  ALLOCATED: f"{card},Metax-SGPU,4096,0:;"}  # fmt: skip
        more["node_name"] = card.rsplit("-", 1)[0]
    return pod(name, cpu=None, memory=None, limits=SGPU, annotations=notes, **more)


def run(*objects: Obj) -> Simulation:
    conf = deviceshare_policy(Vendors=["metax"], GPUSchedulerPolicy="binpack", ScheduleWeight=1)
    return simulate(
        state_of(objects), policy(conf, REGISTRY), REGISTRY, scheduler_names=["volcano"]
    )


def card_of(sim: Simulation, name: str) -> str:
    (bind,) = [b for r in sim.cycles for b in r.result.binds if b.name == name]
    return bind.annotations[ALLOCATED].split(",")[0]


def test_an_online_pod_shares_a_card_running_offline_work() -> None:
    """``checkAppClass``: online work may join a card of offline work (it preempts it there)."""
    sim = run(sgpu_node("m1"), sgpu_pod("batch", "offline", card="m1-0"), sgpu_pod("svc", "online"))
    assert binds(sim) == {"default/svc": "m1"}
    assert card_of(sim, "svc") == "m1-0"


@pytest.mark.parametrize(
    "holder",
    [
        pytest.param(sgpu_pod("svc", "online", card="m1-0"), id="an online pod running there"),
        pytest.param(sgpu_pod("plain", "", card="m1-0"), id="a pod of no app class running there"),
    ],
)
def test_offline_work_stays_off_a_card_it_may_not_share(holder: Obj) -> None:
    """``checkAppClass``: offline work never where online work runs, and pods of an app class
    never beside pods of none; the node's only card says so."""
    sim = run(sgpu_node("m1"), holder, sgpu_pod("batch", "offline"))
    assert binds(sim) == {}
    (waiting,) = [c for c in sim.cycles[-1].result.pod_conditions if c.name == "batch"]
    assert "CardAppClassMismatch" in waiting.message


@pytest.mark.parametrize(
    ("first", "then", "both"),
    [
        pytest.param("offline", "online", True, id="online work joins the offline pod placed"),
        pytest.param("online", "offline", False, id="offline work kept off the online pod placed"),
    ],
)
def test_a_pod_placed_this_session_counts_as_a_holder(first: str, then: str, both: bool) -> None:
    """The session's own placement holds the node's one card for the pod created after it."""
    sim = run(sgpu_node("m1"), sgpu_pod("first", first), sgpu_pod("then", then, created=2e9))
    placed = {"default/first": "m1", "default/then": "m1"}
    assert binds(sim) == (placed if both else {"default/first": "m1"})


def test_an_online_pod_takes_the_card_with_the_fewest_online_pods() -> None:
    """``prioritizeOnlineDevices``: binpack would take the fuller card, but an online pod goes
    where fewer online pods run."""
    sim = run(
        sgpu_node("m1", cards=2),
        sgpu_pod("a", "online", card="m1-0"),
        sgpu_pod("b", "online", card="m1-0"),
        sgpu_pod("c", "online", card="m1-1"),
        sgpu_pod("svc", "online"),
    )
    assert card_of(sim, "svc") == "m1-1"


def test_an_online_pod_prefers_the_node_where_fewer_online_pods_run() -> None:
    """``scoreOnlineDevices``: of two nodes alike but for their online pods, the one with
    fewer."""
    sim = run(
        sgpu_node("m1"),
        sgpu_node("m2"),
        sgpu_pod("a", "online", card="m1-0"),
        sgpu_pod("b", "online", card="m1-0"),
        sgpu_pod("c", "online", card="m2-0"),
        sgpu_pod("svc", "online"),
    )
    assert binds(sim) == {"default/svc": "m2"}
