"""gang: JobValid, JobReady with minMember/minTaskMember, job order (volcano.md §3.1, §3.4, §4.1).

JobValid fails with ``NotEnoughTasks`` (``Not enough valid tasks for gang-scheduling, valid: <v>,
min: <m>``) when fewer tasks than minMember are Pending/Pipelined/placed/Succeeded, and with
``NotEnoughPodsOfTask`` when a ``minTaskMember`` role (pod annotation or label
``volcano.sh/task-spec``) has too few. An invalid job is skipped by allocate and backfill; the
reason is not a condition of its own (§4.1) but shows in the job's pending explanation.
"""

from __future__ import annotations

import pytest

from builders import Obj, binds, node, pod, podgroup, scenario, summary

ROLE = "volcano.sh/task-spec"
T0 = 1_800_000_000.0


def member(name: str, role: str, *, cpu: str = "1", gpu_only: bool = False) -> Obj:
    return pod(
        name,
        group="pg",
        cpu=cpu,
        annotations={ROLE: role},
        node_selector={"gpu": "true"} if gpu_only else None,
    )


# -- NotEnoughTasks ----------------------------------------------------------------------------


def test_a_gang_with_fewer_pods_than_min_member_is_not_scheduled() -> None:
    sim = scenario(
        [node("n1", cpu="4"), podgroup("pg", min_member=2), pod("a", group="pg")], cycles=2
    )
    assert binds(sim) == {}
    report = summary(sim)
    pg = report["podGroups"]["default/pg"]
    # JobValid's reason is not written as a condition; gang's close writes NotEnoughResources,
    # with the JobValid message as the origin reason. Volcano would say N = 2 − 0 placed of
    # T = 1 task ("2/1"); Caldera never counts more unready tasks than there are, and says
    # what is missing: pods.
    assert [(c["type"], c["reason"]) for c in pg["conditions"]] == [
        ("Unschedulable", "NotEnoughResources")
    ]
    expected = (
        "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 2 minAvailable; "
        "Pending: 1 Unschedulable. "
        "Origin reason is Not enough valid tasks for gang-scheduling, valid: 1, min: 2 "
        "(minMember is 2 but the PodGroup has 1 pod(s): waiting for 1 more to be created)"
    )
    assert pg["conditions"][0]["message"] == expected
    assert report["unschedulable"] == {"default/a": expected}


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        pytest.param("Succeeded", {"default/c": "n1"}, id="succeeded tasks count toward minMember"),
        pytest.param("Failed", {}, id="failed tasks do not count toward minMember"),
    ],
)
def test_finished_tasks_and_min_member(phase: str, expected: dict[str, str]) -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=3, phase="Running"),
            pod("a", group="pg", node_name="n1", phase=phase),
            pod("b", group="pg", node_name="n1", phase=phase),
            pod("c", group="pg"),
        ]
    )
    assert binds(sim) == expected
    if not expected:
        assert summary(sim)["unschedulable"]["default/c"].endswith(
            "Origin reason is Not enough valid tasks for gang-scheduling, valid: 1, min: 3"
        )


# -- minTaskMember -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("min_member", "min_task_member", "members", "expected"),
    [
        pytest.param(
            2,
            {"ps": 1, "worker": 1},
            [member("ps-0", "ps"), member("worker-0", "worker")],
            {"default/ps-0", "default/worker-0"},
            id="every role present: the gang is bound",
        ),
        pytest.param(
            2,
            {"ps": 1, "worker": 1},
            [member("worker-0", "worker"), member("worker-1", "worker")],
            set(),
            id="a role with no pods: nothing is bound",
        ),
        pytest.param(
            2,
            {},
            [
                member("ps-0", "ps"),
                member("worker-0", "worker"),
                member("w-1", "worker", gpu_only=True),
            ],
            {"default/ps-0", "default/worker-0"},
            id="without minTaskMember any two placed tasks make the gang",
        ),
        pytest.param(
            2,
            {"worker": 2},
            [
                member("ps-0", "ps"),
                member("worker-0", "worker"),
                member("w-1", "worker", gpu_only=True),
            ],
            set(),
            id="two placed tasks are not enough while a role is short of its minimum",
        ),
        pytest.param(
            1,
            {"ps": 1, "worker": 1},
            [member("worker-0", "worker")],
            {"default/worker-0"},
            id="minMember below the sum of role minimums: roles are not checked (Volcano)",
        ),
    ],
)
def test_min_task_member_per_role(
    min_member: int, min_task_member: dict[str, int], members: list[Obj], expected: set[str]
) -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=min_member, min_task_member=min_task_member),
            *members,
        ]
    )
    assert set(binds(sim)) == expected


def test_a_missing_role_is_explained_as_not_enough_pods_of_task() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=2, min_task_member={"ps": 1, "worker": 1}),
            member("worker-0", "worker"),
            member("worker-1", "worker"),
        ]
    )
    assert binds(sim) == {}
    explanation = summary(sim)["unschedulable"]
    assert set(explanation) == {"default/worker-0", "default/worker-1"}
    for message in explanation.values():
        assert message.endswith(
            "Origin reason is Not enough valid pods of each task for gang-scheduling"
        )


def test_the_role_is_also_read_from_a_pod_label() -> None:
    sim = scenario(
        [
            node("n1", cpu="4"),
            podgroup("pg", min_member=2, min_task_member={"ps": 1, "worker": 1}),
            pod("ps-0", group="pg", labels={ROLE: "ps"}),
            pod("worker-0", group="pg", labels={ROLE: "worker"}),
        ]
    )
    assert set(binds(sim)) == {"default/ps-0", "default/worker-0"}


# -- job order ---------------------------------------------------------------------------------


def test_a_job_that_is_not_ready_yet_goes_before_a_ready_one() -> None:
    # Room for one more 1-cpu pod. "ready" is older and already has its minMember running, so
    # gang's job order (not-ready first) puts the younger "fresh" job ahead of it.
    sim = scenario(
        [
            node("n1", cpu="2"),
            podgroup("ready", min_member=1, phase="Running", created=T0),
            pod("r0", group="ready", node_name="n1"),
            pod("r1", group="ready"),
            podgroup("fresh", min_member=1, created=T0 + 10),
            pod("f0", group="fresh"),
        ]
    )
    assert binds(sim) == {"default/f0": "n1"}
