"""resourcequota: jobs are admitted only while their namespace's ResourceQuotas have room.

Cases follow Volcano's ``TestResourceQuotaPlugin`` (``pkg/scheduler/plugins/resourcequota``) in
spirit, and the rules of its ``JobEnqueueableFn``: minResources masked to each quota's ``hard``
names, plus the quota's ``used`` and what this session already admitted in the namespace, must
stay within ``hard``.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from builders import (
    Obj,
    default_policy_with,
    node,
    pod,
    podgroup,
    resource_quota,
    scenario,
    summary,
)
from caldera.framework.intents import Event
from caldera.simulate.runner import Simulation

POLICY = default_policy_with(add={"resourcequota": "overcommit"})


def run(*objects: Obj) -> Simulation:
    return scenario([node("n1", cpu="64", memory="256Gi"), *objects], policy_yaml=POLICY)


def job(
    name: str, min_resources: Mapping[str, str] | None, *, namespace: str = "default"
) -> list[Obj]:
    return [
        podgroup(name, namespace=namespace, min_resources=min_resources),
        pod(f"{name}-0", namespace=namespace, group=name, cpu="1"),
    ]


def phases(sim: Simulation) -> dict[str, str]:
    return {k: v["phase"] for k, v in summary(sim)["podGroups"].items()}


def quota_events(sim: Simulation) -> list[Event]:
    return [e for e in sim.cycles[0].result.events if e.message.startswith("resource quota")]


NORMAL = {"cpu": "2", "memory": "2G"}
HUGE = {"cpu": "20", "memory": "20G"}


@pytest.mark.parametrize(
    ("min_resources", "quotas", "phase"),
    [
        pytest.param(
            NORMAL, [resource_quota("rq", NORMAL)], "Inqueue", id="the quota has room for the job"
        ),
        pytest.param(
            HUGE, [resource_quota("rq", NORMAL)], "Pending", id="the quota is smaller than the job"
        ),
        pytest.param(HUGE, [], "Inqueue", id="a namespace without a quota admits any job"),
        pytest.param(
            None, [resource_quota("rq", NORMAL)], "Inqueue", id="a job without minResources passes"
        ),
        pytest.param(
            HUGE,
            [resource_quota("rq", NORMAL, namespace="other")],
            "Inqueue",
            id="another namespace's quota does not count",
        ),
        pytest.param(
            {"cpu": "2"},
            [resource_quota("rq", {"memory": "1G"})],
            "Inqueue",
            id="a quota on a resource the job does not ask for does not count",
        ),
        pytest.param(
            {"cpu": "2"},
            [resource_quota("rq", {"requests.cpu": "1"})],
            "Pending",
            id="a plain request counts against its requests. spelling",
        ),
        pytest.param(
            {"cpu": "2"},
            [resource_quota("rq", {"limits.cpu": "1"})],
            "Inqueue",
            id="limits cannot be told from requests: a limits quota passes a plain request",
        ),
        pytest.param(
            {"limits.cpu": "2", "cpu": "2"},
            [resource_quota("rq", {"limits.cpu": "1"})],
            "Pending",
            id="minResources in quota terms is compared name by name",
        ),
        pytest.param(
            {"cpu": "2"},
            [resource_quota("rq", {"cpu": "1"}, status_hard={"cpu": "4"})],
            "Inqueue",
            id="the limit the quota controller enforces (status.hard) wins over spec.hard",
        ),
        pytest.param(
            {"cpu": "2"},
            [resource_quota("loose", {"cpu": "10"}), resource_quota("tight", {"cpu": "1"})],
            "Pending",
            id="every quota of the namespace must have room",
        ),
    ],
)
def test_a_job_is_admitted_only_while_its_namespace_quotas_have_room(
    min_resources: Mapping[str, str] | None, quotas: list[Obj], phase: str
) -> None:
    sim = run(*quotas, *job("pg", min_resources))
    assert phases(sim) == {"default/pg": phase}


def test_a_rejected_job_gets_volcanos_event_naming_only_the_exceeded_resources() -> None:
    quota = resource_quota("rq", {"cpu": "4", "memory": "8Gi"}, used={"cpu": "3", "memory": "1Gi"})
    sim = run(quota, *job("pg", {"cpu": "2", "memory": "1Gi"}))
    assert phases(sim) == {"default/pg": "Pending"}
    message = (
        "resource quota insufficient, requested: map[cpu:2], used: map[cpu:3], limited: map[cpu:4]"
    )
    assert quota_events(sim) == [
        Event("PodGroup", "default", "pg", "Normal", "Unschedulable", message)
    ]
    (condition,) = summary(sim)["podGroups"]["default/pg"]["conditions"]
    assert condition["type"] == "Unschedulable"
    assert condition["message"].endswith(f"Origin reason is {message}")


def test_jobs_admitted_earlier_in_the_session_count_against_the_quota() -> None:
    quota = resource_quota("rq", {"cpu": "3"})
    first, second = job("first", {"cpu": "2"}), job("second", {"cpu": "2"})
    sim = run(quota, *first, *second)
    assert phases(sim) == {"default/first": "Inqueue", "default/second": "Pending"}
    (event,) = quota_events(sim)
    # used is the quota's own status: what this session admitted is not in it
    assert event.name == "second"
    assert event.message == (
        "resource quota insufficient, requested: map[cpu:2], used: map[], limited: map[cpu:3]"
    )


def test_quota_cpu_spellings_keep_millicores() -> None:
    quota = resource_quota("rq", {"requests.cpu": "1500m"}, used={"requests.cpu": "500m"})
    sim = run(quota, *job("fits", {"requests.cpu": "1"}), *job("over", {"requests.cpu": "100m"}))
    assert phases(sim) == {"default/fits": "Inqueue", "default/over": "Pending"}
    (event,) = quota_events(sim)
    assert event.message == (
        "resource quota insufficient, requested: map[requests.cpu:100m], "
        "used: map[requests.cpu:500m], limited: map[requests.cpu:1500m]"
    )
