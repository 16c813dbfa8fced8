"""resource-strategy-fit end to end: which node a pod gets, the proportional predicate's verdicts
and pending reason, the enable switches, and a policy using it through ``caldera simulate``.
Volcano's TestAllocate and Test_checkNodeResourceIsProportional cases are rebuilt here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from builders import (
    Obj,
    binds,
    default_policy_with,
    node,
    open_session,
    pod,
    podgroup,
    policy_text,
    scenario,
    summary,
)
from caldera.cli import main

RSF = "resource-strategy-fit"
GPU = "nvidia.com/gpu"
GPU_MOST = {
    "resourceStrategyFitWeight": 10,
    "resources": {
        GPU: {"type": "MostAllocated", "weight": 2},
        "cpu": {"type": "LeastAllocated", "weight": 1},
    },
}
PROPORTIONAL = {
    "proportional": {
        "enable": True,
        "resources": GPU,
        "resourceProportion": {f"{GPU}.cpu": 4, f"{GPU}.memory": 4},
    }
}
REASON = f"proportional of resource {GPU} check failed"


def with_rsf(args: Mapping[str, Any], **switches: bool) -> str:
    """Volcano's default policy with resource-strategy-fit after nodeorder, given ``args`` and
    ``enableXxx`` switches."""
    doc = yaml.safe_load(default_policy_with(add={RSF: "nodeorder"}, arguments={RSF: args}))
    for tier in doc["tiers"]:
        for option in tier["plugins"]:
            if option["name"] == RSF:
                option.update(switches)
    text: str = yaml.safe_dump(doc, sort_keys=False)
    return text


def labelled(name: str, kind: str, gpus: str | None) -> Obj:
    extra = {GPU: gpus} if gpus else None
    return node(name, cpu="5", memory="10Gi", extra=extra, labels={"nodeResourceType": kind})


VOLCANO_NODES = (
    labelled("n1", "gpu", "10"),
    labelled("n2", "gpu", "10"),
    labelled("n3", "cpu", None),
    labelled("n4", "cpu", None),
)


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param(
            [
                pod(
                    "running",
                    memory="1G",
                    extra={GPU: "2"},
                    node_name="n2",
                    scheduler="default-scheduler",
                ),
                podgroup("pg"),
                pod(
                    "p1",
                    group="pg",
                    memory="1G",
                    extra={GPU: "2"},
                    node_selector={"nodeResourceType": "gpu"},
                ),
            ],
            {"default/p1": "n2"},
            id="GPU MostAllocated packs onto the node whose GPUs are in use",
        ),
        pytest.param(
            [
                pod("running", memory="1G", node_name="n3", scheduler="default-scheduler"),
                podgroup("pg"),
                pod("p3", group="pg", memory="1G", node_selector={"nodeResourceType": "cpu"}),
            ],
            {"default/p3": "n4"},
            id="cpu LeastAllocated spreads onto the idle node",
        ),
    ],
)
def test_volcano_allocate_cases(objs: list[Obj], expected: dict[str, str]) -> None:
    sim = scenario([*VOLCANO_NODES, *objs], policy_yaml=with_rsf(GPU_MOST))
    assert binds(sim) == expected


def test_most_allocated_fills_one_node_before_the_next_and_least_allocated_spreads() -> None:
    def run(kind: str) -> dict[str, str]:
        objs: list[Obj] = [
            node("n1", cpu="8", memory="16Gi"),
            node("n2", cpu="8", memory="16Gi"),
            pod("busy", cpu="2", memory="2Gi", node_name="n1", scheduler="default-scheduler"),
            podgroup("pg", min_member=3),
            *(pod(f"p{i}", group="pg", cpu="2", memory="2Gi") for i in range(3)),
        ]
        args = {"resources": {"cpu": {"type": kind}, "memory": {"type": kind}}}
        return binds(scenario(objs, policy_yaml=with_rsf(args)))

    assert set(run("MostAllocated").values()) == {"n1"}
    assert sorted(run("LeastAllocated").values()) == ["n1", "n2", "n2"]


# -- proportional --------------------------------------------------------------------------------


def proportional_verdicts(cpu: str, memory: str, gpus: str | None) -> dict[str, str]:
    """Volcano's proportional table: n1 idle 30 cpu / 30G / 6 GPUs, n2 26 / 26G / 2, n3 (no
    GPU) 8 / 8G; GPU rates 4 cores and 4 GB. The predicate's rejections, by node."""
    objs: list[Obj] = [
        node("n1", cpu="30", memory="30G", extra={GPU: "6"}),
        node("n2", cpu="26", memory="26G", extra={GPU: "2"}),
        node("n3", cpu="8", memory="8G"),
        podgroup("pg"),
        pod("t", group="pg", cpu=cpu, memory=memory, extra={GPU: gpus} if gpus else None),
    ]
    ssn = open_session(objs, policy_text("allocate", [RSF], arguments={RSF: PROPORTIONAL}))
    (task,) = ssn.jobs["default/pg"].tasks.values()
    return {
        ssn.nodes.names[row]: reason
        for reason, mask in ssn.predicate(task)
        for row in np.flatnonzero(mask)
    }


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(("4", "4G", None), {}, id="a cpu task leaving the reserve intact passes"),
        pytest.param(
            ("10", "10G", None),
            {"n1": REASON},
            id="a cpu task eating into the GPUs' reserve is rejected",
        ),
        pytest.param(("10", "10G", "1"), {}, id="a GPU task is not checked"),
        pytest.param(
            ("4", "23G", None), {"n1": REASON, "n2": REASON}, id="the memory reserve counts too"
        ),
    ],
)
def test_proportional_predicate_matches_volcano(
    request_: tuple[str, str, str | None], expected: dict[str, str]
) -> None:
    assert proportional_verdicts(*request_) == expected


