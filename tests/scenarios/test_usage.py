"""usage: real node load filters and scores nodes (Volcano's ``pkg/scheduler/plugins/usage``:
``TestUsage_predicateFn`` and ``TestUsage_nodeOrderFn`` with their nodes, loads and scores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from builders import (
    NOW,
    Obj,
    new_session,
    node,
    node_scores,
    node_verdicts,
    pod,
    podgroup,
    policy_text,
)
from caldera.api.usage import NodeUsage
from caldera.cli import main
from caldera.framework.session import Session
from caldera.plugins.usage import CPU_REASON, MEMORY_REASON, UsagePlugin

MINUTE = 60.0
NODES = [node(f"n{i}", cpu="4", memory="8Gi") for i in range(1, 6)]


def session(loads: dict[str, tuple[float, float, float | None]], **args: Any) -> Session:
    """A session over n1..n5 (4 cpu, 8Gi) and a pending 1-cpu pod, with ``usage`` as the only
    filter and scorer besides the resource fit; loads: node → (cpu %, memory %, seconds since
    measured, or None for never)."""
    arguments = {"usage": args or None}
    text = policy_text("allocate", ["usage"], arguments=arguments)
    objs: list[Obj] = [
        *NODES,
        podgroup("p1", phase="Inqueue"),
        pod("p1", group="p1", cpu="1", memory="1Gi"),
    ]
    ssn = new_session(objs, text)
    ssn.snapshot.node_usage = {
        name: NodeUsage(cpu, mem, None if age is None else NOW - age)
        for name, (cpu, mem, age) in loads.items()
    }
    ssn.open()
    return ssn


def test_a_node_over_a_threshold_is_refused_while_its_metrics_are_fresh() -> None:
    ssn = session(
        {
            "n1": (81, 60, 0),
            "n2": (60, 81, 0),
            "n3": (80, 79, 0),
            "n4": (90, 81, 6 * MINUTE),
            "n5": (90, 81, None),
        },
        thresholds={"cpu": 80, "mem": 80},
    )
    verdicts = node_verdicts(ssn, "p1")
    assert verdicts["n1"] == CPU_REASON
    assert verdicts["n2"] == MEMORY_REASON
    assert verdicts["n3"] == verdicts["n4"] == verdicts["n5"] == ""


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ({"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1}, [300, 225, 150, 0, 0]),
        ({"usage.weight": 5, "cpu.weight": 2, "memory.weight": 8}, [270, 240, 120, 0, 0]),
        ({"usage.weight": "5", "cpu.weight": "2", "memory.weight": "8"}, [270, 240, 120, 0, 0]),
    ],
)
def test_less_loaded_nodes_score_higher_and_stale_metrics_score_nothing(
    weights: dict[str, Any], expected: list[float]
) -> None:
    ssn = session(
        {
            "n1": (30, 50, 0),
            "n2": (60, 50, 0),
            "n3": (60, 80, 0),
            "n4": (10, 20, 6 * MINUTE),
            "n5": (0, 0, None),
        },
        **weights,
    )
    scores = node_scores(ssn, "p1")
    assert [round(scores[f"n{i}"], 6) for i in range(1, 6)] == expected


def test_a_threshold_out_of_range_keeps_the_default() -> None:
    """Argument parsing as ``parseBoundedFloatArg`` and ``parseCPUQuantityArg`` /
    ``parseMemoryQuantityArg`` do it; the cases are Caldera's own (no upstream test)."""
    args = UsagePlugin.Args.model_validate({"thresholds": {"cpu": -1, "mem": "101"}})
    assert (args.thresholds.cpu, args.thresholds.mem) == (80, 80)
    est = UsagePlugin.Args.model_validate(
        {
            "estimator": {
                "request_ratio": 0.8,
                "burst_ratio": "0.3",
                "be_cpu": "500m",
                "be_mem": "300mi",
            }
        }
    ).estimator
    assert (est.request_ratio, est.burst_ratio, est.be_cpu, est.be_mem) == (
        0.8,
        0.3,
        500,
        300 * 1024 * 1024,
    )


def test_a_pod_placed_this_session_counts_on_its_node_before_the_metrics_show_it() -> None:
    """The shadow cache's estimate of a placed pod (``EstimatePodResource``) lowering its node's
    score; the case and its numbers are Caldera's own."""
    ssn = session({f"n{i}": (0, 0, 0) for i in range(1, 6)})
    before = node_scores(ssn, "p1")["n1"]
    task = next(t for job in ssn.jobs.values() for t in job.tasks.values())
    ssn.statement().allocate(task, ssn.nodes.index["n1"])
    # 1 cpu × request_ratio 0.7 of 4 cpus, 1Gi × 0.7 of 8Gi: (1 - 0.175 + 1 - 0.0875) / 2 × 500
    assert before == 500
    assert node_scores(ssn, "p1")["n1"] == pytest.approx((0.825 + 0.9125) / 2 * 500)


def test_simulate_and_explain_take_node_usage_from_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
        }
        for name, cpu in (("big", "8"), ("small", "2"))
    ]
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {
                "schedulerName": "volcano",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        }
    )
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(docs))
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        policy_text("enqueue, allocate", ["gang"], ["predicates", "proportion", "usage"])
    )
    usage = tmp_path / "usage.yaml"
    usage.write_text("big: {cpu: 92, memory: 40, age: 30s}\nsmall: {cpu: 10, memory: 10}\n")
    common = ["--policy", str(policy), "--node-usage", str(usage), str(cluster)]
    assert main(["simulate", "--output", "json", *common]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert [b["node"] for b in doc["binds"]] == ["small"]  # big has more room, but is 92% busy
    assert main(["explain", "p", *common]) == 0
    table = capsys.readouterr().out
    assert "cpu 92% mem 40% (30s old)" in table
    assert "usage: the CPU load of the node exceeds the upper limit." in table


def test_a_node_usage_file_with_a_bad_key_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    usage = tmp_path / "usage.yaml"
    usage.write_text("n1: {cpu: 120, memory: 10}\n")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    )
    assert main(["simulate", "--node-usage", str(usage), str(cluster)]) == 2
    assert f"{usage}: n1.cpu: expected a percentage from 0 to 100" in capsys.readouterr().err
