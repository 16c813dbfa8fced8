"""Label selectors (``metav1.LabelSelector``) and how they match, with apimachinery's rules.

Pod affinity, topology spread and namespace selectors all use this one type. Two edge cases
decide real placements and are kept exactly: a *missing* selector (``None``) matches nothing,
an *empty* one (``{}``) matches everything. ``In``/``NotIn`` need at least one value,
``Exists``/``DoesNotExist`` none; ``NotIn`` and ``DoesNotExist`` match objects without the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from caldera.models.record import Record

__all__ = ["LabelSelector", "LabelSelectorRequirement", "matches"]


class LabelSelectorRequirement(Record, kw_only=True, frozen=True):
    key: Annotated[str, Meta(min_length=1)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"values: must be non-empty for operator {self.operator}")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"values: must be empty for operator {self.operator}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        return value is None


class LabelSelector(Record, kw_only=True, frozen=True):
    match_labels: dict[str, str] = msgspec.field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def __hash__(self) -> int:
        # hashable although it holds a map, so equal selectors share cached results
        return hash((tuple(sorted(self.match_labels.items())), self.match_expressions))

    @property
    def first_label(self) -> tuple[str, str] | None:
        """One ``matchLabels`` pair, the same each time (every pod the selector matches carries
        it), for looking pods up by label; None without matchLabels."""
        return min(self.match_labels.items()) if self.match_labels else None

    @property
    def empty(self) -> bool:
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match_labels.items()) and all(
            r.matches(labels) for r in self.match_expressions
        )

    def with_requirements(self, extra: tuple[LabelSelectorRequirement, ...]) -> LabelSelector:
        """This selector narrowed by ``extra`` (how matchLabelKeys are applied)."""
        if not extra:
            return self
        return LabelSelector(
            match_labels=self.match_labels, match_expressions=self.match_expressions + extra
        )


def matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A missing selector matches nothing; an empty one matches everything."""
    return selector is not None and selector.matches(labels)
