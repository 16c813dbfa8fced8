"""backfill: best-effort pods (no resource request) of admitted, valid jobs (volcano.md §3.2).

Backfill places each BestEffort pending task of a non-Pending job on the best node that passes the
predicates and binds it at once; jobs that fail JobValid are skipped (§4.1 "Other writes").
"""

from __future__ import annotations

import pytest

from builders import Obj, binds, default_policy_with, node, pod, podgroup, scenario, summary
from caldera.simulate.runner import Simulation


def be(
    name: str,
    *,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> Obj:
    """A best-effort pod of PodGroup ``pg``: its container requests nothing."""
    return pod(
        name,
        group="pg",
        cpu=None,
        memory=None,
        annotations=annotations,
        node_selector=node_selector,
    )


def bound_cycles(sim: Simulation) -> dict[str, int]:
    return {b["pod"]: b["cycle"] for b in summary(sim)["binds"]}


@pytest.mark.parametrize(
    ("filled", "bound", "unschedulable"),
    [
        pytest.param(
            [
                node("n1", cpu="2"),
                pod("kube", scheduler="default-scheduler", node_name="n1", cpu="2"),
            ],
            {"default/a": "n1"},
            {},
            id="a best-effort pod is placed on a node with no cpu left",
        ),
        pytest.param(
            [node("n1", pods="1"), pod("kube", scheduler="default-scheduler", node_name="n1")],
            {},
            {"default/a": "0/1 nodes are available: 1 Too many pods."},
            id="a best-effort pod still needs a pod slot",
        ),
    ],
)
def test_a_best_effort_pod_on_a_node_another_scheduler_filled(
    filled: list[Obj], bound: dict[str, str], unschedulable: dict[str, str]
) -> None:
    sim = scenario([*filled, podgroup("pg"), be("a")])
    assert binds(sim) == bound
    assert summary(sim)["unschedulable"] == unschedulable


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"n2": {"disk": "ssd"}}, {"default/a": "n2"}, id="to the node that matches"),
        pytest.param({}, {}, id="nowhere when no node matches"),
    ],
)
def test_backfill_respects_node_filters(
    labels: dict[str, dict[str, str]], expected: dict[str, str]
) -> None:
    sim = scenario(
        [
            node("n1", labels=labels.get("n1")),
            node("n2", labels=labels.get("n2")),
            podgroup("pg"),
            be("a", node_selector={"disk": "ssd"}),
        ]
    )
    assert binds(sim) == expected
    if not expected:
        assert summary(sim)["unschedulable"] == {
            "default/a": (
                "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
            )
        }


def test_a_gang_of_best_effort_pods_is_ready_and_bound_whole() -> None:
    # Pending best-effort tasks count toward readiness (IsReady, volcano.md §3.1).
    sim = scenario([node("n1"), podgroup("pg", min_member=3), be("a"), be("b"), be("c")])
    assert binds(sim) == {"default/a": "n1", "default/b": "n1", "default/c": "n1"}
    conds = summary(sim)["podGroups"]["default/pg"]["conditions"]
    assert [(c["type"], c["reason"]) for c in conds] == [
        ("Scheduled", "tasks in gang are ready to be scheduled")
    ]


def test_allocate_places_the_gangs_resource_tasks_and_backfill_the_best_effort_one() -> None:
    # minMember 2: one task with a request plus one best-effort task make the gang ready.
    sim = scenario(
        [node("n1"), podgroup("pg", min_member=2), pod("a", group="pg"), be("be")], cycles=2
    )
    assert bound_cycles(sim) == {"default/a": 1, "default/be": 1}
    assert [st.phase for rec in sim.cycles for st in rec.result.podgroups] == [
        "Inqueue",
        "Running",
    ]


@pytest.mark.parametrize(
    ("objects", "policy_yaml"),
    [
        pytest.param(
            [node("n1"), podgroup("pg", min_resources={"cpu": "100"}), be("a")],
            None,
            id="a job enqueue rejected stays Pending and is skipped",
        ),
        pytest.param(
            [node("n1"), podgroup("pg"), be("a")],
            default_policy_with(actions="backfill"),
            id="backfill alone does not admit Pending jobs",
        ),
        pytest.param(
            [node("n1"), podgroup("pg", min_member=3), be("a"), be("b")],
            None,
            id="a gang with fewer pods than minMember is skipped",
        ),
        pytest.param(
            [
                node("n1"),
                podgroup("pg", min_member=2, min_task_member={"ps": 1, "worker": 1}),
                be("w0", annotations={"volcano.sh/task-spec": "worker"}),
                be("w1", annotations={"volcano.sh/task-spec": "worker"}),
            ],
            None,
            id="a gang missing a role of minTaskMember is skipped",
        ),
    ],
)
def test_backfill_skips_jobs_it_may_not_place(objects: list[Obj], policy_yaml: str | None) -> None:
    assert binds(scenario(objects, policy_yaml=policy_yaml, cycles=2)) == {}


def test_without_enqueue_backfill_places_best_effort_pods_of_promoted_jobs() -> None:
    sim = scenario(
        [node("n1"), podgroup("pg"), be("a")],
        policy_yaml=default_policy_with(actions="allocate, backfill"),
    )
    assert binds(sim) == {"default/a": "n1"}
