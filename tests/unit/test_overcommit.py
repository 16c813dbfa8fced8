"""overcommit: admit jobs while total × factor − used still covers what admitted jobs need.

Every case runs on one 10-cpu node, so with the default factor the cluster admits 12 cpu of
minResources minus what is in use.
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import Obj, node, open_session, pod, podgroup, policy, policy_text, scenario, summary
from caldera.errors import ConfigError
from caldera.framework.intents import Event


def overcommit_policy(args: dict[str, Any] | None = None) -> str:
    return policy_text("enqueue", ["overcommit"], arguments={"overcommit": args})


def new_job(min_cpu: str) -> list[Obj]:
    return [
        podgroup("new", min_resources={"cpu": min_cpu}, created=2e9 - 1),
        pod("new-0", group="new", cpu=min_cpu, memory=None),
    ]


@pytest.mark.parametrize(
    ("args", "min_cpu", "admitted"),
    [
        pytest.param(None, "12", True, id="default factor 1.2: 12 of 10 cpu fits"),
        pytest.param(None, "13", False, id="default factor 1.2: 13 of 10 cpu does not"),
        pytest.param({"overcommit-factor": 2.0}, "20", True, id="factor 2: 20 cpu fits"),
        pytest.param({"overcommit-factor": 2.0}, "21", False, id="factor 2: 21 cpu does not"),
        pytest.param({"overcommit-factor": 2}, "20", True, id="an integer factor is accepted"),
        pytest.param({"overcommit-factor": 1.0}, "10", True, id="factor 1: exactly the cluster"),
        pytest.param({"overcommit-factor": 1.0}, "11", False, id="factor 1: nothing beyond"),
        pytest.param(
            {"overcommit-factor": 0.5}, "12", True, id="a factor below 1 falls back to 1.2"
        ),
        pytest.param({"overcommit-factor": 0.5}, "13", False, id="and is not 0.5"),
    ],
)
def test_factor(args: dict[str, Any] | None, min_cpu: str, admitted: bool) -> None:
    ssn = open_session([node("n1", cpu="10"), *new_job(min_cpu)], overcommit_policy(args))
    assert ssn.job_enqueueable(ssn.jobs["default/new"]) is admitted


@pytest.mark.parametrize(
    "value", [pytest.param("1.5", id="a string"), pytest.param(True, id="a boolean")]
)
def test_factor_of_the_wrong_type_is_rejected_at_policy_load(value: object) -> None:
    with pytest.raises(ConfigError, match="overcommit-factor"):
        policy(overcommit_policy({"overcommit-factor": value}))


def _running(*, min_member: int, min_cpu: str, running: list[str], succeeded: int = 0) -> list[Obj]:
    objs: list[Obj] = [
        podgroup("old", phase="Running", min_member=min_member, min_resources={"cpu": min_cpu})
    ]
    objs += [
        pod(f"old-{i}", group="old", cpu=c, memory=None, node_name="n1")
        for i, c in enumerate(running)
    ]
    objs += [
        pod(f"old-done-{i}", group="old", cpu="1", memory=None, node_name="n1", phase="Succeeded")
        for i in range(succeeded)
    ]
    return objs


@pytest.mark.parametrize(
    ("others", "min_cpu", "admitted"),
    [
        pytest.param(
            [pod("busy", cpu="4", memory=None, node_name="n1")],
            "8",
            True,
            id="used resources are taken off: 12 − 4 leaves 8",
        ),
        pytest.param(
            [pod("busy", cpu="4", memory=None, node_name="n1")],
            "9",
            False,
            id="used resources are taken off: 9 is too much",
        ),
        pytest.param(
            [podgroup("admitted", phase="Inqueue", min_resources={"cpu": "6"})],
            "6",
            True,
            id="an Inqueue job's minimum counts: 6 + 6 fits 12",
        ),
        pytest.param(
            [podgroup("admitted", phase="Inqueue", min_resources={"cpu": "6"})],
            "7",
            False,
            id="an Inqueue job's minimum counts: 6 + 7 does not",
        ),
        pytest.param(
            _running(min_member=1, min_cpu="4", running=["1"]),
            "8",
            True,
            id="a Running job short of its minimum holds only the missing 3: 12 − 1 − 3",
        ),
        pytest.param(
            _running(min_member=1, min_cpu="4", running=["1"]),
            "9",
            False,
            id="a Running job short of its minimum holds the missing part",
        ),
        pytest.param(
            _running(min_member=1, min_cpu="2", running=["3"]),
            "9",
            True,
            id="a Running job above its minimum holds nothing more",
        ),
        pytest.param(
            _running(min_member=2, min_cpu="4", running=["1"]),
            "11",
            True,
            id="a Running job with fewer allocated pods than minMember holds nothing",
        ),
        pytest.param(
            _running(min_member=2, min_cpu="4", running=["1"], succeeded=1),
            "11",
            True,
            id="succeeded pods do not count as allocated for that test",
        ),
        pytest.param(
            [podgroup("admitted", phase="Inqueue")],
            "12",
            True,
            id="an Inqueue job without minResources holds nothing",
        ),
    ],
)
def test_idle_and_admitted_jobs(others: list[Obj], min_cpu: str, admitted: bool) -> None:
    ssn = open_session([node("n1", cpu="10"), *others, *new_job(min_cpu)], overcommit_policy())
    assert ssn.job_enqueueable(ssn.jobs["default/new"]) is admitted


def test_rejection_is_recorded_as_an_event_and_the_job_reason() -> None:
    ssn = open_session([node("n1", cpu="10"), *new_job("13")], overcommit_policy())
    job = ssn.jobs["default/new"]
    assert not ssn.job_enqueueable(job)
    msg = "resource in cluster is overused: overused cpu"
    # the event has Volcano's exact words; the reason adds the numbers that make them true
    numbers = "cpu 0 used + 0 admitted + 13 requested > 12 allocatable × overcommit-factor"
    assert job.fit_error == f"{msg} ({numbers})"
    assert ssn.result.events == [
        Event("PodGroup", "default", "new", "Normal", "Unschedulable", msg)
    ]


def test_a_job_without_min_resources_is_always_admitted() -> None:
    ssn = open_session(
        [node("n1", cpu="1"), podgroup("free"), pod("free-0", group="free", cpu="50")],
        overcommit_policy(),
    )
    assert ssn.job_enqueueable(ssn.jobs["default/free"])


def test_jobs_admitted_in_the_same_session_count_against_idle() -> None:
    objs: list[Obj] = [node("n1", cpu="10")]
    for i in range(3):
        objs += [
            podgroup(f"j{i}", min_resources={"cpu": "5"}, created=1e9 + i),
            pod(f"j{i}-0", group=f"j{i}", cpu="5", memory=None),
        ]
    sim = scenario(objs, policy_yaml=overcommit_policy())
    phases = {k: v["phase"] for k, v in summary(sim)["podGroups"].items()}
    # 5 + 5 ≤ 12, a third 5 is not
    assert phases == {"default/j0": "Inqueue", "default/j1": "Inqueue", "default/j2": "Pending"}
    assert [(e.name, e.message) for e in sim.cycles[0].result.events] == [
        ("j2", "resource in cluster is overused: overused cpu")
    ]
