"""The two pending texts made from one set of per-node verdicts (kube-scheduler's and Volcano's)."""

from __future__ import annotations

import pytest

from caldera.api.fiterror import FitErrors

COUNTS = {
    "Insufficient cpu": 5,
    "node(s) had untolerated taint {gpu: true}": 4,
    "node(s) didn't match pod anti-affinity rules": 3,
}


@pytest.mark.parametrize(
    ("fit", "kube", "volcano"),
    [
        pytest.param(
            FitErrors(total=12, counts=dict(COUNTS)),
            "0/12 nodes are available: 3 node(s) didn't match pod anti-affinity rules, "
            "4 node(s) had untolerated taint {gpu: true}, 5 Insufficient cpu.",
            "0/12 nodes are available: 3 node(s) didn't match pod anti-affinity rules, "
            "4 node(s) had untolerated taint {gpu: true}, 5 Insufficient cpu.",
            id="entries '<n> <reason>' sorted as strings, as both schedulers sort them",
        ),
        pytest.param(
            FitErrors(total=3, message='persistentvolumeclaim "data" not found'),
            '0/3 nodes are available: persistentvolumeclaim "data" not found.',
            'persistentvolumeclaim "data" not found',
            id="a pre-filter failure: kube wraps the message, Volcano shows it bare",
        ),
        pytest.param(
            FitErrors(total=3, message="queue q has no room for this task", plain=True),
            "queue q has no room for this task",
            "queue q has no room for this task",
            id="a verdict not about nodes is shown as it is",
        ),
        pytest.param(
            FitErrors(total=0),
            "0/0 nodes are available.",
            "0/0 nodes are available",
            id="no nodes at all",
        ),
        pytest.param(
            FitErrors(total=2, counts={"Insufficient cpu": 2, "Too many pods": 0}),
            "0/2 nodes are available: 2 Insufficient cpu.",
            "0/2 nodes are available: 2 Insufficient cpu.",
            id="reasons no node failed are left out",
        ),
    ],
)
def test_pending_texts(fit: FitErrors, kube: str, volcano: str) -> None:
    assert fit.available() == kube
    assert fit.error() == volcano