def gpu_cluster() -> list[Obj]:
    return [
        node("gpu", cpu="8", memory="32G", extra={GPU: "1"}),
        node("small", cpu="2", memory="8G"),
        podgroup("cpu-job"),
        pod("cpu-job", group="cpu-job", cpu="5", memory="1G"),
        podgroup("gpu-job"),
        pod("gpu-job", group="gpu-job", cpu="5", memory="1G", extra={GPU: "1"}),
    ]


def test_proportional_keeps_cpu_pods_off_the_cpu_gpus_need_and_says_why() -> None:
    sim = scenario(gpu_cluster(), policy_yaml=with_rsf(PROPORTIONAL))
    assert binds(sim) == {"default/gpu-job": "gpu"}
    why = summary(sim)["unschedulable"]["default/cpu-job"]
    assert REASON in why
    assert "Insufficient cpu" in why


def test_enable_predicate_false_turns_the_proportional_check_off() -> None:
    sim = scenario(gpu_cluster(), policy_yaml=with_rsf(PROPORTIONAL, enablePredicate=False))
    assert binds(sim)["default/cpu-job"] == "gpu"


def test_enable_node_order_false_turns_the_scores_off() -> None:
    objs: list[Obj] = [node("n1"), podgroup("pg"), pod("p", group="pg")]
    only = policy_text("allocate", [RSF])
    off = yaml.safe_load(only)
    off["tiers"][0]["plugins"][0]["enableNodeOrder"] = False
    rows = np.arange(1, dtype=np.intp)
    for text, expected in ((only, 812.5), (yaml.safe_dump(off), 0.0)):
        ssn = open_session(objs, text)
        (task,) = ssn.jobs["default/pg"].tasks.values()
        # default args on 4 cpu / 8Gi: ((4-1)/4 + (8-1)/8) / 2 × 100 × 10
        assert ssn.node_order(task, rows).tolist() == [expected]


# -- the CLI ---------------------------------------------------------------------------------------

MANIFESTS = f"""
apiVersion: v1
kind: Node
metadata: {{name: gpu}}
status: {{allocatable: {{cpu: "8", memory: 32G, pods: "110", {GPU}: "1"}}}}
---
apiVersion: v1
kind: Node
metadata: {{name: plain}}
status: {{allocatable: {{cpu: "8", memory: 32G, pods: "110"}}}}
---
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: default}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1", memory: 1G}}}}}}]
"""


def test_a_policy_with_resource_strategy_fit_loads_and_schedules_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = {
        "resourceStrategyFitWeight": 10,
        "sra": {"enable": True, "resources": GPU, "weight": 10},
        **PROPORTIONAL,
    }
    (tmp_path / "policy.yaml").write_text(with_rsf(args))
    (tmp_path / "cluster.yaml").write_text(MANIFESTS)
    argv = ["simulate", "--output", "json", "--policy", str(tmp_path / "policy.yaml")]
    assert main([*argv, str(tmp_path / "cluster.yaml")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(b["pod"], b["node"]) for b in doc["binds"]] == [("default/web", "plain")]


def test_the_cli_rejects_a_bad_argument_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {"resources": {"cpu": {"type": "Spread"}}}
    (tmp_path / "policy.yaml").write_text(with_rsf(bad))
    (tmp_path / "cluster.yaml").write_text(MANIFESTS)
    argv = ["simulate", "--policy", str(tmp_path / "policy.yaml"), str(tmp_path / "cluster.yaml")]
    assert main(argv) != 0
    assert "['resources']['cpu']['type']" in capsys.readouterr().err
