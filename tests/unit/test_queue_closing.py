"""The operator's part of ``caldera queue close``: a ``Closing`` queue becomes ``Closed`` once
nothing is in it (Volcano's queue controller, ``pkg/controllers/queue/state/closing.go``: Closed
when the queue's PodGroup list is empty), and never before the cache holds the whole cluster."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from builders import pod, podgroup, queue, state_of
from caldera.cache.state import ClusterState
from caldera.k8s.rest import Rest
from caldera.operator.writers.controllers import Controllers, occupied_queues

GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"


@pytest.mark.parametrize(
    ("objects", "busy"),
    [
        pytest.param([podgroup("pg", queue="research", phase="Running")], {"research"}, id="pg"),
        pytest.param(
            [podgroup("pg", queue="research", phase="Completed")],
            {"research"},
            id="a Completed PodGroup still counts, as in Volcano",
        ),
        pytest.param([podgroup("pg", queue="")], {"default"}, id="no queue: the default"),
        pytest.param(
            [pod("p", annotations={QUEUE: "research"})], {"research"}, id="a bare pod of ours"
        ),
        pytest.param([pod("p")], {"default"}, id="a bare pod naming no queue"),
        pytest.param(
            [pod("p", annotations={QUEUE: "research"}, phase="Succeeded")],
            set(),
            id="a finished bare pod",
        ),
        pytest.param(
            [pod("p", annotations={QUEUE: "research"}, scheduler="default-scheduler")],
            set(),
            id="another scheduler's pod",
        ),
        pytest.param(
            [pod("p", annotations={QUEUE: "research", GROUP: "gone"})],
            set(),
            id="a pod of a PodGroup counts through its PodGroup only",
        ),
    ],
)
def test_a_queue_is_occupied_by_its_podgroups_and_its_bare_unfinished_pods(
    objects: list[Any], busy: set[str]
) -> None:
    state = state_of(objects)
    assert occupied_queues(state, {"volcano"}, "default") == busy


class FakeRest:
    """Records the calls; ``reach.counted`` says no failure is the API's absence."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.reach = self

    async def call(self, verb: str, resource: Any, **options: Any) -> Any:
        self.calls.append((verb, options["name"], options["body"]))
        return {}

    def counted(self, exc: BaseException) -> bool:
        return False


def closing_event(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"parent": "root"}, "status": {"state": "Closing"}}


async def settled(state: ClusterState | None, name: str = "research") -> list[Any]:
    """What the controller writes after a ``Closing`` event for ``name`` with the cache at
    ``state`` (None: not yet synced)."""
    rest = FakeRest()
    controllers = Controllers(cast(Rest, rest), "default")
    controllers.settle_closing(lambda: state, {"volcano"})
    await controllers.on_queue(None, name, closing_event(name))
    await controllers.settle()
    await controllers.close()
    return rest.calls


async def test_an_empty_closing_queue_is_marked_closed() -> None:
    state = state_of([queue("research", state="Closing")])
    assert await settled(state) == [("patch", "research", {"status": {"state": "Closed"}})]


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param([podgroup("pg", queue="research", phase="Running")], id="a PodGroup"),
        pytest.param([pod("p", annotations={QUEUE: "research"})], id="a bare pod"),
        pytest.param([], id="reopened meanwhile (the cache says Open)"),
    ],
)
async def test_a_closing_queue_stays_closing_while_something_is_in_it_or_it_reopened(
    objects: list[Any],
) -> None:
    state_in_cache = "Open" if not objects else "Closing"
    state = state_of([queue("research", state=state_in_cache), *objects])
    assert await settled(state) == []


async def test_nothing_is_closed_before_the_cache_holds_the_whole_cluster() -> None:
    assert await settled(None) == []


def looking(controllers: Controllers) -> asyncio.Task[None] | None:
    """The look the news scheduled, if one is waiting."""
    task = controllers._settling
    return task if task is not None and not task.done() else None


async def test_news_look_again_only_while_a_queue_is_closing() -> None:
    state = state_of([queue("research", state="Closing"), podgroup("pg", queue="research")])
    rest = FakeRest()
    controllers = Controllers(cast(Rest, rest), "default")
    controllers.settle_closing(lambda: state, {"volcano"})
    controllers.poke()  # nothing is closing: no look
    assert looking(controllers) is None
    await controllers.on_queue(None, "research", closing_event("research"))
    assert rest.calls == []  # its PodGroup is still there
    state.podgroups.clear()  # the job was deleted
    controllers.poke()
    task = looking(controllers)
    assert task is not None
    await task
    assert rest.calls == [("patch", "research", {"status": {"state": "Closed"}})]
    controllers.poke()  # Closed now: no more looks
    assert looking(controllers) is None
    await controllers.close()
