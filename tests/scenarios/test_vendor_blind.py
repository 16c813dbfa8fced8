"""Queues, gangs and preemption do not care which vendor a shared device is: each dialect's
device count (``nvidia.com/gpu``, ``hygon.com/dcunum``, ``huawei.com/Ascend910B3``,
``cambricon.com/vmlu``...) is a queue resource, as Volcano's ``GetIgnoredDevices`` leaves it
(only memory and cores are ignored), while its cards are placed by deviceshare's walk, not by
the node's resource fit."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from test_deviceshare import deviceshare_policy, helm_preempting_policy, tenants_and_preemptor

from builders import (
    REGISTRY,
    Obj,
    binds,
    card,
    gpu_node,
    node,
    pod,
    podgroup,
    policy,
    queue,
    state_of,
)
from caldera.devices.ascend import ASCEND
from caldera.devices.cambricon import CAMBRICON_MLU
from caldera.devices.hygon import HYGON_DCU
from caldera.devices.iluvatar import ILUVATAR
from caldera.devices.model import Grant
from caldera.devices.mthreads import MTHREADS
from caldera.devices.nvidia import NVIDIA
from caldera.devices.vendor import Vendor
from caldera.simulate.runner import Simulation, simulate

(A910B3,) = [v for v in ASCEND if v.name == "Ascend910B3"]
(BI_V150,) = [v for v in ILUVATAR if v.name == "BI-V150"]


@dataclass(frozen=True)
class Dialect:
    """One vendor's card as a test needs it: four tenants of ``unit`` MiB fill it."""

    vendor: Vendor
    arguments: dict[str, Any]
    node: Callable[[str], Obj]
    """A node with one card, ``<node>-card`` (Cambricon: the id HAMi gives it)."""
    asks: Callable[[], dict[str, str]]
    """A container's limits for one tenant's share (``unit`` MiB, ``cores``)."""
    unit: int
    cores: int
    card: str = "{node}-card"
    """The card's id on a node (a capacity-read vendor names it after the node)."""

    def card_of(self, node_name: str) -> str:
        return self.card.format(node=node_name)

    def held(self, node_name: str) -> dict[str, str]:
        """The annotations of a running pod holding one tenant's share of the card."""
        grant = Grant(self.card_of(node_name), self.vendor.name, self.unit, self.cores)
        text = self.vendor.encode([[grant]])
        return {self.vendor.keys.node: node_name, self.vendor.keys.allocated: text}


def _hygon_node(name: str) -> Obj:
    text = f"{name}-card,10,16000,100,DCU-Z100,0,true:"
    return node(name, cpu="32", memory="64Gi", annotations={HYGON_DCU.register_annotation: text})


def _ascend_node(name: str) -> Obj:
    npu = {
        "ID": f"{name}-card",
        "Index": 0,
        "Count": 4,
        "Devmem": 65536,
        "Devcore": 20,
        "Type": "Ascend910B3",
        "Health": True,
    }
    annotations = {A910B3.register_annotation: json.dumps([npu])}
    return node(name, cpu="32", memory="64Gi", annotations=annotations)


def _mlu_node(name: str) -> Obj:
    capacity = {"cambricon.com/mlu.smlu.vcore": "100", "cambricon.com/mlu.smlu.vmemory": "64"}
    return node(name, cpu="32", memory="64Gi", extra=capacity, capacity=capacity)


def _iluvatar_node(name: str) -> Obj:
    text = f"{name}-card,4,65536,100,BI-V150,0,true:"
    return node(name, cpu="32", memory="64Gi", annotations={BI_V150.register_annotation: text})


def _mthreads_node(name: str) -> Obj:
    capacity = {"mthreads.com/sgpu-core": "16", "mthreads.com/sgpu-memory": "96"}
    return node(name, cpu="32", memory="64Gi", extra=capacity, capacity=capacity)


