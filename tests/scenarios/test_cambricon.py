"""Cambricon MLUs end to end: HAMi's sMLU dialect through deviceshare (``deviceshare.Vendors:
[cambricon]``), from the node's capacity to the annotations Cambricon's device plugin reads."""

from __future__ import annotations

from typing import Any

import pytest
from test_deviceshare import deviceshare_policy

from builders import REGISTRY, Obj, binds, bound_with, node, pod, policy, state_of
from caldera.errors import ConfigError
from caldera.simulate.runner import Simulation, simulate

COUNT, MEMORY, CORES = (
    "cambricon.com/vmlu",
    "cambricon.com/mlu.smlu.vmemory",
    "cambricon.com/mlu.smlu.vcore",
)


def mlu_node(
    name: str, mlus: int = 2, vmemory_per_mlu: int = 64, advertised: int | None = None
) -> Obj:
    """A node whose Cambricon plugin in sMLU mode publishes ``mlus`` MLUs of
    ``vmemory_per_mlu`` x 256 MiB (and ``advertised`` vMLUs, if given)."""
    capacity = {CORES: str(100 * mlus), MEMORY: str(vmemory_per_mlu * mlus)}
    if advertised is not None:
        capacity[COUNT] = str(advertised)
    return node(name, cpu="32", memory="128Gi", extra=capacity, capacity=capacity)


def asks(count: int, vmemory: int | None = None, cores: int | None = None) -> dict[str, str]:
    out = {COUNT: str(count)}
    if vmemory is not None:
        out[MEMORY] = str(vmemory)
    if cores is not None:
        out[CORES] = str(cores)
    return out


def run(*objects: Obj, **arguments: Any) -> Simulation:
    conf = deviceshare_policy(Vendors=["cambricon"], **arguments)
    return simulate(
        state_of(objects), policy(conf, REGISTRY), REGISTRY, scheduler_names=["volcano"]
    )


def test_an_smlu_is_bound_with_the_profile_cambricons_device_plugin_reads() -> None:
    sim = run(mlu_node("n1"), pod("p", extra=asks(1, 8, 25)))
    assert binds(sim) == {"default/p": "n1"}
    notes = bound_with(sim, "p")
    # walked from the last MLU: n1-cambricon-mlu-1; 8 units of 256 MiB
    assert notes["hami.io/cambricon-mlu-devices-allocated"] == "n1-cambricon-mlu-1,MLU,2048,25:;"
    assert notes["hami.io/cambricon-mlu-devices-to-allocate"] == (
        "n1-cambricon-mlu-1,MLU,2048,25:;"
    )
    assert notes["CAMBRICON_DSMLU_PROFILE"] == "1_25_8"
    assert notes["CAMBRICON_DSMLU_ASSIGNED"] == "false"
    assert notes["hami.io/vgpu-node"] == "n1"


def test_mlus_share_by_memory_until_a_card_is_full() -> None:
    # each MLU has 64 x 256 MiB; three pods of 40 units: two fit (one per MLU), the third not
    sim = run(mlu_node("n1"), *(pod(f"p{i}", extra=asks(1, 40, 10)) for i in range(3)))
    assert len(binds(sim)) == 2
    cards = {
        bound_with(sim, p)["CAMBRICON_DSMLU_PROFILE"][0]
        for p in ("p0", "p1", "p2")
        if any(b.name == p for r in sim.cycles for b in r.result.binds)
    }
    assert cards == {"0", "1"}
    (waiting,) = [
        c for c in sim.cycles[0].result.pod_conditions if f"default/{c.name}" not in binds(sim)
    ]
    assert waiting.message == "0/1 nodes are available: 1 CardInsufficientMemory."


def test_a_pod_naming_no_memory_takes_a_whole_mlu() -> None:
    sim = run(mlu_node("n1", mlus=1), pod("whole", extra=asks(1)), pod("more", extra=asks(1, 1, 1)))
    assert binds(sim) == {"default/whole": "n1"}
    assert bound_with(sim, "whole")["CAMBRICON_DSMLU_PROFILE"] == "0_100_64"


def test_without_the_vendor_named_mlus_are_ordinary_extended_resources() -> None:
    # Cambricon's own device plugin: cambricon.com/mlu counted against node allocatable
    sim = simulate(
        state_of([mlu_node("n1", advertised=2), pod("p", extra=asks(2))]),
        policy(deviceshare_policy(), REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
    )
    assert binds(sim) == {"default/p": "n1"}
    (bind,) = [b for r in sim.cycles for b in r.result.binds]
    assert "hami.io/cambricon-mlu-devices-allocated" not in dict(bind.annotations)


def test_an_unknown_vendor_is_refused_at_load_naming_the_key() -> None:
    with pytest.raises(ConfigError) as caught:
        policy(deviceshare_policy(Vendors=["cambrian"]), REGISTRY)
    assert caught.value.key == "tiers[1].plugins[3].arguments['deviceshare.Vendors']"
    assert "unknown vendor 'cambrian' (known: " in str(caught.value)


def test_the_vendors_may_be_named_in_one_comma_separated_string() -> None:
    sim = simulate(
        state_of([mlu_node("n1"), pod("p", extra=asks(1, 8, 25))]),
        policy(deviceshare_policy(Vendors="cambricon, ascend"), REGISTRY),
        REGISTRY,
        scheduler_names=["volcano"],
    )
    assert "CAMBRICON_DSMLU_PROFILE" in bound_with(sim, "p")
