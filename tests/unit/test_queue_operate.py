"""Which bus Commands the operator carries out (Volcano's ``IsQueueReference`` and the two queue
actions); what they then write is :func:`caldera.queue_operate.plan`, tested through
``caldera queue`` (tests/scenarios/test_queue_cli.py) and end to end
(tests/integration/test_queue_cli.py)."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.queue_operate import command_target

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
