"""proportion: weighted water-filling of the cluster between queues, and the verdicts built on it.

Expected numbers are worked out by hand from Volcano's algorithm (proportion.go): every round each
queue that still wants more gets ``remaining × weight / Σweights`` on top of what it has, capped by
its real capability and its request, floored at its guarantee; a queue is met when its request is
covered or when a round leaves its deserved unchanged; rounds stop when nothing is left or nothing
moved. realCapability = min(capability, total − Σguarantee + own guarantee).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from builders import Obj, binds, node, open_session, pod, podgroup, queue, scenario, summary
from caldera.api.queue import Queue
from caldera.api.resources import ResourceSpace, Vector
from caldera.api.task import TaskStatus
from caldera.framework.intents import Event
from caldera.framework.session import Session
from caldera.plugins.proportion import QueueShare, water_fill

PROPORTION = """\
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
  - name: proportion
  - name: predicates
"""

INF = math.inf


def shares(ssn: Session) -> dict[str, QueueShare]:
    plugin = next(p for p in ssn.plugins if p.name == "proportion")
    out: dict[str, QueueShare] = plugin.shares  # type: ignore[attr-defined]
    return out


def cpu(vec: Vector, space: ResourceSpace) -> float:
    """Cores (the engine keeps millicores)."""
    return float(vec[space.index["cpu"]]) / 1000


# -- water_fill, the pure function -----------------------------------------------------------

SPACE = ResourceSpace()


def _share(weight: int, request: float, real_cap: float, guarantee: float) -> QueueShare:
    """A queue asking ``request`` cores (nothing else), capped at ``real_cap`` cores."""
    zeros = SPACE.zeros()
    q = Queue(
        name=f"q{weight}",
        uid="",
        weight=weight,
        capability=SPACE.vector({}, missing=INF),
        guarantee=SPACE.vector({"cpu": guarantee * 1000}),
        deserved_spec=None,
        parent="",
        state="Open",
        reclaimable=True,
        priority=0,
        creation=0.0,
        status_allocated={},
    )
    return QueueShare(
        queue=q,
        allocated=zeros.copy(),
        request=SPACE.vector({"cpu": request * 1000}),
        inqueue=zeros.copy(),
        elastic=zeros.copy(),
        real_capability=SPACE.vector({"cpu": real_cap * 1000}, missing=INF),
        deserved=zeros.copy(),
    )


@pytest.mark.parametrize(
    ("total", "queues", "expected"),
    [
        pytest.param(
            8,
            [(1, 100, INF, 0), (3, 100, INF, 0)],
            [2, 6],
            id="weights 1:3 on 8 cpu, both asking a lot, get 2 and 6",
        ),
        pytest.param(
            8,
            [(1, 1, INF, 0), (1, 100, INF, 0)],
            [1, 7],
            id="a queue asking little gets its request and the rest goes to the other",
        ),
        pytest.param(
            8,
            [(1, 2, INF, 0), (5, 3, INF, 0)],
            [2, 3],
            id="when every request fits, each queue gets exactly its request",
        ),
        pytest.param(
            10,
            [(1, 1, INF, 0), (1, 100, INF, 0), (2, 100, INF, 0)],
            # round 1: 2.5→1 (met), 2.5, 5, 1.5 left; round 2: +0.5 and +1
            [1, 3, 6],
            id="what a met queue leaves is shared by the weights of the others",
        ),
        pytest.param(
            8,
            [(1, 100, 1, 0), (1, 100, INF, 0)],
            # the capped queue's deserved stops moving, so it is met and the other gets 7 exactly
            [1, 7],
            id="a queue capped by its real capability leaves exactly the rest to the other",
        ),
        pytest.param(
            8,
            [(1, 100, 2, 0), (1, 100, 3, 0)],
            [2, 3],
            id="when every queue is capped the leftover stays unassigned",
        ),
        pytest.param(
            8,
            # Σguarantee 3: real capabilities 8−3+3 = 8 and 8−3 = 5
            [(1, 100, 8, 3), (3, 100, 5, 0)],
            [3, 5],
            id="a guarantee above the weighted share is the floor",
        ),
        pytest.param(
            8,
            # Σguarantee 4: real capabilities 8 and 4
            [(1, 1, 8, 4), (1, 100, 4, 0)],
            [4, 4],
            id="a guarantee is kept even above the queue's request",
        ),
        pytest.param(0, [(1, 5, INF, 0), (1, 5, INF, 0)], [0, 0], id="an empty cluster"),
    ],
)
def test_water_fill_shares_by_weight(
    total: float, queues: list[tuple[int, float, float, float]], expected: list[float]
) -> None:
    qs = [_share(*q) for q in queues]
    water_fill(SPACE, SPACE.vector({"cpu": total * 1000}), qs)
    assert [cpu(s.deserved, SPACE) for s in qs] == expected


# -- the session: real capability, deserved, order, overuse, allocatable --------------------


def test_real_capability_is_capability_capped_by_what_other_guarantees_leave() -> None:
    ssn = open_session(
        [
            node("n1", cpu="8", memory="16Gi"),
            queue("a", guarantee={"cpu": "2"}, capability={"cpu": "10"}),
            queue("b", guarantee={"cpu": "3"}, capability={"cpu": "4"}),
            queue("c"),
            queue("idle", guarantee={"cpu": "1"}),
            *(podgroup(f"pg-{q}", queue=q) for q in ("a", "b", "c", "default")),
            *(pod(f"p-{q}", group=f"pg-{q}", cpu="100m") for q in ("a", "b", "c", "default")),
        ],
        PROPORTION,
    )
    s = shares(ssn)
    # Σguarantee = 6 cpu (the job-less queue's guarantee is held back too):
    # a = min(10, 8−6+2), b = min(4, 8−6+3), c and default = 8−6
    assert {q: cpu(s[q].real_capability, ssn.space) for q in ("a", "b", "c", "default")} == {
        "a": 4,
        "b": 4,
        "c": 2,
        "default": 2,
    }
    # as in Volcano, a queue without jobs takes no part in sharing
    assert "idle" not in s
    mem = ssn.space.index["memory"]
    # no memory capability or guarantee: the whole cluster's memory
    assert {v.real_capability[mem] for v in s.values()} == {16 * 2**30}


def test_deserved_is_reported_in_the_cycle_result() -> None:
    sim = scenario(
        [
            node("n1", cpu="8", memory="64Gi"),
            queue("a", weight=1),
            queue("b", weight=3),
            podgroup("ja", queue="a"),
            podgroup("jb", queue="b"),
            *(pod(f"a{i}", group="ja", memory=None) for i in range(10)),
            *(pod(f"b{i}", group="jb", memory=None) for i in range(10)),
        ],
        policy_yaml=PROPORTION,
    )
    deserved = sim.cycles[0].result.deserved
    assert deserved["a"] == {"cpu": "2", "memory": "0"}
    assert deserved["b"] == {"cpu": "6", "memory": "0"}
    assert "default" not in deserved  # no jobs: not part of the sharing


def _two_queues(
    *, a_running: int = 0, a_priority: int = 0, b_running: int = 0, b_priority: int = 0
) -> list[Obj]:
    """4 cpu; queues a and b each ask 10 one-core pods (deserved 2 cpu each, no memory)."""
    objs: list[Obj] = [
        node("n1", cpu="4", memory="8Gi"),
        queue("a", priority=a_priority),
        queue("b", priority=b_priority),
        podgroup("ja", queue="a"),
        podgroup("jb", queue="b"),
    ]
    for name, running in (("a", a_running), ("b", b_running)):
        objs += [
            pod(f"{name}-run{i}", group=f"j{name}", memory=None, node_name="n1")
            for i in range(running)
        ]
        objs += [pod(f"{name}{i}", group=f"j{name}", memory=None) for i in range(10 - running)]
    return objs


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, ["a", "b"], id="equal priority and share fall back to creation order"),
        pytest.param({"a_running": 1}, ["b", "a"], id="equal priority: the lower share goes first"),
        pytest.param(
            {"a_running": 1, "a_priority": 5},
            ["a", "b"],
            id="a higher spec.priority goes first whatever its share",
        ),
        pytest.param(
            {"b_priority": 1}, ["b", "a"], id="priority beats creation order between equal shares"
        ),
    ],
)
def test_queue_order_is_priority_then_share(kwargs: dict[str, int], expected: list[str]) -> None:
    ssn = open_session(_two_queues(**kwargs), PROPORTION)
    ordered = sorted((ssn.queues["a"], ssn.queues["b"]), key=ssn.queue_order_key())
    assert [q.name for q in ordered] == expected


@pytest.mark.parametrize(
    ("a_running", "overused"),
    [
        pytest.param(0, False, id="a queue below its deserved is not overused"),
        pytest.param(1, False, id="half of the deserved is not overused"),
        pytest.param(2, True, id="a queue at its deserved is overused"),
        pytest.param(3, True, id="a queue over its deserved is overused"),
    ],
)
def test_overused_when_allocated_reaches_deserved(a_running: int, overused: bool) -> None:
    ssn = open_session(_two_queues(a_running=a_running), PROPORTION)
    # a asks 10 cores, b 10: 2 each (a running 3 is over its share of a 4-core cluster)
    assert cpu(shares(ssn)["a"].deserved, ssn.space) == 2
    assert ssn.overused(ssn.queues["a"]) is overused


def test_allocate_skips_an_overused_queue() -> None:
    sim = scenario(_two_queues(a_running=2), policy_yaml=PROPORTION)
    assert sorted(binds(sim)) == ["default/b0", "default/b1"]


def test_allocatable_keeps_each_requested_dimension_within_deserved() -> None:
    objs: list[Obj] = [
        node("n1", cpu="4", memory="8Gi"),
        queue("default"),
        queue("b"),
        podgroup("ja"),
        podgroup("jb", queue="b"),
        pod("run", group="ja", cpu="1", memory=None, node_name="n1"),
        pod("one-cpu", group="ja", cpu="1", memory=None),
        pod("two-cpu", group="ja", cpu="2", memory=None),
        pod("one-gi", group="ja", cpu=None, memory="1Gi"),
        *(pod(f"b{i}", group="jb", memory=None) for i in range(10)),
    ]
    ssn = open_session(objs, PROPORTION)
    a = shares(ssn)["default"]
    # request 4 cpu and 1Gi: deserved 2 cpu (half the cluster) and 1Gi (its whole request)
    assert cpu(a.deserved, ssn.space) == 2
    assert a.deserved[ssn.space.index["memory"]] == 2**30
    verdicts = {
        t.name: ssn.allocatable(ssn.queues["default"], t)
        for t in ssn.jobs["default/ja"].tasks.values()
        if t.name != "run"
    }
    # allocated 1 cpu: +1 fits (2 ≤ 2), +2 does not (3 > 2); the memory-only task is checked
    # only on memory (0 + 1Gi ≤ 1Gi) although the queue has no cpu to spare after one-cpu
    assert verdicts == {"one-cpu": True, "two-cpu": False, "one-gi": True}


def test_allocatable_follows_allocations_within_the_session() -> None:
    ssn = open_session(_two_queues(), PROPORTION)
    a = ssn.queues["a"]
    tasks = sorted(ssn.jobs["default/ja"].tasks.values(), key=lambda t: t.name)
    assert ssn.allocatable(a, tasks[0])
    ssn.place(tasks[0], 0, TaskStatus.ALLOCATED)
    ssn.place(tasks[1], 0, TaskStatus.ALLOCATED)
    assert shares(ssn)["a"].share == 1.0
    assert not ssn.allocatable(a, tasks[2])
    assert ssn.overused(a)
    ssn.unplace(tasks[1])
    assert shares(ssn)["a"].share == 0.5
    assert ssn.allocatable(a, tasks[2])


def test_two_queues_with_equal_weights_get_equal_shares_end_to_end() -> None:
    objs: list[Obj] = [
        node("n1", cpu="4", memory="8Gi"),
        queue("a"),
        queue("b"),
        podgroup("ja", queue="a"),
        podgroup("jb", queue="b"),
        *(pod(f"a{i}", group="ja") for i in range(10)),
        *(pod(f"b{i}", group="jb") for i in range(10)),
    ]
    sim = scenario(objs, policy_yaml=PROPORTION, cycles=2)
    bound = binds(sim)
    assert sum(1 for k in bound if k.startswith("default/a")) == 2
    assert sum(1 for k in bound if k.startswith("default/b")) == 2
    # request 10 cpu / 10Gi each on 4 cpu / 8Gi: half of everything
    assert sim.cycles[0].result.deserved["a"] == {"cpu": "2", "memory": "4Gi"}
    assert sim.cycles[0].result.deserved["b"] == {"cpu": "2", "memory": "4Gi"}


# -- enqueue: the queue's real capability as an admission gate -----------------------------


def _enqueue_case(
    *,
    capability: dict[str, str] | None = None,
    new_min: str = "1",
    running: tuple[str, str] | None = None,
    inqueue_min: str | None = None,
    other_guarantee: str | None = None,
    running_memory: str | None = None,
) -> list[Obj]:
    """Queue q (capability 4 cpu unless given) on an 8-cpu node, and a pending job ``new``.

    ``running`` = (allocated cpu, minResources cpu) of a Running job in q.
    """
    objs: list[Obj] = [
        node("n1", cpu="8", memory="64Gi"),
        queue("q", capability=capability if capability is not None else {"cpu": "4"}),
        podgroup("new", queue="q", min_resources={"cpu": new_min}),
        pod("new-0", group="new", cpu=new_min, memory=None),
    ]
    if running is not None:
        used, minimum = running
        objs += [
            podgroup("old", queue="q", phase="Running", min_resources={"cpu": minimum}),
            pod("old-0", group="old", cpu=used, memory=running_memory, node_name="n1"),
        ]
    if inqueue_min is not None:
        objs += [
            podgroup("admitted", queue="q", phase="Inqueue", min_resources={"cpu": inqueue_min}),
            pod("admitted-0", group="admitted", cpu=inqueue_min, memory=None),
        ]
    if other_guarantee is not None:
        objs.append(queue("other", guarantee={"cpu": other_guarantee}))
    return objs


@pytest.mark.parametrize(
    ("case", "admitted"),
    [
        pytest.param({"new_min": "4"}, True, id="a minimum equal to the capability is admitted"),
        pytest.param({"new_min": "5"}, False, id="a minimum above the capability is rejected"),
        pytest.param(
            {"new_min": "2", "running": ("2", "2")}, True, id="allocated plus minimum fits"
        ),
        pytest.param(
            {"new_min": "3", "running": ("2", "2")},
            False,
            id="the queue's allocated resources count against its capability",
        ),
        pytest.param(
            {"new_min": "2", "inqueue_min": "3"},
            False,
            id="admitted (Inqueue) jobs' minimums count against the capability",
        ),
        pytest.param(
            {"new_min": "3", "running": ("3", "1")},
            True,
            id="what running jobs hold above their minimum (elastic) is subtracted",
        ),
        pytest.param(
            {"new_min": "3", "other_guarantee": "6"},
            False,
            id="another queue's guarantee shrinks the real capability below the capability",
        ),
        pytest.param(
            {
                "capability": {"cpu": "4", "memory": "1Gi"},
                "new_min": "1",
                "running": ("1", "1"),
                "running_memory": "2Gi",
            },
            True,
            id="only dimensions the job's minimum names are checked",
        ),
    ],
)
def test_enqueueable_checks_the_real_capability(case: dict[str, Any], admitted: bool) -> None:
    ssn = open_session(_enqueue_case(**case), PROPORTION)
    job = ssn.jobs["default/new"]
    assert ssn.job_enqueueable(job) is admitted
    if admitted:
        assert ssn.result.events == []
    else:
        msg = "queue resource quota insufficient: insufficient cpu"
        assert job.fit_error == msg
        assert ssn.result.events == [
            Event("PodGroup", "default", "new", "Normal", "Unschedulable", msg)
        ]


def test_enqueue_admits_jobs_one_by_one_until_the_capability_is_used_up() -> None:
    objs: list[Obj] = [node("n1", cpu="8", memory="8Gi"), queue("q", capability={"cpu": "4"})]
    for i in range(3):
        objs += [
            podgroup(f"j{i}", queue="q", min_resources={"cpu": "2"}, created=1e9 + i),
            pod(f"j{i}-0", group=f"j{i}", cpu="2", memory=None),
        ]
    sim = scenario(objs, policy_yaml='actions: "enqueue"\n' + PROPORTION.split("\n", 1)[1])
    phases = {k: v["phase"] for k, v in summary(sim)["podGroups"].items()}
    assert phases == {"default/j0": "Inqueue", "default/j1": "Inqueue", "default/j2": "Pending"}
    assert [e.message for e in sim.cycles[0].result.events] == [
        "queue resource quota insufficient: insufficient cpu"
    ]


# -- a Closed queue ------------------------------------------------------------------------


def test_a_closed_queue_admits_nothing() -> None:
    objs: list[Obj] = [
        node("n1", cpu="8", memory="8Gi"),
        queue("q", state="Closed"),
        podgroup("gated", queue="q", min_resources={"cpu": "1"}),
        pod("gated-0", group="gated"),
        podgroup("free", queue="q"),
        pod("free-0", group="free"),
    ]
    ssn = open_session(objs, PROPORTION)
    gated = ssn.jobs["default/gated"]
    assert not ssn.job_enqueueable(gated)
    assert gated.fit_error == "queue q is Closed: it takes no new pods"
    task = next(iter(ssn.jobs["default/free"].tasks.values()))
    assert not ssn.allocatable(ssn.queues["q"], task)

    sim = scenario(objs, policy_yaml=PROPORTION, cycles=2)
    assert binds(sim) == {}
