"""Statement: staged placements on a real session, then commit or discard.

The cluster: nodes ``n1`` and ``n2`` (4 cpu, 8Gi each), a pending gang ``train`` with tasks ``a``,
``b`` and ``c``, and a job ``web`` whose task ``r`` already runs on ``n1``. A ``recorder`` plugin
(added to the registry like any third-party plugin) logs every allocate/deallocate event.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pytest

import builders
from caldera.api.task import Task, TaskStatus, Transaction
from caldera.framework.intents import Bind, Evict
from caldera.framework.interfaces import EventHandler, SessionView
from caldera.framework.plugin import NoArgs, Plugin
from caldera.framework.registry import Registry
from caldera.framework.session import Session
from caldera.framework.statement import Statement

ACCOUNTS = ("used", "idle", "releasing", "pipelined", "future_idle")


class RecorderPlugin(Plugin[NoArgs]):
    name: ClassVar[str] = "recorder"

    def on_session_open(self, ssn: SessionView) -> None:
        self.events: list[tuple[str, str]] = []
        ssn.event_handlers.add(
            self.name,
            EventHandler(
                allocate=lambda t: self.events.append(("allocate", t.name)),
                deallocate=lambda t: self.events.append(("deallocate", t.name)),
            ),
        )


REGISTRY = Registry.from_entry_points()
REGISTRY.add_plugin(RecorderPlugin)
POLICY_YAML = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: recorder\n'


@pytest.fixture
def ssn() -> Session:
    return builders.open_session(
        [
            builders.node("n1"),
            builders.node("n2"),
            builders.podgroup("train", min_member=3, phase="Inqueue"),
            builders.pod("a", group="train", cpu="1", memory="1Gi"),
            builders.pod("b", group="train", cpu="2", memory="2Gi"),
            builders.pod("c", group="train", cpu="500m", memory="512Mi"),
            builders.podgroup("web", phase="Running"),
            builders.pod("r", group="web", cpu="1", memory="2Gi", node_name="n1"),
        ],
        POLICY_YAML,
        registry=REGISTRY,
    )


def task(ssn: Session, name: str) -> Task:
    (found,) = (t for job in ssn.jobs.values() for t in job.tasks.values() if t.name == name)
    return found


def events(ssn: Session) -> list[tuple[str, str]]:
    (recorder,) = (p for p in ssn.plugins if isinstance(p, RecorderPlugin))
    return recorder.events


def accounts(ssn: Session) -> dict[str, np.ndarray]:
    return {name: getattr(ssn.nodes, name).copy() for name in ACCOUNTS}


def assert_accounts_are(ssn: Session, expected: dict[str, np.ndarray]) -> None:
    after = accounts(ssn)
    for account in ACCOUNTS:
        np.testing.assert_array_equal(after[account], expected[account], err_msg=account)


def job_index(ssn: Session, job: str) -> dict[str, object]:
    j = ssn.jobs[job]
    return {
        "by_status": {s: sorted(ts) for s, ts in j.by_status.items() if ts},
        "allocated": j.allocated.copy().tolist(),
        "ready": j.ready_task_num(),
        "waiting": j.waiting_task_num(),
        "valid": j.valid_task_num(),
    }


def stage(stmt: Statement, ssn: Session, op: str, name: str, node: str) -> None:
    t = task(ssn, name)
    if op == "allocate":
        stmt.allocate(t, ssn.nodes.index[node])
    elif op == "pipeline":
        stmt.pipeline(t, ssn.nodes.index[node])
    else:
        stmt.evict(t, "preempted")


@pytest.mark.parametrize(
    ("op", "name", "node", "status", "change", "event"),
    [
        pytest.param(
            "allocate",
            "b",
            "n2",
            TaskStatus.ALLOCATED,
            {"used": 1, "idle": -1, "future_idle": -1},
            ("allocate", "b"),
            id="allocate takes the request from idle and future idle into used",
        ),
        pytest.param(
            "pipeline",
            "b",
            "n2",
            TaskStatus.PIPELINED,
            {"pipelined": 1, "future_idle": -1},
            ("allocate", "b"),
            id="pipeline reserves the request on future idle only",
        ),
        pytest.param(
            "evict",
            "r",
            "n1",
            TaskStatus.RELEASING,
            {"releasing": 1, "future_idle": 1},
            ("deallocate", "r"),
            id="evict keeps the request used but counts it as releasing and future idle",
        ),
    ],
)
def test_each_operation_updates_task_job_and_node_accounting(
    ssn: Session,
    op: str,
    name: str,
    node: str,
    status: TaskStatus,
    change: dict[str, int],
    event: tuple[str, str],
) -> None:
    t = task(ssn, name)
    job = ssn.jobs[t.job]
    row = ssn.nodes.index[node]
    before = accounts(ssn)
    allocated_before = job.allocated.copy()

    stmt = ssn.statement()
    stage(stmt, ssn, op, name, node)

    assert len(stmt) == 1
    assert t.status is status
    assert job.tasks_in(status) == [t]
    assert (t.node, t.node_name) == (row, node)
    assert ssn.nodes.tasks[row][t.uid] is t
    after = accounts(ssn)
    for account in ACCOUNTS:
        expected = before[account].copy()
        expected[row] += change.get(account, 0) * t.resreq
        np.testing.assert_array_equal(after[account], expected, err_msg=account)
    held = {"allocate": 1, "pipeline": 0, "evict": -1}[op]
    np.testing.assert_array_equal(job.allocated, allocated_before + held * t.resreq)
    assert events(ssn) == [event]


@pytest.mark.parametrize(
    ("op", "counts"),
    [
        pytest.param("allocate", (1, 0, 3), id="an allocated task counts as ready"),
        pytest.param("pipeline", (0, 1, 3), id="a pipelined task counts as waiting"),
    ],
)
def test_job_counters_follow_the_staged_status(
    ssn: Session, op: str, counts: tuple[int, int, int]
) -> None:
    stage(ssn.statement(), ssn, op, "a", "n1")
    job = ssn.jobs["default/train"]
    assert (job.ready_task_num(), job.waiting_task_num(), job.valid_task_num()) == counts


def test_discard_undoes_everything_in_reverse_order(ssn: Session) -> None:
    before_nodes = accounts(ssn)
    before_train = job_index(ssn, "default/train")
    before_web = job_index(ssn, "default/web")
    node_tasks = [dict(tasks) for tasks in ssn.nodes.tasks]

    stmt = ssn.statement()
    stage(stmt, ssn, "allocate", "a", "n1")
    stage(stmt, ssn, "pipeline", "b", "n2")
    stage(stmt, ssn, "evict", "r", "n1")
    stage(stmt, ssn, "allocate", "c", "n1")
    assert events(ssn) == [
        ("allocate", "a"),
        ("allocate", "b"),
        ("deallocate", "r"),
        ("allocate", "c"),
    ]

    stmt.discard()

    assert len(stmt) == 0
    assert events(ssn)[4:] == [
        ("deallocate", "c"),
        ("allocate", "r"),
        ("deallocate", "b"),
        ("deallocate", "a"),
    ]
    assert_accounts_are(ssn, before_nodes)
    assert ssn.nodes.tasks == node_tasks
    assert job_index(ssn, "default/train") == before_train
    assert job_index(ssn, "default/web") == before_web
    for name in ("a", "b", "c"):
        t = task(ssn, name)
        assert (t.status, t.node, t.node_name) == (TaskStatus.PENDING, -1, "")
    r = task(ssn, "r")
    assert (r.status, r.node_name) == (TaskStatus.RUNNING, "n1")
    assert ssn.result.binds == []
    assert ssn.result.evictions == []


def test_discard_records_the_last_placement_tried(ssn: Session) -> None:
    stmt = ssn.statement()
    stage(stmt, ssn, "allocate", "a", "n1")
    stage(stmt, ssn, "pipeline", "b", "n2")
    stmt.discard()
    assert task(ssn, "a").last_transaction == Transaction(TaskStatus.ALLOCATED, "n1")
    assert task(ssn, "b").last_transaction == Transaction(TaskStatus.PIPELINED, "n2")
    assert task(ssn, "c").last_transaction is None


def test_discard_restores_a_pipeline_onto_an_evicted_tasks_resources(ssn: Session) -> None:
    """The preempt pattern: evict a victim, pipeline the preemptor into what it releases."""
    before = accounts(ssn)
    stmt = ssn.statement()
    stage(stmt, ssn, "evict", "r", "n1")
    stage(stmt, ssn, "pipeline", "a", "n1")
    stmt.discard()
    assert events(ssn) == [
        ("deallocate", "r"),
        ("allocate", "a"),
        ("deallocate", "a"),
        ("allocate", "r"),
    ]
    assert_accounts_are(ssn, before)
    assert task(ssn, "r").status is TaskStatus.RUNNING
    assert task(ssn, "a").status is TaskStatus.PENDING


def test_commit_turns_allocations_into_binds_and_evictions_into_evicts(ssn: Session) -> None:
    stmt = ssn.statement()
    stage(stmt, ssn, "allocate", "a", "n1")
    stage(stmt, ssn, "evict", "r", "n1")
    stage(stmt, ssn, "pipeline", "c", "n1")
    stage(stmt, ssn, "allocate", "b", "n2")
    before = accounts(ssn)
    events_before = list(events(ssn))

    stmt.commit()

    a, b, c, r = (task(ssn, n) for n in "abcr")
    assert ssn.result.binds == [
        Bind("default", "a", a.uid, "n1", {}),
        Bind("default", "b", b.uid, "n2", {}),
    ]
    assert ssn.result.evictions == [Evict("default", "r", r.uid, "preempted")]
    assert (a.status, b.status) == (TaskStatus.BINDING, TaskStatus.BINDING)
    assert c.status is TaskStatus.PIPELINED  # a pipeline exists only in the session
    assert r.status is TaskStatus.RELEASING
    assert ssn.jobs["default/train"].count(TaskStatus.BINDING) == 2
    assert ssn.jobs["default/train"].ready_task_num() == 2
    assert_accounts_are(ssn, before)
    assert events(ssn) == events_before  # commit places nothing new
    assert len(stmt) == 0


def test_a_discard_after_commit_changes_nothing(ssn: Session) -> None:
    stmt = ssn.statement()
    stage(stmt, ssn, "allocate", "a", "n1")
    stmt.commit()
    before = accounts(ssn)
    stmt.discard()
    assert task(ssn, "a").status is TaskStatus.BINDING
    np.testing.assert_array_equal(accounts(ssn)["used"], before["used"])
    assert len(ssn.result.binds) == 1
