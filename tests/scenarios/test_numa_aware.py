"""numa-aware: Guaranteed pods go where the kubelet's topology manager will admit them.

Cases follow Volcano's ``numa-aware`` plugin (``filterNodeByPolicy``, the cpumanager's
``generateCPUTopologyHints`` and ``Allocate``, the policies' ``Predicate``) and its tests in
spirit: nodes of two NUMA nodes with four CPUs each.
"""

from __future__ import annotations

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
    scenario,
)
from caldera.framework.session import Session
from caldera.models.numa import Numatopology

POLICY = "volcano.sh/numa-topology-policy"
TEXT = policy_text("enqueue, allocate", ["priority", "gang"], ["predicates", "numa-aware"])


def topology(name: str, policy: str, *, allocatable: str = "0-7", static: bool = True) -> Obj:
    raw: dict[str, Any] = {
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {
            "policies": {
                "CPUManagerPolicy": "static" if static else "none",
                "TopologyManagerPolicy": policy,
            },
            "numares": {"cpu": {"allocatable": allocatable, "capacity": 8}},
            "cpuDetail": {
                str(c): {"numa": c // 4, "socket": c // 4, "core": c % 4} for c in range(8)
            },
        },
    }
    return Numatopology.model_validate(raw)


def guaranteed(name: str, cpus: int, policy: str | None = None, **kwargs: Any) -> list[Obj]:
    """A Guaranteed pod (requests equal limits) of whole cpus, in a PodGroup of its own."""
    annotations = {POLICY: policy} if policy else {}
    size = str(cpus)
    return [
        podgroup(f"pg-{name}", created=kwargs.get("created")),
        pod(
            name,
            group=f"pg-{name}",
            cpu=size,
            memory="1Gi",
            limits={"cpu": size, "memory": "1Gi"},
            annotations=annotations,
            **kwargs,
        ),
    ]


def machine(name: str) -> Obj:
    return node(name, cpu="8", memory="32Gi")


def session(objs: list[Obj]) -> Session:
    return open_session(objs, TEXT)


def test_a_pod_with_a_policy_needs_a_static_node_running_that_policy() -> None:
    objs = [
        machine("single"),
        machine("best"),
        machine("plain"),
        machine("dynamic"),
        topology("single", "single-numa-node"),
        topology("best", "best-effort"),
        topology("dynamic", "single-numa-node", static=False),
        *guaranteed("p", 4, "single-numa-node"),
    ]
    assert node_verdicts(session(objs), "p") == {
        "best": "task topology polocy[single-numa-node] is different with node[best-effort]",
        "dynamic": "cpu manager policy isn't static",
        "plain": "numa info is empty",
        "single": "",
    }


@pytest.mark.parametrize(
    ("objs", "name", "verdict"),
    [
        pytest.param(
            [topology("n1", "single-numa-node"), *guaranteed("big", 6, "single-numa-node")],
            "big",
            "plugin numa-aware predicates failed for task big container main",
            id="single-numa-node refuses a pod no one NUMA node can hold",
        ),
        pytest.param(
            [topology("n1", "restricted"), *guaranteed("big", 6, "restricted")],
            "big",
            "",
            # six cpus fit no single NUMA node's four: two NUMA nodes are the preferred hint
            id="restricted admits the smallest set of NUMA nodes that could hold it",
        ),
        pytest.param(
            [
                topology("n1", "single-numa-node"),
                podgroup("pg"),
                pod("burstable", group="pg", cpu="6", memory="1Gi"),
            ],
            "burstable",
            "",
            id="pods that are not Guaranteed are left alone",
        ),
    ],
)
def test_the_numa_policy_of_one_machine_admits_or_refuses_the_pod(
    objs: list[Obj], name: str, verdict: str
) -> None:
    assert node_verdicts(session([machine("n1"), *objs]), name) == {"n1": verdict}


def test_restricted_refuses_when_the_free_cpus_are_spread_thinner_than_preferred() -> None:
    # cpus 0-1 and 4-5 free: four cpus would fit one NUMA node, but free ones only span two
    objs = [
        machine("n1"),
        topology("n1", "restricted", allocatable="0-1,4-5"),
        *guaranteed("four", 4, "restricted"),
    ]
    assert node_verdicts(session(objs), "four")["n1"].startswith("plugin numa-aware predicates")
    best = [machine("n1"), topology("n1", "best-effort", allocatable="0-1,4-5")]
    assert node_verdicts(session([*best, *guaranteed("four", 4, "best-effort")]), "four") == {
        "n1": ""
    }


def test_pods_placed_in_a_session_take_their_cpus_from_the_next_pods() -> None:
    # the node has cpu to spare for all three; its NUMA nodes do not
    objs = [
        node("n1", cpu="16", memory="32Gi"),
        topology("n1", "single-numa-node"),
        *(
            o
            for i in range(3)
            for o in guaranteed(f"p{i}", 3, "single-numa-node", created=float(i))
        ),
    ]
    sim = scenario(objs, policy_yaml=TEXT)
    # three cpus on one NUMA node: one pod per NUMA node, the third waits
    assert binds(sim) == {"default/p0": "n1", "default/p1": "n1"}


def test_fewer_numa_nodes_score_higher() -> None:
    objs: list[Obj] = [
        machine("whole"),
        machine("split"),
        topology("whole", "best-effort"),
        topology("split", "best-effort", allocatable="2-3,6-7"),
        *guaranteed("p", 4, "best-effort"),
    ]
    ssn = session(objs)
    node_verdicts(ssn, "p")  # the filter works out each node's hints; the score reads them
    scores = node_scores(ssn, "p")
    assert scores["whole"] - scores["split"] == 50.0  # 1 NUMA node against 2: 100 − 50
