"""nodegroup: which nodes a queue's pods may use and how they score, by node group.

The tables follow Volcano's ``TestNodeGroup`` and ``TestNodeGroupResourceLimits``
(``pkg/scheduler/plugins/nodegroup/nodegroup_test.go``) in spirit: five nodes, four of them in
groups 1–4 (label ``volcano.sh/nodegroup-name``) and one without the label, and queues whose
affinity names some of the groups; the rules are those of ``queueGroupAffinity.predicate`` and
``.score`` and the plugin's ``predicateFn``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from builders import (
    Obj,
    binds,
    node,
    node_scores,
    node_verdicts,
    open_session,
    pod,
    podgroup,
    policy_text,
    queue,
    scenario,
)
from caldera.cli import main
from caldera.framework.session import Session
from caldera.plugins.nodegroup import (
    LABEL_NOT_FOUND,
    LIMITS_ANNOTATION,
    NODEGROUP_LABEL,
    NOT_SPECIFIED,
    UNSATISFIED,
)

NODES = ["n1", "n2", "n3", "n4", "n5"]


def nodes() -> list[Obj]:
    out: list[Obj] = [
        node(f"n{i}", cpu="8", memory="32Gi", labels={NODEGROUP_LABEL: f"group{i}"})
        for i in range(1, 5)
    ]
    return [*out, node("n5", cpu="8", memory="32Gi")]


def terms(required: Sequence[str] = (), preferred: Sequence[str] = ()) -> dict[str, list[str]]:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": list(required),
        "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
    }


# Volcano's queue1: hard {1, 3}, soft {3}; anti hard {2, 4}, anti soft {4}
Q1_AFFINITY = {
    "nodeGroupAffinity": terms(["group1", "group3"], ["group3"]),
    "nodeGroupAntiAffinity": terms(["group2", "group4"], ["group4"]),
}


def session(
    queues: Sequence[Obj],
    queue_of_pod: str,
    *,
    arguments: Mapping[str, Any] | None = None,
    hierarchy: bool = False,
    extra: Sequence[Obj] = (),
) -> Session:
    text = policy_text("allocate", ["nodegroup"], arguments={"nodegroup": arguments})
    if hierarchy:
        text = text.replace("- name: nodegroup", "- name: nodegroup\n    enableHierarchy: true")
    objs = [
        *nodes(),
        *queues,
        podgroup("pg", queue=queue_of_pod),
        pod("p", group="pg", cpu="2", memory="4Gi"),
        *extra,
    ]
    return open_session(objs, text)


def verdicts(ssn: Session) -> dict[str, str]:
    return node_verdicts(ssn, "p")


def scores(ssn: Session) -> dict[str, float]:
    return node_scores(ssn, "p")


OK = ""


@pytest.mark.parametrize(
    ("queues", "queue_name", "arguments", "hierarchy", "expected_scores", "expected_verdicts"),
    [
        pytest.param(
            [queue("q1", affinity=Q1_AFFINITY)],
            "q1",
            None,
            False,
            [100, 0, 150, -1, 0],
            [OK, UNSATISFIED, OK, OK, LABEL_NOT_FOUND],
            id="soft terms inside the hard ones add up; a soft anti-affinity lets a group through",
        ),
        pytest.param(
            [
                queue(
                    "q2",
                    affinity={
                        "nodeGroupAffinity": terms(["group1"], ["group3"]),
                        "nodeGroupAntiAffinity": terms(["group2"], ["group4"]),
                    },
                )
            ],
            "q2",
            None,
            False,
            [100, 0, 50, -1, 0],
            [OK, UNSATISFIED, OK, OK, LABEL_NOT_FOUND],
            id="a soft group outside the hard ones is still allowed",
        ),
        pytest.param(
            [queue("plain")],
            "plain",
            {"strict": False},
            False,
            [0, 0, 0, 0, 0],
            [NOT_SPECIFIED] * 4 + [OK],
            id="strict false: a queue without affinity may use only unlabelled nodes",
        ),
        pytest.param(
            [queue("plain")],
            "plain",
            None,
            False,
            [0, 0, 0, 0, 0],
            [NOT_SPECIFIED] * 4 + [LABEL_NOT_FOUND],
            id="strict (the default): a queue without affinity may use no node",
        ),
        pytest.param(
            [
                queue("root", affinity=Q1_AFFINITY),
                queue("q1", affinity=Q1_AFFINITY, parent="root"),
                queue("q1-child", parent="q1"),
            ],
            "q1-child",
            None,
            True,
            [100, 0, 150, -1, 0],
            [OK, UNSATISFIED, OK, OK, LABEL_NOT_FOUND],
            id="with enableHierarchy a queue without affinity inherits its parent's",
        ),
        pytest.param(
            [
                queue("root", affinity=Q1_AFFINITY),
                queue("middle", parent="root"),
                queue("leaf", parent="middle"),
            ],
            "leaf",
            None,
            True,
            [100, 0, 150, -1, 0],
            [OK, UNSATISFIED, OK, OK, LABEL_NOT_FOUND],
            id="the nearest ancestor with affinity is inherited, past one without",
        ),
        pytest.param(
            [queue("root", affinity=Q1_AFFINITY), queue("child", parent="root")],
            "child",
            None,
            False,
            [0, 0, 0, 0, 0],
            [NOT_SPECIFIED] * 4 + [LABEL_NOT_FOUND],
            id="without enableHierarchy nothing is inherited",
        ),
        pytest.param(
            [queue("q3", affinity={"nodeGroupAffinity": terms((), ["group1", "group3"])})],
            "q3",
            {"enablePreferredOrder": True},
            False,
            [50, 0, 25, 0, 0],
            [OK, UNSATISFIED, OK, UNSATISFIED, LABEL_NOT_FOUND],
            id="enablePreferredOrder: earlier preferred groups score higher",
        ),
        pytest.param(
            [queue("q3", affinity={"nodeGroupAffinity": terms((), ["group1", "group3"])})],
            "q3",
            None,
            False,
            [50, 0, 50, 0, 0],
            [OK, UNSATISFIED, OK, UNSATISFIED, LABEL_NOT_FOUND],
            id="without it every preferred group scores 50",
        ),
    ],
)
def test_node_group_verdicts_and_scores(
    queues: Sequence[Obj],
    queue_name: str,
    arguments: Mapping[str, Any] | None,
    hierarchy: bool,
    expected_scores: list[float],
    expected_verdicts: list[str],
) -> None:
    ssn = session(queues, queue_name, arguments=arguments, hierarchy=hierarchy)
    assert scores(ssn) == dict(zip(NODES, map(float, expected_scores), strict=True))
    assert verdicts(ssn) == dict(zip(NODES, expected_verdicts, strict=True))


BOTH = {"nodeGroupAffinity": terms(["group1", "group2"], ["group1"])}


def limited(limits: Mapping[str, Mapping[str, str]] | str) -> Obj:
    raw = limits if isinstance(limits, str) else json.dumps(limits)
    return queue("q", affinity=BOTH, annotations={LIMITS_ANNOTATION: raw})


def running(name: str, node_name: str, cpu: str) -> list[Obj]:
    return [
        podgroup(f"pg-{name}", queue="q"),
        pod(name, group=f"pg-{name}", cpu=cpu, memory="1Gi", node_name=node_name, phase="Running"),
    ]


@pytest.mark.parametrize(
    ("limits", "extra", "n1_verdict"),
    [
        pytest.param({"group1": {"cpu": "3", "memory": "8Gi"}}, [], OK, id="under the limit"),
        pytest.param(
            {"group1": {"cpu": "3"}}, [], OK, id="a resource the limit omits is unlimited"
        ),
        pytest.param(
            {"group1": {"cpu": "1"}},
            [],
            "nodegroup group1 resource limit exceeded, insufficient resources: [cpu]",
            id="a named resource is enforced",
        ),
        pytest.param(
            {"group1": {"cpu": "3"}},
            running("busy", "n1", "2"),
            "nodegroup group1 resource limit exceeded, insufficient resources: [cpu]",
            id="what the queue already runs in the group counts",
        ),
        pytest.param(
            {"group1": {"cpu": "3"}},
            running("elsewhere", "n2", "2"),
            OK,
            id="what it runs in another group does not",
        ),
    ],
)
def test_per_group_resource_limits_of_a_queue(
    limits: Mapping[str, Mapping[str, str]], extra: list[Obj], n1_verdict: str
) -> None:
    ssn = session([limited(limits)], "q", extra=extra)
    found = verdicts(ssn)
    assert found["n1"] == n1_verdict
    assert found["n2"] == OK  # the fallback group has no limit


def test_an_unreadable_limits_annotation_keeps_the_queues_pods_off_every_node() -> None:
    ssn = session([limited("{group1: cpu}")], "q")
    assert set(verdicts(ssn).values()) == {f"the queue's {LIMITS_ANNOTATION} annotation is invalid"}
    (event,) = [e for e in ssn.result.events if e.kind == "Queue"]
    assert event.reason == "InvalidNodeGroupLimits"
    assert event.message.startswith(f"metadata.annotations['{LIMITS_ANNOTATION}']: not JSON")


def test_pods_placed_in_a_session_count_against_the_cap_and_overflow_to_the_fallback() -> None:
    objs: list[Obj] = [
        node("n1", cpu="16", memory="64Gi", labels={NODEGROUP_LABEL: "group1"}),
        node("n2", cpu="16", memory="64Gi", labels={NODEGROUP_LABEL: "group2"}),
        limited({"group1": {"cpu": "4"}}),
        podgroup("pg", queue="q", min_member=3),
        *[pod(f"w{i}", group="pg", cpu="2", memory="1Gi") for i in range(3)],
    ]
    policy = policy_text("enqueue, allocate", ["gang"], ["predicates", "nodegroup"])
    sim = scenario(objs, policy_yaml=policy)
    placed = binds(sim)
    assert sorted(placed.values()) == ["n1", "n1", "n2"]  # group1 is preferred until its cap


def test_explain_shows_the_node_group_verdict_of_each_node(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "nodegroup"
    argv = ["explain", "--output", "json", "--policy", str(example / "volcano-scheduler.conf")]
    assert main([*argv, "default/frontend-0", str(example / "cluster.yaml")]) == 0
    found = json.loads(capsys.readouterr().out)["nodes"]
    assert found["plain-1"]["reasons"] == {"nodegroup": [LABEL_NOT_FOUND]}
    assert found["fixed-1"]["reasons"] == {"nodegroup": [NOT_SPECIFIED]}
    assert main([*argv, "default/report-0", str(example / "cluster.yaml")]) == 0
    found = json.loads(capsys.readouterr().out)["nodes"]
    assert {n: v["scores"]["nodegroup"] for n, v in found.items() if v["fits"]} == {
        "fixed-1": 50.0,
        "fixed-2": 50.0,
        "burst-1": 25.0,
    }
