"""Resource names HAMi's device configuration renames (``deviceshare.DeviceConfigFile``, the
file HAMi's scheduler reads with ``--device-config-file``), end to end: pods asking the
configured names get cards, a default name configured away is left to its own device plugin,
cards are read from node capacity under the configured names, and the namespace quota counts
them; a file that cannot be read refuses the policy naming the key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_deviceshare import deviceshare_policy, quota

from builders import REGISTER, REGISTRY, Obj, binds, card, node, pod, policy, register, state_of
from caldera.errors import ConfigError
from caldera.models.core import ResourceQuota
from caldera.simulate.runner import Simulation, simulate

RENAMED = """\
nvidia:
  resourceCountName: hami.io/gpu
  resourceMemoryName: hami.io/gpumem
cambricon:
  resourceCoreName: cambricon.com/smlu.core
"""


def run(
    tmp_path: Path, *objects: Obj, quotas: tuple[ResourceQuota, ...] = (), **arguments: Any
) -> Simulation:
    path = tmp_path / "device-config.yaml"
    path.write_text(RENAMED)
    conf = deviceshare_policy(DeviceConfigFile=str(path), **arguments)
    state = state_of(objects)
    for q in quotas:
        state.add(q)
    return simulate(state, policy(conf, REGISTRY), REGISTRY, scheduler_names=["volcano"])


def hami_node(name: str) -> Obj:
    """An NVIDIA node whose HAMi device plugin advertises the renamed count."""
    return node(
        name, extra={"hami.io/gpu": "10"}, annotations={REGISTER: register(card(f"{name}-gpu"))}
    )


def test_a_pod_asking_the_configured_names_gets_a_card(tmp_path: Path) -> None:
    sim = run(
        tmp_path, hami_node("n1"), pod("p", limits={"hami.io/gpu": "1", "hami.io/gpumem": "3000"})
    )
    assert binds(sim) == {"default/p": "n1"}
    (bind,) = sim.cycles[0].result.binds
    assert bind.annotations["hami.io/vgpu-devices-allocated"] == "n1-gpu,NVIDIA,3000,0:;"


def test_the_default_name_configured_away_is_left_to_its_own_device_plugin(
    tmp_path: Path,
) -> None:
    """``nvidia.com/gpu`` is not HAMi's here: an ordinary extended resource, which the node
    does not advertise."""
    sim = run(tmp_path, hami_node("n1"), pod("p", limits={"nvidia.com/gpu": "1"}))
    assert binds(sim) == {}
    (waiting,) = sim.cycles[-1].result.pod_conditions
    assert "Insufficient nvidia.com/gpu" in waiting.message


def test_cards_are_read_from_node_capacity_under_the_configured_name(tmp_path: Path) -> None:
    capacity = {"cambricon.com/smlu.core": "100", "cambricon.com/mlu.smlu.vmemory": "64"}
    mlu = node("m1", cpu="32", memory="64Gi", extra=capacity, capacity=capacity)
    asks = {"cambricon.com/vmlu": "1", "cambricon.com/smlu.core": "30"}
    sim = run(tmp_path, mlu, pod("p", limits=asks), Vendors=["cambricon"])
    assert binds(sim) == {"default/p": "m1"}
    (bind,) = sim.cycles[0].result.binds
    assert bind.annotations["hami.io/cambricon-mlu-devices-allocated"].endswith(",30:;")


def test_the_namespace_quota_counts_the_configured_memory_name(tmp_path: Path) -> None:
    """§6 on ``limits.hami.io/gpumem``: 4000 MiB allowed, the second 3000 MiB pod waits."""
    asks = {"hami.io/gpu": "1", "hami.io/gpumem": "3000"}
    sim = run(
        tmp_path,
        hami_node("n1"),
        pod("a", limits=asks),
        pod("b", limits=asks, created=2e9),
        quotas=(quota("default", {"limits.hami.io/gpumem": "4000"}),),
    )
    assert binds(sim) == {"default/a": "n1"}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        pytest.param(None, "cannot read", id="no such file"),
        pytest.param(
            "nvidia:\n  resourceCountName: 7\n", "nvidia.resourceCountName", id="a bad field"
        ),
    ],
)
def test_a_device_config_that_cannot_be_read_refuses_the_policy(
    tmp_path: Path, content: str | None, says: str
) -> None:
    path = tmp_path / "device-config.yaml"
    if content is not None:
        path.write_text(content)
    conf = deviceshare_policy(DeviceConfigFile=str(path))
    with pytest.raises(ConfigError, match=says) as caught:
        policy(conf, REGISTRY)
    assert caught.value.key is not None and "deviceshare.DeviceConfigFile" in caught.value.key
