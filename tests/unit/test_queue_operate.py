"""Which bus Commands the operator carries out (Volcano's ``IsQueueReference`` and the two queue
actions); what they then write is :func:`caldera.queue_operate.plan`, tested through
``caldera queue`` (tests/scenarios/test_queue_cli.py) and end to end
(tests/integration/test_queue_cli.py)."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.models.volcano import Queue
from caldera.queue_operate import CLOSED_BY_PARENT, QueueWrite, command_target, follow_parent

QUEUE_REF = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "name": "q",
    "uid": "u",
}


@pytest.mark.parametrize(
    ("body", "wanted"),
    [
        pytest.param(
            {"target": QUEUE_REF, "action": "CloseQueue"}, ("q", "close"), id="close a queue"
        ),
        pytest.param(
            {"target": QUEUE_REF, "action": "OpenQueue"}, ("q", "open"), id="open a queue"
        ),
        pytest.param(
            {
                "target": {**QUEUE_REF, "kind": "Job", "apiVersion": "batch.volcano.sh/v1alpha1"},
                "action": "AbortJob",
            },
            None,
            id="a Job's command is the job controller's",
        ),
        pytest.param(
            {
                "target": {**QUEUE_REF, "apiVersion": "scheduling.volcano.sh/v1alpha1"},
                "action": "CloseQueue",
            },
            None,
            id="a queue of another API version is not Volcano's reference",
        ),
        pytest.param(
            {"target": QUEUE_REF, "action": "SyncQueue"},
            None,
            id="an action not asked of a queue by vcctl",
        ),
        pytest.param({"action": "CloseQueue"}, None, id="no target"),
        pytest.param(
            {"target": {**QUEUE_REF, "name": ""}, "action": "CloseQueue"}, None, id="no queue name"
        ),
    ],
)
def test_the_commands_the_operator_takes(
    body: dict[str, Any], wanted: tuple[str, str] | None
) -> None:
    assert command_target(body) == wanted


def q(name: str, state: str, parent: str = "root", closed_by_parent: str | None = None) -> Queue:
    notes = {} if closed_by_parent is None else {CLOSED_BY_PARENT: closed_by_parent}
    return Queue.model_validate(
        {
            "metadata": {"name": name, "annotations": notes},
            "spec": {"parent": parent},
            "status": {"state": state},
        }
    )


@pytest.mark.parametrize(
    ("parent", "child", "writes"),
    [
        pytest.param(
            q("research", "Closed"),
            q("nlp", "Open", "research"),
            [QueueWrite("nlp", "Closing", {CLOSED_BY_PARENT: "true"})],
            id="an open queue under a closed parent closes, marked closed by it",
        ),
        pytest.param(
            q("research", "Closing"),
            q("nlp", "Open", "research"),
            [QueueWrite("nlp", "Closing", {CLOSED_BY_PARENT: "true"})],
            id="so does one under a closing parent",
        ),
        pytest.param(
            q("research", "Open"),
            q("nlp", "Closed", "research", "true"),
            [QueueWrite("nlp", "Open", {CLOSED_BY_PARENT: "false"})],
            id="a queue its parent closed opens with the parent",
        ),
        pytest.param(
            q("research", "Open"),
            q("nlp", "Closed", "research", "false"),
            [],
            id="a queue closed on its own stays closed",
        ),
        pytest.param(
            q("research", "Closed"),
            q("nlp", "Closing", "research"),
            [],
            id="a queue already closing is left to close",
        ),
        pytest.param(q("research", "Open"), q("nlp", "Open", "research"), [], id="both open"),
    ],
)
def test_a_queue_follows_its_parent_as_syncHierarchicalQueue_has_it(
    parent: Queue, child: Queue, writes: list[QueueWrite]
) -> None:
    queues = {"root": q("root", "Open", ""), "research": parent, "nlp": child}
    assert follow_parent(child, queues) == writes
