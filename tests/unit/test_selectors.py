"""Label selectors match as apimachinery's LabelSelectorAsSelector does."""

from __future__ import annotations

import pytest

from caldera.models.record import RecordError
from caldera.models.selectors import LabelSelector, matches

APP_WEB = {"app": "web", "tier": "front"}


def sel(raw: dict[str, object]) -> LabelSelector:
    return LabelSelector.model_validate(raw)


@pytest.mark.parametrize(
    ("name", "raw", "labels", "expected"),
    [
        ("empty selector matches everything", {}, APP_WEB, True),
        ("empty selector matches an unlabelled object", {}, {}, True),
        ("matchLabels equal", {"matchLabels": {"app": "web"}}, APP_WEB, True),
        ("matchLabels differ", {"matchLabels": {"app": "db"}}, APP_WEB, False),
        ("matchLabels key absent", {"matchLabels": {"zone": "a"}}, APP_WEB, False),
        (
            "In matches one of the values",
            {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db", "web"]}]},
            APP_WEB,
            True,
        ),
        (
            "In needs the key",
            {"matchExpressions": [{"key": "x", "operator": "In", "values": ["web"]}]},
            APP_WEB,
            False,
        ),
        (
            "NotIn matches objects without the key",
            {"matchExpressions": [{"key": "x", "operator": "NotIn", "values": ["web"]}]},
            APP_WEB,
            True,
        ),
        (
            "NotIn rejects a listed value",
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
            APP_WEB,
            False,
        ),
        (
            "Exists",
            {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
            APP_WEB,
            True,
        ),
        (
            "DoesNotExist",
            {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]},
            APP_WEB,
            False,
        ),
        (
            "labels and expressions are ANDed",
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["back"]}],
            },
            APP_WEB,
            False,
        ),
    ],
)
def test_selector_semantics(
    name: str, raw: dict[str, object], labels: dict[str, str], expected: bool
) -> None:
    assert sel(raw).matches(labels) is expected, name


def test_a_missing_selector_matches_nothing() -> None:
    assert matches(None, APP_WEB) is False
    assert matches(sel({}), APP_WEB) is True


@pytest.mark.parametrize(
    "expr",
    [
        {"key": "a", "operator": "In", "values": []},
        {"key": "a", "operator": "NotIn"},
        {"key": "a", "operator": "Exists", "values": ["x"]},
        {"key": "a", "operator": "Gt", "values": ["1"]},
        {"key": "", "operator": "Exists"},
    ],
)
def test_invalid_requirements_are_rejected(expr: dict[str, object]) -> None:
    with pytest.raises(RecordError):
        sel({"matchExpressions": [expr]})


def test_equal_selectors_are_equal_and_hashable() -> None:
    a = sel({"matchLabels": {"b": "2", "a": "1"}})
    b = sel({"matchLabels": {"a": "1", "b": "2"}})
    assert a == b
    assert hash(a) == hash(b)