DIALECTS = {
    "NVIDIA": Dialect(
        NVIDIA,
        {},
        lambda n: gpu_node(n, card(f"{n}-card", 16000)),
        lambda: {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"},
        4000,
        0,
    ),
    "Hygon DCU": Dialect(
        HYGON_DCU,
        {},
        _hygon_node,
        lambda: {"hygon.com/dcunum": "1", "hygon.com/dcumem": "4000", "hygon.com/dcucores": "10"},
        4000,
        10,
    ),
    "Ascend 910B3": Dialect(
        A910B3,
        {"AscendEnable": True},
        _ascend_node,
        lambda: {"huawei.com/Ascend910B3": "1", "huawei.com/Ascend910B3-memory": "16384"},
        16384,
        5,
    ),
    "Cambricon MLU": Dialect(
        CAMBRICON_MLU,
        {"Vendors": ["cambricon"]},
        _mlu_node,
        lambda: {
            "cambricon.com/vmlu": "1",
            "cambricon.com/mlu.smlu.vmemory": "16",
            "cambricon.com/mlu.smlu.vcore": "10",
        },
        4096,
        10,
        "{node}-cambricon-mlu-0",
    ),
    "Iluvatar BI-V150": Dialect(
        BI_V150,
        {"Vendors": ["iluvatar"]},
        _iluvatar_node,
        lambda: {
            "iluvatar.ai/BI-V150-vgpu": "1",
            "iluvatar.ai/BI-V150.vMem": "64",
            "iluvatar.ai/BI-V150.vCore": "25",
        },
        16384,
        25,
    ),
    "Moore Threads": Dialect(
        MTHREADS,
        {"Vendors": ["mthreads"]},
        _mthreads_node,
        lambda: {
            "mthreads.com/vgpu": "1",
            "mthreads.com/sgpu-memory": "24",
            "mthreads.com/sgpu-core": "4",
        },
        12288,
        4,
        "{node}-mthreads-0",
    ),
}
CASES = pytest.mark.parametrize("dialect", DIALECTS.values(), ids=DIALECTS.keys())


def run(dialects: list[Dialect], objects: list[Obj], text: str | None = None) -> Simulation:
    arguments: dict[str, Any] = {}
    for d in dialects:
        for key, value in d.arguments.items():
            if key == "Vendors":
                arguments[key] = [*arguments.get(key, []), *value]
            else:
                arguments[key] = value
    conf = text if text is not None else deviceshare_policy(**arguments)
    return simulate(
        state_of(objects), policy(conf, REGISTRY), REGISTRY, scheduler_names=["volcano"], cycles=2
    )


@CASES
def test_a_queues_capability_on_the_vendors_device_count_holds(dialect: Dialect) -> None:
    count = dialect.vendor.count_resource
    objs: list[Obj] = [
        dialect.node("n1"),
        queue("capped", capability={count: "1"}),
        *(podgroup(f"g{i}", queue="capped") for i in range(2)),
        *(pod(f"p{i}", group=f"g{i}", extra=dialect.asks()) for i in range(2)),
    ]
    sim = run([dialect], objs)
    # the card has room for both; the queue's capability lets one through
    assert len(binds(sim)) == 1
    messages = [c.message for c in sim.cycles[-1].result.pod_conditions if c.message]
    assert messages == [
        f"queue capped is at its deserved share: {count} 1 held + 1 requested > 1 deserved"
    ]


@CASES
def test_without_a_capability_the_count_no_node_advertises_does_not_hold_a_queue_back(
    dialect: Dialect,
) -> None:
    objs: list[Obj] = [dialect.node("n1"), *(pod(f"p{i}", extra=dialect.asks()) for i in range(3))]
    assert len(binds(run([dialect], objs))) == 3


def test_a_gang_across_two_vendors_starts_all_or_nothing() -> None:
    nvidia, mlu = DIALECTS["NVIDIA"], DIALECTS["Cambricon MLU"]
    members = [
        pod("train-gpu", group="mixed", extra=nvidia.asks()),
        pod(
            "train-mlu", group="mixed", extra={**mlu.asks(), "cambricon.com/mlu.smlu.vmemory": "96"}
        ),
    ]
    # the MLU member asks 96 x 256 MiB of a 64-unit MLU: the gang cannot start, and its GPU
    # member gives its card back
    objs = [nvidia.node("gpu"), mlu.node("mlu"), podgroup("mixed", min_member=2), *members]
    assert binds(run([nvidia, mlu], objs)) == {}
    members[1] = pod("train-mlu", group="mixed", extra=mlu.asks())
    objs = [nvidia.node("gpu"), mlu.node("mlu"), podgroup("mixed", min_member=2), *members]
    assert binds(run([nvidia, mlu], objs)) == {
        "default/train-gpu": "gpu",
        "default/train-mlu": "mlu",
    }


@CASES
def test_a_high_priority_pod_preempts_a_tenant_of_the_full_shared_card(dialect: Dialect) -> None:
    objs = tenants_and_preemptor(
        dialect.node("n1"),
        held=dialect.held("n1"),
        tenant=dialect.asks(),
        preemptor=dialect.asks(),
    )
    sim = run([dialect], objs, helm_preempting_policy(**dialect.arguments))
    assert len(sim.cycles[0].result.evictions) == 1  # one tenant's share is room enough
    assert binds(sim) == {"default/high-0": "n1"}
    allocated = sim.bind_annotations["default/high-0"][dialect.vendor.keys.allocated]
    assert allocated.startswith(f"{dialect.card_of('n1')},{dialect.vendor.name},{dialect.unit},")
