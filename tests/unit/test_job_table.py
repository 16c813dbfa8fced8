"""The session's job table gives the sums the per-job loops of Volcano's plugins give."""

from __future__ import annotations

import random

import numpy as np
import pytest

from builders import engine_task
from caldera.api.compare import ShareMeter
from caldera.api.job import Job
from caldera.api.jobtable import JobTable, SettledJobs, partition
from caldera.api.resources import ResourceSpace
from caldera.api.task import ALLOCATED_STATUSES, TaskStatus
from caldera.models.volcano import PodGroupStatus

SPACE = ResourceSpace(["nvidia.com/gpu"])


def random_jobs(seed: int) -> list[Job]:
    rng = random.Random(seed)
    jobs = []
    for i in range(40):
        job = Job(
            uid=f"ns/j{i}",
            namespace="ns",
            name=f"j{i}",
            queue=rng.choice(["a", "b", "gone"]),
            priority=0,
            min_available=rng.choice([1, 2, 3]),
            min_task_member={},
            min_resources=(
                None if rng.random() < 0.3 else SPACE.vector({"cpu": rng.choice([500, 3000])})
            ),
            creation=0.0,
            phase=rng.choice(["Pending", "Inqueue", "Running"]),
            annotations={},
            conditions=[],
            allocated=SPACE.zeros(),
            api_status=PodGroupStatus(),
        )
        for k in range(rng.randint(0, 4)):
            status = rng.choice([TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.BOUND])
            task = engine_task(SPACE, f"j{i}-{k}", cpu=rng.choice(["100m", "700m"]), status=status)
            task.job = job.uid
            job.add_task(task)
        jobs.append(job)
    return jobs


@pytest.mark.parametrize("seed", range(5))
def test_admitted_and_queue_sums_equal_volcanos_per_job_loops(seed: int) -> None:
    jobs = random_jobs(seed)
    table = JobTable(SPACE, jobs)
    expected = {q: SPACE.zeros() for q in ("a", "b")}
    inqueue = {q: SPACE.zeros() for q in ("a", "b")}
    request = {q: SPACE.zeros() for q in ("a", "b")}
    for job in jobs:  # the loops of OnSessionOpen in proportion.go and overcommit.go
        if job.queue not in expected:
            continue
        expected[job.queue] += job.allocated
        request[job.queue] += job.allocated
        for task in job.by_status.get(TaskStatus.PENDING, {}).values():
            request[job.queue] += task.resreq
        if job.min_resources is None:
            continue
        if job.phase == "Inqueue":
            inqueue[job.queue] += job.min_resources
        elif job.phase == "Running" and job.count(*ALLOCATED_STATUSES) >= job.min_available:
            inqueue[job.queue] += np.maximum(job.min_resources - job.allocated, 0.0)
    names = ["a", "b"]
    assert table.sum_by(names, table.allocated).tolist() == [expected[q].tolist() for q in names]
    assert table.sum_by(names, table.admitted()).tolist() == [inqueue[q].tolist() for q in names]
    assert table.sum_by(names, table.pending_requests()).tolist() == [
        request[q].tolist() for q in names
    ]
    everyone = sum((inqueue[q] for q in names), SPACE.zeros())
    in_known = np.array([job.queue in expected for job in jobs])
    assert table.total(table.admitted(), in_known).tolist() == everyone.tolist()


def test_shares_of_many_rows_equal_one_row_at_a_time() -> None:
    rng = np.random.default_rng(3)
    total = np.array([4000.0, 0.0, 10.0, 8.0])  # memory is 0: a request for it counts as 1
    space = ResourceSpace(["nvidia.com/gpu"])
    meter = ShareMeter(space, total)
    rows = rng.integers(0, 3, size=(50, 4)).astype(np.float64) * np.array([1000, 1, 1, 2])
    assert meter.many(rows).tolist() == [meter(row) for row in rows]


def settle_some(jobs: list[Job]) -> None:
    """Make every job whose tasks are all placed a settled-looking one: an in-memory group,
    Running and ready."""
    for job in jobs:
        if job.tasks and not job.by_status.get(TaskStatus.PENDING):
            job.has_object = False
            job.phase = "Running"
            job.min_available = min(job.min_available, len(job.tasks))


@pytest.mark.parametrize("seed", range(5))
def test_sums_with_settled_jobs_kept_apart_equal_the_sums_over_every_job(seed: int) -> None:
    jobs = random_jobs(seed)
    settle_some(jobs)
    whole = JobTable(SPACE, jobs)
    active, settled = partition(SPACE, {job.uid: job for job in jobs})
    assert 0 < len(settled) < len(jobs)
    split = JobTable(SPACE, list(active.values()), settled)
    names = ["a", "b", "gone"]
    assert split.queue_names() == set(whole.queues)
    expected = (
        whole.sum_by(names, whole.allocated),
        whole.sum_by(names, whole.pending_requests()),
        whole.sum_by(names, whole.admitted(inqueue_owed=True)),
        whole.sum_by(names, np.maximum(whole.allocated - whole.minimum, 0.0)),
    )
    for got, want in zip(split.queue_sums(names), expected, strict=True):
        assert got.tolist() == want.tolist()
    assert split.total_admitted().tolist() == whole.total(whole.admitted(), whole.has_min).tolist()


def test_settled_sums_kept_by_add_and_remove_equal_sums_made_at_once() -> None:
    jobs = random_jobs(7)
    settle_some(jobs)
    _, at_once = partition(SPACE, {job.uid: job for job in jobs})
    members = [job for job in jobs if job.uid in at_once]
    kept = SettledJobs(SPACE)
    for job in reversed(members):
        kept.add(job)
    extra = members[0]
    kept.remove(extra)
    kept.add(extra)
    names = ["a", "b", "gone"]
    for got, want in zip(kept.by_queue(names), at_once.by_queue(names), strict=True):
        assert got.tolist() == want.tolist()
    assert kept.admitted_total.tolist() == at_once.admitted_total.tolist()


def test_a_settled_job_a_session_changes_is_woken_and_keeps_its_allocation_at_open() -> None:
    jobs = random_jobs(3)
    settle_some(jobs)
    _, settled = partition(SPACE, {job.uid: job for job in jobs})
    job = next(j for j in jobs if j.uid in settled)
    before = job.allocated.copy()
    task = next(iter(job.tasks.values()))
    job.set_status(task, TaskStatus.RELEASING)
    assert settled.woken == [job]
    assert job.allocated_at_open().tolist() == before.tolist()
    assert job.allocated.tolist() == (before - task.resreq).tolist()
    job.set_status(task, TaskStatus.RUNNING)
    assert settled.woken == [job]  # woken once
