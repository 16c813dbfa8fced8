"""The webhook manager's options as the queue rules read them (``validate_queue.go``:
``validateQueueDepth`` with ``MaxQueueDepth``, ``validateQueueDeleting`` with
``EnableQueueAllocatedPodsCheck``, ``AdmitQueues`` with ``EnableRootQueueProtection``)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import node, pod, queue, state_of
from caldera.admission.queues import validate_queue
from caldera.admission.review import Denied, Options, Review
from caldera.cache.state import ClusterState


def _queue(name: str, parent: str = "", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"parent": parent, **spec}}


def _review(state: ClusterState, operation: str, obj: dict[str, Any], **options: Any) -> Review:
    return Review(
        operation=operation,
        name=obj["metadata"]["name"],
        namespace="",
        obj=obj if operation != "DELETE" else {},
        old=obj if operation != "CREATE" else None,
        state=state,
        options=Options(**options),
    )


def _chain() -> ClusterState:
    return state_of([queue("q1"), queue("q2", parent="q1"), queue("q3", parent="q2")])


def test_max_queue_depth_counts_the_queues_below_root() -> None:
    state = _chain()
    validate_queue(_review(state, "CREATE", _queue("q4", "q3"), max_queue_depth=4))
    with pytest.raises(Denied, match=r"^queue q4 exceeds the maximum allowed depth of 3$"):
        validate_queue(_review(state, "CREATE", _queue("q4", "q3"), max_queue_depth=3))


def test_a_queue_with_running_pods_may_be_deleted_unless_the_check_is_on() -> None:
    state = state_of(
        [
            node("n1"),
            queue("busy"),
            pod("p", node_name="n1", annotations={"scheduling.volcano.sh/queue-name": "busy"}),
        ]
    )
    validate_queue(_review(state, "DELETE", _queue("busy")))
    with pytest.raises(
        Denied, match=r"^queue busy cannot be deleted because it has allocated Pods: 1$"
    ):
        validate_queue(_review(state, "DELETE", _queue("busy"), allocated_pods_check=True))


def test_root_protection_can_be_switched_off() -> None:
    state = state_of([queue("root")])
    changed = _queue("root", capability={"cpu": "100"})
    review = Review("UPDATE", "root", "", changed, state, old=_queue("root"))
    with pytest.raises(Denied, match="cannot be modified"):
        validate_queue(review)
    validate_queue(
        Review(
            "UPDATE",
            "root",
            "",
            changed,
            state,
            old=_queue("root"),
            options=Options(root_protection=False),
        )
    )


def test_an_unknown_operation_is_refused_with_volcanos_message() -> None:
    with pytest.raises(Denied) as caught:
        validate_queue(_review(_chain(), "CONNECT", _queue("x")))
    assert str(caught.value) == (
        "invalid operation `CONNECT`, expect operation to be `CREATE`, `UPDATE` or `DELETE`"
    )
