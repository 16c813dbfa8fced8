"""deviceshare's older GPU modes: whole cards by count (GPUNumberEnable) and cards shared by
memory (GPUSharingEnable), as Volcano's ``gpushare`` devices decide (``predicateGPUbyNumber``,
``predicateGPUbyMemory``, ``getUnhealthyGPUs``, ``Allocate``)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from builders import Obj, node, pod, policy_text, scenario
from caldera.errors import ConfigError
from caldera.framework.policy import load_policy
from caldera.framework.registry import Registry
from caldera.plugins.deviceshare.gpushare import GPU_INDEX, GPU_MEMORY, GPU_NUMBER
from caldera.simulate.runner import Simulation


def gpu_policy(**arguments: bool) -> str:
    return policy_text(
        "enqueue, allocate",
        ["priority", "gang"],
        ["predicates", "deviceshare", "nodeorder"],
        arguments={"deviceshare": {f"deviceshare.{k}": v for k, v in arguments.items()}},
    )


def gpu_node(cards: int, memory: int, *, unhealthy: str = "") -> Obj:
    return node(
        "gpu-1",
        cpu="32",
        memory="128Gi",
        extra={GPU_NUMBER: str(cards), GPU_MEMORY: str(memory)},
        annotations={"volcano.sh/gpu-unhealthy-ids": unhealthy} if unhealthy else None,
    )


def cards(sim: Simulation) -> dict[str, str]:
    return {b.name: b.annotations.get(GPU_INDEX, "") for b in sim.cycles[0].result.binds}


def reasons(sim: Simulation) -> dict[str, str]:
    return {c.name: c.message for c in sim.cycles[0].result.pod_conditions}


BY_NUMBER = {"GPUNumberEnable": True}
BY_MEMORY = {"GPUSharingEnable": True}


@pytest.mark.parametrize(
    ("mode", "objs", "placed", "waiting"),
    [
        pytest.param(
            BY_NUMBER,
            [
                gpu_node(4, 64000),
                pod("a", cpu="1", limits={GPU_NUMBER: "2"}, created=1.0),
                pod("b", cpu="1", limits={GPU_NUMBER: "1"}, created=2.0),
            ],
            {"a": "0,1", "b": "2"},
            {},
            id="GPU number hands out whole idle cards, lowest first",
        ),
        pytest.param(
            BY_NUMBER,
            [
                gpu_node(4, 64000, unhealthy="2"),
                pod(
                    "running",
                    cpu="1",
                    limits={GPU_NUMBER: "1"},
                    node_name="gpu-1",
                    phase="Running",
                    annotations={GPU_INDEX: "0"},
                ),
                pod("one", cpu="1", limits={GPU_NUMBER: "1"}, created=1.0),
                pod("two", cpu="1", limits={GPU_NUMBER: "2"}, created=2.0),
            ],
            # cards 1 and 3 are idle (0 is taken, 2 unhealthy): one pod gets card 1, the other
            # waits
            {"one": "1"},
            {"two": "GpuNumber no enough gpu number on node"},
            id="GPU number counts the cards running pods hold and skips unhealthy ones",
        ),
        pytest.param(
            BY_MEMORY,
            [
                gpu_node(2, 32000),  # 16000 per card
                pod("a", cpu="1", limits={GPU_MEMORY: "10000"}, created=1.0),
                pod("b", cpu="1", limits={GPU_MEMORY: "10000"}, created=2.0),
                pod("c", cpu="1", limits={GPU_MEMORY: "7000"}, created=3.0),
                pod("d", cpu="1", limits={GPU_MEMORY: "6000"}, created=4.0),
            ],
            # 27,000 of 32,000 asked would pass a node-wide fit; no card has 7,000 left for c
            {"a": "0", "b": "1", "d": "0"},
            {"c": "GpuShare no enough gpu memory on node"},
            id="GPU sharing fits a pod on one card by memory",
        ),
        pytest.param(
            BY_NUMBER,
            [
                node(
                    "gpu-1",
                    cpu="32",
                    memory="128Gi",
                    extra={GPU_NUMBER: "1000000000", GPU_MEMORY: "1"},
                ),
                pod("a", cpu="1", limits={GPU_NUMBER: "2"}, created=1.0),
            ],
            {"a": "0,1"},
            {},
            id="a node advertising an absurd number of cards is read up to a bound",
        ),
    ],
)
def test_each_older_gpu_mode_hands_out_the_cards_volcano_would(
    mode: dict[str, bool], objs: list[Obj], placed: dict[str, str], waiting: dict[str, str]
) -> None:
    """``placed``: the card indexes each bound pod is given; ``waiting``: words of the reason of
    each pod left waiting."""
    sim = scenario(objs, policy_yaml=gpu_policy(**mode))
    assert cards(sim) == placed
    said = reasons(sim)
    assert sorted(said) == sorted(waiting)
    for name, words in waiting.items():
        assert words in said[name]


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        pytest.param(
            {"GPUSharingEnable": True, "GPUNumberEnable": True},
            "cannot both be true",
            id="both older modes",
        ),
        pytest.param(
            {"GPUNumberEnable": True, "VGPUEnable": True},
            "cannot be used with deviceshare.VGPUEnable",
            id="an older mode with HAMi's vGPU",
        ),
    ],
)
def test_the_gpu_modes_exclude_each_other_at_policy_load(
    arguments: Mapping[str, bool], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_policy(gpu_policy(**arguments), Registry.from_entry_points())
    assert caught.value.key == "tiers[1].plugins[1].arguments"
    assert says in str(caught.value)
