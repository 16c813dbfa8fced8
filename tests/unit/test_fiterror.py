"""The two pending texts made from one set of per-node verdicts (kube-scheduler's and Volcano's),
and which reasons those verdicts count (Volcano's ``FitErrors``)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import numpy.typing as npt
import pytest

from caldera.api.fiterror import FitErrors
from caldera.framework.placement import ByFilter, Stage, fit_errors

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


# -- which reasons count: placement.fit_errors, Volcano's FitErrors over allocate's predicate --

NAMES = ["n0", "n1", "n2", "n3"]
CURABLE = frozenset({"node(s) didn't have free ports for the requested pod ports"})
PORTS = "node(s) didn't have free ports for the requested pod ports"
TAINT = "node(s) had untolerated taint {gpu: true}"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
CPU, MEMORY = "Insufficient cpu", "Insufficient memory"


def mask(*rows: int) -> npt.NDArray[np.bool_]:
    out = np.zeros(len(NAMES), dtype=np.bool_)
    out[list(rows)] = True
    return out


def by_filter(*parts: tuple[str, str, npt.NDArray[np.bool_]]) -> ByFilter:
    out = ByFilter()
    for name, reason, rows in parts:
        out.add(name, [(reason, rows)])
    return out


@pytest.mark.parametrize(
    ("stages", "within", "expected"),
    [
        pytest.param(
            [
                ("NodeResourcesFit", [(CPU, mask(0, 1)), (MEMORY, mask(1))]),
                ("predicates", by_filter(("TaintToleration", TAINT, mask(0, 2)))),
            ],
            None,
            {"n0": [CPU], "n1": [CPU, MEMORY], "n2": [TAINT]},
            id="allocate's predicate: a node short of resources counts them alone, all of them",
        ),
        pytest.param(
            [
                (
                    "predicates",
                    by_filter(
                        ("NodePorts", PORTS, mask(0, 1)),
                        ("TaintToleration", TAINT, mask(1, 2)),
                        ("NodeAffinity", AFFINITY, mask(1, 2, 3)),
                    ),
                )
            ],
            None,
            {"n0": [PORTS], "n1": [PORTS, TAINT], "n2": [TAINT], "n3": [AFFINITY]},
            id="PredicatesPlugin.Predicate: filters pile up until one evictions cannot cure",
        ),
        pytest.param(
            [
                ("predicates", by_filter(("TaintToleration", TAINT, mask(0)))),
                (
                    "deviceshare",
                    [("CardInsufficientMemory", mask(0, 1)), ("ResourceQuotaNotFit", mask(1))],
                ),
            ],
            None,
            {"n0": [TAINT], "n1": ["CardInsufficientMemory", "ResourceQuotaNotFit"]},
            id="Session.PredicateFn: the first plugin that fails a node is the last asked; "
            "every reason of one check counts",
        ),
        pytest.param(
            [("NodeResourcesFit", [(CPU, mask(0, 1, 2, 3))])],
            mask(2, 3),
            {"n2": [CPU], "n3": [CPU]},
            id="nodes outside the HyperNode tried are not counted",
        ),
    ],
)
def test_fit_errors_counts_each_node_under_the_reasons_of_the_check_that_failed_it(
    stages: list[Stage],
    within: npt.NDArray[np.bool_] | None,
    expected: dict[str, list[str]],
) -> None:
    fit = fit_errors(len(NAMES), stages, curable=CURABLE, within=within, names=NAMES)
    assert {node: [r for _, r in pairs] for node, pairs in fit.nodes.items()} == expected
    assert fit.counts == Counter(r for reasons in expected.values() for r in reasons)
    unnamed = fit_errors(len(NAMES), stages, curable=CURABLE, within=within)
    assert unnamed.counts == fit.counts and unnamed.nodes == {}


def test_fit_errors_name_the_filter_each_reason_came_from() -> None:
    stages: list[Stage] = [
        ("NodeResourcesFit", [(CPU, mask(0))]),
        ("predicates", by_filter(("TaintToleration", TAINT, mask(1)))),
        ("tdm", [("node is revocable", mask(2))]),
    ]
    fit = fit_errors(len(NAMES), stages, names=NAMES)
    assert fit.nodes == {
        "n0": [("NodeResourcesFit", CPU)],
        "n1": [("TaintToleration", TAINT)],
        "n2": [("tdm", "node is revocable")],
    }
