"""``caldera shard-controller``'s decisions from the cluster state (no I/O): the ConfigMap's
configuration, kept when a new one does not read, and the NodeShards to write and delete."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from builders import node, pod, state_of
from caldera.models.core import ConfigMap
from caldera.models.shard import NodeShard
from caldera.operator.shard_controller import ControllerSettings, ShardController

GOOD = """\
schedulerConfigs:
  - {name: busy, type: volcano, cpuUtilizationMin: 0.5, cpuUtilizationMax: 1.0, maxNodes: 10}
  - {name: idle, type: volcano, cpuUtilizationMin: 0.0, cpuUtilizationMax: 0.49, maxNodes: 10}
"""


def config_map(text: str) -> ConfigMap:
    meta = {"name": "volcano-sharding-configmap", "namespace": "volcano-system"}
    return ConfigMap.model_validate({"metadata": meta, "data": {"sharding.yaml": text}})


def controller() -> ShardController:
    return ShardController(None, ControllerSettings())  # type: ignore[arg-type]


def objects(*more: Any) -> list[Any]:
    return [
        node("n0", cpu="4", capacity={"cpu": "4"}),  # utilisation is of capacity, as Volcano's
        node("n1", cpu="4", capacity={"cpu": "4"}),
        pod("load", cpu="3", node_name="n0"),
        *more,
    ]


def test_the_configmap_gives_the_schedulers_and_their_nodes() -> None:
    ctl = controller()
    state = state_of(objects())
    state.add(config_map(GOOD))
    ctl.read_config(state)
    writes, stale = ctl.decide(state)
    assert {(w.name, w.create, w.nodes_desired) for w in writes} == {
        ("busy", True, ("n0",)),
        ("idle", True, ("n1",)),
    }
    assert stale == ()


def test_a_configmap_that_does_not_read_keeps_the_last_good_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctl = controller()
    state = state_of(objects())
    state.add(config_map(GOOD))
    ctl.read_config(state)
    broken = state_of(objects())
    broken.add(config_map(GOOD.replace("cpuUtilizationMax: 1.0", "cpuUtilizationMax: 1.5")))
    with caplog.at_level(logging.ERROR):
        ctl.read_config(broken)
    assert [s.name for s in ctl.config.scheduler_configs] == ["busy", "idle"]
    (said,) = [r.getMessage() for r in caplog.records]
    assert "schedulerConfigs[0].cpuUtilizationMax" in said and "keeping the previous" in said


def test_an_unchanged_nodeshard_is_not_rewritten_and_an_unknown_one_is_deleted() -> None:
    ctl = controller()
    shards = [
        NodeShard.model_validate({"metadata": {"name": "busy"}, "spec": {"nodesDesired": ["n0"]}}),
        NodeShard.model_validate({"metadata": {"name": "gone"}, "spec": {"nodesDesired": []}}),
    ]
    state = state_of(objects(*shards))
    state.add(config_map(GOOD))
    ctl.read_config(state)
    writes, stale = ctl.decide(state)
    assert [w.name for w in writes] == ["idle"]
    assert stale == ("gone",)
