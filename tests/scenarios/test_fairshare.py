"""Fair share under allocate: shares are recomputed as jobs are placed, so the order moves.

Volcano's ``TestFareShareAllocate`` (pkg/scheduler/actions/allocate) runs allocate with drf's job
order and proportion's queue order (allocatable switched off, and overused left off as its test
harness leaves unset switches) on one node of 5 CPUs and 5G. A
queue is taken from the priority queue, one of its jobs is placed, and the queue is pushed back
*with its share as it is now*, so a queue that has just been given resources may have to let
another queue go first. The cases below are those, rebuilt with our builders, plus the job-level
counterpart for drf inside one queue, and the same re-keying in reclaim's turns.
"""

from __future__ import annotations

import textwrap

import pytest

from builders import Obj, binds, node, open_session, pod, podgroup, queue, scenario
from caldera.actions._evict import turns_by_queue_share
from caldera.simulate.runner import Simulation

FAIR_SHARE = textwrap.dedent(
    """\
    actions: "allocate"
    tiers:
    - plugins:
      - name: drf
      - name: proportion
        enabledAllocatable: false
        enabledOverused: false
      - name: predicates
      - name: nodeorder
    """
)
NS = "ns-1"


def run(*objects: Obj) -> Simulation:
    return scenario([node("node-1", cpu="5", memory="5G"), *objects], policy_yaml=FAIR_SHARE)


def group(name: str, q: str, *, running: bool = False) -> Obj:
    return podgroup(
        name, namespace=NS, queue=q, min_member=0, phase="Running" if running else "Inqueue"
    )


def task(name: str, pg: str, cpu: str, memory: str, *, running: bool = False) -> Obj:
    return pod(
        name,
        namespace=NS,
        group=pg,
        cpu=cpu,
        memory=memory,
        node_name="node-1" if running else "",
    )


def bound(sim: Simulation) -> list[str]:
    return sorted(binds(sim))


@pytest.mark.parametrize(
    ("objects", "placed"),
    [
        pytest.param(
            [
                queue("q-1"),
                queue("q-2"),
                group("pg-small-1", "q-1", running=True),
                group("pg-large-1", "q-1"),
                group("pg-large-2", "q-2"),
                task("pod-small-1", "pg-small-1", "1", "1G", running=True),
                task("pod-large-1", "pg-large-1", "2", "2G"),
                task("pod-large-2", "pg-large-2", "3", "2G"),
            ],
            # q-2 holds nothing and goes first; its 3 CPUs leave 1, too few for q-1's job
            ["pod-large-2"],
            id="the queue with the lower share allocates first",
        ),
        pytest.param(
            [
                queue("q-1"),
                queue("q-2"),
                group("pg-small-1", "q-1", running=True),
                group("pg-large-1", "q-1"),
                group("pg-large-2", "q-2"),
                group("pg-small-2", "q-2"),
                task("pod-small-1", "pg-small-1", "1", "1G", running=True),
                task("pod-large-1", "pg-large-1", "2", "2G"),
                task("pod-large-2", "pg-large-2", "2", "2G"),
                task("pod-small-2", "pg-small-2", "1", "1G"),
            ],
            # q-2 (share 0) places pg-large-2 and its share passes q-1's, so q-1's large job
            # goes next and takes the last 2 CPUs; with a share computed once, q-2 would have
            # gone on to place pg-small-2 and left q-1's job without room
            ["pod-large-1", "pod-large-2"],
            id="a queue pushed back after a job is ordered by its new share",
        ),
        pytest.param(
            [
                queue("q-1"),
                group("pg-1", "q-1", running=True),
                group("pg-2", "q-1"),
                task("pod-1", "pg-1", "1", "1G", running=True),
                task("pod-2", "pg-2", "2", "2G"),
            ],
            ["pod-2"],
            id="a queue whose first job has nothing pending goes on to its next job",
        ),
        pytest.param(
            [
                queue("q-1"),
                group("pg-a", "q-1"),
                group("pg-b", "q-1", running=True),
                task("b-0", "pg-b", "1", "1G", running=True),
                task("a-1", "pg-a", "2", "2G"),
                task("a-2", "pg-a", "2", "2G"),
                task("b-1", "pg-b", "2", "2G"),
            ],
            # pg-a (share 0) places a-1 and is ready with a task left; pushed back with its
            # share now (2/5) it comes after pg-b (1/5), which takes the last 2 CPUs before a-2
            ["a-1", "b-1"],
            id="a job pushed back after a task is ordered by its new drf share",
        ),
    ],
)
def test_allocate_reorders_queues_and_jobs_by_their_share_as_it_places(
    objects: list[Obj], placed: list[str]
) -> None:
    assert bound(run(*objects)) == [f"{NS}/{name}" for name in placed]


def test_reclaim_turns_put_a_queue_back_in_line_by_its_share_after_each_job() -> None:
    # reclaim's turns (Volcano: pop a queue, serve a job, push the queue back): once q-1's first
    # job has taken resources, q-2 (share still 0) comes before q-1's second job
    ssn = open_session(
        [
            node("node-1", cpu="5", memory="5G"),
            queue("q-1"),
            queue("q-2"),
            group("pg-1a", "q-1"),
            group("pg-1b", "q-1"),
            group("pg-2a", "q-2"),
            task("p-1a", "pg-1a", "1", "1G"),
            task("p-1b", "pg-1b", "1", "1G"),
            task("p-2a", "pg-2a", "1", "1G"),
        ],
        FAIR_SHARE,
    )
    order = []
    for job in turns_by_queue_share(ssn, list(ssn.jobs.values())):
        order.append(job.name)
        (pending,) = job.tasks.values()
        ssn.statement().allocate(pending, 0)
    assert order == ["pg-1a", "pg-2a", "pg-1b"]
