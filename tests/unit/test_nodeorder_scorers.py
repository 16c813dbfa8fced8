"""nodeorder's node affinity, image locality and taint toleration scorers, from kube's formulas."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from builders import Obj, binds, node, open_session, pod, podgroup, policy_text, scenario
from caldera.framework.session import Session
from caldera.plugins.nodeorder import NodeOrderPlugin
from caldera.plugins.nodeorder.images import normalized_image_name
from caldera.plugins.nodeorder.taints import normalize

MB = 1024 * 1024
ONLY = {
    "leastrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "imagelocality.weight": 0,
    "tainttoleration.weight": 0,
    "podaffinity.weight": 0,
    "podtopologyspread.weight": 0,
}


def only(key: str, weight: int = 1) -> dict[str, int]:
    return {**ONLY, key: weight}


def scores(objects: Sequence[Obj], args: Mapping[str, Any], **pod_kwargs: Any) -> dict[str, float]:
    """node → weighted nodeorder score of one pending pod over every node."""
    ssn = session(objects, args, **pod_kwargs)
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    rows = np.arange(len(ssn.nodes), dtype=np.intp)
    return dict(zip(ssn.nodes.names, ssn.node_order(task, rows).tolist(), strict=True))


def session(objects: Sequence[Obj], args: Mapping[str, Any], **pod_kwargs: Any) -> Session:
    text = policy_text(
        "enqueue, allocate", ["gang", "predicates", "nodeorder"], arguments={"nodeorder": args}
    )
    return open_session([*objects, podgroup("pg"), pod("p", group="pg", **pod_kwargs)], text)


# -- node affinity ------------------------------------------------------------------------------


def preferred(*terms: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": pref} for w, pref in terms
            ]
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return {"matchExpressions": [out]}


ZONES = [node("a", labels={"zone": "z1", "ssd": "true"}), node("b", labels={"zone": "z2"})]


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        pytest.param(None, {"a": 0, "b": 0}, id="no preferred terms: 0 everywhere"),
        pytest.param(
            preferred((10, expr("zone", "In", "z1"))), {"a": 10, "b": 0}, id="a matching term"
        ),
        pytest.param(
            preferred((10, expr("zone", "In", "z1")), (5, expr("ssd", "Exists"))),
            {"a": 15, "b": 0},
            id="matching weights add up",
        ),
        pytest.param(
            preferred((80, expr("zone", "Exists")), (70, expr("zone", "In", "z2"))),
            {"a": 80, "b": 150},
            id="no normalisation on Volcano's per-node path: the sum may pass 100",
        ),
        pytest.param(
            preferred((10, {})), {"a": 0, "b": 0}, id="an empty preference matches nothing"
        ),
        pytest.param(
            preferred(
                (7, {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]})
            ),
            {"a": 0, "b": 7},
            id="matchFields on the node name",
        ),
        pytest.param(
            preferred((10, expr("zone", "In", "z1")), (5, expr("zone", "NotIn", "$"))),
            {"a": 0, "b": 0},
            id="one term that does not parse voids every preference (NewPreferredSchedulingTerms)",
        ),
        pytest.param(
            preferred((10, expr("zone", "In", "z1")), (5, expr("rank", "Gt", "high"))),
            {"a": 0, "b": 0},
            id="a Gt bound that is not an integer voids every preference",
        ),
        pytest.param(
            preferred((10, expr("zone", "In", "z1")), (5, {})),
            {"a": 10, "b": 0},
            id="an empty preference is skipped, not invalid",
        ),
    ],
)
def test_node_affinity_score(affinity: dict[str, Any] | None, expected: dict[str, int]) -> None:
    assert scores(ZONES, only("nodeaffinity.weight"), affinity=affinity) == expected


def test_nodeaffinity_weight_multiplies_and_decides() -> None:
    aff = preferred((10, expr("zone", "In", "z2")))
    assert scores(ZONES, only("nodeaffinity.weight", 2), affinity=aff) == {"a": 0, "b": 20}
    sim = scenario([*ZONES, podgroup("pg"), pod("p", group="pg", affinity=aff)])
    assert binds(sim) == {"default/p": "b"}


# -- image locality -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        pytest.param("nginx", "nginx:latest", id="no tag gets latest"),
        pytest.param("nginx:1.27", "nginx:1.27", id="a tag is kept"),
        pytest.param("registry:5000/app", "registry:5000/app:latest", id="a port is not a tag"),
        pytest.param("app@sha256:abc", "app@sha256:abc", id="a digest is kept"),
    ],
)
def test_image_names_are_normalised_like_kube(name: str, normalized: str) -> None:
    assert normalized_image_name(name) == normalized


@pytest.mark.parametrize(
    ("node_images", "pod_images", "expected"),
    [
        pytest.param({}, ["app:1"], 0, id="image absent: 0"),
        pytest.param(
            {"app:1": 500 * MB},
            ["app:1"],
            # on 1 of 2 nodes: 250 MiB scaled; 100·(250 − 23)//(1000 − 23)
            100 * (250 - 23) // (1000 - 23),
            id="size scaled by the share of nodes holding it",
        ),
        pytest.param({"app:1": 10 * MB}, ["app:1"], 0, id="below the 23 MiB threshold: 0"),
        pytest.param({"app:1": 4000 * MB}, ["app:1"], 100, id="above 1000 MiB per container: 100"),
        pytest.param(
            {"app:1": 4000 * MB},
            ["app:1", "sidecar:2"],
            # 2000 MiB scaled, threshold 2000 MiB for two containers
            100,
            id="the upper threshold grows with the number of containers",
        ),
        pytest.param(
            {"nginx:latest": 900 * MB},
            ["nginx"],
            100 * (450 - 23) // (1000 - 23),
            id="an untagged pod image matches the node's :latest",
        ),
    ],
)
def test_image_locality(node_images: dict[str, int], pod_images: list[str], expected: int) -> None:
    objects: list[Obj] = [node("has", images=node_images), node("other")]
    got = scores(objects, only("imagelocality.weight"), images=pod_images)
    assert got == {"has": expected, "other": 0}


def test_an_image_on_every_node_counts_fully_everywhere() -> None:
    objects: list[Obj] = [
        node("a", images={"app:1": 500 * MB}),
        node("b", images={"app:1": 500 * MB}),
    ]
    got = scores(objects, only("imagelocality.weight"), images=["app:1"])
    assert got == {"a": 100 * (500 - 23) // 977, "b": 100 * (500 - 23) // 977}


# -- taint toleration ---------------------------------------------------------------------------


def prefer(key: str, value: str = "") -> dict[str, str]:
    return {"key": key, "value": value, "effect": "PreferNoSchedule"}


TAINTED = [
    node("clean"),
    node("one", taints=[prefer("a")]),
    node("two", taints=[prefer("a"), prefer("b")]),
    node("hard", taints=[{"key": "x", "value": "", "effect": "NoSchedule"}]),
]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param(
            [],
            # counts 0, 1, 2, 0 → 100 − 100·c//2
            {"clean": 100, "one": 50, "two": 0, "hard": 100},
            id="untolerated PreferNoSchedule taints lower the score, reversed over the max",
        ),
        pytest.param(
            [{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}],
            {"clean": 100, "one": 100, "two": 0, "hard": 100},
            id="a tolerated taint does not count",
        ),
        pytest.param(
            [{"key": "a", "operator": "Exists"}],
            {"clean": 100, "one": 100, "two": 0, "hard": 100},
            id="a toleration without effect tolerates PreferNoSchedule",
        ),
        pytest.param(
            [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}],
            {"clean": 100, "one": 50, "two": 0, "hard": 100},
            id="a NoSchedule toleration is not used for scoring",
        ),
        pytest.param(
            [{"operator": "Exists"}],
            {"clean": 100, "one": 100, "two": 100, "hard": 100},
            id="everything tolerated: no candidate has a count, all 100",
        ),
    ],
)
def test_taint_toleration(tolerations: list[dict[str, str]], expected: dict[str, int]) -> None:
    ssn = session(TAINTED, only("tainttoleration.weight"), tolerations=tolerations)
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    rows = np.arange(len(ssn.nodes), dtype=np.intp)
    got = dict(zip(ssn.nodes.names, ssn.node_order(task, rows).tolist(), strict=True))
    assert got == expected


def test_taint_scores_are_normalised_over_the_candidates_only() -> None:
    ssn = session(TAINTED, only("tainttoleration.weight"))
    task = next(iter(ssn.jobs["default/pg"].tasks.values()))
    rows = np.array([ssn.nodes.index["clean"], ssn.nodes.index["one"]], dtype=np.intp)
    # without "two" among the candidates, the max count is 1
    assert ssn.node_order(task, rows).tolist() == [100, 0]


@pytest.mark.parametrize(
    ("counts", "reverse", "expected"),
    [
        pytest.param([0, 0], True, [100, 100], id="all zero, reversed: 100"),
        pytest.param([0, 0], False, [0, 0], id="all zero: 0"),
        pytest.param([1, 3], False, [33, 100], id="integer division by the max"),
        pytest.param([1, 3], True, [67, 0], id="reversed after the division"),
    ],
)
def test_default_normalize_score(counts: list[int], reverse: bool, expected: list[int]) -> None:
    assert normalize(np.array(counts, dtype=float), reverse=reverse).tolist() == expected


def test_weight_zero_builds_no_scorer() -> None:
    ssn = session(TAINTED, ONLY)
    plugin = next(p for p in ssn.plugins if isinstance(p, NodeOrderPlugin))
    assert plugin.scorers == []
